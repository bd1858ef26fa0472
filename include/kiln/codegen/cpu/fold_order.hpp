// The fixed order in which kiln folds a reduction's elements (the runtime's reducer and the
// compiled row functions' register folds both follow it, so both give the same bits): blocks of
// 256 elements, each folded into 32 interleaved partials; the blocks' partials joined as a binary
// counter does; then the 32 partials joined as a tree.
#pragma once

#include "kiln/codegen/cpu/isa.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// The 32 partials of one block as `count` accumulators of type A (scalars, or SIMD batches of 32
// / count lanes each). push() takes each block's partials in order; finish() leaves the join of
// all of them in p: a block joins the one before it when both cover as many blocks, and what is
// left joins from the last down. The error of a sum grows with 8 + log n, not with n.
template <class A, int count>
class block_partials {
 public:
  static constexpr int ways = 32, block = 256;

  template <class Join>
  void push(A (&p)[count], Join join) {
    int l = 0;
    while (top_ > 0 && level_[top_ - 1] == l) {
      --top_;
      for (int k = 0; k < count; ++k) p[k] = join(stack_[top_][k], p[k]);
      ++l;
    }
    for (int k = 0; k < count; ++k) stack_[top_][k] = p[k];
    level_[top_++] = l;
  }
  // False (p untouched) when no block was pushed.
  template <class Join>
  bool finish(A (&p)[count], Join join) const {
    if (top_ == 0) return false;
    for (int k = 0; k < count; ++k) p[k] = stack_[top_ - 1][k];
    for (int t = top_ - 2; t >= 0; --t)
      for (int k = 0; k < count; ++k) p[k] = join(stack_[t][k], p[k]);
    return true;
  }

 private:
  A stack_[48][count];
  int level_[48];
  int top_ = 0;
};

// The 32 partials of a finished fold joined as a tree (partial k with k + 16, then k + 8, ...).
template <class S, class Join>
S join_partials(S (&partial)[32], Join join) {
  for (int width = 16; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) partial[k] = join(partial[k], partial[k + width]);
  return partial[0];
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA
