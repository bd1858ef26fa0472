// Immutable bytes held by reference: a tensor constant's elements, shared without copies by the
// graph that made them, the executables compiled from it and an importer, or borrowed from memory
// the caller keeps alive.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace kiln {

class shared_bytes {
 public:
  shared_bytes() = default;
  // Takes the buffer over (no copy).
  explicit shared_bytes(std::vector<unsigned char>&& bytes) {
    auto held = std::make_shared<std::vector<unsigned char>>(std::move(bytes));
    data_ = held->data();
    size_ = held->size();
    owner_ = std::move(held);
  }
  // `size` bytes at `data`, kept alive (and unchanged) by `owner` as long as any copy lives.
  shared_bytes(std::shared_ptr<const void> owner, const void* data, std::size_t size)
      : owner_(std::move(owner)), data_(static_cast<const unsigned char*>(data)), size_(size) {}
  // `size` bytes at `data`, read where they are: the caller keeps them alive and unchanged while
  // any copy lives (for a graph constant: the graph and every executable compiled from it).
  static shared_bytes borrow(const void* data, std::size_t size) { return {nullptr, data, size}; }
  // A copy of `size` bytes at `data`.
  static shared_bytes copy_of(const void* data, std::size_t size) {
    const auto* from = static_cast<const unsigned char*>(data);
    return shared_bytes(std::vector<unsigned char>(from, from + size));
  }

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const unsigned char* begin() const { return data_; }
  const unsigned char* end() const { return data_ + size_; }
  unsigned char operator[](std::size_t i) const { return data_[i]; }
  operator std::span<const unsigned char>() const { return {data_, size_}; }
  // Whether the bytes are borrowed (nothing here keeps them alive).
  bool borrowed() const { return !owner_ && data_; }

 private:
  std::shared_ptr<const void> owner_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kiln
