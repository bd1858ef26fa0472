// Shapes computed from run-time sizes, as exporters write them (Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape, a flatten's Mul of two sizes): carried as graph::extents, so that a model with
// a dynamic batch or sequence length imports once and runs at any size; Range and Slice of data
// over them count and cut at the call, and any other op reads them as numbers.
#include <algorithm>
#include <string>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using extents = std::vector<graph::extent>;

// Input i's extents, or the refusal.
extents extents_of(node_context& c, int i, bool* scalar = nullptr) {
  auto e = c.extents_input(i, scalar);
  if (!e)
    c.fail(errc::unsupported, "input " + std::to_string(i) +
                                  " is not an integer shape known at import beside a shape of "
                                  "run-time sizes");
  return *e;
}

std::int64_t position(node_context& c, std::int64_t i, std::size_t n, const char* what) {
  const auto size = static_cast<std::int64_t>(n);
  if (i < -size || i >= size)
    c.fail(errc::invalid_argument, std::string(what) + " " + std::to_string(i) +
                                       " is out of range for a shape of " + std::to_string(n) +
                                       " sizes");
  return i < 0 ? i + size : i;
}

void lower_gather(node_context& c) {
  c.only_attrs({"axis"});
  if (c.attr_int("axis", 0) != 0) c.fail(errc::unsupported, "a shape is gathered along axis 0");
  const extents data = extents_of(c, 0);
  const host_tensor& at = c.known_input(1, "indices");
  if (at.dims.rank > 1) c.fail(errc::unsupported, "indices of rank above 1 into a shape");
  extents picked;
  for (std::int64_t i : at.ints())
    picked.push_back(data[static_cast<std::size_t>(position(c, i, data.size(), "index"))]);
  c.out_extents(0, picked, at.dims.rank == 0);
}

// A Slice of data from or to run-time sizes (a causal mask's rows [past, past + new) of a static
// table): steps of 1, each axis a window of the data (graph::slice: an end past the data's size
// is an error at the call, not clamped). Static negative positions count from the end.
void lower_slice_of_data(node_context& c) {
  const graph::value x = c.in(0);
  const int rank = c.g.dims_of(x).rank;
  const extents starts = extents_of(c, 1), ends = extents_of(c, 2);
  std::vector<std::int64_t> axes(starts.size());
  for (std::size_t k = 0; k < axes.size(); ++k) axes[k] = static_cast<std::int64_t>(k);
  if (c.has(3)) axes = c.ints_input(3, "axes");
  if (c.has(4))
    for (std::int64_t step : c.ints_input(4, "steps"))
      if (step != 1) c.fail(errc::unsupported, "steps other than 1 at run-time positions");
  if (ends.size() != starts.size() || axes.size() != starts.size())
    c.fail(errc::invalid_argument, "starts, ends and axes differ in length");
  graph::value y = x;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const auto axis =
        static_cast<int>(position(c, axes[k], static_cast<std::size_t>(rank), "axis"));
    const graph::extent n = c.g.extent_of(x, axis);
    // A static position: from the end where negative, clamped to the axis where it is static
    // (past a run-time axis's end only "to the end" is taken as its end; the call checks others).
    auto place = [&](graph::extent e) {
      if (!e.is_static()) return e;
      if (n.is_static())
        return graph::extent(
            std::clamp(e.size() < 0 ? e.size() + n.size() : e.size(), std::int64_t{0}, n.size()));
      if (e.size() < 0) return c.g.difference(n, -std::max(e.size(), -(std::int64_t{1} << 40)));
      return e.size() >= (1 << 30) ? n : e;
    };
    y = c.g.slice(y, axis, place(starts[k]), place(ends[k]));
  }
  c.out(0, y);
}

void lower_slice(node_context& c) {
  c.only_attrs({});
  if (!c.input_slot(0).extents) return lower_slice_of_data(c);
  const extents data = extents_of(c, 0);
  const auto n = static_cast<std::int64_t>(data.size());
  const auto starts = c.ints_input(1, "starts"), ends = c.ints_input(2, "ends");
  const auto axes = c.has(3) ? c.ints_input(3, "axes") : std::vector<std::int64_t>{0};
  const auto steps = c.has(4) ? c.ints_input(4, "steps") : std::vector<std::int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1 ||
      (axes[0] != 0 && axes[0] != -1) || steps[0] == 0)
    c.fail(errc::unsupported, "a shape is sliced along its one axis, with a nonzero step");
  const std::int64_t step = steps[0];
  auto clamp = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < 0) v += n;
    return std::clamp(v, lo, hi);
  };
  extents out;
  if (step > 0)
    for (std::int64_t i = clamp(starts[0], 0, n), e = clamp(ends[0], 0, n); i < e; i += step)
      out.push_back(data[static_cast<std::size_t>(i)]);
  else
    for (std::int64_t i = clamp(starts[0], -1, n - 1), e = clamp(ends[0], -1, n - 1); i > e;
         i += step)
      out.push_back(data[static_cast<std::size_t>(i)]);
  c.out_extents(0, out, false);
}

void lower_concat(node_context& c) {
  c.only_attrs({"axis"});
  if (c.attr_int("axis", 0) != 0 && c.attr_int("axis", 0) != -1)
    c.fail(errc::unsupported, "shapes are concatenated along their one axis");
  extents out;
  for (int i = 0; i < c.inputs(); ++i) {
    bool scalar = false;
    const extents e = extents_of(c, i, &scalar);
    if (scalar) c.fail(errc::invalid_argument, "input " + std::to_string(i) + " is a scalar");
    out.insert(out.end(), e.begin(), e.end());
  }
  c.out_extents(0, out, false);
}

// Unsqueeze of a scalar to [1]; Squeeze of [1] to a scalar (a shape has one axis at most).
void lower_unsqueeze(node_context& c) {
  c.only_attrs({"axes"});
  bool scalar = false;
  const extents e = extents_of(c, 0, &scalar);
  const auto axes = c.opset() < 13 ? c.attr_ints("axes") : c.ints_input(1, "axes");
  if (!scalar || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1))
    c.fail(errc::unsupported, "a shape of run-time sizes is unsqueezed from a scalar to one axis");
  c.out_extents(0, e, false);
}

void lower_squeeze(node_context& c) {
  c.only_attrs({"axes"});
  bool scalar = false;
  const extents e = extents_of(c, 0, &scalar);
  if (scalar || e.size() != 1)
    c.fail(errc::unsupported, "a shape of run-time sizes is squeezed from one size to a scalar");
  c.out_extents(0, e, true);
}

// Any other op reads the sizes as numbers (an i64 tensor counted at the call: value_of), which
// then are data: a shape computed from them is refused where it is used.
void lower_as_data(node_context& c) {
  const lowering* lower = find_lowering(c.op());
  if (!lower) c.fail(errc::unsupported, "kiln has no lowering for " + c.op());
  (*lower)(c);
}

void lower_cast(node_context& c) {
  c.only_attrs({"to", "saturate"});
  const dtype to = c.element_type(c.attr_int("to", 0));
  if (to != dtype::i64 && to != dtype::i32) return lower_as_data(c);  // (a size as a float)
  bool scalar = false;
  const extents e = extents_of(c, 0, &scalar);
  c.out_extents(0, e, scalar);
}

void lower_identity(node_context& c) {
  bool scalar = false;
  const extents e = extents_of(c, 0, &scalar);
  c.out_extents(0, e, scalar);
}

// Add, Sub, Mul, Div, Min and Max of shapes elementwise (one side may be a single size): sums,
// differences, products, quotients rounded down (as ONNX divides integers), and bounds by a
// static size. Division by a run-time size is that size's inverse in a product; subtraction
// takes a run-time size out of a sum that holds it.
enum class arithmetic { add, sub, mul, div, min, max };
template <arithmetic o>
void lower_arithmetic(node_context& c) {
  c.only_attrs({});
  bool a_scalar = false, b_scalar = false;
  const extents a = extents_of(c, 0, &a_scalar), b = extents_of(c, 1, &b_scalar);
  const std::size_t n = std::max(a.size(), b.size());
  if ((a.size() != n && a.size() != 1) || (b.size() != n && b.size() != 1))
    c.fail(errc::shape_mismatch, "shapes of " + std::to_string(a.size()) + " and " +
                                     std::to_string(b.size()) + " sizes do not broadcast");
  extents out;
  for (std::size_t i = 0; i < n; ++i) {
    const graph::extent x = a[a.size() == 1 ? 0 : i], y = b[b.size() == 1 ? 0 : i];
    out.push_back(o == arithmetic::add   ? c.g.sum(x, y)
                  : o == arithmetic::sub ? c.g.difference(x, y)
                  : o == arithmetic::mul ? c.g.product(x, y)
                  : o == arithmetic::div ? c.g.floor_quotient(x, y)
                  : o == arithmetic::min ? c.g.minimum(x, y)
                                         : c.g.maximum(x, y));
  }
  c.out_extents(0, out, a_scalar && b_scalar);
}

// Range from or to run-time sizes (position ids [past, past + new)): start and limit sizes,
// delta known at import, of delta's type.
void lower_range(node_context& c) {
  c.only_attrs({});
  auto bound = [&](int i) {
    bool scalar = false;
    const extents e = extents_of(c, i, &scalar);
    if (!scalar) c.fail(errc::invalid_argument, "input " + std::to_string(i) + " is not a scalar");
    return e.front();
  };
  const dtype t = c.known(2) ? c.type_of(2) : dtype::i64;
  c.out(0, c.g.range(bound(0), bound(1), static_cast<std::int64_t>(c.scalar_input(2, "delta")), t));
}

void lower_reshape(node_context& c) {
  c.only_attrs({"allowzero"});
  const extents to = extents_of(c, 1);
  c.out(0, c.g.reshape(c.in(0), to, c.attr_int("allowzero", 0) != 0));
}

// Tile by repeats known at the call: x [d...] seen as [1, d0, 1, d1, ...], expanded to
// [r0, d0, r1, d1, ...] and joined to [r0 d0, r1 d1, ...], the products carried as run-time sizes.
void lower_tile(node_context& c) {
  c.only_attrs({});
  if (c.opset() < 6) c.fail(errc::unsupported, "Tile before opset 6 takes its tiles as a scalar");
  const graph::value x = c.in(0);
  const int rank = c.g.dims_of(x).rank;
  const extents repeats = extents_of(c, 1);
  if (static_cast<int>(repeats.size()) != rank)
    c.fail(errc::invalid_argument, "repeats has " + std::to_string(repeats.size()) +
                                       " sizes for an input of rank " + std::to_string(rank));
  if (2 * rank > max_rank)
    c.fail(errc::unsupported, "rank " + std::to_string(rank) + " above kiln::max_rank / 2");
  extents spread, tiled, joined;
  for (int i = 0; i < rank; ++i) {
    const graph::extent size = c.g.extent_of(x, i), r = repeats[static_cast<std::size_t>(i)];
    spread.insert(spread.end(), {1, size});
    tiled.insert(tiled.end(), {r, size});
    joined.push_back(c.g.product(r, size));
  }
  c.out(0, c.g.reshape(c.g.expand(c.g.reshape(x, spread), tiled), joined));
}

void lower_expand(node_context& c) {
  c.only_attrs({});
  c.out(0, c.g.expand(c.in(0), extents_of(c, 1)));
}

// The value (one element, 0.0f by default) expanded to the shape.
void lower_constant_of_shape(node_context& c) {
  c.only_attrs({"value"});
  graph::value fill = c.g.constant(0.0, dtype::f32);
  if (const auto* a = c.attr("value")) {
    const host_tensor t = tensor_of(a->t(), c.who() + " value");
    if (t.count() != 1) c.fail(errc::shape_mismatch, "value has more than one element");
    fill = c.g.constant(std::vector<unsigned char>(t.bytes), t.type, shape{});
  }
  c.out(0, c.g.expand(fill, extents_of(c, 0)));
}

}  // namespace

void lower_on_extents(node_context& c) {
  static const lowering_table table = {{"Gather", lower_gather},
                                       {"Slice", lower_slice},
                                       {"Concat", lower_concat},
                                       {"Unsqueeze", lower_unsqueeze},
                                       {"Squeeze", lower_squeeze},
                                       {"Cast", lower_cast},
                                       {"Identity", lower_identity},
                                       {"Add", lower_arithmetic<arithmetic::add>},
                                       {"Sub", lower_arithmetic<arithmetic::sub>},
                                       {"Mul", lower_arithmetic<arithmetic::mul>},
                                       {"Div", lower_arithmetic<arithmetic::div>},
                                       {"Min", lower_arithmetic<arithmetic::min>},
                                       {"Max", lower_arithmetic<arithmetic::max>},
                                       {"Range", lower_range},
                                       {"Reshape", lower_reshape},
                                       {"Expand", lower_expand},
                                       {"Tile", lower_tile},
                                       {"ConstantOfShape", lower_constant_of_shape}};
  auto found = table.find(c.op());
  if (found == table.end() || (c.op() == "Slice" && c.opset() < 10)) return lower_as_data(c);
  found->second(c);
}

}  // namespace kiln::onnx_import
