// ONNX ops whose result's size depends on their inputs' values (Compress, NonZero, Unique,
// NonMaxSuppression): Compress with a known condition is a gather of the kept positions; the
// others are computed on known tensors, at import where their inputs are known then, else at the
// call, where the model is cut before them (cut_model.hpp; the types and extents the rest of the
// model is built for are here). Internal to kiln::onnx.
#include <algorithm>
#include <array>
#include <cmath>
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

// An axis attribute's value (negative counts from the end) for an input of rank `rank`.
int axis_of(const node_context& c, std::int64_t a, int rank) {
  if (a < -rank || a >= rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(a) + " for an input of rank " + std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

// The items `at` of x along `axis`, x's extents taken as `d` (x flattened where d is 1-D).
host_tensor take_items(const host_tensor& x, const shape& d, int axis, const ints& at) {
  std::int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= d.dims[a];
  for (int a = axis + 1; a < d.rank; ++a) inner *= d.dims[a];
  const auto size = static_cast<std::int64_t>(size_in_bytes(x.type));
  const auto k = static_cast<std::int64_t>(at.size());
  shape yd = d;
  yd.dims[axis] = k;
  host_tensor y{x.type, yd,
                std::vector<unsigned char>(static_cast<std::size_t>(outer * k * inner * size))};
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < k; ++i)
      std::memcpy(
          y.bytes.data() + (o * k + i) * inner * size,
          x.bytes.data() + (o * d.dims[axis] + at[static_cast<std::size_t>(i)]) * inner * size,
          static_cast<std::size_t>(inner * size));
  return y;
}

// Compress: the positions along `axis` (none: of the flattened input) whose condition is true;
// copied where the input is known (at import, or at the call), else a gather.
void lower_compress(node_context& c) {
  c.only_attrs({"axis"});
  graph& g = c.g;
  const host_tensor& condition = c.known_input(1, "condition");
  if (condition.dims.rank != 1)
    c.fail(errc::shape_mismatch, "condition is " + to_string(condition.dims) + ", not 1-D");
  shape d = c.dims_of(0);
  const bool along = c.has_attr("axis");
  const int axis = along ? axis_of(c, c.attr_int("axis", 0), d.rank) : 0;
  if (!along) {
    if (!d.is_static()) c.fail(errc::unsupported, "flattening input dims " + to_string(d));
    d = shape{d.element_count()};
  }
  const std::int64_t n = d.dims[axis];
  if (n == dyn) c.fail(errc::unsupported, "compressing a run-time size");
  const std::vector<double> keep = condition.doubles();
  if (static_cast<std::int64_t>(keep.size()) > n)
    c.fail(errc::shape_mismatch, "condition holds " + std::to_string(keep.size()) +
                                     " values for an axis of " + std::to_string(n));
  ints at;
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (keep[i] != 0) at.push_back(static_cast<std::int64_t>(i));
  if (const host_tensor* x = c.known(0)) return c.out_known(0, take_items(*x, d, axis, at));
  const value x = along ? c.in(0) : g.reshape(c.in(0), {n});
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
  const bool along = c.has_attr("axis");
  const int axis = along ? axis_of(c, c.attr_int("axis", 0), x.dims.rank) : 0;
  const shape d = along ? x.dims : shape{x.count()};
  // Items: the slices along the axis, each as its elements in row-major order of the rest.
  const std::int64_t n = d.dims[axis];
  std::int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= d.dims[a];
  for (int a = axis + 1; a < d.rank; ++a) inner *= d.dims[a];
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
  c.out_known(0, take_items(x, d, axis, out_first));
  c.out_known(1, i64_tensor(out_first, shape{u}));
  c.out_known(2, i64_tensor(out_inverse, shape{n}));
  c.out_known(3, i64_tensor(out_counts, shape{u}));
}

// One scalar of an optional input (`otherwise` where absent).
double optional_scalar(const node_context& c, int i, std::string_view what, double otherwise) {
  if (!c.has(i)) return otherwise;
  const host_tensor& t = c.known_input(i, what);
  if (t.count() != 1)
    c.fail(errc::shape_mismatch,
           std::string(what) + " is " + to_string(t.dims) + ", not a single value");
  return t.doubles()[0];
}

// NonMaxSuppression of known boxes and scores: per batch and class, the boxes above the score
// threshold by descending score (equal scores by index), each kept unless its IoU with one kept
// before exceeds the threshold, at most max_output_boxes_per_class: rows [batch, class, box].
// Scores equal to score_threshold are dropped, as ONNX Runtime drops them.
void lower_non_max_suppression(node_context& c) {
  c.only_attrs({"center_point_box"});
  const std::int64_t center = c.attr_int("center_point_box", 0);
  if (center != 0 && center != 1)
    c.fail(errc::invalid_argument,
           "center_point_box is " + std::to_string(center) + ", expected 0 or 1");
  const host_tensor& boxes = c.known_input(0, "boxes");
  const host_tensor& scores = c.known_input(1, "scores");
  const auto limit =
      static_cast<std::int64_t>(optional_scalar(c, 2, "max_output_boxes_per_class", 0));
  const double iou_threshold = optional_scalar(c, 3, "iou_threshold", 0);
  const bool thresholded = c.has(4);
  const double score_threshold = optional_scalar(c, 4, "score_threshold", 0);
  if (boxes.dims.rank != 3 || boxes.dims.dims[2] != 4 || scores.dims.rank != 3 ||
      scores.dims.dims[0] != boxes.dims.dims[0] || scores.dims.dims[2] != boxes.dims.dims[1])
    c.fail(errc::shape_mismatch,
           "boxes " + to_string(boxes.dims) + " and scores " + to_string(scores.dims) +
               ": expected [batches, boxes, 4] and [batches, classes, boxes]");
  if (!(iou_threshold >= 0 && iou_threshold <= 1))
    c.fail(errc::invalid_argument,
           "iou_threshold is " + std::to_string(iou_threshold) + ", expected one in [0, 1]");
  const std::int64_t batches = boxes.dims.dims[0], n = boxes.dims.dims[1],
                     classes = scores.dims.dims[1];
  const std::vector<double> b = boxes.doubles(), s = scores.doubles();
  // Box i of batch k as (y_min, x_min, y_max, x_max).
  auto corners = [&](std::int64_t k, std::int64_t i) {
    const double* p = &b[static_cast<std::size_t>((k * n + i) * 4)];
    if (center == 1)
      return std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2,
                                   p[0] + p[2] / 2};
    return std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]),
                                 std::max(p[1], p[3])};
  };
  auto overlaps = [&](const std::array<double, 4>& p, const std::array<double, 4>& q) {
    const double h = std::min(p[2], q[2]) - std::max(p[0], q[0]),
                 w = std::min(p[3], q[3]) - std::max(p[1], q[1]);
    if (h <= 0 || w <= 0) return false;
    const double area_p = (p[2] - p[0]) * (p[3] - p[1]), area_q = (q[2] - q[0]) * (q[3] - q[1]);
    const double shared = h * w, joined = area_p + area_q - shared;
    return area_p > 0 && area_q > 0 && joined > 0 && shared / joined > iou_threshold;
  };
  ints rows;
  for (std::int64_t k = 0; k < batches && limit > 0; ++k)
    for (std::int64_t cls = 0; cls < classes; ++cls) {
      const double* score = &s[static_cast<std::size_t>((k * classes + cls) * n)];
      std::vector<std::int64_t> order;
      for (std::int64_t i = 0; i < n; ++i)
        if (!thresholded || score[i] > score_threshold) order.push_back(i);
      // The candidates as a heap whose top is the highest score (equal scores: the lower index;
      // NaN below every number), taken one at a time until `limit` are kept: the order of a
      // stable sort by descending score, without sorting the many a small limit never reaches.
      auto after = [&](std::int64_t p, std::int64_t q) {  // p comes after q
        const double a = score[p], b = score[q];
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && (!std::isnan(b) || p > q);
        return a < b || (a == b && p > q);
      };
      std::make_heap(order.begin(), order.end(), after);
      std::vector<std::array<double, 4>> kept;
      for (auto end = order.end(); end != order.begin(); --end) {
        if (static_cast<std::int64_t>(kept.size()) == limit) break;
        std::pop_heap(order.begin(), end, after);
        const std::int64_t i = *(end - 1);
        const auto box = corners(k, i);
        if (std::any_of(kept.begin(), kept.end(),
                        [&](const auto& other) { return overlaps(box, other); }))
          continue;
        kept.push_back(box);
        rows.insert(rows.end(), {k, cls, i});
      }
    }
  c.out_known(0, i64_tensor(rows, shape{static_cast<std::int64_t>(rows.size() / 3), 3}));
}

}  // namespace

void add_data_sized_lowerings(lowering_table& t) {
  t["Compress"] = lower_compress;
  t["NonZero"] = lower_non_zero;
  t["Unique"] = lower_unique;
  t["NonMaxSuppression"] = lower_non_max_suppression;
}

bool sized_by_call_values(std::string_view op_type, const std::vector<slot*>& inputs) {
  if (op_type == "SequenceAt" || op_type == "SequenceLength" || op_type == "ConcatFromSequence" ||
      op_type == "SequenceInsert" || op_type == "SequenceErase")
    return !inputs.empty() && inputs[0] && inputs[0]->list &&
           inputs[0]->list->carried < 0;  // (a Loop's body at the call appends to its own)
  auto computed = [&](std::size_t i) {
    return i < inputs.size() && inputs[i] && !inputs[i]->known;
  };
  if (op_type == "NonZero" || op_type == "Unique") return computed(0);
  if (op_type == "Compress") return computed(1);
  if (op_type == "NonMaxSuppression")
    return std::any_of(inputs.begin(), inputs.end(), [](const slot* s) { return s && !s->known; });
  return false;
}

// A sequence of run-time length read at the call: its length, one of its tensors, or all of them
// joined along `axis` (new_axis: stacked along a new axis there); or changed at the call (a
// tensor inserted, one erased): another such list.
static std::vector<call_sized_result> list_read_results(node_context& c) {
  if (c.op() == "SequenceLength") {
    c.only_attrs({});
    return {{dtype::i64, shape{}, -1}};
  }
  const call_list& l = *c.input_slot(0).list;
  if (c.op() == "SequenceInsert") {
    c.only_attrs({});
    const dtype t = c.type_of(1);
    shape d = c.dims_of(1);
    if (!l.open && (t != l.type || d.rank != l.dims.rank))
      c.fail(errc::dtype_mismatch, "inserting " + std::string(kiln::name(t)) + to_string(d) +
                                       " into a sequence of " + std::string(kiln::name(l.type)) +
                                       to_string(l.dims));
    for (int a = 0; !l.open && a < d.rank; ++a)
      if (l.dims.dims[a] != d.dims[a]) d.dims[a] = dyn;
    return {{t, d, -1, true}};
  }
  if (l.open)
    c.fail(errc::unsupported,
           "a sequence of run-time length that nothing is appended to (its "
           "element type and extents are not known at import)");
  if (c.op() == "SequenceAt") {
    c.only_attrs({});
    return {{l.type, l.dims, -1}};
  }
  if (c.op() == "SequenceErase") {
    c.only_attrs({});
    return {{l.type, l.dims, -1, true}};
  }
  c.only_attrs({"axis", "new_axis"});
  if (!c.has_attr("axis")) c.fail(errc::invalid_argument, "the axis attribute is required");
  const bool stack = c.attr_int("new_axis", 0) != 0;
  const int axis = axis_of(c, c.attr_int("axis", 0), l.dims.rank + (stack ? 1 : 0));
  shape d = l.dims;
  if (stack) {
    if (d.rank == max_rank)
      c.fail(errc::unsupported, "stacking tensors of rank " + std::to_string(d.rank));
    d.rank += 1;
    for (int a = d.rank - 1; a > axis; --a) d.dims[a] = d.dims[a - 1];
  }
  d.dims[axis] = dyn;
  return {{l.type, d, -1}};
}

std::vector<call_sized_result> call_sized_results(node_context& c) {
  if (c.op() == "SequenceAt" || c.op() == "SequenceLength" || c.op() == "ConcatFromSequence" ||
      c.op() == "SequenceInsert" || c.op() == "SequenceErase")
    return list_read_results(c);
  const shape d = c.dims_of(0);
  if (c.op() == "NonZero") {
    c.only_attrs({});
    return {{dtype::i64, shape{d.rank, dyn}, 1}};
  }
  if (c.op() == "NonMaxSuppression") {
    c.only_attrs({"center_point_box"});
    const shape scores = c.dims_of(1);
    if (d.rank != 3 || (d.dims[2] != dyn && d.dims[2] != 4) || scores.rank != 3)
      c.fail(errc::shape_mismatch, "boxes " + to_string(d) + " and scores " + to_string(scores) +
                                       ": expected [batches, boxes, 4] and [batches, classes, " +
                                       "boxes]");
    return {{dtype::i64, shape{dyn, 3}, 0}};
  }
  // Unique and Compress: the input with its items along `axis` (none: flattened) chosen.
  const bool along = c.has_attr("axis");
  const int axis = along ? axis_of(c, c.attr_int("axis", 0), d.rank) : 0;
  const std::int64_t items = along ? d.dims[axis] : d.is_static() ? d.element_count() : dyn;
  shape kept = along ? d : shape{dyn};
  kept.dims[axis] = dyn;
  if (c.op() == "Compress") {
    c.only_attrs({"axis"});
    if (c.dims_of(1).rank != 1)
      c.fail(errc::shape_mismatch, "condition is " + to_string(c.dims_of(1)) + ", not 1-D");
    return {{c.type_of(0), kept, axis}};
  }
  c.only_attrs({"axis", "sorted"});
  return {{c.type_of(0), kept, axis},
          {dtype::i64, shape{dyn}, 0},
          {dtype::i64, shape{items}, -1},
          {dtype::i64, shape{dyn}, 0}};
}

}  // namespace kiln::onnx_import
