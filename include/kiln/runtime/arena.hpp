// The memory a call's transients live in: the arenas a program keeps per device and reuses call
// after call (runtime::arena_pool), and a caller's own workspace (kiln::workspace) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "kiln/compiler/plan.hpp"
#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/buffer.hpp"

namespace kiln {

// Memory a caller lends one call for its transients, in place of the arena the executable keeps:
// host bytes for a call on the CPU, a buffer of the device for a call on Vulkan. It must hold the
// plan's arena (`plan.transient_bytes()`, or at the call for run-time sizes; a call with a smaller
// one says how many bytes it needs) and is not touched by the caller while the call runs.
class workspace {
 public:
  workspace() = default;
  workspace(std::span<std::byte> host) : host_(host.data()), bytes_(host.size()) {}
  template <element_type T>
  workspace(const buffer<T>& b)
      : memory_(b.memory()),
        bytes_(static_cast<std::size_t>(b.size()) * sizeof(T)),
        offset_(b.offset_bytes()) {}

  bool given() const { return host_ || memory_; }
  std::byte* host() const { return host_; }                   // host bytes, or null
  runtime::device_memory* memory() const { return memory_; }  // a device's, or null
  std::size_t bytes() const { return bytes_; }
  std::int64_t offset() const { return offset_; }  // a buffer slice's start in memory(), bytes

 private:
  std::byte* host_ = nullptr;
  runtime::device_memory* memory_ = nullptr;
  std::size_t bytes_ = 0;
  std::int64_t offset_ = 0;
};

namespace runtime {

// Where a call's transients are: the layout and its memory (host bytes, or a device's memory with
// the offset of the arena in it; on Vulkan the back end binds memory's buffer).
struct arena {
  compiler::arena_layout layout;
  unsigned char* host = nullptr;
  const device_memory* memory = nullptr;
  std::int64_t offset = 0;  // where the arena starts in memory, in bytes
};

// What a back end calls for a call's arena of plan p: on the device, or in host memory.
using arena_source = function_ref<arena(const compiler::plan& p, bool on_device)>;

// Arenas of one program, per device, reused by its calls: a call takes a free one (or makes one
// when every arena is in use by a concurrent call, or when the call needs more bytes) and gives it
// back at its end, so a steady stream of calls allocates nothing. Freed with the program.
class arena_pool {
 public:
  // Memory of `bytes` on the device (a buffer kept alive by `keep`), or host memory when null.
  struct block {
    std::shared_ptr<void> keep;
    const device_memory* memory = nullptr;
    unsigned char* host = nullptr;
    std::int64_t bytes = 0;
    const void* device = nullptr;  // the pool's key: null for the host
  };
  using make_block = function_ref<block(std::int64_t bytes)>;

  // A block lent to one call, given back when it goes.
  class lease {
   public:
    lease() = default;
    lease(arena_pool* pool, block b) : pool_(pool), block_(std::move(b)) {}
    lease(lease&& o) noexcept
        : pool_(std::exchange(o.pool_, nullptr)), block_(std::move(o.block_)) {}
    lease& operator=(lease&& o) noexcept {
      if (this != &o) {
        give_back();
        pool_ = std::exchange(o.pool_, nullptr);
        block_ = std::move(o.block_);
      }
      return *this;
    }
    ~lease() { give_back(); }
    const block& get() const { return block_; }

   private:
    void give_back() {
      if (pool_) pool_->give_back(std::move(block_));
      pool_ = nullptr;
    }
    arena_pool* pool_ = nullptr;
    block block_;
  };

  // A free block of `device` (null: the host) with at least `bytes`, or a new one from make.
  lease take(const void* device, std::int64_t bytes, make_block make);

  // Host memory for an arena of `bytes` (64-byte aligned, as the CPU kernels' loads like).
  static block host_block(std::int64_t bytes);

  // The arena layout of plan p for a call with the resolved symbols sym[0 .. symbols): computed
  // once per plan and set of sizes, then found again (a few recent ones are kept).
  compiler::arena_layout layout(const compiler::plan& p, const std::int64_t* sym,
                                std::size_t symbols);

  // The blocks not lent to a call now (what a steady stream of calls reuses).
  std::size_t free_blocks() const;

 private:
  void give_back(block b);

  struct known_layout {
    const compiler::plan* plan;
    std::vector<std::int64_t> sizes;
    compiler::arena_layout layout;
  };
  mutable std::mutex mutex_;
  std::vector<block> free_;
  std::vector<known_layout> layouts_;
};

}  // namespace runtime
}  // namespace kiln

// The pool's definitions (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <algorithm>

namespace kiln::runtime {

KILN_RUNTIME_API arena_pool::lease arena_pool::take(const void* device, std::int64_t bytes,
                                                    make_block make) {
  {
    std::lock_guard lock(mutex_);
    auto of_device = [&](const block& b) { return b.device == device; };
    auto fits = [&](const block& b) { return of_device(b) && b.bytes >= bytes; };
    if (auto it = std::find_if(free_.begin(), free_.end(), fits); it != free_.end()) {
      block b = std::move(*it);
      free_.erase(it);
      return lease(this, std::move(b));
    }
    // Outgrown: calls now need more than it holds, so the new block takes its place.
    if (auto it = std::find_if(free_.begin(), free_.end(), of_device); it != free_.end())
      free_.erase(it);
  }
  block b = make(bytes);
  b.device = device;
  return lease(this, std::move(b));
}

KILN_RUNTIME_API arena_pool::block arena_pool::host_block(std::int64_t bytes) {
  struct alignas(64) line {
    unsigned char bytes[64];
  };
  std::shared_ptr<line[]> lines(new line[static_cast<std::size_t>((bytes + 63) / 64) + 1]);
  block b;
  b.host = lines.get()->bytes;
  b.bytes = bytes;
  b.keep = std::move(lines);
  return b;
}

KILN_RUNTIME_API compiler::arena_layout arena_pool::layout(const compiler::plan& p,
                                                           const std::int64_t* sym,
                                                           std::size_t symbols) {
  const std::span<const std::int64_t> sizes(sym, sym ? symbols : 0);
  std::lock_guard lock(mutex_);
  for (const auto& l : layouts_)
    if (l.plan == &p && std::ranges::equal(l.sizes, sizes)) return l.layout;
  if (layouts_.size() == 16) layouts_.erase(layouts_.begin());
  layouts_.push_back({&p, {sizes.begin(), sizes.end()}, p.arena(sym)});
  return layouts_.back().layout;
}

KILN_RUNTIME_API std::size_t arena_pool::free_blocks() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

KILN_RUNTIME_API void arena_pool::give_back(block b) {
  std::lock_guard lock(mutex_);
  free_.push_back(std::move(b));
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
