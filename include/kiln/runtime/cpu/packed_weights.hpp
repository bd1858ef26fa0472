// An executable's constant weights packed once for the CPU GEMM, as ONNX Runtime pre-packs them:
// each constant B operand in the chosen kernels' packed layout, made at its first product and read
// by every later call in place of packing it again (16 % of a BERT layer's time at batch 1).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/runtime/cpu/contraction.hpp"

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
    std::vector<std::int64_t> key{arg, offset, static_cast<std::int64_t>(type), b.dims.rank};
    for (int d = 0; d < b.dims.rank; ++d) {
      key.push_back(b.dims.dims[d]);
      key.push_back(b.layout.stride[d]);
    }
    std::lock_guard lock(mutex_);
    auto [at, added] = packed_.try_emplace(std::move(key));
    if (added) {
      const std::size_t bytes = pack_weights(type, b, nullptr);
      if (bytes > 0) {
        // Not zeroed first: packing writes every byte.
        at->second.reset(new line[(bytes + sizeof(line) - 1) / sizeof(line)]);
        pack_weights(type, b, at->second.get());
      }
    }
    return at->second.get();
  }

 private:
  struct alignas(64) line {
    unsigned char bytes[64];
  };
  std::vector<bool> unchanging_;
  std::mutex mutex_;
  std::map<std::vector<std::int64_t>, std::unique_ptr<line[]>> packed_;
};

}  // namespace kiln::cpu
