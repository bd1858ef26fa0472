// kiln::graph's methods built from its other methods for ops that read data-dependent positions
// or unroll a fixed algorithm: top_k, the scatters, det, grid_sample, roi_align, dft. Included by
// graph.hpp where the runtime's bodies are compiled (core/runtime_boundary.hpp).
#pragma once

#include "kiln/graph/graph.hpp"

#if KILN_RUNTIME_BODY
namespace kiln {

KILN_RUNTIME_API std::pair<graph::value, graph::value> graph::top_k(value x, std::int64_t k,
                                                                    std::int64_t axis,
                                                                    bool largest) {
  const std::int32_t id = id_of(x, "top_k", 1);
  const dtype t = type_of(x);
  if (t == dtype::boolean) throw error(errc::dtype_mismatch, "top_k", "x is bool, not a number");
  const int a = axis_of("top_k", id, axis);
  const shape d = dims_of(x);
  const int rank = d.rank;
  const std::int64_t n = static_dim(d, a, "top_k");
  if (k < 0 || k > n)
    throw error(errc::invalid_argument, "top_k",
                "k is " + std::to_string(k) + ", axis " + std::to_string(a) + " holds " +
                    std::to_string(n));
  // The axis swapped with the last one (a permutation that is its own inverse): rows [..., n].
  std::vector<std::int64_t> perm;
  for (int i = 0; i < rank; ++i) perm.push_back(i == a ? rank - 1 : i == rank - 1 ? a : i);
  const value rows = a == rank - 1 ? x : transpose(x, perm);
  // Element i of a row against element j: [..., i, 1] and [..., 1, j].
  const value xi = unsqueeze(rows, {rank}), xj = unsqueeze(rows, {rank - 1});
  const value i_col = reshape(range(0, double(n), 1, dtype::i64), {n, 1});
  const value j_row = reshape(range(0, double(n), 1, dtype::i64), {1, n});
  // j comes before i: it ranks higher, or is equal and earlier. With NaN above every number
  // (a NaN equals another NaN here), every row's order is total, so the counts are a permutation.
  value higher = largest ? gt(xj, xi) : lt(xj, xi);
  value same = eq(xj, xi);
  if (is_floating(t)) {
    const value nan_i = isnan(xi), nan_j = isnan(xj);
    higher = logical_or(higher, largest ? logical_and(nan_j, logical_not(nan_i))
                                        : logical_and(nan_i, logical_not(nan_j)));
    same = logical_or(same, logical_and(nan_i, nan_j));
  }
  const value before = logical_or(higher, logical_and(same, lt(j_row, i_col)));
  // Each element's place in its row's order: [..., n].
  const value place = reduce(ir::op::reduce_sum, cast(before, dtype::i64), {rank}, false);
  // The element at each of the first k places: [..., n, 1] against places [k].
  const value at = eq(unsqueeze(place, {rank}), range(0, double(k), 1, dtype::i64));
  const value zero = constant(0, dtype::i64);
  const value indices = reduce(ir::op::reduce_sum, select(at, i_col, zero), {rank - 1}, false);
  const value values = gather_elements(rows, indices, rank - 1);
  if (a == rank - 1) return {values, indices};
  return {transpose(values, perm), transpose(indices, perm)};
}

KILN_RUNTIME_API graph::value graph::scatter_elements(value data, value indices, value updates,
                                                      std::int64_t axis,
                                                      std::string_view reduction) {
  const std::int32_t id = id_of(data, "scatter_elements", 1);
  id_of(indices, "scatter_elements", 2);
  id_of(updates, "scatter_elements", 3);
  auto fail = [](errc code, const std::string& what) {
    throw error(code, "scatter_elements", what);
  };
  const dtype t = type_of(data);
  if (type_of(updates) != t)
    fail(errc::dtype_mismatch, std::string("updates are ") +
                                   std::string(kiln::name(type_of(updates))) + ", data " +
                                   std::string(kiln::name(t)));
  if (type_of(indices) != dtype::i64 && type_of(indices) != dtype::i32)
    fail(errc::dtype_mismatch, std::string("indices are ") +
                                   std::string(kiln::name(type_of(indices))) + ", not i32 or i64");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    fail(errc::invalid_argument,
         "reduction '" + std::string(reduction) + "' is not none, add, mul, max or min");
  const shape d = dims_of(data), s = dims_of(indices);
  const int rank = d.rank;
  if (dims_of(updates) != s || s.rank != rank || rank == 0)
    fail(errc::shape_mismatch, "data " + to_string(d) + ", indices " + to_string(s) +
                                   " and updates " + to_string(dims_of(updates)) +
                                   ": indices and updates must have one shape of data's rank");
  const int a = axis_of("scatter_elements", id, axis);
  for (int i = 0; i < rank; ++i) {
    static_dim(d, i, "scatter_elements");
    static_dim(s, i, "scatter_elements");
    if (i != a && s.dims[i] > d.dims[i])
      fail(errc::shape_mismatch, "indices " + to_string(s) + " are larger than data " +
                                     to_string(d) + " along axis " + std::to_string(i));
  }
  const std::int64_t n = d.dims[a], m = s.dims[a];
  // The axis swapped with the last one (a permutation that is its own inverse); indices and
  // updates padded to data's sizes off it (a padded index is n, which matches no position).
  std::vector<std::int64_t> perm;
  for (int i = 0; i < rank; ++i) perm.push_back(i == a ? rank - 1 : i == rank - 1 ? a : i);
  auto last = [&](value v) { return a == rank - 1 ? v : transpose(v, perm); };
  std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * rank), 0);
  for (int i = 0; i + 1 < rank; ++i)
    pads[static_cast<std::size_t>(rank + i)] = d.dims[perm[i]] - s.dims[perm[i]];
  value at = cast(last(indices), dtype::i64);
  at = select(lt(at, constant(0, dtype::i64)), add(at, constant(n, dtype::i64)), at);
  at = pad(at, pads, constant(n, dtype::i64));
  const value u = pad(last(updates), pads, constant(0.0, t));
  const value x = last(data);
  // hit[..., i, j]: update i lands on position j.
  const value hit = eq(unsqueeze(at, {rank}), range(0, double(n), 1, dtype::i64));
  const value u_col = unsqueeze(u, {rank});  // [..., m, 1]
  value y;
  if (reduction == "none") {
    // The last update landing on each position, or -1.
    const value i_col = reshape(range(0, double(m), 1, dtype::i64), {m, 1});
    const value from =
        reduce(ir::op::reduce_max, select(hit, i_col, constant(-1, dtype::i64)), {rank - 1}, false);
    const value landed = ge(from, constant(0, dtype::i64));
    const value picked =
        gather_elements(u, select(landed, from, constant(0, dtype::i64)), rank - 1);
    y = select(landed, picked, x);
  } else if (reduction == "add") {
    y = add(x, reduce(ir::op::reduce_sum, select(hit, u_col, constant(0.0, t)), {rank - 1}, false));
  } else if (reduction == "mul") {
    y = mul(x,
            reduce(ir::op::reduce_prod, select(hit, u_col, constant(1.0, t)), {rank - 1}, false));
  } else {  // max, min: data's own value where nothing lands
    const bool is_max = reduction == "max";
    const value x_row = unsqueeze(x, {rank - 1});  // [..., 1, n]
    const value r = reduce(is_max ? ir::op::reduce_max : ir::op::reduce_min,
                           select(hit, u_col, x_row), {rank - 1}, false);
    y = is_max ? max(x, r) : min(x, r);
  }
  return last(y);
}

KILN_RUNTIME_API graph::value graph::scatter_nd(value data, value indices, value updates,
                                                std::string_view reduction) {
  id_of(data, "scatter_nd", 1);
  id_of(indices, "scatter_nd", 2);
  id_of(updates, "scatter_nd", 3);
  const shape d = dims_of(data), q = dims_of(indices), u = dims_of(updates);
  auto fail = [](errc code, const std::string& what) { throw error(code, "scatter_nd", what); };
  if (type_of(indices) != dtype::i64 && type_of(indices) != dtype::i32)
    fail(errc::dtype_mismatch, std::string("indices are ") +
                                   std::string(kiln::name(type_of(indices))) + ", not i32 or i64");
  if (q.rank < 1 || d.rank < 1) fail(errc::shape_mismatch, "data and indices need an axis");
  for (const shape* s : {&d, &q, &u})
    for (int i = 0; i < s->rank; ++i) static_dim(*s, i, "scatter_nd");
  const std::int64_t k = q.dims[q.rank - 1];
  // updates: indices' leading axes, then data's axes after the first k.
  shape want;
  for (int i = 0; i + 1 < q.rank; ++i) want.dims[want.rank++] = q.dims[i];
  for (int i = static_cast<int>(k); i < d.rank; ++i) want.dims[want.rank++] = d.dims[i];
  if (k < 1 || k > d.rank || u != want)
    fail(errc::shape_mismatch, "data " + to_string(d) + ", indices " + to_string(q) +
                                   " and updates " + to_string(u) +
                                   ": indices' last size must be 1 to " + std::to_string(d.rank) +
                                   " and updates " + to_string(want));
  std::int64_t positions = 1, rest = 1, tuples = 1;
  for (int i = 0; i < d.rank; ++i) (i < k ? positions : rest) *= d.dims[i];
  for (int i = 0; i + 1 < q.rank; ++i) tuples *= q.dims[i];
  // Each tuple's position among data's first k axes, row-major (negative components counted
  // from their axis's end; one outside its axis makes the position -1: nothing lands).
  const value tuple = cast(reshape(indices, {tuples, k}), dtype::i64);
  value at, outside;
  for (std::int64_t j = 0; j < k; ++j) {
    const value n = constant(d.dims[j], dtype::i64);
    value c = reshape(slice(tuple, {j}, {j + 1}, {1}), {tuples});
    c = select(lt(c, constant(0, dtype::i64)), add(c, n), c);
    const value out = logical_or(lt(c, constant(0, dtype::i64)), ge(c, n));
    outside = j == 0 ? out : logical_or(outside, out);
    at = j == 0 ? c : add(mul(at, n), c);
  }
  at = select(outside, constant(-1, dtype::i64), at);  // -1 + positions: outside the axis too
  at = select(lt(at, constant(0, dtype::i64)), constant(positions, dtype::i64), at);
  const value flat = scatter_elements(reshape(data, {positions, rest}),
                                      expand(reshape(at, {tuples, 1}), {tuples, rest}),
                                      reshape(updates, {tuples, rest}), 0, reduction);
  return reshape(flat,
                 std::span<const std::int64_t>(d.dims.data(), static_cast<std::size_t>(d.rank)));
}

KILN_RUNTIME_API graph::value graph::det(value x) {
  const std::int32_t id = id_of(x, "det", 1);
  const dtype t = type_of(x);
  if (!is_floating(t))
    throw error(errc::dtype_mismatch, "det",
                std::string("x is ") + std::string(kiln::name(t)) + ", not a float type");
  const shape d = dims_of(x);
  if (d.rank < 2 || static_dim(d, d.rank - 1, "det") != static_dim(d, d.rank - 2, "det"))
    throw error(errc::shape_mismatch, "det",
                "x is " + to_string(d) + ", not [..., n, n] with a static n");
  const int rank = d.rank;
  const std::int64_t n = d.dims[rank - 1];
  std::vector<std::int64_t> batch;
  for (int i = 0; i + 2 < rank; ++i) batch.push_back(static_dim(b_.get().nodes[id].dims, i, "det"));
  // Row numbers as [n, 1].
  const value rows = reshape(range(0, double(n), 1, dtype::i64), {n, 1});
  const value zero = constant(0.0, t), one = constant(1.0, t);
  value a = x, det = one;
  for (std::int64_t j = 0; j < n; ++j) {
    const value jv = constant(j, dtype::i64);
    // The pivot: the largest |a[i, j]| for i >= j (the first such, as getrf takes it).
    const value column = slice(a, {j}, {j + 1}, {rank - 1});  // [..., n, 1]
    const value below = select(lt(rows, jv), constant(-1.0, t), abs(column));
    const value p = index_reduce(ir::op::argmax, below, rank - 2, true);  // [..., 1, 1]
    // Rows j and p swapped: each row of the result read from row j, p or itself.
    const value row_j = slice(a, {j}, {j + 1}, {rank - 2});  // [..., 1, n]
    std::vector<std::int64_t> across(batch);
    across.push_back(1);
    across.push_back(n);
    const value row_p = gather_elements(a, expand(p, across), rank - 2);
    a = select(eq(rows, jv), row_p, select(eq(rows, p), row_j, a));
    det = select(eq(p, jv), det, neg(det));
    // Eliminate below the pivot: row i -= (a[i, j] / pivot) x row j, for i > j.
    const value pivot = slice(row_p, {j}, {j + 1}, {rank - 1});  // [..., 1, 1]
    det = mul(det, pivot);
    const value pivot_row = row_p;
    const value factor = select(logical_and(gt(rows, jv), ne(pivot, zero)),
                                div(slice(a, {j}, {j + 1}, {rank - 1}), pivot), zero);
    a = sub(a, mul(factor, pivot_row));
  }
  std::vector<std::int64_t> out(batch);
  return reshape(det, out);
}

namespace detail {
// The float type a composite computes in: f64 for f64 operands, else f32 (f16 and narrower
// positions and weights would put samples at the wrong pixels).
inline dtype compute_type(dtype a, dtype b) {
  return a == dtype::f64 || b == dtype::f64 ? dtype::f64 : dtype::f32;
}
}  // namespace detail

KILN_RUNTIME_API graph::value graph::grid_sample(value x, value grid, std::string_view mode,
                                                 std::string_view padding_mode,
                                                 bool align_corners) {
  id_of(x, "grid_sample", 1);
  id_of(grid, "grid_sample", 2);
  auto fail = [](errc code, const std::string& what) { throw error(code, "grid_sample", what); };
  const dtype t = type_of(x);
  if (!is_floating(t) || !is_floating(type_of(grid)))
    fail(errc::dtype_mismatch, std::string("x is ") + std::string(kiln::name(t)) + ", grid " +
                                   std::string(kiln::name(type_of(grid))) +
                                   ": both must be float types");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    fail(errc::invalid_argument,
         "mode '" + std::string(mode) + "' is not bilinear, nearest or bicubic");
  if (padding_mode != "zeros" && padding_mode != "border" && padding_mode != "reflection")
    fail(errc::invalid_argument,
         "padding_mode '" + std::string(padding_mode) + "' is not zeros, border or reflection");
  const shape d = dims_of(x), gd = dims_of(grid);
  if (d.rank != 4 || gd.rank != 4 || gd.dims[3] != 2 || gd.dims[0] != d.dims[0])
    fail(errc::shape_mismatch, "x " + to_string(d) + " and grid " + to_string(gd) +
                                   ": expected [N, C, H, W] and [N, Ho, Wo, 2]");
  for (int i = 0; i < 4; ++i) {
    static_dim(d, i, "grid_sample");
    static_dim(gd, i, "grid_sample");
  }
  const std::int64_t n = d.dims[0], c = d.dims[1], h = d.dims[2], w = d.dims[3];
  const dtype ct = detail::compute_type(t, type_of(grid));
  auto k = [&](double v) { return constant(v, ct); };
  const value g = cast(grid, ct);
  // Pixel coordinates along one image axis of `size` pixels.
  auto unnormalize = [&](value v, std::int64_t size) {
    const auto s = static_cast<double>(size);
    return align_corners ? mul(add(v, k(1)), k((s - 1) / 2))
                         : div(sub(mul(add(v, k(1)), k(s)), k(1)), k(2));
  };
  // A coordinate reflected into the image, then clipped into it (PyTorch's reflect_coordinates:
  // about the corner centres with align_corners, else about the outer edges).
  auto reflect = [&](value v, std::int64_t size) {
    const double low = align_corners ? 0 : -1;
    const double high = align_corners ? 2 * double(size - 1) : 2 * double(size) - 1;
    if (low == high) return k(0);
    const double span = (high - low) / 2;
    const value a = abs(sub(v, k(low / 2)));
    const value flips = floor(div(a, k(span)));
    const value extra = fmod(a, k(span));
    const value even = eq(fmod(flips, k(2)), k(0));
    return select(even, add(extra, k(low / 2)), add(sub(k(span), extra), k(low / 2)));
  };
  auto pad_coordinate = [&](value v, std::int64_t size) {
    if (padding_mode == "border") return clip(v, k(0), k(double(size - 1)));
    if (padding_mode == "reflection") return clip(reflect(v, size), k(0), k(double(size - 1)));
    return v;
  };
  const std::int64_t gx_at[] = {0}, gy_at[] = {1}, end_x[] = {1}, end_y[] = {2}, last[] = {3};
  value gx = unnormalize(squeeze(slice(g, gx_at, end_x, last), last), w);  // [N, Ho, Wo]
  value gy = unnormalize(squeeze(slice(g, gy_at, end_y, last), last), h);
  // x's pixels as rows [N H W, C]; a pixel's row: n H W + y W + x.
  const value pixels = reshape(transpose(cast(x, ct), {0, 2, 3, 1}), {n * h * w, c});
  const value image_row =
      reshape(mul(range(0, double(n), 1, dtype::i64), constant(h * w, dtype::i64)), {n, 1, 1});
  // One tap: pixel (ix, iy) (whole numbers, maybe outside) times weight; outside is zero.
  auto tap = [&](value ix, value iy, value weight) {
    const value inside = logical_and(logical_and(ge(ix, k(0)), le(ix, k(double(w - 1)))),
                                     logical_and(ge(iy, k(0)), le(iy, k(double(h - 1)))));
    const value cx = cast(clip(ix, k(0), k(double(w - 1))), dtype::i64);
    const value cy = cast(clip(iy, k(0), k(double(h - 1))), dtype::i64);
    const value row = add(image_row, add(mul(cy, constant(w, dtype::i64)), cx));
    return mul(gather(pixels, row, 0), unsqueeze(select(inside, weight, k(0)), {3}));
  };
  value y;
  if (mode == "bicubic") {
    // Sixteen taps around the floor, each tap's coordinate padded on its own (as PyTorch does).
    const double a = -0.75;
    auto weights = [&](value f) {  // f: the distance past the floor, in [0, 1)
      auto near = [&](value s) {   // |distance| <= 1
        return add(mul(mul(sub(mul(k(a + 2), s), k(a + 3)), s), s), k(1));
      };
      auto far = [&](value s) {  // 1 < |distance| < 2
        return sub(mul(add(mul(sub(mul(k(a), s), k(5 * a)), s), k(8 * a)), s), k(4 * a));
      };
      return std::array<value, 4>{far(add(f, k(1))), near(f), near(sub(k(1), f)),
                                  far(sub(k(2), f))};
    };
    const value fx = floor(gx), fy = floor(gy);
    const auto wx = weights(sub(gx, fx)), wy = weights(sub(gy, fy));
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        const value ix = pad_coordinate(add(fx, k(i - 1)), w);
        const value iy = pad_coordinate(add(fy, k(j - 1)), h);
        const value term =
            tap(ix, iy, mul(wx[static_cast<std::size_t>(i)], wy[static_cast<std::size_t>(j)]));
        y = i + j == 0 ? term : add(y, term);
      }
  } else {
    gx = pad_coordinate(gx, w);
    gy = pad_coordinate(gy, h);
    if (mode == "nearest") {
      y = tap(round(gx), round(gy), k(1));
    } else {
      const value x0 = floor(gx), y0 = floor(gy);
      const value x1 = add(x0, k(1)), y1 = add(y0, k(1));
      const value rx = sub(gx, x0), ry = sub(gy, y0);  // weights of x1, y1
      const value lx = sub(k(1), rx), ly = sub(k(1), ry);
      y = add(add(tap(x0, y0, mul(lx, ly)), tap(x1, y0, mul(rx, ly))),
              add(tap(x0, y1, mul(lx, ry)), tap(x1, y1, mul(rx, ry))));
    }
  }
  return cast(transpose(y, {0, 3, 1, 2}), t);  // [N, Ho, Wo, C] -> [N, C, Ho, Wo]
}

KILN_RUNTIME_API graph::value graph::roi_align(value x, value rois, value batch_indices,
                                               std::int64_t output_height,
                                               std::int64_t output_width,
                                               std::int64_t sampling_ratio, double spatial_scale,
                                               std::string_view mode, bool half_pixel) {
  id_of(x, "roi_align", 1);
  id_of(rois, "roi_align", 2);
  id_of(batch_indices, "roi_align", 3);
  auto fail = [](errc code, const std::string& what) { throw error(code, "roi_align", what); };
  const dtype t = type_of(x);
  if (!is_floating(t) || !is_floating(type_of(rois)))
    fail(errc::dtype_mismatch, std::string("x is ") + std::string(kiln::name(t)) + ", rois " +
                                   std::string(kiln::name(type_of(rois))) +
                                   ": both must be float types");
  const dtype bt = type_of(batch_indices);
  if (bt != dtype::i64 && bt != dtype::i32)
    fail(errc::dtype_mismatch,
         std::string("batch_indices are ") + std::string(kiln::name(bt)) + ", not i32 or i64");
  if (mode != "avg" && mode != "max")
    fail(errc::invalid_argument, "mode '" + std::string(mode) + "' is not avg or max");
  if (output_height < 1 || output_width < 1)
    fail(errc::invalid_argument, "output_height " + std::to_string(output_height) +
                                     " and output_width " + std::to_string(output_width) +
                                     " must be at least 1");
  if (sampling_ratio < 1)
    fail(errc::unsupported,
         "sampling_ratio " + std::to_string(sampling_ratio) +
             " (kiln: > 0; ONNX's adaptive 0 makes the sample count depend on the rois' values)");
  const shape d = dims_of(x), rd = dims_of(rois), bd = dims_of(batch_indices);
  if (d.rank != 4 || rd.rank != 2 || rd.dims[1] != 4 || bd.rank != 1 || bd.dims[0] != rd.dims[0])
    fail(errc::shape_mismatch, "x " + to_string(d) + ", rois " + to_string(rd) +
                                   ", batch_indices " + to_string(bd) +
                                   ": expected [N, C, H, W], [R, 4] and [R]");
  for (int i = 0; i < 4; ++i) static_dim(d, i, "roi_align");
  const std::int64_t r = static_dim(rd, 0, "roi_align");
  const std::int64_t n = d.dims[0], c = d.dims[1], h = d.dims[2], w = d.dims[3];
  const std::int64_t s = sampling_ratio;
  const dtype ct = detail::compute_type(t, type_of(rois));
  auto k = [&](double v) { return constant(v, ct); };
  const value box = mul(cast(rois, ct), k(spatial_scale));
  auto corner = [&](std::int64_t i) {  // [R, 1]
    const std::int64_t from[] = {i}, to[] = {i + 1}, axis[] = {1};
    return sub(slice(box, from, to, axis), k(half_pixel ? 0.5 : 0));
  };
  // Sample coordinates along one axis: [R, cells * s], cell-major; each with its two pixels and
  // their weights (ONNX's reference: outside [-1, size] samples nothing; below 0 reads 0; at or
  // past the last pixel reads it alone).
  struct axis_samples {
    value low, high, low_weight, high_weight, inside;
  };
  auto samples = [&](value start, value end, std::int64_t cells, std::int64_t size) {
    value extent = sub(end, start);
    if (!half_pixel) extent = max(extent, k(1));
    const value bin = div(extent, k(double(cells)));
    std::vector<double> at;
    for (std::int64_t cell = 0; cell < cells; ++cell)
      for (std::int64_t i = 0; i < s; ++i)
        at.push_back(double(cell) + (double(i) + 0.5) / double(s));
    const value offsets = cast(constant(at.data(), dtype::f64, at.size(), shape{1, cells * s}), ct);
    const value v = add(start, mul(offsets, bin));
    const value inside = logical_and(ge(v, k(-1)), le(v, k(double(size))));
    const value clamped = max(v, k(0));
    const value last = k(double(size - 1));
    const value at_end = ge(floor(clamped), last);
    const value low = select(at_end, last, floor(clamped));
    const value high = select(at_end, last, add(low, k(1)));
    const value frac = sub(select(at_end, last, clamped), low);
    return axis_samples{cast(low, dtype::i64), cast(high, dtype::i64), sub(k(1), frac), frac,
                        inside};
  };
  const axis_samples sy = samples(corner(1), corner(3), output_height, h);
  const axis_samples sx = samples(corner(0), corner(2), output_width, w);
  // x's pixels as rows [N H W, C]; a sample's pixel row: image H W + y W + x, as [R, A, B] (A
  // and B: the samples along y and along x).
  const value pixels = reshape(transpose(cast(x, ct), {0, 2, 3, 1}), {n * h * w, c});
  const value image_row =
      reshape(mul(cast(batch_indices, dtype::i64), constant(h * w, dtype::i64)), {r, 1, 1});
  const value inside = cast(logical_and(unsqueeze(sy.inside, {2}), unsqueeze(sx.inside, {1})), ct);
  auto corner_term = [&](value yi, value yw, value xi, value xw) {
    const value row =
        add(image_row, add(unsqueeze(mul(yi, constant(w, dtype::i64)), {2}), unsqueeze(xi, {1})));
    const value weight = mul(mul(unsqueeze(yw, {2}), unsqueeze(xw, {1})), inside);
    return mul(gather(pixels, row, 0), unsqueeze(weight, {3}));  // [R, A, B, C]
  };
  const value t1 = corner_term(sy.low, sy.low_weight, sx.low, sx.low_weight);
  const value t2 = corner_term(sy.low, sy.low_weight, sx.high, sx.high_weight);
  const value t3 = corner_term(sy.high, sy.high_weight, sx.low, sx.low_weight);
  const value t4 = corner_term(sy.high, sy.high_weight, sx.high, sx.high_weight);
  const value cells =
      reshape(mode == "avg" ? add(add(t1, t2), add(t3, t4)) : max(max(t1, t2), max(t3, t4)),
              {r, output_height, s, output_width, s, c});
  const value pooled = mode == "avg"
                           ? div(reduce(ir::op::reduce_sum, cells, {2, 4}, false), k(double(s * s)))
                           : reduce(ir::op::reduce_max, cells, {2, 4}, false);
  return cast(transpose(pooled, {0, 3, 1, 2}), t);  // [R, C, output_height, output_width]
}

KILN_RUNTIME_API graph::value graph::dft(value x, std::int64_t axis, bool inverse, bool onesided,
                                         std::int64_t length) {
  id_of(x, "dft", 1);
  auto fail = [](errc code, const std::string& what) { throw error(code, "dft", what); };
  const dtype t = type_of(x);
  if (!is_floating(t))
    fail(errc::dtype_mismatch,
         std::string("x is ") + std::string(kiln::name(t)) + ", not a float type");
  const shape d = dims_of(x);
  const int rank = d.rank;
  if (rank < 2 || (d.dims[rank - 1] != 1 && d.dims[rank - 1] != 2))
    fail(errc::shape_mismatch,
         "x is " + to_string(d) + ": its last axis must hold 1 (real) or 2 (complex) values");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    fail(errc::invalid_argument, "axis " + std::to_string(axis) + " for x " + to_string(d) +
                                     " (the last axis holds the parts, not a signal)");
  const int a = static_cast<int>(axis);
  const std::int64_t n = static_dim(d, a, "dft");
  const std::int64_t m = length == 0 ? n : length;
  if (m < 1) fail(errc::invalid_argument, "length " + std::to_string(length) + " is below 1");
  const std::int64_t bins = onesided ? m / 2 + 1 : m;
  const dtype ct = detail::compute_type(t, t);
  // The parts, each with the signal's axis last and cut or padded to m.
  const int r = rank - 1;
  std::vector<std::int64_t> perm;
  for (int i = 0; i < r; ++i) perm.push_back(i == a ? r - 1 : i == r - 1 ? a : i);
  auto part = [&](std::int64_t p) {
    const std::int64_t from[] = {p}, to[] = {p + 1}, last[] = {r};
    value v = squeeze(slice(cast(x, ct), from, to, last), last);
    if (a != r - 1) v = transpose(v, perm);
    if (m < n) {
      const std::int64_t start[] = {0}, end[] = {m}, along[] = {r - 1};
      v = slice(v, start, end, along);
    } else if (m > n) {
      std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * r), 0);
      pads.back() = m - n;
      v = pad(v, pads);
    }
    return v;
  };
  // cos and sin of 2 pi jk / m, [m, bins] (the angle reduced mod m in integers first); the sines
  // negated for the inverse, whose kernel is e^(+i angle).
  std::vector<double> cosines(static_cast<std::size_t>(m * bins)), sines(cosines.size());
  const double pi = 3.14159265358979323846;
  for (std::int64_t j = 0; j < m; ++j)
    for (std::int64_t f = 0; f < bins; ++f) {
      // Quarter turns exactly (sin pi is 1.2e-16 in doubles, not 0).
      const std::int64_t turn = (j * f) % m;
      const double angle = 2 * pi * double(turn) / double(m);
      double c = std::cos(angle), sn = std::sin(angle);
      if (4 * turn % m == 0) {
        const std::int64_t quarter = 4 * turn / m;
        c = quarter == 0 ? 1 : quarter == 2 ? -1 : 0;
        sn = quarter == 1 ? 1 : quarter == 3 ? -1 : 0;
      }
      cosines[static_cast<std::size_t>(j * bins + f)] = c;
      sines[static_cast<std::size_t>(j * bins + f)] = inverse ? -sn : sn;
    }
  auto matrix = [&](const std::vector<double>& v) {
    return cast(constant(v.data(), dtype::f64, v.size(), shape{m, bins}), ct);
  };
  const value cos_m = matrix(cosines), sin_m = matrix(sines);
  // (re + i im)(cos - i sin) = re cos + im sin + i (im cos - re sin).
  const value re = part(0);
  value y_re = matmul(re, cos_m), y_im = neg(matmul(re, sin_m));
  if (d.dims[rank - 1] == 2) {
    const value im = part(1);
    y_re = add(y_re, matmul(im, sin_m));
    y_im = add(y_im, matmul(im, cos_m));
  }
  if (inverse) {
    const value scale = constant(1.0 / double(m), ct);
    y_re = mul(y_re, scale);
    y_im = mul(y_im, scale);
  }
  auto back = [&](value v) { return unsqueeze(a != r - 1 ? transpose(v, perm) : v, {r}); };
  return cast(concat({back(y_re), back(y_im)}, r), t);
}

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
