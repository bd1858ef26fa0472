// An executable's constant weights packed once for the CPU GEMM, as ONNX Runtime pre-packs them:
// each constant B operand of a product and each constant w of a convolution (its GEMM's A) in the
// chosen kernels' packed layout, made at its first use and read by every later call in place of
// packing it again (16 % of a BERT layer's time at batch 1; 14 % of a small speech model's).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/runtime/cpu/convolution.hpp"

namespace kiln::cpu {

class packed_weights {
 public:
  // `unchanging`: the plan inputs whose data stays as it is while the executable lives (its
  // constants; not its parameters or variables).
  explicit packed_weights(std::vector<bool> unchanging) : unchanging_(std::move(unchanging)) {}
  packed_weights(const packed_weights&) = delete;
  packed_weights& operator=(const packed_weights&) = delete;

  // B of a product of dtype `type` read from plan input `arg` (from its byte `offset`), packed
  // whole (at its first use), or null where that input may change or B cannot be packed whole
  // (pack_weights). The memory lives as long as this object.
  const void* find(std::int32_t arg, std::int64_t offset, dtype type, const matmul_operand& b) {
    if (arg < 0 || static_cast<std::size_t>(arg) >= unchanging_.size() || !unchanging_[arg])
      return nullptr;
    // By the input and how B reads it, not by its address (a call may pass a copy of the
    // constant): a constant may be read through several layouts (a view's transpose, a slice).
    std::vector<std::int64_t> key{0, arg, offset, static_cast<std::int64_t>(type), b.dims.rank};
    for (int d = 0; d < b.dims.rank; ++d) {
      key.push_back(b.dims.dims[d]);
      key.push_back(b.layout.stride[d]);
    }
    return packed(std::move(key), [&](void* to) { return pack_weights(type, b, to); });
  }

  // w of a convolution of dtype `type` (result y_dims, geometry c) read from plan input `arg`,
  // packed whole as its GEMM's A (pack_conv_weights), or null where it cannot be.
  const void* find_conv(std::int32_t arg, std::int64_t offset, dtype type, const shape& w_dims,
                        const operand_layout& w, const shape& y_dims, const conv_geometry& c) {
    if (arg < 0 || static_cast<std::size_t>(arg) >= unchanging_.size() || !unchanging_[arg])
      return nullptr;
    std::vector<std::int64_t> key{
        1,           arg,      offset,       static_cast<std::int64_t>(type),
        w_dims.rank, c.groups, c.transposed, y_dims.dims[1]};
    for (int d = 0; d < w_dims.rank; ++d) {
      key.push_back(w_dims.dims[d]);
      key.push_back(w.stride[d]);
    }
    return packed(std::move(key),
                  [&](void* to) { return pack_conv_weights(type, w_dims, w, y_dims, c, to); });
  }

 private:
  // The bytes packed under `key`, made by pack(to) (which returns their size, and with a null `to`
  // only that) at the first request.
  template <class Pack>
  const void* packed(std::vector<std::int64_t> key, Pack pack) {
    std::lock_guard lock(mutex_);
    auto [at, added] = packed_.try_emplace(std::move(key));
    if (added) {
      const std::size_t bytes = pack(nullptr);
      if (bytes > 0) {
        // Not zeroed first: packing writes every byte.
        at->second.reset(new line[(bytes + sizeof(line) - 1) / sizeof(line)]);
        pack(at->second.get());
      }
    }
    return at->second.get();
  }

  struct alignas(64) line {
    unsigned char bytes[64];
  };
  std::vector<bool> unchanging_;
  std::mutex mutex_;
  std::map<std::vector<std::int64_t>, std::unique_ptr<line[]>> packed_;
};

}  // namespace kiln::cpu
