// Convolutions for both doors (ONNX's Conv and ConvTranspose): the windows worked out from the
// attributes, checked, and built as one contraction node with the bias as its epilogue.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/builder.hpp"
#include "kiln/ir/print.hpp"
#include "kiln/ir/windows.hpp"

namespace kiln {

// A 2-D convolution's windows, usable as a template argument: conv2d<kiln::conv_params{.strides
// = {2, 2}, .pads = {1, 1, 1, 1}}>(x, w). pads in ONNX's order: every axis's begin, then every
// end.
struct conv_params {
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 4> pads{0, 0, 0, 0};
  std::array<std::int64_t, 2> dilations{1, 1};
  std::int64_t groups = 1;
  kiln::auto_pad auto_pad = kiln::auto_pad::notset;
};

}  // namespace kiln

namespace kiln::ir {

// A convolution's windows over any number of spatial axes (those after N and C): ONNX's
// attributes. Empty strides and dilations mean 1, empty pads 0. conv_transpose only:
// output_padding (extra outputs at each axis's end) and output_shape (the spatial sizes wanted,
// the pads then worked out).
struct conv_window {  // (every member initialized: designated initializers may leave any out)
  std::vector<std::int64_t> strides{}, pads{}, dilations{};
  std::int64_t groups = 1;
  kiln::auto_pad auto_pad = kiln::auto_pad::notset;
  std::vector<std::int64_t> output_padding{}, output_shape{};
};

constexpr conv_window window_of(const conv_params& p) {
  return {{p.strides.begin(), p.strides.end()},
          {p.pads.begin(), p.pads.end()},
          {p.dilations.begin(), p.dilations.end()},
          p.groups,
          p.auto_pad,
          {},
          {}};
}

namespace detail {

// ONNX Conv (transposed = false) or ConvTranspose of x [N, C, spatial...] with w, plus bias [M]
// (bias < 0: none).
constexpr std::int32_t convolve(builder& b, std::int32_t x, std::int32_t w, const conv_window& c,
                                std::int32_t bias, bool transposed) {
  const op o = transposed ? op::conv_transpose : op::conv;
  const std::string name = transposed ? "conv_transpose" : "conv";
  auto fail = [&](errc code, const std::string& what) { throw error(code, name, what); };
  auto text = [](std::int64_t v) { return kiln::detail::to_text(v); };
  node xn = b.get().nodes[x];  // copies: building appends nodes
  const node wn = b.get().nodes[w];
  const int rank = xn.dims.rank;
  const auto axes = static_cast<std::size_t>(rank > 2 ? rank - 2 : 0);
  if (rank < 3)
    fail(errc::shape_mismatch,
         "x must be [N, C, spatial...] (rank 3 or more), got " + type_text(xn.type, xn.dims));
  if (wn.dims.rank != rank)
    fail(errc::shape_mismatch,
         std::string("w must be ") +
             (transposed ? "[C, M / groups, kernel...]" : "[M, C / groups, kernel...]") +
             " (rank " + text(rank) + " as x), got " + type_text(wn.type, wn.dims));
  if (xn.type != wn.type)
    fail(errc::dtype_mismatch, "x is " + std::string(kiln::name(xn.type)) + " but w is " +
                                   std::string(kiln::name(wn.type)) + " (insert a cast)");
  if (!is_floating(xn.type))
    fail(errc::dtype_mismatch,
         "the elements are " + std::string(kiln::name(xn.type)) + ", not a float type");
  for (int a = 1; a < rank; ++a)
    if ((a > 1 && is_symbol(xn.dims.dims[a])) || is_symbol(wn.dims.dims[a]) ||
        is_symbol(wn.dims.dims[0]))
      fail(errc::unsupported, "x " + to_string(xn.dims) + " and w " + to_string(wn.dims) +
                                  ": only x's batch size and channels may be known at run time");
  const std::int64_t groups = c.groups;
  // x's channels known at the call: w's, checked then (w's static count times a valid groups: a
  // negative product would read as a run-time size).
  builder::contracted_size channels_at_call{};
  if (is_symbol(xn.dims.dims[1])) {
    if (groups < 1 || groups > 0x7fffffff || wn.dims.dims[1] > 0x7fffffff / groups)
      fail(errc::invalid_argument, "groups is " + text(groups) + " for w " + to_string(wn.dims) +
                                       " and x's channels known at run time");
    channels_at_call =
        b.contracted(o, xn.dims.dims[1], transposed ? wn.dims.dims[0] : wn.dims.dims[1] * groups);
    x = b.with_size(x, 1, channels_at_call.size);
    xn = b.get().nodes[x];
  }
  const std::int64_t channels = xn.dims.dims[1];
  if (groups < 1 || channels % groups != 0)
    fail(errc::invalid_argument,
         "groups is " + text(groups) + ": it must divide x's " + text(channels) + " channels");
  // The kernel's input channels per group, and the output channels.
  const std::int64_t w_in = transposed ? wn.dims.dims[0] : wn.dims.dims[1] * groups;
  const std::int64_t out_channels = transposed ? wn.dims.dims[1] * groups : wn.dims.dims[0];
  if (w_in != channels)
    fail(errc::shape_mismatch,
         "x " + to_string(xn.dims) + " has " + text(channels) + " channels but w " +
             to_string(wn.dims) + " takes " + text(w_in) +
             (transposed ? "" : " (its size 1 times groups = " + text(groups) + ")"));
  if (!transposed && out_channels % groups != 0)
    fail(errc::shape_mismatch, "w " + to_string(wn.dims) + " has " + text(out_channels) +
                                   " output channels, not a multiple of groups = " + text(groups));
  auto each = [&](const std::vector<std::int64_t>& v, std::size_t want, std::int64_t fallback,
                  const char* what) {
    if (v.empty()) return std::vector<std::int64_t>(want, fallback);
    if (v.size() != want)
      fail(errc::invalid_argument,
           std::string(what) + " has " + text(static_cast<std::int64_t>(v.size())) +
               " values, expected " + text(static_cast<std::int64_t>(want)));
    return v;
  };
  const std::vector<std::int64_t> strides = each(c.strides, axes, 1, "strides"),
                                  dilations = each(c.dilations, axes, 1, "dilations"),
                                  pads = each(c.pads, 2 * axes, 0, "pads"),
                                  extra = each(c.output_padding, axes, 0, "output_padding"),
                                  wanted = each(c.output_shape, axes, 0, "output_shape");
  shape dims = xn.dims;
  dims.dims[1] = out_channels;
  attributes m{};
  m.groups = static_cast<std::int32_t>(groups);
  for (std::size_t i = 0; i < axes; ++i) {
    const int a = 2 + static_cast<int>(i);
    const std::int64_t size = xn.dims.dims[a], k = wn.dims.dims[a];
    const std::int64_t s = strides[i], d = dilations[i];
    if (k < 1 || s < 1 || d < 1 || pads[i] < 0 || pads[i + axes] < 0 || extra[i] < 0)
      fail(errc::invalid_argument,
           "kernel sizes, strides and dilations must be positive, pads and output_padding not "
           "negative");
    // Bounds under which the window arithmetic below cannot overflow.
    constexpr std::int64_t limit = 0x7fffffff;
    if (size > limit || k > limit || s > limit || d > 0x7fff || pads[i] > limit ||
        pads[i + axes] > limit || extra[i] > limit || wanted[i] > limit)
      fail(errc::unsupported,
           "a spatial size, kernel, stride, pad, output_padding or output_shape of 2^31 or more, "
           "or a dilation of 2^15 or more");
    const std::int64_t span = (k - 1) * d + 1;
    std::int64_t outputs, begin, end;
    if (!transposed) {
      const axis_window along = window_along(size, k, s, d, pads[i], pads[i + axes], c.auto_pad);
      outputs = along.outputs;
      begin = along.begin;
      end = along.end;
    } else {
      // ONNX: output_shape, or SAME's size * stride, fixes the outputs and the pads follow
      // (the odd one at the end for SAME_UPPER, else at the beginning); else the pads do.
      const bool same =
          c.auto_pad == kiln::auto_pad::same_upper || c.auto_pad == kiln::auto_pad::same_lower;
      const std::int64_t full = s * (size - 1) + extra[i] + span;
      if (!c.output_shape.empty() || same) {
        outputs = c.output_shape.empty() ? size * s : wanted[i];
        // ONNX's halves round down, a negative total (outputs beyond the full size) too.
        const std::int64_t total = full - outputs;
        const std::int64_t half = total / 2 - (total < 0 && total % 2 != 0);
        begin = c.auto_pad == kiln::auto_pad::same_upper ? half : total - half;
        end = total - begin;
      } else {
        begin = c.auto_pad == kiln::auto_pad::valid ? 0 : pads[i];
        end = c.auto_pad == kiln::auto_pad::valid ? 0 : pads[i + axes];
        outputs = full - begin - end;
      }
    }
    if (outputs < 1)
      fail(errc::shape_mismatch, "spatial axis " + text(static_cast<std::int64_t>(i)) +
                                     " of size " + text(size) + " (padded by " + text(begin) +
                                     " and " + text(end) + ") gives no output for a kernel of " +
                                     text(span) + " cells");
    if (s > 0x7fffffff || begin > 0x7fffffff || -begin > 0x7fffffff || d > 0x7fff)
      fail(errc::unsupported, "a stride or pad of 2^31 or more, or a dilation of 2^15 or more");
    dims.dims[a] = outputs;
    m.steps[a] = static_cast<std::int32_t>(s);
    m.starts[a] = static_cast<std::int32_t>(-begin);
    m.dilations[a] = static_cast<std::int16_t>(d);
  }
  std::int32_t y = b.convolution(o, x, w, m, dims);
  b.set_contraction(channels_at_call.symbol, y);
  if (bias < 0) return y;
  const node& bn = b.get().nodes[bias];
  if (bn.dims.rank != 1 || bn.dims.dims[0] != out_channels || bn.type != xn.type)
    fail(errc::shape_mismatch, "the bias must be " + type_text(xn.type, shape{out_channels}) +
                                   " (one per output channel), got " + type_text(bn.type, bn.dims));
  // [M] -> [M, 1, ...]: broadcast over the spatial axes.
  std::int64_t sizes[max_rank] = {out_channels};
  for (std::size_t i = 0; i < axes; ++i) sizes[1 + i] = 1;
  const std::int32_t column = b.reshape(bias, std::span<const std::int64_t>(sizes, axes + 1));
  return b.binary(op::add, y, column);
}

}  // namespace detail

// ONNX Conv: y [N, M, outputs...] from x [N, C, spatial...] and w [M, C / groups, kernel...]
// (each group's C / groups input channels give its M / groups outputs; groups = C with M = C is
// depthwise), plus bias [M] where bias >= 0.
constexpr std::int32_t conv(builder& b, std::int32_t x, std::int32_t w, const conv_window& c,
                            std::int32_t bias = -1) {
  return detail::convolve(b, x, w, c, bias, false);
}

// ONNX ConvTranspose: y [N, M, outputs...] from x [N, C, spatial...] and w [C, M / groups,
// kernel...]: each input cell adds its kernel, scaled, to the outputs its window covers.
constexpr std::int32_t conv_transpose(builder& b, std::int32_t x, std::int32_t w,
                                      const conv_window& c, std::int32_t bias = -1) {
  return detail::convolve(b, x, w, c, bias, true);
}

}  // namespace kiln::ir
