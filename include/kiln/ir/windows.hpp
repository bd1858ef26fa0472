// Sliding windows along the spatial axes of [N, C, spatial...] tensors, shared by pooling and
// convolution: ONNX's auto_pad and the outputs and padding of one axis.
#pragma once

#include <cstdint>

namespace kiln {

// How a window pads (ONNX's auto_pad): explicit pads, or as many as keep ceil(size / stride)
// outputs (the odd one at the end, or at the beginning), or none.
enum class auto_pad : std::uint8_t { notset, same_upper, same_lower, valid };

}  // namespace kiln

namespace kiln::ir {

// One spatial axis of a window: its outputs and the padding before and after the input.
struct axis_window {
  std::int64_t outputs = 0, begin = 0, end = 0;
};

// The windows of `kernel` cells (`dilation` apart) every `stride` along an axis of `size`, padded
// by `begin` and `end` as given, or as `mode` says; ceil_mode (pooling) keeps a last window that
// only partly covers the padded axis, unless it starts in the end padding. outputs < 1: no window
// fits.
constexpr axis_window window_along(std::int64_t size, std::int64_t kernel, std::int64_t stride,
                                   std::int64_t dilation, std::int64_t begin, std::int64_t end,
                                   kiln::auto_pad mode, bool ceil_mode = false) {
  const std::int64_t span = (kernel - 1) * dilation + 1;
  axis_window w{0, begin, end};
  switch (mode) {
    case kiln::auto_pad::same_upper:
    case kiln::auto_pad::same_lower: {
      w.outputs = (size + stride - 1) / stride;
      std::int64_t total = (w.outputs - 1) * stride + span - size;
      total = total > 0 ? total : 0;
      w.begin = mode == kiln::auto_pad::same_upper ? total / 2 : total - total / 2;
      w.end = total - w.begin;
      break;
    }
    case kiln::auto_pad::valid:
      w.begin = w.end = 0;
      w.outputs = size >= span ? (size - span) / stride + 1 : 0;
      break;
    case kiln::auto_pad::notset: {
      const std::int64_t room = size + begin + end - span;
      w.outputs = room < 0 ? 0 : (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
      if (ceil_mode && w.outputs > 0 && (w.outputs - 1) * stride >= size + begin) --w.outputs;
      break;
    }
  }
  return w;
}

}  // namespace kiln::ir
