// ONNX ops that kiln builds from several graph ops: the classification losses, CumSum and LRN (as
// products with a constant 0/1 matrix), DynamicQuantizeLinear, the window generators, integer
// convolutions, QLinearConv and QLinearMatMul, Resize and Upsample (as weighted gathers), GatherND,
// Einsum.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <tuple>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

ints all_axes(int rank) {
  ints a(static_cast<std::size_t>(rank));
  std::iota(a.begin(), a.end(), 0);
  return a;
}

// A [rows, cols] matrix of x's dtype, 1 where keep(i, j), else 0.
template <class Keep>
value mask_matrix(graph& g, dtype t, std::int64_t rows, std::int64_t cols, Keep keep) {
  std::vector<double> m(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m[static_cast<std::size_t>(i * cols + j)] = keep(i, j);
  return g.cast(g.constant(m.data(), dtype::f64, m.size(), shape{rows, cols}), t);
}

// y[..., j, ...] = sum over i of x[..., i, ...] m[i, j] along `axis` (x's axis moved last, a
// product with m, moved back).
value along_axis_times(graph& g, value x, std::int64_t axis, value m) {
  const int rank = g.dims_of(x).rank;
  if (rank == 1) return g.reshape(g.matmul(g.reshape(x, {1, -1}), m), {-1});
  ints perm = all_axes(rank);
  std::swap(perm[static_cast<std::size_t>(axis)], perm.back());
  return g.transpose(g.matmul(g.transpose(x, perm), m), perm);
}

// NegativeLogLikelihoodLoss on log-probabilities [N, C, d...] and targets [N, d...].
value nll_loss(node_context& c, value input, value target, std::optional<value> weight) {
  c.only_attrs({"reduction", "ignore_index"});
  graph& g = c.g;
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    c.fail(errc::invalid_argument, "reduction is '" + reduction + "', expected none, sum or mean");
  const dtype t = g.type_of(input);
  value index = g.cast(target, dtype::i64);
  std::optional<value> ignored;
  if (c.has_attr("ignore_index")) {
    ignored = g.eq(index, g.constant(c.attr_int("ignore_index", 0), dtype::i64));
    index = g.select(*ignored, g.constant(0, dtype::i64), index);
  }
  const std::int64_t class_axis[] = {1};
  value picked = g.squeeze(g.gather_elements(input, g.unsqueeze(index, class_axis), 1), class_axis);
  std::optional<value> w;
  if (weight) w = g.gather(*weight, index, 0);
  if (ignored) w = g.select(*ignored, g.constant(0.0, t), w ? *w : g.constant(1.0, t));
  value loss = w ? g.mul(g.neg(picked), *w) : g.neg(picked);
  if (reduction == "none") return loss;
  const ints axes = all_axes(g.dims_of(loss).rank);
  value total = g.reduce(ir::op::reduce_sum, loss, axes, false);
  if (reduction == "sum") return total;
  if (!w) return g.reduce(ir::op::reduce_mean, loss, axes, false);
  return g.div(total, g.reduce(ir::op::reduce_sum, *w, axes, false));  // w has the loss's dims
}

void lower_nll(node_context& c) {
  c.out(0, nll_loss(c, c.in(0), c.in(1), c.has(2) ? std::optional(c.in(2)) : std::nullopt));
}

void lower_softmax_cross_entropy(node_context& c) {
  value log_prob = c.g.log_softmax(c.in(0), 1);
  c.out(0, nll_loss(c, log_prob, c.in(1), c.has(2) ? std::optional(c.in(2)) : std::nullopt));
  c.out(1, log_prob);
}

void lower_cumsum(node_context& c) {
  c.only_attrs({"exclusive", "reverse"});
  const shape d = c.dims_of(0);
  auto axis = static_cast<std::int64_t>(c.scalar_input(1, "axis"));
  if (axis < -d.rank || axis >= d.rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " is outside rank " + std::to_string(d.rank));
  if (axis < 0) axis += d.rank;
  const std::int64_t n = d.dims[axis];
  if (n == dyn) c.fail(errc::unsupported, "the summed axis has a run-time size");
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  // y[j] sums x[i] for i up to j (reverse: from j on); exclusive leaves out i = j.
  value m = mask_matrix(c.g, c.type_of(0), n, n, [&](std::int64_t i, std::int64_t j) {
    return reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
  });
  c.out(0, along_axis_times(c.g, c.in(0), axis, m));
}

void lower_lrn(node_context& c) {
  c.only_attrs({"size", "alpha", "beta", "bias"});
  const shape d = c.dims_of(0);
  const std::int64_t size = c.attr_int("size", 0);
  if (size < 1) c.fail(errc::invalid_argument, "size is " + std::to_string(size));
  if (d.rank < 3 || d.dims[1] == dyn)
    c.fail(errc::unsupported, "input dims " + to_string(d) + " (kiln: [N, C, ...], C static)");
  const std::int64_t channels = d.dims[1], before = (size - 1) / 2, after = size - 1 - before;
  const dtype t = c.type_of(0);
  value x = c.in(0);
  // The squares summed over channels c - before to c + after, as a product with a band matrix.
  value band = mask_matrix(c.g, t, channels, channels, [&](std::int64_t i, std::int64_t j) {
    return i >= j - before && i <= j + after;
  });
  value sums = along_axis_times(c.g, c.g.mul(x, x), 1, band);
  value scale = c.g.add(
      c.g.constant(c.attr_float("bias", 1.0), t),
      c.g.mul(c.g.constant(c.attr_float("alpha", 1e-4) / static_cast<double>(size), t), sums));
  c.out(0, c.g.div(x, c.g.pow(scale, c.g.constant(c.attr_float("beta", 0.75), t))));
}

void lower_dynamic_quantize(node_context& c) {
  c.only_attrs({});
  graph& g = c.g;
  value x = c.in(0);
  const dtype t = c.type_of(0);
  const ints axes = all_axes(c.dims_of(0).rank);
  value zero = g.constant(0.0, t);
  value hi = g.max(g.reduce(ir::op::reduce_max, x, axes, false), zero);
  value lo = g.min(g.reduce(ir::op::reduce_min, x, axes, false), zero);
  value scale = g.div(g.sub(hi, lo), g.constant(255.0, t));
  value q_lo = g.constant(0.0, t), q_hi = g.constant(255.0, t);
  value zero_point = g.clip(g.round(g.sub(zero, g.div(lo, scale))), q_lo, q_hi);
  value y = g.clip(g.add(g.round(g.div(x, scale)), zero_point), q_lo, q_hi);
  c.out(0, g.cast(y, dtype::u8));
  c.out(1, scale);
  c.out(2, g.cast(zero_point, dtype::u8));
}

// HannWindow, HammingWindow, BlackmanWindow: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with
// N the size (periodic) or the size - 1 (symmetric); computed at import.
void lower_window(node_context& c, double a0, double a1, double a2) {
  c.only_attrs({"output_datatype", "periodic"});
  const auto size = static_cast<std::int64_t>(c.scalar_input(0, "size"));
  if (size < 0) c.fail(errc::invalid_argument, "size is " + std::to_string(size));
  const dtype to = c.element_type(c.attr_int("output_datatype", 1));
  const double n = static_cast<double>(c.attr_int("periodic", 1) != 0 ? size : size - 1);
  const double pi = 3.14159265358979323846;
  std::vector<double> w(static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double x = 2 * pi * static_cast<double>(i) / n;
    w[i] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
  }
  c.out(0, c.g.cast(c.g.constant(w.data(), dtype::f64, w.size(), shape{size}), to));
}

// x - zero point, exactly, in f64 (every integer product and sum of int8 data up to 2^53).
value centred_f64(node_context& c, int x, int zero_point) {
  value v = c.g.cast(c.in(x), dtype::f64);
  return c.has(zero_point) ? c.g.sub(v, c.g.cast(c.in(zero_point), dtype::f64)) : v;
}

void lower_conv_integer(node_context& c) {
  c.only_attrs({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  const ir::conv_window w = conv_window_of(c);
  c.out(0, c.g.cast(c.g.conv(centred_f64(c, 0, 2), centred_f64(c, 1, 3), w), dtype::i32));
}

// An exact integer product (f64) times scale, rounded half to even, plus the zero point of
// input `zero_point` and saturated to its type, as ONNX's reference requantizes (in f32).
value requantized(node_context& c, value product, value scale, int zero_point) {
  graph& g = c.g;
  const dtype to = c.type_of(zero_point);
  value y = g.add(g.round(g.mul(g.cast(product, dtype::f32), scale)),
                  g.cast(c.in(zero_point), dtype::f32));
  const double lo = to == dtype::u8 ? 0 : -128, hi = to == dtype::u8 ? 255 : 127;
  return g.cast(g.clip(y, g.constant(lo, dtype::f32), g.constant(hi, dtype::f32)), to);
}

// QLinearConv: (x - x_zero) (w - w_zero) plus the i32 bias, scaled by x_scale w_scale / y_scale
// (w's zero point and scale per output channel where they are [M]).
void lower_qlinear_conv(node_context& c) {
  c.only_attrs({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  graph& g = c.g;
  const ir::conv_window w = conv_window_of(c);
  const int rank = c.dims_of(3).rank;
  // A per-channel [M] along w's first axis or y's second.
  auto per_channel = [&](value v, int axis) {
    if (g.dims_of(v).rank != 1) return v;
    std::vector<std::int64_t> dims(static_cast<std::size_t>(rank), 1);
    dims[static_cast<std::size_t>(axis)] = g.dims_of(v).dims[0];
    return g.reshape(v, dims);
  };
  const value x = centred_f64(c, 0, 2);
  const value weight =
      g.sub(g.cast(c.in(3), dtype::f64), per_channel(g.cast(c.in(5), dtype::f64), 0));
  const value product =
      c.has(8) ? g.conv(x, weight, g.cast(c.in(8), dtype::f64), w) : g.conv(x, weight, w);
  c.out(0, requantized(c, product, g.div(g.mul(c.in(1), per_channel(c.in(4), 1)), c.in(6)), 7));
}

// (a - a_zero)(b - b_zero) a_scale b_scale / y_scale + y_zero.
void lower_qlinear_matmul(node_context& c) {
  c.only_attrs({});
  graph& g = c.g;
  const value product = g.matmul(centred_f64(c, 0, 2), centred_f64(c, 3, 5));
  c.out(0, requantized(c, product, g.div(g.mul(c.in(1), c.in(4)), c.in(6)), 7));
}

// Resize and Upsample, separably: along each resized axis, every output position reads one, two
// or four input positions (nearest, linear, cubic) with weights, all worked out here from the
// sizes, which are static. An axis is a gather of each tap, weighted and summed; gathers read in
// place, so a resize fuses into the region that consumes it.
struct resize_mode {
  std::string mode = "nearest", transform = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};

// The input coordinate of output position x, as ONNX's reference maps it (the output's length
// there is scale * in, not rounded, as ONNX's reference has it).
double source_coordinate(const resize_mode& m, double x, double scale, std::int64_t in,
                         double roi_start, double roi_end) {
  const auto length_in = static_cast<double>(in);
  const double length_out = scale * length_in;
  const bool out = length_out != 1;  // (the spec's "length_resized > 1")
  const std::string& t = m.transform;
  if (t == "align_corners") return !out ? 0 : x * (length_in - 1) / (length_out - 1);
  if (t == "asymmetric") return x / scale;
  if (t == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (t == "pytorch_half_pixel") return !out ? -0.5 : (x + 0.5) / scale - 0.5;
  if (t == "tf_crop_and_resize")
    return (!out ? (roi_end - roi_start) * (length_in - 1) / 2
                 : x * (roi_end - roi_start) * (length_in - 1) / (length_out - 1)) +
           roi_start * (length_in - 1);
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

// The taps' weights at `ratio` in (0, 1], the distance past the left neighbour.
std::vector<double> tap_weights(const resize_mode& m, double ratio) {
  if (m.mode == "linear") return {1 - ratio, ratio};
  if (m.mode == "cubic") {
    const double a = m.cubic_a;
    auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < d < 2
    auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // d <= 1
    return {far(ratio + 1), near(ratio), near(1 - ratio), far(2 - ratio)};
  }
  if (ratio == 1) return {0, 1};  // on an input position
  const std::string& n = m.nearest;
  if (n == "floor") return {1, 0};
  if (n == "ceil") return {0, 1};
  if (n == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
  return {double(ratio <= 0.5), double(ratio > 0.5)};  // round_prefer_floor
}

value resize_axis(node_context& c, value x, int axis, std::int64_t out, double scale,
                  const resize_mode& m, double roi_start, double roi_end) {
  graph& g = c.g;
  const shape d = g.dims_of(x);
  const std::int64_t in = d.dims[axis];
  const std::size_t taps = m.mode == "nearest" ? 2 : m.mode == "linear" ? 2 : 4;
  std::vector<std::vector<std::int64_t>> index(
      taps, std::vector<std::int64_t>(static_cast<std::size_t>(out)));
  std::vector<std::vector<double>> weight(taps, std::vector<double>(static_cast<std::size_t>(out)));
  std::vector<unsigned char> outside(static_cast<std::size_t>(out), 0);
  for (std::int64_t j = 0; j < out; ++j) {
    const double x = source_coordinate(m, static_cast<double>(j), scale, in, roi_start, roi_end);
    const auto u = static_cast<std::size_t>(j);
    if (m.transform == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1)))
      outside[u] = 1;
    // Neighbours: the two around x (x itself on the right when x is an input position), and one
    // more on each side for cubic; positions outside the axis read its edge.
    const auto right = static_cast<std::int64_t>(std::ceil(x));
    const double ratio = x - static_cast<double>(right - 1);
    std::vector<double> w = tap_weights(m, ratio);
    const std::int64_t first = right - static_cast<std::int64_t>(taps / 2);
    if (m.exclude_outside) {
      double sum = 0;
      for (std::size_t k = 0; k < taps; ++k) {
        const std::int64_t p = first + static_cast<std::int64_t>(k);
        if (p < 0 || p >= in) w[k] = 0;
        sum += w[k];
      }
      for (auto& v : w) v = sum != 0 ? v / sum : 0;
    }
    for (std::size_t k = 0; k < taps; ++k) {
      index[k][u] = std::clamp<std::int64_t>(first + static_cast<std::int64_t>(k), 0, in - 1);
      weight[k][u] = w[k];
    }
  }
  const dtype t = g.type_of(x);
  std::vector<std::int64_t> along(static_cast<std::size_t>(d.rank), 1);
  along[static_cast<std::size_t>(axis)] = out;
  auto positions = [&](const std::vector<std::int64_t>& p) {
    return g.constant(p.data(), dtype::i64, p.size(), shape{out});
  };
  value y{};
  if (m.mode == "nearest") {
    std::vector<std::int64_t> chosen(static_cast<std::size_t>(out));
    for (std::size_t j = 0; j < chosen.size(); ++j)
      chosen[j] = weight[0][j] > 0 ? index[0][j] : index[1][j];
    y = g.gather(x, positions(chosen), axis);
  } else {
    for (std::size_t k = 0; k < taps; ++k) {
      value w = g.reshape(
          g.cast(g.constant(weight[k].data(), dtype::f64, weight[k].size(), shape{out}), t), along);
      value term = g.mul(g.gather(x, positions(index[k]), axis), w);
      y = k == 0 ? term : g.add(y, term);
    }
  }
  if (std::find(outside.begin(), outside.end(), 1) != outside.end()) {
    value mask = g.reshape(
        g.constant(std::vector<unsigned char>(outside), dtype::boolean, shape{out}), along);
    y = g.select(mask, g.constant(m.extrapolation, t), y);
  }
  return y;
}

void lower_resize(node_context& c) {
  resize_mode m;
  const shape d = c.dims_of(0);
  if (!d.is_static()) c.fail(errc::unsupported, "input dims " + to_string(d) + " (kiln: static)");
  std::vector<double> scales, roi;
  std::vector<std::int64_t> sizes;
  if (c.op() == "Upsample") {  // nearest as floor, linear as asymmetric
    c.only_attrs({"mode", "scales", "height_scale", "width_scale"});
    m.transform = "asymmetric";
    m.nearest = "floor";
    scales = c.opset() < 9 ? c.attr_floats("scales") : c.known(1) ? c.known(1)->doubles() : scales;
    if (c.opset() >= 9 && !c.known(1)) c.ints_input(1, "scales");  // the refusal, naming it
  } else if (c.opset() < 11) {
    c.only_attrs({"mode"});
    m.transform = "asymmetric";
    m.nearest = "floor";
    if (!c.known(1)) c.ints_input(1, "scales");
    scales = c.known(1)->doubles();
  } else {
    c.only_attrs({"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                  "exclude_outside", "extrapolation_value"});
    m.transform = c.attr_string("coordinate_transformation_mode", "half_pixel");
    m.nearest = c.attr_string("nearest_mode", "round_prefer_floor");
    m.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
    m.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    m.extrapolation = c.attr_float("extrapolation_value", 0);
    auto read = [&](int i, const char* what) -> const host_tensor* {
      if (!c.has(i)) return nullptr;
      if (!c.known(i)) c.ints_input(i, what);  // the refusal, naming the input
      return c.known(i);
    };
    if (const host_tensor* r = read(1, "roi")) roi = r->doubles();
    if (const host_tensor* s = read(2, "scales")) scales = s->doubles();
    if (c.has(3)) sizes = c.ints_input(3, "sizes");
  }
  m.mode = c.attr_string("mode", "nearest");
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic")
    c.fail(errc::invalid_argument, "mode is '" + m.mode + "', expected nearest, linear or cubic");
  for (const char* t : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                        "tf_half_pixel_for_nn", "tf_crop_and_resize"})
    if (m.transform == t) goto known_transform;
  c.fail(errc::invalid_argument, "coordinate_transformation_mode '" + m.transform + "'");
known_transform:
  const auto rank = static_cast<std::size_t>(d.rank);
  if (sizes.empty() && scales.size() != rank)
    c.fail(errc::shape_mismatch, "scales has " + std::to_string(scales.size()) +
                                     " values for an input of rank " + std::to_string(rank));
  if (!sizes.empty() && sizes.size() != rank)
    c.fail(errc::shape_mismatch, "sizes has " + std::to_string(sizes.size()) +
                                     " values for an input of rank " + std::to_string(rank));
  if (m.transform == "tf_crop_and_resize" && roi.size() != 2 * rank)
    c.fail(errc::shape_mismatch, "roi has " + std::to_string(roi.size()) + " values, expected " +
                                     std::to_string(2 * rank));
  value y = c.in(0);
  for (int a = 0; a < d.rank; ++a) {
    const auto u = static_cast<std::size_t>(a);
    const std::int64_t in = d.dims[a];
    double scale =
        sizes.empty() ? scales[u] : static_cast<double>(sizes[u]) / static_cast<double>(in);
    if (!(scale > 0))
      c.fail(errc::invalid_argument,
             "scale " + std::to_string(scale) + " at axis " + std::to_string(a));
    const std::int64_t out =
        sizes.empty() ? static_cast<std::int64_t>(scale * static_cast<double>(in)) : sizes[u];
    if (out < 1)
      c.fail(errc::invalid_argument,
             "axis " + std::to_string(a) + " resizes to " + std::to_string(out));
    if (out == in && scale == 1 && m.transform != "tf_crop_and_resize") continue;
    y = resize_axis(c, y, a, out, scale, m, roi.empty() ? 0 : roi[u],
                    roi.empty() ? 1 : roi[u + rank]);
  }
  c.out(0, y);
}

// GatherND: each index tuple of the last axis of `indices` (after batch_dims shared leading axes)
// becomes one position of data's leading axes flattened, read by a gather along that axis.
void lower_gather_nd(node_context& c) {
  c.only_attrs({"batch_dims"});
  graph& g = c.g;
  const shape dd = c.dims_of(0), id = c.dims_of(1);
  const std::int64_t b = c.attr_int("batch_dims", 0);
  if (id.rank < 1 || id.dims[id.rank - 1] == dyn)
    c.fail(errc::unsupported, "indices dims " + to_string(id) + " (kiln: the last axis static)");
  const std::int64_t k = id.dims[id.rank - 1];
  if (b < 0 || b >= id.rank || b + k > dd.rank)
    c.fail(errc::invalid_argument, "batch_dims " + std::to_string(b) + " and index tuples of " +
                                       std::to_string(k) + " for data dims " + to_string(dd));
  for (std::int64_t a = 0; a < b + k; ++a)
    if (dd.dims[a] == dyn)
      c.fail(errc::unsupported, "data axis " + std::to_string(a) + " has a run-time size");
  // linear = batch position * (the indexed axes' count) + the tuple in row-major order.
  value tuple = g.cast(c.in(1), dtype::i64);
  value linear = g.constant(0, dtype::i64);
  std::int64_t stride = 1;
  for (std::int64_t j = k - 1; j >= 0; --j) {
    const std::int64_t start[] = {j}, end[] = {j + 1}, axis[] = {id.rank - 1};
    value part = g.squeeze(g.slice(tuple, start, end, axis), axis);
    value size = g.constant(dd.dims[b + j], dtype::i64);
    part = g.select(g.lt(part, g.constant(0, dtype::i64)), g.add(part, size), part);
    linear = g.add(linear, g.mul(part, g.constant(stride, dtype::i64)));
    stride *= dd.dims[b + j];
  }
  std::int64_t batches = 1;
  for (std::int64_t a = 0; a < b; ++a) batches *= dd.dims[a];
  if (b > 0) {
    std::vector<std::int64_t> base(static_cast<std::size_t>(batches));
    for (std::int64_t i = 0; i < batches; ++i) base[static_cast<std::size_t>(i)] = i * stride;
    ints dims(id.dims.begin(), id.dims.begin() + b);
    dims.resize(static_cast<std::size_t>(id.rank - 1), 1);  // ones for the other index axes
    linear = g.add(
        linear, g.reshape(g.constant(base.data(), dtype::i64, base.size(), shape{batches}), dims));
  }
  ints flat = {batches * stride};
  for (int a = static_cast<int>(b + k); a < dd.rank; ++a)
    flat.push_back(dd.dims[a] == dyn ? 0 : dd.dims[a]);
  value result = g.gather(g.reshape(c.in(0), flat), linear, 0);
  c.out(0, result);
}

// x's diagonal over axes p < q (of equal size n): x times the n x n identity, summed over q,
// with p moved last. Returns the value and its letters.
std::pair<value, std::string> diagonal(graph& g, value x, std::string term, std::size_t p,
                                       std::size_t q) {
  const shape d = g.dims_of(x);
  const std::int64_t n = d.dims[p];
  ints perm;
  std::string letters;
  for (std::size_t a = 0; a < term.size(); ++a)
    if (a != p && a != q) {
      perm.push_back(static_cast<std::int64_t>(a));
      letters += term[a];
    }
  perm.push_back(static_cast<std::int64_t>(p));
  perm.push_back(static_cast<std::int64_t>(q));
  const value eye =
      mask_matrix(g, g.type_of(x), n, n, [](std::int64_t i, std::int64_t j) { return i == j; });
  const std::int64_t last[] = {static_cast<std::int64_t>(term.size()) - 1};
  value y = g.reduce(ir::op::reduce_sum, g.mul(g.transpose(x, perm), eye), last, false);
  return {y, letters + term[p]};
}

// Einsum of one or two operands: an ellipsis stands for fresh letters (aligned from the right,
// numpy's rule), a letter repeated in one operand takes its diagonal; then letters only one side
// has and the output lacks are summed first; the shared letters the output keeps are batch axes,
// the shared ones it drops are contracted, and the product is one batched matmul of the operands
// transposed to [batch, kept, contracted] and [batch, contracted, kept].
void lower_einsum(node_context& c) {
  c.only_attrs({"equation"});
  graph& g = c.g;
  std::string eq;
  for (char ch : c.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  std::vector<std::string> terms;
  const std::string lhs = eq.substr(0, arrow);
  for (std::size_t at = 0; at <= lhs.size();) {
    const std::size_t comma = std::min(lhs.find(',', at), lhs.size());
    terms.push_back(lhs.substr(at, comma - at));
    at = comma + 1;
  }
  if (terms.size() != static_cast<std::size_t>(c.inputs()) || terms.size() > 2)
    c.fail(errc::unsupported, "'" + eq + "' (kiln: one or two operands, one term each)");
  // The ellipsis: as many fresh letters as the operand with the most axes there needs.
  std::string fresh;
  for (char ch = 'A'; ch <= 'z'; ++ch)
    if (std::isalpha(static_cast<unsigned char>(ch)) && eq.find(ch) == std::string::npos)
      fresh += ch;
  std::size_t widest = 0;
  std::vector<std::size_t> spans(terms.size(), 0);
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto dots = terms[i].find("...");
    if (dots == std::string::npos) continue;
    const auto rank = static_cast<std::size_t>(c.dims_of(static_cast<int>(i)).rank);
    if (terms[i].size() - 3 > rank)
      c.fail(errc::shape_mismatch,
             "term '" + terms[i] + "' for an operand of rank " + std::to_string(rank));
    spans[i] = rank - (terms[i].size() - 3);
    widest = std::max(widest, spans[i]);
  }
  if (widest > fresh.size()) c.fail(errc::unsupported, "'" + eq + "' (too many letters)");
  const std::string ellipsis = fresh.substr(0, widest);
  for (std::size_t i = 0; i < terms.size(); ++i)
    if (const auto dots = terms[i].find("..."); dots != std::string::npos)
      terms[i].replace(dots, 3, ellipsis.substr(widest - spans[i]));
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    if (const auto dots = out.find("..."); dots != std::string::npos)
      out.replace(dots, 3, ellipsis);
  } else {  // implicit: the ellipsis, then the letters that appear once, in alphabetical order
    out = ellipsis;
    for (char ch = 'A'; ch <= 'z'; ++ch)
      if (std::isalpha(static_cast<unsigned char>(ch)) &&
          std::count(lhs.begin(), lhs.end(), ch) == 1)
        out += ch;
  }
  std::vector<value> v;
  std::map<char, std::int64_t> size;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const shape d = c.dims_of(static_cast<int>(i));
    if (static_cast<int>(terms[i].size()) != d.rank)
      c.fail(errc::shape_mismatch,
             "term '" + terms[i] + "' for an operand of dims " + to_string(d));
    for (int a = 0; a < d.rank; ++a) {
      const char ch = terms[i][static_cast<std::size_t>(a)];
      if (d.dims[a] == dyn) c.fail(errc::unsupported, "operand axes with run-time sizes");
      if (size.count(ch) && size[ch] != d.dims[a])
        c.fail(errc::shape_mismatch, std::string("letter ") + ch + " has sizes " +
                                         std::to_string(size[ch]) + " and " +
                                         std::to_string(d.dims[a]));
      size[ch] = d.dims[a];
    }
    v.push_back(c.in(static_cast<int>(i)));
    // A letter twice in one term: the diagonal, until every letter is once.
    for (std::size_t p = 0; p < terms[i].size(); ++p) {
      const std::size_t q = terms[i].find(terms[i][p], p + 1);
      if (q == std::string::npos) continue;
      std::tie(v[i], terms[i]) = diagonal(g, v[i], terms[i], p, q);
      p = static_cast<std::size_t>(-1);  // the letters moved: look again from the start
    }
  }
  auto has = [](const std::string& s, char ch) { return s.find(ch) != std::string::npos; };
  // Sums over the letters only this operand has and the output drops.
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string other = terms.size() == 2 ? terms[1 - i] : "";
    ints axes;
    std::string kept;
    for (std::size_t a = 0; a < terms[i].size(); ++a) {
      const char ch = terms[i][a];
      if (!has(out, ch) && !has(other, ch))
        axes.push_back(static_cast<std::int64_t>(a));
      else
        kept += ch;
    }
    if (!axes.empty()) v[i] = g.reduce(ir::op::reduce_sum, v[i], axes, false);
    terms[i] = kept;
  }
  auto permuted = [&](value x, const std::string& from, const std::string& to) {
    ints perm;
    for (char ch : to) perm.push_back(static_cast<std::int64_t>(from.find(ch)));
    return from == to ? x : g.transpose(x, perm);
  };
  auto count = [&](const std::string& letters) {
    std::int64_t n = 1;
    for (char ch : letters) n *= size[ch];
    return n;
  };
  if (terms.size() == 1) return c.out(0, permuted(v[0], terms[0], out));
  std::string batch, left, right, contracted;
  for (char ch : terms[0]) {
    if (has(terms[1], ch))
      (has(out, ch) ? batch : contracted) += ch;
    else
      left += ch;
  }
  for (char ch : terms[1])
    if (!has(terms[0], ch)) right += ch;
  value a = g.reshape(permuted(v[0], terms[0], batch + left + contracted),
                      ints{count(batch), count(left), count(contracted)});
  value b = g.reshape(permuted(v[1], terms[1], batch + contracted + right),
                      ints{count(batch), count(contracted), count(right)});
  ints dims;
  for (char ch : batch + left + right) dims.push_back(size[ch]);
  c.out(0, permuted(g.reshape(g.matmul(a, b), dims), batch + left + right, out));
}

}  // namespace

void add_composite_lowerings(lowering_table& t) {
  t["Einsum"] = lower_einsum;
  t["GatherND"] = lower_gather_nd;
  t["Resize"] = lower_resize;
  t["Upsample"] = lower_resize;
  t["HannWindow"] = [](node_context& c) { lower_window(c, 0.5, 0.5, 0); };
  t["HammingWindow"] = [](node_context& c) { lower_window(c, 25.0 / 46.0, 21.0 / 46.0, 0); };
  t["BlackmanWindow"] = [](node_context& c) { lower_window(c, 0.42, 0.5, 0.08); };
  t["ConvInteger"] = lower_conv_integer;
  t["QLinearMatMul"] = lower_qlinear_matmul;
  t["QLinearConv"] = lower_qlinear_conv;
  t["NegativeLogLikelihoodLoss"] = lower_nll;
  t["SoftmaxCrossEntropyLoss"] = lower_softmax_cross_entropy;
  t["CumSum"] = lower_cumsum;
  t["LRN"] = lower_lrn;
  t["DynamicQuantizeLinear"] = lower_dynamic_quantize;
}

}  // namespace kiln::onnx_import
