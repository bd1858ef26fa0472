// ONNX ops whose result's size depends on their inputs' values (Compress, NonZero, Unique), where
// those values are known at import: Compress with a known condition is a gather of the kept
// positions; NonZero and Unique of a known tensor are computed then. Otherwise each is refused,
// naming the input kiln needs at import. Internal to kiln::onnx.
#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

// Compress: the positions along `axis` (none: of the flattened input) whose condition is true.
void lower_compress(node_context& c) {
  c.only_attrs({"axis"});
  graph& g = c.g;
  const host_tensor& condition = c.known_input(1, "condition");
  if (condition.dims.rank != 1)
    c.fail(errc::shape_mismatch, "condition is " + to_string(condition.dims) + ", not 1-D");
  const shape d = c.dims_of(0);
  value x = c.in(0);
  std::int64_t axis = 0;
  if (c.has_attr("axis")) {
    axis = c.attr_int("axis", 0);
    if (axis < -d.rank || axis >= d.rank)
      c.fail(errc::invalid_argument,
             "axis " + std::to_string(axis) + " for an input of rank " + std::to_string(d.rank));
    if (axis < 0) axis += d.rank;
  } else {
    if (!d.is_static()) c.fail(errc::unsupported, "flattening input dims " + to_string(d));
    x = g.reshape(x, {d.element_count()});
  }
  const std::int64_t n = g.dims_of(x).dims[axis];
  if (n == dyn) c.fail(errc::unsupported, "compressing a run-time size");
  const std::vector<double> keep = condition.doubles();
  if (static_cast<std::int64_t>(keep.size()) > n)
    c.fail(errc::shape_mismatch, "condition holds " + std::to_string(keep.size()) +
                                     " values for an axis of " + std::to_string(n));
  ints at;
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (keep[i] != 0) at.push_back(static_cast<std::int64_t>(i));
  const auto k = static_cast<std::int64_t>(at.size());
  c.out(0, g.gather(x, g.constant(at.data(), dtype::i64, at.size(), shape{k}), axis));
}

// NonZero of a known tensor: [rank, count], each nonzero element's indices (row-major order).
void lower_non_zero(node_context& c) {
  c.only_attrs({});
  const host_tensor& x = c.known_input(0, "X");
  const std::vector<double> v = x.doubles();
  const int rank = x.dims.rank;
  std::vector<ints> coordinates(static_cast<std::size_t>(rank));
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(v.size()); ++i) {
    if (v[static_cast<std::size_t>(i)] == 0) continue;
    ++count;
    for (std::int64_t r = i, a = rank - 1; a >= 0; --a) {
      coordinates[static_cast<std::size_t>(a)].push_back(r % x.dims.dims[a]);
      r /= x.dims.dims[a];
    }
  }
  ints flat;
  for (const auto& axis : coordinates) flat.insert(flat.end(), axis.begin(), axis.end());
  c.out_known(0, i64_tensor(flat, shape{static_cast<std::int64_t>(rank), count}));
}

// Unique of a known tensor: its distinct elements (or slices along `axis`), sorted or in order of
// first occurrence, with each one's first index, every element's place among them, and counts.
void lower_unique(node_context& c) {
  c.only_attrs({"axis", "sorted"});
  const host_tensor& x = c.known_input(0, "X");
  const bool sorted = c.attr_int("sorted", 1) != 0;
  shape d = x.dims;
  int axis = 0;
  if (c.has_attr("axis")) {
    std::int64_t a = c.attr_int("axis", 0);
    if (a < -d.rank || a >= d.rank)
      c.fail(errc::invalid_argument,
             "axis " + std::to_string(a) + " for an input of rank " + std::to_string(d.rank));
    axis = static_cast<int>(a < 0 ? a + d.rank : a);
  } else {
    d = shape{x.count()};
  }
  // Items: the slices along the axis, each as its elements in row-major order of the rest.
  const std::int64_t n = d.dims[axis];
  std::int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= d.dims[a];
  for (int a = axis + 1; a < d.rank; ++a) inner *= d.dims[a];
  const std::size_t size = size_in_bytes(x.type);
  const std::vector<double> values = x.doubles();
  const ints whole = is_floating(x.type) ? ints{} : x.ints();  // integers compared exactly
  auto element = [&](std::int64_t item, std::int64_t k) {
    return (k / inner * n + item) * inner + k % inner;  // k: the item's k-th element
  };
  auto less = [&](std::int64_t p, std::int64_t q) {
    for (std::int64_t k = 0; k < outer * inner; ++k) {
      const auto i = static_cast<std::size_t>(element(p, k)),
                 j = static_cast<std::size_t>(element(q, k));
      if (whole.empty() ? values[i] != values[j] : whole[i] != whole[j])
        return whole.empty() ? values[i] < values[j] : whole[i] < whole[j];
    }
    return false;
  };
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);  // equal items keep their order
  // The distinct items by first occurrence; each item's distinct one.
  ints first, inverse(static_cast<std::size_t>(n)), counts;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int64_t item = order[k];
    if (k == 0 || less(order[k - 1], item)) {
      first.push_back(item);
      counts.push_back(0);
    }
    inverse[static_cast<std::size_t>(item)] = static_cast<std::int64_t>(first.size()) - 1;
    ++counts.back();
  }
  ints place(first.size());  // sorted position -> output position
  std::iota(place.begin(), place.end(), 0);
  if (!sorted) {  // in order of first occurrence
    std::vector<std::int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](std::int64_t a, std::int64_t b) {
      return first[static_cast<std::size_t>(a)] < first[static_cast<std::size_t>(b)];
    });
    for (std::size_t k = 0; k < by_first.size(); ++k)
      place[static_cast<std::size_t>(by_first[k])] = static_cast<std::int64_t>(k);
  }
  const auto u = static_cast<std::int64_t>(first.size());
  ints out_first(first.size()), out_counts(first.size()), out_inverse(inverse.size());
  for (std::size_t k = 0; k < first.size(); ++k) {
    out_first[static_cast<std::size_t>(place[k])] = first[k];
    out_counts[static_cast<std::size_t>(place[k])] = counts[k];
  }
  for (std::size_t i = 0; i < inverse.size(); ++i)
    out_inverse[i] = place[static_cast<std::size_t>(inverse[i])];
  shape yd = d;
  yd.dims[axis] = u;
  host_tensor y{x.type, yd,
                std::vector<unsigned char>(static_cast<std::size_t>(yd.element_count()) * size)};
  for (std::int64_t item = 0; item < u; ++item)
    for (std::int64_t k = 0; k < outer * inner; ++k) {
      const std::int64_t from = element(out_first[static_cast<std::size_t>(item)], k);
      const std::int64_t to = (k / inner * u + item) * inner + k % inner;
      std::memcpy(y.bytes.data() + to * static_cast<std::int64_t>(size),
                  x.bytes.data() + from * static_cast<std::int64_t>(size), size);
    }
  c.out_known(0, std::move(y));
  c.out_known(1, i64_tensor(out_first, shape{u}));
  c.out_known(2, i64_tensor(out_inverse, shape{n}));
  c.out_known(3, i64_tensor(out_counts, shape{u}));
}

}  // namespace

void add_data_sized_lowerings(lowering_table& t) {
  t["Compress"] = lower_compress;
  t["NonZero"] = lower_non_zero;
  t["Unique"] = lower_unique;
}

}  // namespace kiln::onnx_import
