// ONNX's signal-processing ops: DFT, STFT (frames gathered, windowed, transformed by
// graph::dft) and MelWeightMatrix (a constant computed at import). Internal to kiln::onnx.
#include <cmath>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

void lower_dft(node_context& c) {
  c.only_attrs(c.opset() >= 20
                   ? std::initializer_list<std::string_view>{"inverse", "onesided"}
                   : std::initializer_list<std::string_view>{"axis", "inverse", "onesided"});
  std::int64_t length = 0;
  if (c.has(1)) {
    const auto v = c.ints_input(1, "dft_length");
    if (v.size() != 1) c.fail(errc::shape_mismatch, "dft_length is not a scalar");
    length = v[0];
    if (length < 1) c.fail(errc::invalid_argument, "dft_length " + std::to_string(length));
  }
  std::int64_t axis = c.attr_int("axis", 1);
  if (c.opset() >= 20) {  // the axis became an input, counting the parts' axis
    axis = -2;
    if (c.has(2)) {
      const auto v = c.ints_input(2, "axis");
      if (v.size() != 1) c.fail(errc::shape_mismatch, "axis is not a scalar");
      axis = v[0];
    }
  }
  c.out(0, c.g.dft(c.in(0), axis, c.attr_int("inverse", 0) != 0, c.attr_int("onesided", 0) != 0,
                   length));
}

// STFT: signal [batch, length, 1 or 2] cut into frames of frame_length every frame_step,
// each times the window (when given), transformed: [batch, frames, bins, 2].
void lower_stft(node_context& c) {
  c.only_attrs({"onesided"});
  graph& g = c.g;
  const shape d = c.dims_of(0);
  if (d.rank != 3 || !d.is_static())
    c.fail(errc::shape_mismatch,
           "signal is " + to_string(d) + ", expected [batch, length, 1 or 2] with static sizes");
  const std::int64_t step = static_cast<std::int64_t>(c.scalar_input(1, "frame_step"));
  std::int64_t frame = 0;
  if (c.has(2)) {
    const shape w = c.dims_of(2);
    if (w.rank != 1)
      c.fail(errc::shape_mismatch, "window is " + to_string(w) + ", expected [frame_length]");
    frame = w.dims[0];
  }
  if (c.has(3)) {
    const auto v = static_cast<std::int64_t>(c.scalar_input(3, "frame_length"));
    if (frame != 0 && v != frame)
      c.fail(errc::shape_mismatch,
             "frame_length " + std::to_string(v) + " and a window of " + std::to_string(frame));
    frame = v;
  }
  if (frame < 1 || step < 1 || frame > d.dims[1])
    c.fail(errc::invalid_argument,
           "frame_length " + std::to_string(frame) + " and frame_step " + std::to_string(step) +
               " for a signal of " + std::to_string(d.dims[1]) + " (both >= 1, the frame within)");
  const std::int64_t frames = (d.dims[1] - frame) / step + 1;
  std::vector<std::int64_t> at;
  for (std::int64_t f = 0; f < frames; ++f)
    for (std::int64_t i = 0; i < frame; ++i) at.push_back(f * step + i);
  value x = g.gather(c.in(0), g.constant(at.data(), dtype::i64, at.size(), shape{frames, frame}),
                     1);  // [batch, frames, frame, parts]
  if (c.has(2)) x = g.mul(x, g.reshape(g.cast(c.in(2), c.type_of(0)), {1, 1, frame, 1}));
  c.out(0, g.dft(x, 2, false, c.attr_int("onesided", 1) != 0));
}

// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangles over the mel scale, as ONNX's
// reference computes them (the mel step over num_mel_bins + 2 points), from inputs known at
// import.
void lower_mel_weight_matrix(node_context& c) {
  c.only_attrs({"output_datatype"});
  const auto bins = static_cast<std::int64_t>(c.scalar_input(0, "num_mel_bins"));
  const auto dft_length = static_cast<std::int64_t>(c.scalar_input(1, "dft_length"));
  const double rate = c.scalar_input(2, "sample_rate");
  const double low = c.scalar_input(3, "lower_edge_hertz");
  const double high = c.scalar_input(4, "upper_edge_hertz");
  if (bins < 1 || dft_length < 1 || !(rate > 0) || !(low >= 0) || !(high > low))
    c.fail(errc::invalid_argument,
           "num_mel_bins " + std::to_string(bins) + ", dft_length " + std::to_string(dft_length) +
               ", sample_rate " + std::to_string(rate) + ", edges " + std::to_string(low) + " to " +
               std::to_string(high) + " (positive, the edges rising)");
  const std::int64_t spectrum = dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = mel(low), step = (mel(high) - low_mel) / double(bins + 2);
  std::vector<std::int64_t> point;
  for (std::int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + low_mel) / 2595) - 1);
    point.push_back(static_cast<std::int64_t>(std::floor(double(dft_length + 1) * hz / rate)));
  }
  std::vector<double> m(static_cast<std::size_t>(spectrum * bins), 0.0);
  auto set = [&](std::int64_t j, std::int64_t i, double v) {
    if (j < 0 || j >= spectrum)
      c.fail(errc::invalid_argument, "the edges put a mel point past the spectrum's bins");
    m[static_cast<std::size_t>(j * bins + i)] = v;
  };
  for (std::int64_t i = 0; i < bins; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const std::int64_t left = point[u], centre = point[u + 1], right = point[u + 2];
    if (centre == left)
      set(centre, i, 1);
    else
      for (std::int64_t j = left; j <= centre; ++j)
        set(j, i, double(j - left) / double(centre - left));
    for (std::int64_t j = centre; j < right; ++j)
      set(j, i, double(right - j) / double(right - centre));
  }
  const dtype to = c.element_type(c.attr_int("output_datatype", 1));
  c.out(0, c.g.cast(c.g.constant(m.data(), dtype::f64, m.size(), shape{spectrum, bins}), to));
}

}  // namespace

void add_spectral_lowerings(lowering_table& t) {
  t["DFT"] = lower_dft;
  t["STFT"] = lower_stft;
  t["MelWeightMatrix"] = lower_mel_weight_matrix;
}

}  // namespace kiln::onnx_import
