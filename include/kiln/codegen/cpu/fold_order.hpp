// The fixed order in which kiln folds a reduction's elements (the runtime's reducer and the
// compiled row functions' register folds both follow it, so both give the same bits): pieces of
// 4096 elements, each in blocks of 256, each block folded into 32 interleaved partials; a piece's
// blocks joined as a binary counter does, then its 32 partials as a tree; the pieces' results
// joined pairwise (the runtime's fold_partials).
#pragma once

#include <bit>
#include <cstdint>

#include "kiln/codegen/cpu/isa.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// The most elements one fold covers: a reduced row longer than this is folded a piece at a time.
inline constexpr std::int64_t fold_piece = 4096;

// The 32 partials of one block as `count` accumulators of type A (scalars, or SIMD batches of 32
// / count lanes each). Each block of a piece is folded into next() and then push()ed; result()
// is the join of all of them: a block joins the one before it when both cover as many blocks, and
// what is left joins from the last down. The error of a sum grows with 8 + log n, not with n.
//
// A block is folded where it stays, and joins are made in place: the partials are never copied
// from one array to another. GCC tuned for AMD's Zen copies arrays 16 bytes at a time, and a
// 32-byte load soon after such a copy waits for both stores to leave the store buffer (on rows of
// 768 elements that was a large part of a fold's time).
template <class A, int count>
class block_partials {
 public:
  static constexpr int ways = 32, block = 256;

  // Where the next block's `count` partials are to be folded.
  A* next() { return stack_[top_]; }
  // Takes the block folded at next(); at most a piece's blocks (fold_piece / block).
  template <class Join>
  void push(Join join) {
    // The entries this block completes: the last `joined`, of levels 0, 1, ... from the top down.
    int joined = 0;
    while (joined < top_ && level_[top_ - 1 - joined] == joined) ++joined;
    for (int t = top_ - 1; t >= top_ - joined; --t)
      for (int k = 0; k < count; ++k) stack_[t][k] = join(stack_[t][k], stack_[t + 1][k]);
    top_ -= joined;
    level_[top_++] = joined;
  }
  // The join of every block pushed (count accumulators, in place), or nullptr when none was.
  // Ends the fold.
  template <class Join>
  A* result(Join join) {
    if (top_ == 0) return nullptr;
    for (int t = top_ - 2; t >= 0; --t)
      for (int k = 0; k < count; ++k) stack_[t][k] = join(stack_[t][k], stack_[t + 1][k]);
    return stack_[0];
  }

 private:
  // A piece's blocks take at most `levels` entries (its 16 blocks: 15 pushed are levels 3, 2, 1,
  // 0), and one more for the block being folded. Sized for a piece, not for any count, the stack
  // is 768 bytes of the fold's frame, not 6 KB.
  static constexpr int levels = std::bit_width(std::uint64_t(fold_piece / block));
  A stack_[levels + 1][count];
  int level_[levels];
  int top_ = 0;
};

// The first n (a power of two) of a finished fold's partials joined as a tree, in place: partial
// k with k + n / 2, then k + n / 4, ... (n = 32: the whole fold; a SIMD fold joins its batches so
// first, then calls this on the lanes of the last).
template <class S, class Join>
S join_partials(S* partial, int n, Join join) {
  for (int width = n / 2; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) partial[k] = join(partial[k], partial[k + width]);
  return partial[0];
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA
