// Tensor constants as a call's arguments, for both doors (graph::constant, kiln::table): host
// bytes on the CPU; on each Vulkan device, buffers uploaded at the first call there and kept.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/shared_bytes.hpp"
#include "kiln/runtime/device.hpp"
#include "kiln/runtime/signature.hpp"

namespace kiln::runtime {

// A tensor constant's values (each of dtype t; ir::tensor_data) as row-major storage bytes.
KILN_RUNTIME_API std::vector<std::uint8_t> tensor_bytes(dtype t, std::span<const scalar> values);

class constant_uploads {
 public:
  KILN_RUNTIME_API constant_uploads();
  KILN_RUNTIME_API ~constant_uploads();
  constant_uploads(const constant_uploads&) = delete;
  constant_uploads& operator=(const constant_uploads&) = delete;

  // Constant k of `host` (each constant's bytes) with extents `dims`, as an argument on d.
  KILN_RUNTIME_API buffer_ref ref(const device& d, std::size_t k,
                                  std::span<const shared_bytes> host, const shape& dims);

 private:
  struct state;
  std::unique_ptr<state> s_;
};

// Positions 0, 1, ..., n - 1 (i64) as a call's argument (ir::graph::positions): host memory on
// every device (a Vulkan call stages it as it stages a host argument). One table for the process,
// grown by doubling; a table once handed out is never freed, as a call in flight may still read
// it (all of them together hold at most twice the largest n asked for). Above 2^32 positions is an
// error naming `who`.
KILN_RUNTIME_API buffer_ref positions_ref(std::int64_t n, const std::string& who);

}  // namespace kiln::runtime

#if KILN_RUNTIME_BODY
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <string>

namespace kiln::runtime {

struct constant_uploads::state {
  std::mutex mutex;
  std::map<const void*, std::vector<buffer<std::uint8_t>>> on_device;  // by Vulkan context
};

KILN_RUNTIME_API std::vector<std::uint8_t> tensor_bytes(dtype t, std::span<const scalar> values) {
  std::vector<std::uint8_t> bytes(values.size() * static_cast<std::size_t>(size_in_bytes(t)));
  visit_dtype(t, [&]<dtype D>() {
    using S = storage_t<D>;
    for (std::size_t k = 0; k < values.size(); ++k) {
      S x{};
      if constexpr (std::is_arithmetic_v<S>)
        x = is_floating(D) ? static_cast<S>(values[k].f) : static_cast<S>(values[k].i);
      else  // a narrow float: rounded from f32
        x = S(static_cast<float>(values[k].f));
      std::memcpy(bytes.data() + k * sizeof(S), &x, sizeof(S));
    }
  });
  return bytes;
}

KILN_RUNTIME_API constant_uploads::constant_uploads() : s_(std::make_unique<state>()) {}
KILN_RUNTIME_API constant_uploads::~constant_uploads() = default;

KILN_RUNTIME_API buffer_ref constant_uploads::ref(const device& d, std::size_t k,
                                                  std::span<const shared_bytes> host,
                                                  const shape& dims) {
  if (d.type() == device::kind::cpu) return {host[k].data(), dims};
  std::lock_guard lock(s_->mutex);
  auto& uploaded = s_->on_device[d.context()];
  if (uploaded.empty())
    for (const auto& bytes : host) {
      // Device memory cannot be empty: a constant of no elements gets one unused byte.
      std::vector<std::uint8_t> padded(std::max<std::size_t>(bytes.size(), 1), 0);
      if (!bytes.empty()) std::memcpy(padded.data(), bytes.data(), bytes.size());
      uploaded.push_back(d.upload(padded));
    }
  return {nullptr, dims, false, uploaded[k].memory()};
}

KILN_RUNTIME_API buffer_ref positions_ref(std::int64_t n, const std::string& who) {
  constexpr std::int64_t most = std::int64_t{1} << 32;
  if (n < 0 || n > most)
    throw error(errc::unsupported, who,
                std::to_string(n) + " positions are asked for (a Range of run-time length); kiln " +
                    "counts up to 2^32");
  static std::mutex mutex;
  static std::vector<std::unique_ptr<std::int64_t[]>> tables;  // the last is the largest
  static std::int64_t capacity = 0;
  std::lock_guard lock(mutex);
  if (n > capacity) {
    const std::int64_t grown = std::min(most, std::max<std::int64_t>({n, 2 * capacity, 1024}));
    std::unique_ptr<std::int64_t[]> table;
    try {
      table = std::make_unique_for_overwrite<std::int64_t[]>(static_cast<std::size_t>(grown));
    } catch (const std::bad_alloc&) {
      throw error(errc::unsupported, who,
                  "no memory for " + std::to_string(grown) + " positions (a Range of run-time " +
                      "length " + std::to_string(n) + ")");
    }
    std::iota(table.get(), table.get() + grown, std::int64_t{0});
    tables.push_back(std::move(table));
    capacity = grown;
  }
  return {tables.back().get(), shape{n}};
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
