// Runs a convolution on the CPU: a 2-D depthwise one plane by plane; a 2-D one over several input
// channels with rows wider than a vector through the GEMM's register tile, reading its windows
// from copies of its input rows; any other as an implicit GEMM (contraction.hpp): the kernel is
// A, and B's panels are packed from the input's windows as they are needed (no im2col buffer).
#pragma once

#include <algorithm>
#include <vector>

#include "kiln/runtime/cpu/contraction.hpp"

namespace kiln::cpu {

// A convolution's windows along each spatial axis a (0: the axis after the channels), from its
// node's attributes: kernel cell k joins output o and input i where o * strides[a] + starts[a] +
// k * dilations[a] = i (transposed: i * strides[a] + ... = o).
struct conv_geometry {
  bool transposed = false;
  std::int64_t groups = 1;
  std::array<std::int64_t, max_rank> strides{}, starts{}, dilations{};
  // w packed beforehand by pack_conv_weights (the chosen kernels' layout), read in place of
  // packing it at this call; null: packed as the GEMM runs.
  const void* packed_weights = nullptr;
};

// y [N, M, outputs...] = x [N, C, spatial...] convolved with w ([M, C / groups, kernel...];
// transposed: [C, M / groups, kernel...]), read through their strides, as one GEMM per image and
// group: finished_tile::batch is image x groups + group, its rows the group's output channels,
// its columns the output cells in row-major order.
KILN_RUNTIME_API void run_conv(dtype type, const shape& x_dims, const operand_layout& x,
                               const shape& w_dims, const operand_layout& w, const shape& y_dims,
                               const conv_geometry& c, tile_ref epilogue);

// A convolution's w packed whole as its GEMM packs A (each group's rows as MR-row panels, KC
// block after KC block), for conv_geometry::packed_weights: a constant weight packed once instead
// of at every call. Writes to `to` (64-byte aligned) where it is not null; returns the bytes it
// takes, or 0 where the convolution does not read w as a GEMM's A (a 2-D depthwise one) or the
// type is not one the GEMM packs.
KILN_RUNTIME_API std::size_t pack_conv_weights(dtype type, const shape& w_dims,
                                               const operand_layout& w, const shape& y_dims,
                                               const conv_geometry& c, void* to);

}  // namespace kiln::cpu

// This instruction set's kernels, in its namespace (codegen/cpu/isa.hpp).
#if KILN_CPU_KERNELS_BODY
#include "kiln/codegen/cpu/isa.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {
namespace detail {

constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// Whether depthwise_2d runs a convolution of `in_group` input channels per group and `spatial`
// axes (it reads w in place: nothing to pack).
inline bool is_depthwise_2d(const conv_geometry& c, std::int64_t in_group, int spatial) {
  return !c.transposed && in_group == 1 && spatial == 2;
}

// Column phase f of input rows [y0, y0 + rows) of an H x W plane (`plane`: its element 0; rows
// `row_step` apart, columns `step`), each as `width` elements from `to` on, one row after another:
// element j of a row is input column j x sx + f + start, 0 outside the plane.
template <class S, class T>
void copy_phase_rows(const T* plane, std::int64_t row_step, std::int64_t step, std::int64_t H,
                     std::int64_t W, std::int64_t y0, std::int64_t rows, std::int64_t sx,
                     std::int64_t f, std::int64_t start, std::int64_t width, S* to) {
  const std::int64_t at0 = f + start;
  const std::int64_t lo = std::clamp(ceil_div(-at0, sx), std::int64_t{0}, width);
  const std::int64_t hi = std::clamp(ceil_div(W - at0, sx), lo, width);
  const std::int64_t stride = sx * step;
  for (std::int64_t y = y0; y < y0 + rows; ++y, to += width) {
    if (y < 0 || y >= H) {
      std::fill(to, to + width, S(0));
      continue;
    }
    const T* from = plane + y * row_step + (lo * sx + at0) * step;
    std::fill(to, to + lo, S(0));
    // Strides 1 and 2 known to the compiler, which vectorizes them.
    if (stride == 1)
      for (std::int64_t j = lo; j < hi; ++j) to[j] = as_fold<S>(from[j - lo]);
    else if (stride == 2)
      for (std::int64_t j = lo; j < hi; ++j) to[j] = as_fold<S>(from[(j - lo) * 2]);
    else
      for (std::int64_t j = lo; j < hi; ++j) to[j] = as_fold<S>(from[(j - lo) * stride]);
    std::fill(to + hi, to + width, S(0));
  }
}

// What stride2_width3_row needs beyond xsimd 8.1's batches, per instruction set that has
// two-register shuffles: a masked load of a row's first n columns from p, the parting of
// 2 x lanes consecutive columns into evens and odds, and the odds a lane on with `left` in
// lane 0.
#if defined(__AVX512F__)
#define KILN_CPU_STRIDE2_PARTS 1
struct stride2_parts {
  using vec = xsimd::batch<float>;
  static_assert(vec::size == 16);
  static vec load(const float* p, std::int64_t n) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>(n >= 16  ? 0xffff
                                                        : n <= 0 ? 0
                                                                 : (1u << n) - 1),
                                 p);
  }
  static void part(vec lo, vec hi, vec& evens, vec& odds) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    evens = _mm512_permutex2var_ps(lo, even, hi);
    odds = _mm512_permutex2var_ps(lo, odd, hi);
  }
  static vec shifted(vec odds, float left) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(odds),
                                                   _mm512_castps_si512(_mm512_set1_ps(left)), 15));
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
#define KILN_CPU_STRIDE2_PARTS 1
struct stride2_parts {
  using vec = xsimd::batch<float>;
  static_assert(vec::size == 8);
  static vec load(const float* p, std::int64_t n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const auto k = static_cast<int>(std::clamp<std::int64_t>(n, 0, 8));
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(k), lane));
  }
  static void part(vec lo, vec hi, vec& evens, vec& odds) {
    // Within each 128-bit half, then the halves' 64-bit pairs in order: lo's four, hi's four.
    auto in_order = [](__m256 v) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
    };
    evens = in_order(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    odds = in_order(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  static vec shifted(vec odds, float left) {
    const __m256 rotated =
        _mm256_permutevar8x32_ps(odds, _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6));
    return _mm256_blend_ps(rotated, _mm256_set1_ps(left), 0x01);
  }
};
#endif

#ifdef KILN_CPU_STRIDE2_PARTS
// Output row oy of a depthwise 3-wide, stride-2 convolution whose windows start one column left
// of 2 x j (pads of 1) over f32 rows of unit column step: the sums depthwise_2d's phases give, in
// their order and so with their bits, with each input row's even and odd columns parted in
// registers instead of copied into phase rows (those copies, a permute, a store and its reload
// per vector, were half of MobileNet's stride-2 depthwise convolution). `vectors`: the row's
// vectors of outputs.
inline void stride2_width3_row(const float* plane, std::int64_t row_step, std::int64_t H,
                               std::int64_t W, std::int64_t KH, std::int64_t dy, std::int64_t iy0,
                               const float* weights, std::int64_t vectors, float* out) {
  using P = stride2_parts;
  using vec = P::vec;
  constexpr std::int64_t L = vec::size;
  for (std::int64_t v0 = 0; v0 < vectors; v0 += 4) {
    const int B = static_cast<int>(std::min<std::int64_t>(4, vectors - v0));
    vec acc[4] = {vec(0.f), vec(0.f), vec(0.f), vec(0.f)};
    for (std::int64_t ky = 0; ky < KH; ++ky) {
      const std::int64_t iy = iy0 + ky * dy;
      if (iy < 0 || iy >= H) continue;
      const float* row = plane + iy * row_step;
      const vec w0(weights[ky * 3]), w1(weights[ky * 3 + 1]), w2(weights[ky * 3 + 2]);
      for (int b = 0; b < B; ++b) {
        const std::int64_t c0 = 2 * L * (v0 + b);  // input column of lane 0's middle cell
        vec evens, odds;                           // columns 2j and 2j + 1
        P::part(P::load(row + c0, W - c0), P::load(row + c0 + L, W - c0 - L), evens, odds);
        // Columns 2j - 1: the odds a lane on, column c0 - 1 (0 outside the image: left of it,
        // or right of it where the padding on the right is wide) in lane 0.
        const vec before = P::shifted(odds, c0 > 0 && c0 <= W ? row[c0 - 1] : 0.f);
        acc[b] = xsimd::fma(w0, before, acc[b]);
        acc[b] = xsimd::fma(w1, evens, acc[b]);
        acc[b] = xsimd::fma(w2, odds, acc[b]);
      }
    }
    // Past the row's outputs this writes the next row's first ones, which that row then writes.
    for (int b = 0; b < B; ++b) acc[b].store_unaligned(out + (v0 + b) * L);
  }
}
#endif

// A 2-D depthwise convolution (one input channel per group: MobileNet's) in fold type S from
// storage type T: each output plane from its input plane, sixteen (a vector of) outputs of a row
// at a time, summing every kernel cell in a register. The input rows a band of output rows reads
// are first copied into one plane per column phase (column j of phase f: input column j x stride
// + f + start, 0 outside the image), so that the outputs of a row read consecutive elements for
// every stride and dilation; a band's phases fit in L1 (a whole plane's, 59 KB at 112² and
// stride 2, did not: its copy and every multiply-add's load went to L2). (A loop per kernel cell
// adding into the output row, as the other ranks run, spent most of its time on each short row's
// setup and on reloading the row it adds to.)
template <class S, class T>
void depthwise_2d(const shape& x_dims, const operand_layout& x, const shape& w_dims,
                  const operand_layout& w, const shape& y_dims, const conv_geometry& c,
                  tile_ref epilogue) {
  using batch = xsimd::batch<S>;
  constexpr std::int64_t L = batch::size;
  const std::int64_t H = x_dims.dims[2], W = x_dims.dims[3];
  const std::int64_t OH = y_dims.dims[2], OW = y_dims.dims[3];
  const std::int64_t KH = w_dims.dims[2], KW = w_dims.dims[3];
  const std::int64_t sy = c.strides[0], sx = c.strides[1], dy = c.dilations[0], dx = c.dilations[1];
  const std::int64_t out_group = y_dims.dims[1] / c.groups, N = OH * OW;
  // Columns each phase row holds: the last vector of outputs past OW, shifted by the widest
  // kernel column.
  const std::int64_t vectors = (OW + L - 1) / L;
  const std::int64_t phase_width = vectors * L + (KW - 1) * dx / sx + 1;
  // Output rows a band: its input rows' phases in 24 KB.
  const std::int64_t row_bytes = sx * phase_width * std::int64_t{sizeof(S)};
  const std::int64_t fit_rows = std::max<std::int64_t>(24 * 1024 / row_bytes, 1);
  const std::int64_t band = std::clamp<std::int64_t>((fit_rows - (KH - 1) * dy - 1) / sy + 1, 1,
                                                     std::max<std::int64_t>(OH, 1));
  const std::int64_t band_rows = (band - 1) * sy + (KH - 1) * dy + 1;  // input rows a band reads
  const std::int64_t planes = x_dims.dims[0] * y_dims.dims[1];
  // Stride 2 across a 3-wide window with a column of padding on the left (MobileNet's halving
  // depthwise convolutions) parts each row's columns in registers where the set has the shuffles
  // for it (stride2_width3_row).
  [[maybe_unused]] const bool parts_in_registers =
      sx == 2 && KW == 3 && dx == 1 && c.starts[1] == -1 && x.stride[3] == 1;
  auto run_planes = [&](std::int64_t first, std::int64_t end) {
    thread_local std::vector<S> phases, plane, weights;
    thread_local std::vector<T> narrow;
    // Output plane (image, co)'s values in `plane`, to the epilogue.
    auto deliver = [&](std::int64_t image, std::int64_t co, std::int64_t g) {
      const void* values = plane.data();
      if constexpr (!std::is_same_v<S, T>) {  // rounded to the contraction's narrow type
        narrow.resize(static_cast<std::size_t>(N));
        for (std::int64_t j = 0; j < N; ++j) narrow[j] = T(plane[j]);
        values = narrow.data();
      }
      epilogue({image * c.groups + g, co % out_group, 1, 0, N, values, N});
    };
    // Kernel column kx's elements in its phase, from the phases' start.
    thread_local std::vector<std::int64_t> column_offset;
    column_offset.resize(static_cast<std::size_t>(KW));
    for (std::int64_t kx = 0; kx < KW; ++kx)
      column_offset[kx] = kx * dx % sx * band_rows * phase_width + kx * dx / sx;
    phases.resize(static_cast<std::size_t>(sx * band_rows * phase_width));
    plane.resize(static_cast<std::size_t>(N + L));  // the last row's last vector may pass N
    weights.resize(static_cast<std::size_t>(KH * KW));
    for (std::int64_t at = first; at < end; ++at) {
      const std::int64_t image = at / y_dims.dims[1], co = at % y_dims.dims[1];
      const std::int64_t g = co / out_group;
      const T* xc = reinterpret_cast<const T*>(x.data) + image * x.stride[0] + g * x.stride[1];
      const T* wc = reinterpret_cast<const T*>(w.data) + co * w.stride[0];
      for (std::int64_t ky = 0; ky < KH; ++ky)
        for (std::int64_t kx = 0; kx < KW; ++kx)
          weights[ky * KW + kx] = as_fold<S>(wc[ky * w.stride[2] + kx * w.stride[3]]);
#ifdef KILN_CPU_STRIDE2_PARTS
      if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>)
        if (parts_in_registers) {
          for (std::int64_t oy = 0; oy < OH; ++oy)
            stride2_width3_row(xc, x.stride[2], H, W, KH, dy, oy * sy + c.starts[0], weights.data(),
                               vectors, plane.data() + oy * OW);
          deliver(image, co, g);
          continue;
        }
#endif
      for (std::int64_t oy0 = 0; oy0 < OH; oy0 += band) {
        const std::int64_t oy1 = std::min(OH, oy0 + band);
        // Input rows [y0, y0 + band_rows) in the phases (those inside the image).
        const std::int64_t y0 = oy0 * sy + c.starts[0];
        const std::int64_t copy_first = std::max<std::int64_t>(y0, 0);
        const std::int64_t copy_end = std::min(H, y0 + band_rows);
        for (std::int64_t f = 0; f < sx; ++f)
          copy_phase_rows(xc, x.stride[2], x.stride[3], H, W, copy_first, copy_end - copy_first, sx,
                          f, c.starts[1], phase_width,
                          phases.data() + (f * band_rows + copy_first - y0) * phase_width);
        // Vectors [v0, v0 + B) of output row oy, B accumulators side by side (one alone would
        // wait on its own multiply-add at every kernel cell).
        auto vectors_of_row = [&]<int B>(std::integral_constant<int, B>, std::int64_t oy,
                                         std::int64_t v0) {
          batch acc[B];
          for (int b = 0; b < B; ++b) acc[b] = batch(S(0));
          for (std::int64_t ky = 0; ky < KH; ++ky) {
            const std::int64_t iy = oy * sy + c.starts[0] + ky * dy;
            if (iy < 0 || iy >= H) continue;
            const S* row = phases.data() + (iy - y0) * phase_width + v0 * L;
            for (std::int64_t kx = 0; kx < KW; ++kx) {
              const batch weight(weights[ky * KW + kx]);
              const S* from = row + column_offset[kx];
              for (int b = 0; b < B; ++b)
                acc[b] = xsimd::fma(weight, batch::load_unaligned(from + b * L), acc[b]);
            }
          }
          // Past OW this writes the next row's first outputs, which that row then writes.
          S* out = plane.data() + oy * OW + v0 * L;
          for (int b = 0; b < B; ++b) acc[b].store_unaligned(out + b * L);
        };
        for (std::int64_t oy = oy0; oy < oy1; ++oy) {
          std::int64_t v0 = 0;
          for (; v0 + 4 <= vectors; v0 += 4)
            vectors_of_row(std::integral_constant<int, 4>{}, oy, v0);
          if (const std::int64_t rest = vectors - v0; rest == 3)
            vectors_of_row(std::integral_constant<int, 3>{}, oy, v0);
          else if (rest == 2)
            vectors_of_row(std::integral_constant<int, 2>{}, oy, v0);
          else if (rest == 1)
            vectors_of_row(std::integral_constant<int, 1>{}, oy, v0);
        }
      }
      deliver(image, co, g);
    }
  };
  // About 2 x cells multiply-adds per output: threads pay off past half a million flops.
  if (double(planes) * double(N) * double(KH * KW) > 2e5)
    parallel_for(planes, 1, run_planes);
  else
    run_planes(0, planes);
}

// Fold type S, storage type T. B's row p is (input channel, kernel cell), its column j an output
// cell: the input element that cell's window puts under that kernel cell, or 0 (padding).
// Per column p of a convolution's A (input channel p / cells, kernel cell p % cells): the
// element's offset in w's rows.
inline std::vector<std::int64_t> conv_weight_offsets(const shape& w_dims, const operand_layout& w,
                                                     bool transposed, std::int64_t in_group) {
  std::int64_t cells = 1;
  for (int a = 2; a < w_dims.rank; ++a) cells *= w_dims.dims[a];
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(in_group * cells));
  std::array<std::int64_t, max_rank> k{};  // the cell's index along each kernel axis
  std::int64_t channel = 0;
  for (auto& off : offsets) {  // the cells in row-major order, counted without dividing
    off = channel * w.stride[transposed ? 0 : 1];
    for (int a = 2; a < w_dims.rank; ++a) off += k[a] * w.stride[a];
    int a = w_dims.rank - 1;
    while (a >= 2 && ++k[a] == w_dims.dims[a]) k[a--] = 0;
    if (a < 2) ++channel;
  }
  return offsets;
}

// w's rows of group g as the GEMM's A: where its first row starts (elements) and the row stride.
inline std::pair<std::int64_t, std::int64_t> conv_weight_rows(const operand_layout& w,
                                                              const conv_geometry& c,
                                                              std::int64_t g, std::int64_t in_group,
                                                              std::int64_t out_group) {
  // conv: row m of group g is w[g x out_group + m]; transposed: w[g x in_group + ci, m].
  return {c.transposed ? g * in_group * w.stride[0] : g * out_group * w.stride[0],
          w.stride[c.transposed ? 1 : 0]};
}

// pack_conv_weights for fold type S from storage type T: each group's A whole, as gemm's a_whole.
template <class S, class T>
std::size_t pack_conv_weights_as(const shape& w_dims, const operand_layout& w, const shape& y_dims,
                                 const conv_geometry& c, void* to) {
  using G = gemm_shape<S>;
  const std::int64_t groups = c.groups, out_group = y_dims.dims[1] / groups;
  const std::int64_t in_group = c.transposed ? w_dims.dims[0] / groups : w_dims.dims[1];
  if (is_depthwise_2d(c, in_group, w_dims.rank - 2)) return 0;
  if (!w.terms.empty()) return 0;
  std::int64_t K = in_group;
  for (int a = 2; a < w_dims.rank; ++a) K *= w_dims.dims[a];
  const std::int64_t rows = (out_group + G::MR - 1) / G::MR * G::MR;
  const auto bytes = static_cast<std::size_t>(groups * rows * K) * sizeof(S);
  if (!to || bytes == 0) return bytes;
  const std::vector<std::int64_t> offsets = conv_weight_offsets(w_dims, w, c.transposed, in_group);
  for (std::int64_t g = 0; g < groups; ++g) {
    const auto [base, sm] = conv_weight_rows(w, c, g, in_group, out_group);
    for (std::int64_t p0 = 0; p0 < K; p0 += G::KC)
      pack_a<S, T>(
          w.data + base * std::int64_t{sizeof(T)}, sm,
          [&](std::int64_t p) { return offsets[static_cast<std::size_t>(p)]; }, out_group, p0,
          std::min<std::int64_t>(G::KC, K - p0), static_cast<S*>(to) + g * rows * K + p0 * rows);
  }
  return bytes;
}

// Whether direct_2d runs a convolution with fold type S: 2-D, not transposed, several input
// channels per group (one is depthwise_2d's), not a 1x1 kernel the GEMM reads as a plain matrix,
// and output rows wider than a vector, so that a row's register tiles are two vectors wide. A
// one-vector tile feeds each broadcast of A to one multiply-add instead of two: on rows of 14
// and 7 (ResNet's last stages: K 2304 and 4608) it took 1.2 and 2 times the GEMM's time, which
// runs all cells of an image as one row.
template <class S>
bool runs_direct_2d(const conv_geometry& c, std::int64_t in_group, int spatial,
                    std::int64_t out_width, bool pointwise) {
  using G = gemm_shape<S>;
  return !c.transposed && spatial == 2 && in_group > 1 && !pointwise && out_width > G::L;
}

// An MR x V-vector register tile of direct_2d: the sums over K rows of A's panel `ap` (MR values
// a row) times the V vectors of input from rows[p] + j; its first `cols` columns written to `c`
// (ldc apart), or added to what it holds where `add` (a later KC block). Past `cols` each row
// of `c` is read and written back unchanged (the next output row's cells, which a later KC
// block adds to): c needs V x L columns of room.
template <class S, int V>
void direct_tile(std::int64_t K, const S* ap, const S* const* rows, std::int64_t j, S* c,
                 std::int64_t ldc, int cols, bool add) {
  using G = gemm_shape<S>;
  using batch = typename G::batch;
  constexpr int MR = G::MR, L = G::L;
  batch acc0[MR], acc1[MR];
  // Written out as micro_kernel's, so that the accumulators stay in registers.
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((acc0[I] = acc1[I] = batch(S(0))), ...);
    for (std::int64_t p = 0; p < K; ++p) {
      const S* from = rows[p] + j;
      const batch b0 = batch::load_unaligned(from);
      const batch b1 = V == 2 ? batch::load_unaligned(from + L) : b0;
      const S* a = ap + p * MR;
      (
          [&] {
            const batch av(a[I]);
            acc0[I] = xsimd::fma(av, b0, acc0[I]);
            if constexpr (V == 2) acc1[I] = xsimd::fma(av, b1, acc1[I]);
          }(),
          ...);
    }
  }
  (std::make_integer_sequence<int, MR>{});
  if (cols == V * L) {
    for (int i = 0; i < MR; ++i) {
      S* row = c + i * ldc;
      if (add) {
        (acc0[i] + batch::load_unaligned(row)).store_unaligned(row);
        if constexpr (V == 2) (acc1[i] + batch::load_unaligned(row + L)).store_unaligned(row + L);
      } else {
        acc0[i].store_unaligned(row);
        if constexpr (V == 2) acc1[i].store_unaligned(row + L);
      }
    }
    return;
  }
  // The lanes of each vector inside `cols`.
  alignas(64) S lane[L];
  for (int t = 0; t < L; ++t) lane[t] = S(t);
  const batch index = batch::load_aligned(lane);
  const auto in0 = index < batch(S(cols)), in1 = index < batch(S(cols - L));
  for (int i = 0; i < MR; ++i) {
    S* row = c + i * ldc;
    const batch old0 = batch::load_unaligned(row);
    xsimd::select(in0, add ? old0 + acc0[i] : acc0[i], old0).store_unaligned(row);
    if constexpr (V == 2) {
      const batch old1 = batch::load_unaligned(row + L);
      xsimd::select(in1, add ? old1 + acc1[i] : acc1[i], old1).store_unaligned(row + L);
    }
  }
}

// A 2-D convolution in fold type S from storage type T, computed directly: the input rows a
// band of output rows reads are copied into one row per channel and column phase (as
// depthwise_2d's), and each register tile reads its K input vectors from those rows, where the
// GEMM would first pack every window's K elements into B (a stem's 3 x 3 x 3 windows: 0.1 of its
// 0.27 ms on one thread; ResNet's 3 x 3 x 64: a tenth of their time). The sums run over KC
// blocks from 0 in the GEMM's order, so the bits are the GEMM's. A band's results go to the
// epilogue as one tile: the group's output channels x the band's cells.
template <class S, class T>
void direct_2d(const shape& x_dims, const operand_layout& x, const shape& w_dims,
               const operand_layout& w, const shape& y_dims, const conv_geometry& c,
               tile_ref epilogue) {
  using G = gemm_shape<S>;
  constexpr std::int64_t L = G::L, MR = G::MR, NR = G::NR;
  const std::int64_t groups = c.groups, in_group = x_dims.dims[1] / groups;
  const std::int64_t out_group = y_dims.dims[1] / groups;
  const std::int64_t H = x_dims.dims[2], W = x_dims.dims[3];
  const std::int64_t OH = y_dims.dims[2], OW = y_dims.dims[3];
  const std::int64_t KH = w_dims.dims[2], KW = w_dims.dims[3];
  const std::int64_t sy = c.strides[0], sx = c.strides[1], dy = c.dilations[0], dx = c.dilations[1];
  const std::int64_t K = in_group * KH * KW, panels = (out_group + MR - 1) / MR;
  const std::int64_t images = x_dims.dims[0] * groups;
  if (images == 0 || OH == 0 || out_group == 0) return;  // no cells: no tile
  // A phase row holds what a row's register tiles read: whole tiles past OW, shifted by the
  // widest kernel column.
  const std::int64_t phase_width = (OW + NR - 1) / NR * NR + (KW - 1) * dx / sx + 1;
  // Output rows a band: its tile and its input rows' phases in about 96 KB (L2), and at least
  // two bands for each thread where there are rows enough.
  const std::int64_t row_bytes =
      (panels * MR * OW + sy * in_group * sx * phase_width) * std::int64_t{sizeof(S)};
  std::int64_t band = std::clamp<std::int64_t>(96 * 1024 / row_bytes, 1, OH);
  const std::int64_t per_image = (2 * std::int64_t{split_threads()} + images - 1) / images;
  band = std::min(band, std::max<std::int64_t>((OH + per_image - 1) / per_image, 1));
  const std::int64_t bands = (OH + band - 1) / band;
  const std::int64_t band_rows = (band - 1) * sy + (KH - 1) * dy + 1;  // input rows a band reads
  const std::int64_t ld = band * OW;
  // Row p of B (input channel, kernel cell) for the band's first output row: where it starts in
  // the phases; each output row after it is sy input rows further.
  std::vector<std::int64_t> row_start(static_cast<std::size_t>(K));
  for (std::int64_t p = 0; p < K; ++p) {
    const std::int64_t ci = p / (KH * KW), ky = p / KW % KH, kx = p % KW;
    row_start[p] = ((ci * sx + kx * dx % sx) * band_rows + ky * dy) * phase_width + kx * dx / sx;
  }
  std::vector<std::int64_t> w_offset;
  if (!c.packed_weights) w_offset = conv_weight_offsets(w_dims, w, false, in_group);
  auto run_bands = [&](std::int64_t first, std::int64_t end) {
    thread_local std::vector<S> phases, tile, packed;
    thread_local std::vector<const S*> rows;
    thread_local std::vector<T> narrow;
    phases.resize(static_cast<std::size_t>(in_group * sx * band_rows * phase_width));
    tile.resize(static_cast<std::size_t>(panels * MR * ld + NR));  // room for a last tile
    rows.resize(static_cast<std::size_t>(K));
    // Row p of B for the band's first output row; each output row after it is sy input rows on.
    for (std::int64_t p = 0; p < K; ++p) rows[p] = phases.data() + row_start[p];
    std::int64_t packed_group = -1;
    for (std::int64_t t = first; t < end; ++t) {
      const std::int64_t image = t / bands / groups, g = t / bands % groups;
      const std::int64_t oy0 = t % bands * band, oy1 = std::min(OH, oy0 + band);
      const S* a = static_cast<const S*>(c.packed_weights) + g * panels * MR * K;
      if (!c.packed_weights) {
        if (packed_group != g) {
          packed.resize(static_cast<std::size_t>(panels * MR * K));
          const auto [base, sm] = conv_weight_rows(w, c, g, in_group, out_group);
          for (std::int64_t p0 = 0; p0 < K; p0 += G::KC)
            pack_a<S, T>(
                w.data + base * std::int64_t{sizeof(T)}, sm,
                [&](std::int64_t p) { return w_offset[static_cast<std::size_t>(p)]; }, out_group,
                p0, std::min<std::int64_t>(G::KC, K - p0), packed.data() + p0 * panels * MR);
          packed_group = g;
        }
        a = packed.data();
      }
      // The band's input rows [y0, y0 + band_rows) by channel and column phase (column j of
      // phase f: input column j x sx + f + start), 0 outside the image.
      const std::int64_t y0 = oy0 * sy + c.starts[0];
      for (std::int64_t ci = 0; ci < in_group; ++ci) {
        const T* xc = reinterpret_cast<const T*>(x.data) + image * x.stride[0] +
                      (g * in_group + ci) * x.stride[1];
        for (std::int64_t f = 0; f < sx; ++f)
          copy_phase_rows(xc, x.stride[2], x.stride[3], H, W, y0, band_rows, sx, f, c.starts[1],
                          phase_width, phases.data() + (ci * sx + f) * band_rows * phase_width);
      }
      // A KC block of A's panel (in L1) under every tile of the band's rows, panel after panel:
      // A is read once a band (ResNet's 3 x 3 x 256 is 2.4 MB: read once a tile, from memory,
      // it took twice the GEMM's time). A tile's sums over the blocks stay in the GEMM's order.
      for (std::int64_t p0 = 0; p0 < K; p0 += G::KC) {
        const std::int64_t kc = std::min<std::int64_t>(G::KC, K - p0);
        for (std::int64_t r = 0; r < panels; ++r) {
          const S* ap = a + p0 * panels * MR + r * MR * kc;  // as the GEMM packs A
          for (std::int64_t oy = oy0; oy < oy1; ++oy) {
            const std::int64_t at = (oy - oy0) * sy * phase_width;
            S* out = tile.data() + r * MR * ld + (oy - oy0) * OW;
            for (std::int64_t j = 0; j < OW; j += NR) {
              const int cols = static_cast<int>(std::min(NR, OW - j));
              if (cols > L)
                direct_tile<S, 2>(kc, ap, rows.data() + p0, at + j, out + j, ld, cols, p0 > 0);
              else
                direct_tile<S, 1>(kc, ap, rows.data() + p0, at + j, out + j, ld, cols, p0 > 0);
            }
          }
        }
      }
      const std::int64_t cells = (oy1 - oy0) * OW;
      const void* values = tile.data();
      if constexpr (!std::is_same_v<S, T>) {  // rounded to the contraction's narrow type
        narrow.resize(static_cast<std::size_t>(out_group * ld));
        for (std::int64_t i = 0; i < out_group; ++i)
          for (std::int64_t j = 0; j < cells; ++j) narrow[i * ld + j] = T(tile[i * ld + j]);
        values = narrow.data();
      }
      epilogue({image * groups + g, 0, out_group, oy0 * OW, cells, values, ld});
    }
  };
  const std::int64_t tasks = images * bands;
  if (double(images) * double(out_group) * double(OH * OW) * double(K) > 2e5 && tasks > 1)
    parallel_for(tasks, 1, run_bands);
  else
    run_bands(0, tasks);
}

template <class S, class T>
void conv_as(const shape& x_dims, const operand_layout& x, const shape& w_dims,
             const operand_layout& w, const shape& y_dims, const conv_geometry& c,
             tile_ref epilogue) {
  using G = gemm_shape<S>;
  const int rank = x_dims.rank, ns = rank - 2;
  const std::int64_t groups = c.groups;
  const std::int64_t in_group = x_dims.dims[1] / groups, out_group = y_dims.dims[1] / groups;
  std::int64_t cells = 1, N = 1;  // kernel cells, output cells
  for (int a = 0; a < ns; ++a) {
    cells *= w_dims.dims[2 + a];
    N *= y_dims.dims[2 + a];
  }
  const std::int64_t K = in_group * cells;
  const int last = ns - 1;
  const std::int64_t out_last = y_dims.dims[rank - 1];
  // A 1x1 kernel that keeps every cell (stride 1, no padding) over cells laid out with one
  // stride: B is a plain matrix.
  bool pointwise = !c.transposed && cells == 1;
  for (int a = 0; a < ns; ++a)
    pointwise = pointwise && c.strides[a] == 1 && c.starts[a] == 0 &&
                (a == last || x.stride[2 + a] == x.stride[3 + a] * x_dims.dims[3 + a]);
  // Depthwise (one input channel per group, MobileNet's): each output plane directly; 2-D
  // below, other ranks a row of outputs at a time, one kernel cell after another, vectorized
  // along the row. The GEMM would compute a register tile of MR rows for each single row here.
  // Both 2-D kernels work out their own tables: the GEMM's below would go unused.
  if (is_depthwise_2d(c, in_group, ns))
    return depthwise_2d<S, T>(x_dims, x, w_dims, w, y_dims, c, epilogue);
  if (runs_direct_2d<S>(c, in_group, ns, out_last, pointwise))
    return direct_2d<S, T>(x_dims, x, w_dims, w, y_dims, c, epilogue);
  // Per row p of B (and column p of A): the input channel's offset in x, the kernel cell's
  // element offset in w, and per spatial axis starts + k x dilation (the cell's shift).
  // (w's offsets only where w is not packed already.)
  std::vector<std::int64_t> w_offset, x_channel(K), shift(K * ns);
  if (!c.packed_weights) w_offset = conv_weight_offsets(w_dims, w, c.transposed, in_group);
  std::array<std::int64_t, max_rank> k{};              // the cell's index along each kernel axis
  for (std::int64_t p = 0, channel = 0; p < K; ++p) {  // counted without dividing
    for (int a = 0; a < ns; ++a) shift[p * ns + a] = c.starts[a] + k[a] * c.dilations[a];
    x_channel[p] = channel * x.stride[1];
    int a = ns - 1;
    while (a >= 0 && ++k[a] == w_dims.dims[2 + a]) k[a--] = 0;
    if (a < 0) ++channel;
  }
  const std::int64_t in_last = x_dims.dims[rank - 1];
  const std::int64_t s_last = c.strides[last], xs_last = x.stride[rank - 1];
  // Per row p (conv): the outputs along the last axis whose input o x s + shift is inside it,
  // [first_inside, end_inside) (worked out once: divisions per run of outputs cost more than
  // the copy).
  std::vector<std::int64_t> first_inside(K), end_inside(K);
  for (std::int64_t p = 0; p < K; ++p) {
    const std::int64_t by = shift[p * ns + last];
    first_inside[p] = ceil_div(-by, s_last);
    end_inside[p] = ceil_div(in_last - by, s_last);
  }
  // The input position along spatial axis a that output o reads under a cell shifted by `by`,
  // or -1 where it is padding (transposed: where no input cell lands on o).
  auto position = [&](int a, std::int64_t o, std::int64_t by) -> std::int64_t {
    std::int64_t i = o * c.strides[a] + by;
    if (c.transposed) {
      const std::int64_t num = o - by;
      i = num % c.strides[a] == 0 ? num / c.strides[a] : -1;
    }
    return i >= 0 && i < x_dims.dims[2 + a] ? i : -1;
  };
  // The input row that kernel cell p puts under output row o (o's axes before the last), from
  // `base` (an image's channel), or nullptr where that row is padding.
  auto window_row = [&](const T* base, std::int64_t p,
                        const std::array<std::int64_t, max_rank>& o) -> const T* {
    for (int a = 0; a < last; ++a) {
      const std::int64_t i = position(a, o[a], shift[p * ns + a]);
      if (i < 0) return nullptr;
      base += i * x.stride[2 + a];
    }
    return base;
  };
  // Other ranks: where the groups are channels (depthwise), or a single input channel's rows are
  // long and contiguous. One input channel under many filters along short strided rows (an
  // STFT as a 1-D convolution: 258 filters of 256 taps, stride 128, 4 outputs) is a GEMM of
  // K = taps instead: the rows would not vectorize (one thread: 0.29 ms, as a GEMM 0.09).
  const bool long_rows = s_last * xs_last == 1 && out_last >= 16;
  if (!c.transposed && in_group == 1 && (groups > 1 || long_rows)) {
    if (w_offset.empty()) w_offset = conv_weight_offsets(w_dims, w, c.transposed, in_group);
    const std::int64_t planes = x_dims.dims[0] * y_dims.dims[1], rows = N / out_last;
    auto run_planes = [&](std::int64_t first, std::int64_t end) {
      thread_local std::vector<S> plane;
      thread_local std::vector<T> narrow;
      if (plane.size() < static_cast<std::size_t>(N)) plane.resize(static_cast<std::size_t>(N));
      std::array<std::int64_t, max_rank> o{};
      for (std::int64_t at = first; at < end; ++at) {
        const std::int64_t image = at / y_dims.dims[1], co = at % y_dims.dims[1];
        const std::int64_t g = co / out_group;
        const T* xc = reinterpret_cast<const T*>(x.data) + image * x.stride[0] + g * x.stride[1];
        const T* wc = reinterpret_cast<const T*>(w.data) + co * w.stride[0];
        std::fill(plane.begin(), plane.begin() + N, S(0));
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t rest = r, a = last - 1; a >= 0; --a) {
            o[a] = rest % y_dims.dims[2 + a];
            rest /= y_dims.dims[2 + a];
          }
          S* out = plane.data() + r * out_last;
          for (std::int64_t p = 0; p < K; ++p) {  // the kernel's cells, in order
            const std::int64_t* by = &shift[p * ns];
            const T* row = window_row(xc, p, o);
            if (!row) continue;
            const S weight = as_fold<S>(wc[w_offset[p]]);
            const std::int64_t lo = std::clamp(first_inside[p], std::int64_t{0}, out_last);
            const std::int64_t hi = std::clamp(end_inside[p], lo, out_last);
            const T* from = row + (lo * s_last + by[last]) * xs_last;
            const std::int64_t step = s_last * xs_last;
            if (step == 1)
              for (std::int64_t t = lo; t < hi; ++t) out[t] += weight * as_fold<S>(from[t - lo]);
            else
              for (std::int64_t t = lo; t < hi; ++t)
                out[t] += weight * as_fold<S>(from[(t - lo) * step]);
          }
        }
        const void* values = plane.data();
        if constexpr (!std::is_same_v<S, T>) {  // rounded to the contraction's narrow type
          narrow.resize(static_cast<std::size_t>(N));
          for (std::int64_t j = 0; j < N; ++j) narrow[j] = T(plane[j]);
          values = narrow.data();
        }
        epilogue({image * groups + g, co % out_group, 1, 0, N, values, N});
      }
    };
    // About 2 x cells multiply-adds per output: threads pay off past half a million flops.
    if (double(planes) * double(N) * double(K) > 2e5)
      parallel_for(planes, 1, run_planes);
    else
      run_planes(0, planes);
    return;
  }
  gemm<S, T>(
      x_dims.dims[0] * groups, out_group, N, K,
      [&](std::int64_t bi, std::int64_t i0, std::int64_t m, std::int64_t p0, std::int64_t kc,
          S* to) {
        const auto [base, sm] = conv_weight_rows(w, c, bi % groups, in_group, out_group);
        pack_a<S, T>(
            w.data + (base + i0 * sm) * sizeof(T), sm, [&](std::int64_t p) { return w_offset[p]; },
            m, p0, kc, to);
      },
      [&](std::int64_t bi, std::int64_t p0, std::int64_t kc, std::int64_t first, std::int64_t end,
          std::int64_t j0, std::int64_t n, S* to) {
        const std::int64_t image = bi / groups, g = bi % groups;
        const T* xb =
            reinterpret_cast<const T*>(x.data) + image * x.stride[0] + g * in_group * x.stride[1];
        if (pointwise) {  // B is x's [channels, cells] matrix: packed as matmul's
          pack_b<S, T>(reinterpret_cast<const unsigned char*>(xb + (p0 + first) * x.stride[1] +
                                                              j0 * xs_last),
                       x.stride[1], xs_last, kc, first, end, n, to);
          return;
        }
        std::array<std::int64_t, max_rank> o{};
        const auto zero = [](std::int64_t) { return S(0); };
        for (std::int64_t p = p0 + first; p < p0 + end; ++p) {
          // Column j of this row lies in panel j / NR, at j % NR. put(at, len, value) writes
          // value(t) to columns at + t, t < len, a panel's contiguous piece at a time.
          S* panels = to + (p - p0) * G::NR;
          auto put = [&](std::int64_t at, std::int64_t len, auto value) {
            for (std::int64_t t = 0; t < len;) {
              const std::int64_t j = at + t, piece = std::min(len - t, G::NR - j % G::NR);
              S* into = panels + j / G::NR * G::NR * kc + j % G::NR;
              for (std::int64_t q = 0; q < piece; ++q) into[q] = value(t + q);
              t += piece;
            }
          };
          const std::int64_t* by = &shift[p * ns];
          for (std::int64_t j = j0, a = ns - 1; a >= 0; --a) {
            o[a] = j % y_dims.dims[2 + a];
            j /= y_dims.dims[2 + a];
          }
          for (std::int64_t at = 0; at < n;) {
            // Output cells along the last axis from o[last]: one row of the window's image.
            const std::int64_t run = std::min(out_last - o[last], n - at);
            const T* row = window_row(xb + x_channel[p], p, o);
            if (!row) {
              put(at, run, zero);
            } else if (!c.transposed) {
              // Inputs o x s + by for o in [o[last], o[last] + run): those inside the axis.
              const std::int64_t lo = std::clamp(first_inside[p] - o[last], std::int64_t{0}, run);
              const std::int64_t hi = std::clamp(end_inside[p] - o[last], lo, run);
              const T* from = row + ((o[last] + lo) * s_last + by[last]) * xs_last;
              const std::int64_t step = s_last * xs_last;
              put(at, lo, zero);
              // Steps 1 and 2 (a stem's, a downsampling's) known to the compiler, which
              // vectorizes them.
              if (step == 1)
                put(at + lo, hi - lo, [&](std::int64_t t) { return as_fold<S>(from[t]); });
              else if (step == 2)
                put(at + lo, hi - lo, [&](std::int64_t t) { return as_fold<S>(from[t * 2]); });
              else
                put(at + lo, hi - lo, [&](std::int64_t t) { return as_fold<S>(from[t * step]); });
              put(at + hi, run - hi, zero);
            } else {
              put(at, run, [&](std::int64_t t) {
                const std::int64_t i = position(last, o[last] + t, by[last]);
                return i < 0 ? S(0) : as_fold<S>(row[i * xs_last]);
              });
            }
            at += run;
            o[last] += run;
            for (int a = last; a > 0 && o[a] == y_dims.dims[2 + a]; --a) {
              o[a] = 0;
              ++o[a - 1];
            }
          }
          put(n, (n + G::NR - 1) / G::NR * G::NR - n, zero);  // the last panel's spare columns
        }
      },
      epilogue, false, nullptr, static_cast<const S*>(c.packed_weights), groups);
}

}  // namespace detail

namespace kernels {

inline std::size_t pack_conv_weights(dtype type, const shape& w_dims, const operand_layout& w,
                                     const shape& y_dims, const conv_geometry& c, void* to) {
  std::size_t bytes = 0;
  detail::with_types(type, false, "conv", "convolution", [&]<class S, class T> {
    bytes = detail::pack_conv_weights_as<S, T>(w_dims, w, y_dims, c, to);
  });
  return bytes;
}

inline void run_conv(dtype type, const shape& x_dims, const operand_layout& x, const shape& w_dims,
                     const operand_layout& w, const shape& y_dims, const conv_geometry& c,
                     tile_ref epilogue) {
  detail::with_types(type, false, "conv", "convolution", [&]<class S, class T> {
    detail::conv_as<S, T>(x_dims, x, w_dims, w, y_dims, c, epilogue);
  });
}

}  // namespace kernels
}  // namespace kiln::cpu::inline KILN_CPU_ISA
#endif  // KILN_CPU_KERNELS_BODY
