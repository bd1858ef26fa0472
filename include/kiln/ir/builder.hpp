// Builds an ir::graph op by op (validate -> infer -> append), deduplicating identical nodes.
// Used at compile time by the DSL and at run time by the graph API: the same code for both.
// Appending is O(1) expected (hashed deduplication), so graphs of millions of nodes build in
// seconds.
#pragma once

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "kiln/core/broadcast.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/hash.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::ir {

class builder {
 public:
  // A function parameter with element type t and declared extents (static sizes or dyn).
  constexpr std::int32_t input(dtype t, const shape& declared,
                               const std::array<std::int32_t, max_rank>& same_as = {}) {
    std::int32_t arg = static_cast<std::int32_t>(g_.inputs.size());
    if (!is_valid(t))
      fail(op::input, errc::invalid_argument,
           "parameter " + detail::to_text(arg + 1) + ": dtype value " +
               detail::to_text(static_cast<int>(t)) + " is not a kiln::dtype");
    // The sizes are checked where a shape enters: extents<> for the DSL, graph::input (naming the
    // input) at run time; canonicalize's rebuilds re-add inputs already checked.
    node n;
    n.kind = op::input;
    n.type = t;
    n.arg = arg;
    n.dims = declared;
    for (int i = 0; i < declared.rank; ++i) {
      if (declared.dims[i] >= 0) continue;
      if (same_as[i] != 0) {  // an earlier parameter's size: its symbol
        const std::int32_t from = (same_as[i] - 1) / max_rank, axis = (same_as[i] - 1) % max_rank;
        std::int32_t s = -1;
        for (std::size_t k = 0; k < g_.nodes.size() && s < 0 && from < arg; ++k)
          if (g_.nodes[k].kind == op::input && g_.nodes[k].arg == from &&
              axis < g_.nodes[k].dims.rank && is_symbol(g_.nodes[k].dims.dims[axis]))
            s = symbol_of(g_.nodes[k].dims.dims[axis]);
        if (s < 0)
          fail(op::input, errc::invalid_argument,
               "parameter " + detail::to_text(arg + 1) + " axis " + detail::to_text(i) +
                   " is the size of parameter " + detail::to_text(from + 1) + " axis " +
                   detail::to_text(axis) + ", which is not an earlier parameter's run-time size");
        n.dims.dims[i] = dim_of_symbol(s);
        continue;
      }
      n.dims.dims[i] = dim_of_symbol(static_cast<std::int32_t>(g_.symbols.size()));
      add_symbol({symbol_kind::input, arg, i, -1}, {});
    }
    g_.inputs.push_back({t, declared, same_as});
    return push(n);
  }

  // A tensor constant of element type t and static extents `dims`, its values row-major (each of
  // dtype t): an input whose data the graph carries (graph::tensors).
  constexpr std::int32_t tensor_constant(dtype t, const shape& dims,
                                         std::span<const scalar> values) {
    if (!dims.is_static() || dims.element_count() != static_cast<std::int64_t>(values.size()))
      fail(op::constant, errc::invalid_argument,
           "a tensor constant of extents " + to_string(dims) + " takes " +
               detail::to_text(dims.element_count()) + " values, got " +
               detail::to_text(static_cast<std::int64_t>(values.size())));
    std::int32_t id = input(t, dims);
    g_.tensors.push_back({g_.nodes[id].arg, std::vector<scalar>(values.begin(), values.end())});
    return id;
  }
  // Positions 0, 1, ..., size - 1 (i64) where size is a run-time size of the parameters: an input
  // the runtime supplies at the call (graph::positions), as no kernel counts. Its size is the
  // parameters' symbol itself, not one of its own, so that it broadcasts with what has that size.
  constexpr std::int32_t positions(std::int64_t size) {
    if (!is_symbol(size) || symbol_of(size) >= static_cast<std::int32_t>(g_.symbols.size()))
      fail(op::input, errc::invalid_argument,
           "positions take a run-time size of the graph, got " + detail::to_text(size));
    node n;
    n.kind = op::input;
    n.type = dtype::i64;
    n.arg = static_cast<std::int32_t>(g_.inputs.size());
    n.dims = shape{size};
    g_.inputs.push_back({dtype::i64, shape{dyn}, {}});
    g_.positions.push_back(n.arg);
    return push(n);
  }
  // Carries tensor constants over to a rebuilt graph (their inputs keep their numbers).
  constexpr void keep_tensors(const std::vector<tensor_data>& tensors) { g_.tensors = tensors; }

  // A rank-0 constant of dtype v.type.
  constexpr std::int32_t constant(const scalar& v) {
    if (!is_valid(v.type))
      fail(op::constant, errc::invalid_argument,
           "dtype value " + detail::to_text(static_cast<int>(v.type)) + " is not a kiln::dtype");
    node n;
    n.kind = op::constant;
    n.type = v.type;
    n.value = v;
    return append(n);
  }

  constexpr std::int32_t unary(op o, std::int32_t a) {
    expect_arity(o, 1);
    const node& x = at(a, o);
    if (info(o).cls == op_class::cast) fail(o, errc::invalid_argument, "use builder::cast");
    if (is_reduction(info(o).cls))
      fail(o, errc::invalid_argument, "takes axes: use builder::reduce or index_reduce");
    if (info(o).cls == op_class::view)
      fail(o, errc::invalid_argument, "takes an index map: use builder::" + std::string(name(o)));
    check_type(o, x.type);
    node n;
    n.kind = o;
    n.type = result_dtype(o, x.type);
    n.dims = x.dims;
    n.operands = {a, -1, -1};
    return append(n);
  }

  constexpr std::int32_t binary(op o, std::int32_t a, std::int32_t b) {
    expect_arity(o, 2);
    if (o == op::matmul) return matmul(a, b);
    if (is_convolution(o))
      fail(o, errc::invalid_argument, "takes windows: use ir::" + std::string(name(o)));
    const node& x = at(a, o);
    const node& y = at(b, o);
    if (x.type != y.type)
      fail(o, errc::dtype_mismatch,
           std::string("operand types differ: ") + std::string(name(x.type)) + " and " +
               std::string(name(y.type)) + " (insert a cast)");
    check_type(o, x.type);
    node n;
    n.kind = o;
    n.type = result_dtype(o, x.type);
    n.dims = broadcast(o, x.dims, y.dims);
    n.operands = {a, b, -1};
    if (info(o).commutative && b < a) n.operands = {b, a, -1};  // canonical order helps CSE
    return append(n);
  }

  // An op of class ternary: three operands of one type, broadcast together, result of that type.
  constexpr std::int32_t ternary(op o, std::int32_t a, std::int32_t b, std::int32_t c) {
    expect_arity(o, 3);
    if (info(o).cls != op_class::ternary) fail(o, errc::invalid_argument, "use builder::select");
    const node& x = at(a, o);
    const node& y = at(b, o);
    const node& z = at(c, o);
    if (x.type != y.type || x.type != z.type)
      fail(o, errc::dtype_mismatch,
           std::string("operand types differ: ") + std::string(name(x.type)) + ", " +
               std::string(name(y.type)) + " and " + std::string(name(z.type)) +
               " (insert a cast)");
    check_type(o, x.type);
    node n;
    n.kind = o;
    n.type = x.type;
    n.dims = broadcast(o, broadcast(o, x.dims, y.dims), z.dims);
    n.operands = {a, b, c};
    return append(n);
  }

  constexpr std::int32_t select(std::int32_t cond, std::int32_t a, std::int32_t b) {
    const node& c = at(cond, op::select);
    const node& x = at(a, op::select);
    const node& y = at(b, op::select);
    if (c.type != dtype::boolean)
      fail(op::select, errc::dtype_mismatch,
           "condition must be bool, got " + std::string(name(c.type)));
    if (x.type != y.type)
      fail(op::select, errc::dtype_mismatch,
           std::string("branch types differ: ") + std::string(name(x.type)) + " and " +
               std::string(name(y.type)));
    node n;
    n.kind = op::select;
    n.type = x.type;
    n.dims = broadcast(op::select, broadcast(op::select, c.dims, x.dims), y.dims);
    n.operands = {cond, a, b};
    return append(n);
  }

  constexpr std::int32_t cast(std::int32_t a, dtype to) {
    const node& x = at(a, op::cast);
    if (!is_valid(to))
      fail(op::cast, errc::invalid_argument,
           "target dtype value " + detail::to_text(static_cast<int>(to)) + " is not a kiln::dtype");
    if (x.type == to) return a;
    node n;
    n.kind = op::cast;
    n.type = to;
    n.dims = x.dims;
    n.operands = {a, -1, -1};
    return append(n);
  }

  // Reduction o of `a` over the axes set in `axes` (bit i: axis i). No axes reduces each element
  // alone: `a` itself for sum, mean, max, min and prod; |a|, |a| and a*a for l1, l2 and
  // sum_square (a rank-0 operand's "every axis").
  constexpr std::int32_t reduce(op o, std::int32_t a, std::uint32_t axes, bool keepdims) {
    expect_arity(o, 1);
    if (info(o).cls != op_class::reduction) fail(o, errc::invalid_argument, "is not a reduction");
    const node& x = at(a, o);
    check_type(o, x.type);
    if (x.dims.rank < 32 && (axes >> x.dims.rank) != 0)
      fail(o, errc::invalid_argument,
           "axis " + detail::to_text(std::countr_zero(axes >> x.dims.rank) + x.dims.rank) +
               " is out of range for an operand of rank " + detail::to_text(x.dims.rank));
    if (axes == 0 && o != op::reduce_l1 && o != op::reduce_l2 && o != op::reduce_sum_square)
      return a;
    node n;
    n.kind = o;
    n.type = x.type;
    n.attrs = {axes, keepdims};
    n.dims = reduced_dims(x.dims, n.attrs);
    n.operands = {a, -1, -1};
    return append(n);
  }

  // argmax / argmin of `a` along `axis` (0 <= axis < rank): the i64 index of the first (or with
  // select_last, the last) of the extreme elements, as ONNX's ArgMax/ArgMin.
  constexpr std::int32_t index_reduce(op o, std::int32_t a, int axis, bool keepdims,
                                      bool select_last) {
    expect_arity(o, 1);
    if (info(o).cls != op_class::index_reduction)
      fail(o, errc::invalid_argument, "is not argmax or argmin");
    const node& x = at(a, o);
    check_type(o, x.type);
    if (axis < 0 || axis >= x.dims.rank)
      fail(o, errc::invalid_argument,
           "axis " + detail::to_text(axis) + " is out of range for an operand of rank " +
               detail::to_text(x.dims.rank));
    if (x.dims.dims[axis] == 0)
      fail(o, errc::shape_mismatch,
           "axis " + detail::to_text(axis) + " has size 0: there is no index to give");
    node n;
    n.kind = o;
    n.type = dtype::i64;
    n.attrs = {1u << axis, keepdims, select_last};
    n.dims = reduced_dims(x.dims, n.attrs);
    n.operands = {a, -1, -1};
    return append(n);
  }

  // ONNX MatMul (numpy's matmul): a [..., M, K] times b [..., K, N] is [..., M, N], the batch
  // dims (...) broadcast; a 1-D a is a row [1, K] and a 1-D b a column [K, 1], that axis dropped
  // from the result again. The contraction node takes operands of equal rank (>= 2) and batch
  // dims, so the operands are broadcast to those first (views: nothing is copied).
  constexpr std::int32_t matmul(std::int32_t a, std::int32_t b) {
    const node& x = at(a, op::matmul);
    const node& y = at(b, op::matmul);
    if (x.type != y.type)
      fail(op::matmul, errc::dtype_mismatch,
           std::string("operand types differ: ") + std::string(name(x.type)) + " and " +
               std::string(name(y.type)) + " (insert a cast)");
    check_type(op::matmul, x.type);
    if (is_integer(x.type) && x.type != dtype::i32)
      fail(op::matmul, errc::dtype_mismatch,
           "integer products are of i32 (matmul_integer takes u8 and i8 with zero points), got " +
               std::string(name(x.type)));
    if (x.dims.rank == 0 || y.dims.rank == 0)
      fail(op::matmul, errc::shape_mismatch,
           "operands " + to_string(x.dims) + " and " + to_string(y.dims) +
               ": a scalar has no axis to contract (use mul)");
    // Copies: the expands and reshapes below append nodes (x and y may move).
    const shape xd = x.dims, yd = y.dims;
    const dtype type = x.type;
    const bool row = xd.rank == 1, column = yd.rank == 1;
    const std::int64_t k_a = xd.dims[xd.rank - 1], k_b = yd.dims[column ? 0 : yd.rank - 2];
    if (k_a != k_b && !is_symbol(k_a) && !is_symbol(k_b))
      fail(op::matmul, errc::shape_mismatch,
           "a " + to_string(xd) + " has " + dim_text(k_a) + " columns but b " + to_string(yd) +
               " has " + dim_text(k_b) + " rows (the contracted sizes must be equal)");
    // Contracted sizes known at the call: one size for both operands, checked then.
    const contracted_size k = contracted(op::matmul, k_a, k_b);
    a = with_size(a, xd.rank - 1, k.size);
    b = with_size(b, column ? 0 : yd.rank - 2, k.size);
    if (row && !column && is_symbol(yd.dims[yd.rank - 1]))
      fail(op::matmul, errc::unsupported,
           "a 1-D a times b " + to_string(yd) + " with a run-time number of columns");
    if (row) {  // [K] -> [1, K]
      shape one;
      one.rank = 2;
      one.dims[0] = one.dims[1] = 1;
      a = expand(a, one);
    }
    if (column) {  // [K] -> [K, 1]
      const std::int64_t sizes[] = {0, 1};
      b = reshape(b, sizes);
    }
    shape ad = g_.nodes[a].dims, bd = g_.nodes[b].dims;
    shape batch_a, batch_b;
    for (int i = 0; i + 2 < ad.rank; ++i) batch_a.dims[batch_a.rank++] = ad.dims[i];
    for (int i = 0; i + 2 < bd.rank; ++i) batch_b.dims[batch_b.rank++] = bd.dims[i];
    const shape batch = broadcast(op::matmul, batch_a, batch_b);
    auto with_batch = [&](std::int32_t v, const shape& d) {
      shape want = batch;
      want.dims[want.rank++] = d.dims[d.rank - 2];
      want.dims[want.rank++] = d.dims[d.rank - 1];
      return want == d ? v : expand(v, want);
    };
    a = with_batch(a, ad);
    b = with_batch(b, bd);
    node n;
    n.kind = op::matmul;
    n.type = type;
    n.dims = batch;
    n.dims.dims[n.dims.rank++] = ad.dims[ad.rank - 2];
    n.dims.dims[n.dims.rank++] = bd.dims[bd.rank - 1];
    n.operands = {a, b, -1};
    std::int32_t r = append(n);
    set_contraction(k.symbol, r);
    if (!row && !column) return r;
    // Drop the promoted axis (or both): copy every kept size, static or not, by position.
    std::int64_t sizes[max_rank] = {};
    int count = 0;
    for (int i = 0; i < batch.rank; ++i) sizes[count++] = 0;
    if (!row) sizes[count++] = 0;
    if (!column) sizes[count++] = n.dims.dims[n.dims.rank - 1];
    return reshape(r, std::span<const std::int64_t>(sizes, count));
  }

  // A convolution node (conv or conv_transpose) of x [N, C, spatial...] and w, its windows in m,
  // its result dims d: ir::conv and ir::conv_transpose (ir/convolutions.hpp) work them out from
  // ONNX's attributes and report mistakes; this checks what a node needs to be well formed.
  constexpr std::int32_t convolution(op o, std::int32_t x, std::int32_t w, const attributes& m,
                                     const shape& d) {
    const node& xn = at(x, o);
    const node& wn = at(w, o);
    if (!is_convolution(o)) fail(o, errc::invalid_argument, "is not a convolution");
    if (xn.type != wn.type)
      fail(o, errc::dtype_mismatch,
           std::string("operand types differ: ") + std::string(name(xn.type)) + " and " +
               std::string(name(wn.type)) + " (insert a cast)");
    check_type(o, xn.type);
    if (xn.dims.rank < 3 || wn.dims.rank != xn.dims.rank || d.rank != xn.dims.rank || m.groups < 1)
      fail(o, errc::shape_mismatch,
           "x " + to_string(xn.dims) + " and w " + to_string(wn.dims) + " give no convolution");
    node n;
    n.kind = o;
    n.type = xn.type;
    n.dims = d;
    n.attrs = m;
    n.operands = {x, w, -1};
    return append(n);
  }

  // ---- index maps ----------------------------------------------------------------------------
  // Each gives a view: its elements are the operand's, moved (ONNX's semantics). Identity maps
  // give the operand itself, and a view of a view of the same op is one view.

  // Result axis i is operand axis perm[i]; an empty perm reverses the axes (ONNX Transpose).
  constexpr std::int32_t transpose(std::int32_t a, std::span<const std::int64_t> perm) {
    const node& x = at(a, op::transpose);
    const int r = x.dims.rank;
    attributes m{};
    if (!perm.empty() && static_cast<int>(perm.size()) != r)
      fail(op::transpose, errc::invalid_argument,
           "perm has " + detail::to_text(static_cast<std::int64_t>(perm.size())) +
               " entries for an operand of rank " + detail::to_text(r));
    std::uint32_t seen = 0;
    for (int i = 0; i < r; ++i) {
      std::int64_t p = perm.empty() ? r - 1 - i : perm[i];
      if (p < 0 || p >= r)
        fail(op::transpose, errc::invalid_argument,
             "perm entry " + detail::to_text(i) + " is " + detail::to_text(p) +
                 ", out of range for an operand of rank " + detail::to_text(r));
      if ((seen >> p) & 1u)
        fail(op::transpose, errc::invalid_argument,
             "perm names axis " + detail::to_text(p) + " twice");
      seen |= 1u << p;
      m.perm[i] = static_cast<std::int8_t>(p);
    }
    shape d;
    d.rank = r;
    for (int i = 0; i < r; ++i) d.dims[i] = x.dims.dims[m.perm[i]];
    return view(op::transpose, a, m, d);
  }

  // The operand's elements in row-major order, as `sizes` (ONNX Reshape: 0 copies the operand's
  // size at that position unless allow_zero, one -1 is inferred). Sizes may be run-time sizes
  // (symbols: an operand's, or products and quotients of them, computed_size); the element
  // counts must then agree as products of the same run-time sizes. `as_dims`: sizes are the IR's
  // (negative ones are symbols), and the inferred size is the one at `inferred_at` (if any).
  constexpr std::int32_t reshape(std::int32_t a, std::span<const std::int64_t> sizes,
                                 bool allow_zero = false, bool as_dims = false,
                                 int inferred_at = -1) {
    const node& x = at(a, op::reshape);
    if (static_cast<int>(sizes.size()) > max_rank)
      fail(op::reshape, errc::invalid_argument,
           "has " + detail::to_text(static_cast<std::int64_t>(sizes.size())) +
               " sizes, above kiln::max_rank (" + detail::to_text(max_rank) + ")");
    shape d;
    d.rank = static_cast<int>(sizes.size());
    int inferred = -1;
    monomial want{1, {}};  // the result's elements, but for the inferred size
    for (int i = 0; i < d.rank; ++i) {
      std::int64_t s = sizes[i];
      const bool infer_here = as_dims ? i == inferred_at : s == -1;
      if (s == 0 && !allow_zero && !infer_here) {
        if (i >= x.dims.rank)
          fail(op::reshape, errc::invalid_argument,
               "size " + detail::to_text(i) + " is 0 (copy the operand's), but the operand has " +
                   "rank " + detail::to_text(x.dims.rank));
        d.dims[i] = x.dims.dims[i];
      } else if (infer_here) {
        if (inferred >= 0)
          fail(op::reshape, errc::invalid_argument, "has more than one size of -1");
        inferred = i;
        continue;
      } else if (is_symbol(s) &&
                 (!as_dims || symbol_of(s) >= static_cast<std::int32_t>(g_.symbols.size()))) {
        fail(op::reshape, errc::invalid_argument,
             "size " + detail::to_text(i) + " is " + detail::to_text(s));
      } else {
        d.dims[i] = s;
      }
      want = times(op::reshape, want, monomial_of(d.dims[i]));
    }
    monomial have{1, {}};
    for (int i = 0; i < x.dims.rank; ++i)
      have = times(op::reshape, have, monomial_of(x.dims.dims[i]));
    // The sizes as given (or, from the IR, with run-time sizes as '?').
    auto target = [&] {
      if (!as_dims) return detail::sizes_text(sizes);
      std::string t = "[";
      for (int i = 0; i < d.rank; ++i)
        t += (i ? ", " : "") + (i == inferred_at      ? std::string("-1")
                                : is_symbol(sizes[i]) ? std::string("?")
                                                      : detail::to_text(sizes[i]));
      return t + "]";
    };
    auto mismatch = [&](const char* why) {
      fail(op::reshape, errc::shape_mismatch,
           "operand " + to_string(x.dims) + " cannot be reshaped to " + target() + why);
    };
    if (inferred >= 0) {
      auto q = divided(have, want);
      if (!q) {
        const bool sizes_among = std::includes(have.atoms.begin(), have.atoms.end(),
                                               want.atoms.begin(), want.atoms.end());
        fail(op::reshape, errc::shape_mismatch,
             "cannot infer the -1 of " + target() + " from operand " + to_string(x.dims) +
                 (sizes_among ? "" : " (its run-time sizes are not those of the other sizes)"));
      }
      d.dims[inferred] = dim_of(*q);
      want = have;
    }
    if (have.atoms != want.atoms)
      mismatch(
          " (the run-time sizes of the two differ: kiln reshapes run-time sizes into products "
          "and quotients of the same sizes)");
    if (have.factor != want.factor) mismatch(" (different element counts)");
    return view(op::reshape, a, {}, d);
  }
  // ---- sizes computed from run-time sizes ------------------------------------------------------
  // A size as a product: a static factor times atoms (symbols kiln does not split: inputs' sizes,
  // broadcasts, quotients), sorted. Equal products are one symbol: dim_of builds a left-deep
  // chain of `product` symbols over the sorted atoms, then `scaled` by the factor.
  struct monomial {
    std::int64_t factor = 1;
    std::vector<std::int32_t> atoms;
  };
  constexpr monomial monomial_of(std::int64_t d) const {
    if (!is_symbol(d)) return {d, {}};
    const symbol& s = g_.symbols[static_cast<std::size_t>(symbol_of(d))];
    if (s.kind == symbol_kind::product)
      return times(op::reshape, monomial_of(dim_of_symbol(s.a)), monomial_of(dim_of_symbol(s.b)));
    if (s.kind == symbol_kind::scaled) {
      monomial m = monomial_of(dim_of_symbol(s.a));
      return times(op::reshape, m, {s.b, {}});
    }
    return {1, {symbol_of(d)}};
  }
  constexpr monomial times(op o, const monomial& x, const monomial& y) const {
    monomial r;
    if (x.factor != 0 && y.factor > std::numeric_limits<std::int64_t>::max() / x.factor)
      fail(o, errc::shape_mismatch,
           "sizes " + detail::to_text(x.factor) + " and " + detail::to_text(y.factor) +
               " multiply past 2^63");
    r.factor = x.factor * y.factor;
    r.atoms.resize(x.atoms.size() + y.atoms.size());
    std::merge(x.atoms.begin(), x.atoms.end(), y.atoms.begin(), y.atoms.end(), r.atoms.begin());
    if (r.factor == 0) r.atoms.clear();
    // A quotient a / k times a multiple of k is a again (the call checked that k divides a).
    for (std::size_t i = 0; i < r.atoms.size(); ++i) {
      const symbol& q = g_.symbols[static_cast<std::size_t>(r.atoms[i])];
      if (q.kind != symbol_kind::quotient || r.factor % q.b != 0) continue;
      monomial rest{r.factor / q.b, r.atoms};
      rest.atoms.erase(rest.atoms.begin() + static_cast<std::ptrdiff_t>(i));
      return times(o, rest, monomial_of(dim_of_symbol(q.a)));
    }
    return r;
  }
  // x / y where y's atoms are among x's and its factor divides x's; or where y is static and x's
  // atoms are those of a quotient symbol: empty where kiln cannot divide.
  constexpr std::optional<monomial> divided(const monomial& x, const monomial& y) {
    if (y.factor == 0) return std::nullopt;
    monomial r{x.factor, {}};
    std::size_t j = 0;
    for (std::int32_t atom : x.atoms) {
      if (j < y.atoms.size() && y.atoms[j] == atom)
        ++j;
      else
        r.atoms.push_back(atom);
    }
    if (j != y.atoms.size()) return std::nullopt;
    if (r.factor % y.factor == 0) {
      r.factor /= y.factor;
      return r;
    }
    // A static divisor that does not divide the factor: a quotient symbol, checked at the call.
    if (r.atoms.empty()) return std::nullopt;
    const std::int64_t common = std::gcd(r.factor, y.factor), by = y.factor / common;
    if (by > 0x7fffffff) return std::nullopt;
    // No node: the quotient may be made before the node that uses it, or used by none.
    const std::int32_t q = computed_size(symbol_kind::quotient, symbol_of(dim_of({1, r.atoms})),
                                         static_cast<std::int32_t>(by), -1);
    return monomial{r.factor / common, {q}};
  }
  // The size of product m: static, or a symbol.
  constexpr std::int64_t dim_of(const monomial& m) {
    if (m.atoms.empty() || m.factor == 0) return m.factor;
    std::int32_t s = m.atoms[0];
    for (std::size_t i = 1; i < m.atoms.size(); ++i)
      s = computed_size(symbol_kind::product, s, m.atoms[i], -1);
    if (m.factor == 1) return dim_of_symbol(s);
    if (m.factor > 0x7fffffff)
      fail(op::reshape, errc::unsupported,
           "a static factor of " + detail::to_text(m.factor) + " times a run-time size");
    return dim_of_symbol(
        computed_size(symbol_kind::scaled, s, static_cast<std::int32_t>(m.factor), -1));
  }
  // The symbol of kind k over (a, b), made once.
  constexpr std::int32_t computed_size(symbol_kind k, std::int32_t a, std::int32_t b,
                                       std::int32_t node) {
    for (std::size_t i = 0; i < g_.symbols.size(); ++i) {
      const symbol& s = g_.symbols[i];
      if (s.kind == k && s.a == a && s.b == b) return static_cast<std::int32_t>(i);
    }
    return add_symbol({k, a, b, node}, {});
  }
  // Sizes a and b (static or symbols) multiplied; a divided by b, which must divide it (a
  // run-time quotient is checked at the call): for shapes computed from run-time sizes.
  constexpr std::int64_t size_product(std::int64_t a, std::int64_t b) {
    return dim_of(times(op::reshape, monomial_of(a), monomial_of(b)));
  }
  constexpr std::int64_t size_quotient(std::int64_t a, std::int64_t b) {
    auto q = divided(monomial_of(a), monomial_of(b));
    if (!q)
      fail(op::reshape, errc::unsupported,
           "size " + size_text(a) + " divided by " + size_text(b) +
               ": kiln divides run-time sizes by static sizes and by the run-time sizes they are "
               "products of");
    return dim_of(*q);
  }
  constexpr std::string size_text(std::int64_t d) const {
    return is_symbol(d) ? "s" + detail::to_text(symbol_of(d)) : detail::to_text(d);
  }
  // A size as a sum: a constant plus atoms (symbols that are not sums or offsets: inputs' sizes,
  // products, ...) each counted, sorted. Equal sums are one symbol: dim_of_sum builds a left-deep
  // chain of `sum` symbols over the atoms (an atom counted k times `scaled` by k), then an
  // `offset` by the constant.
  struct linear {
    std::int64_t constant = 0;
    std::vector<std::pair<std::int32_t, std::int64_t>> terms;  // (atom, count), by atom
  };
  constexpr linear linear_of(std::int64_t d) const {
    if (!is_symbol(d)) return {d, {}};
    const symbol& s = g_.symbols[static_cast<std::size_t>(symbol_of(d))];
    if (s.kind == symbol_kind::sum)
      return combined(linear_of(dim_of_symbol(s.a)), linear_of(dim_of_symbol(s.b)), 1);
    if (s.kind == symbol_kind::offset) return combined(linear_of(dim_of_symbol(s.a)), {s.b, {}}, 1);
    if (s.kind == symbol_kind::scaled) {
      linear l = linear_of(dim_of_symbol(s.a));
      bool over = __builtin_mul_overflow(l.constant, std::int64_t{s.b}, &l.constant);
      for (auto& t : l.terms) over = over || __builtin_mul_overflow(t.second, s.b, &t.second);
      if (over)
        throw error(errc::shape_mismatch, "sizes",
                    "a size times " + detail::to_text(s.b) + " passes 2^63");
      return l;
    }
    return {0, {{symbol_of(d), 1}}};
  }
  // x + sign y; a count below zero stays (dim_of_sum refuses it).
  constexpr linear combined(const linear& x, const linear& y, int sign) const {
    linear r;
    if (__builtin_add_overflow(x.constant, sign * y.constant, &r.constant))
      throw error(errc::shape_mismatch, "sizes", "sizes add past 2^63");
    std::size_t i = 0, j = 0;
    while (i < x.terms.size() || j < y.terms.size()) {
      if (j == y.terms.size() || (i < x.terms.size() && x.terms[i].first < y.terms[j].first)) {
        r.terms.push_back(x.terms[i++]);
      } else if (i == x.terms.size() || y.terms[j].first < x.terms[i].first) {
        r.terms.push_back({y.terms[j].first, sign * y.terms[j].second});
        ++j;
      } else {
        const std::int64_t c = x.terms[i].second + sign * y.terms[j].second;
        if (c != 0) r.terms.push_back({x.terms[i].first, c});
        ++i, ++j;
      }
    }
    return r;
  }
  // The size of sum l: static, or a symbol; an error where it is below zero or subtracts a
  // run-time size that it does not hold.
  constexpr std::int64_t dim_of_sum(const linear& l, const char* what) {
    std::int32_t s = -1;
    for (auto [atom, count] : l.terms) {
      if (count < 0 || count > 0x7fffffff)
        throw error(
            errc::unsupported, "sizes",
            std::string(what) +
                ": kiln subtracts run-time sizes only from sums that hold them (a sum's size "
                "minus one of its pieces)");
      std::int32_t t = count == 1 ? atom
                                  : computed_size(symbol_kind::scaled, atom,
                                                  static_cast<std::int32_t>(count), -1);
      s = s < 0 ? t : computed_size(symbol_kind::sum, s, t, -1);
    }
    if (s < 0) {
      if (l.constant < 0)
        throw error(errc::shape_mismatch, "sizes",
                    std::string(what) + " is " + detail::to_text(l.constant) + ", below zero");
      return l.constant;
    }
    if (l.constant == 0) return dim_of_symbol(s);
    if (l.constant > 0x7fffffff || l.constant < -0x7fffffff)
      throw error(errc::unsupported, "sizes",
                  std::string(what) + ": a run-time size plus " + detail::to_text(l.constant));
    return dim_of_symbol(
        computed_size(symbol_kind::offset, s, static_cast<std::int32_t>(l.constant), -1));
  }
  // Sizes a and b (static or symbols) added; a minus b (b's run-time sizes among a's); a plus the
  // constant k (which may be negative: the call checks that the size is not).
  constexpr std::int64_t size_sum(std::int64_t a, std::int64_t b) {
    return dim_of_sum(combined(linear_of(a), linear_of(b), 1), "a sum of sizes");
  }
  constexpr std::int64_t size_difference(std::int64_t a, std::int64_t b) {
    return dim_of_sum(combined(linear_of(a), linear_of(b), -1),
                      ("size " + size_text(a) + " minus " + size_text(b)).c_str());
  }
  constexpr std::int64_t size_plus(std::int64_t a, std::int64_t k) {
    return dim_of_sum(combined(linear_of(a), {k, {}}, 1), "a size plus a constant");
  }
  // a / b rounded down (ONNX's Div of sizes): exact where kiln can divide (b's run-time sizes
  // among a's, or a static b dividing a's factor), else a floor_quotient of a static b.
  constexpr std::int64_t size_floor_quotient(std::int64_t a, std::int64_t b) {
    if (!is_symbol(a) && !is_symbol(b)) {
      if (b <= 0)
        throw error(errc::invalid_argument, "sizes", "a size divided by " + detail::to_text(b));
      return a / b;
    }
    const monomial x = monomial_of(a), y = monomial_of(b);
    if (y.factor > 0 && x.factor % y.factor == 0)
      if (auto q = divided(x, y)) return dim_of(*q);
    if (is_symbol(b))
      throw error(errc::unsupported, "sizes",
                  "size " + size_text(a) + " divided by " + size_text(b) +
                      ": kiln divides run-time sizes by static sizes and by the run-time sizes "
                      "they are products of");
    if (b <= 0 || b > 0x7fffffff)
      throw error(errc::invalid_argument, "sizes", "a size divided by " + detail::to_text(b));
    if (b == 1) return a;
    return dim_of_symbol(
        computed_size(symbol_kind::floor_quotient, symbol_of(a), static_cast<std::int32_t>(b), -1));
  }
  // Size a, checked not to pass the static size k (at the call where a is a run-time size); an
  // error naming `node`'s op where it passes it here.
  constexpr std::int64_t size_at_most(std::int64_t a, std::int64_t k, std::int32_t node) {
    if (!is_symbol(a)) {
      if (a > k)
        throw error(errc::shape_mismatch,
                    node >= 0 ? std::string(name(g_.nodes[node].kind)) : "sizes",
                    "reads to position " + detail::to_text(a) + " of " + detail::to_text(k));
      return a;
    }
    if (k > 0x7fffffff) return a;  // (no check needed: 32-bit positions)
    return dim_of_symbol(
        computed_size(symbol_kind::at_most, symbol_of(a), static_cast<std::int32_t>(k), node));
  }
  // min(a, k) or max(a, k) (kind minimum or maximum) of size a and a static size k.
  constexpr std::int64_t size_bound(symbol_kind kind, std::int64_t a, std::int64_t k) {
    if (k < 0 || k > 0x7fffffff)
      throw error(errc::invalid_argument, "sizes", "a bound of " + detail::to_text(k));
    if (!is_symbol(a)) return kind == symbol_kind::minimum ? std::min(a, k) : std::max(a, k);
    if (kind == symbol_kind::maximum && k == 0) return a;
    return dim_of_symbol(computed_size(kind, symbol_of(a), static_cast<std::int32_t>(k), -1));
  }

  // The operand broadcast with `sizes` (ONNX Expand: numpy broadcasting both ways).
  constexpr std::int32_t expand(std::int32_t a, const shape& sizes) {
    const node& x = at(a, op::expand);
    shape d = broadcast(op::expand, x.dims, sizes);
    return view(op::expand, a, {}, d);
  }

  // ONNX Slice: along each of `axes` (negative from the end; empty: 0, 1, ...) the elements from
  // starts to ends (exclusive) by steps (empty: 1), negative indices from the end, clamped.
  constexpr std::int32_t slice(std::int32_t a, std::span<const std::int64_t> starts,
                               std::span<const std::int64_t> ends,
                               std::span<const std::int64_t> axes = {},
                               std::span<const std::int64_t> steps = {}) {
    const node& x = at(a, op::slice);
    const int r = x.dims.rank;
    if (starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size()) ||
        (!steps.empty() && steps.size() != starts.size()))
      fail(op::slice, errc::invalid_argument,
           "starts, ends, axes and steps differ in length (" +
               detail::to_text(static_cast<std::int64_t>(starts.size())) + ", " +
               detail::to_text(static_cast<std::int64_t>(ends.size())) + ", " +
               detail::to_text(static_cast<std::int64_t>(axes.size())) + ", " +
               detail::to_text(static_cast<std::int64_t>(steps.size())) + ")");
    attributes m{};
    shape d = x.dims;
    for (int i = 0; i < r; ++i) m.steps[i] = 1;
    std::uint32_t seen = 0;
    for (std::size_t k = 0; k < starts.size(); ++k) {
      std::int64_t axis = axes.empty() ? static_cast<std::int64_t>(k) : axes[k];
      if (axis < -r || axis >= r)
        fail(op::slice, errc::invalid_argument,
             "axis " + detail::to_text(axis) + " is out of range for an operand of rank " +
                 detail::to_text(r));
      if (axis < 0) axis += r;
      if ((seen >> axis) & 1u)
        fail(op::slice, errc::invalid_argument,
             "axis " + detail::to_text(axis) + " is sliced twice");
      seen |= 1u << axis;
      std::int64_t step = steps.empty() ? 1 : steps[k];
      std::int64_t n = x.dims.dims[axis];
      if (step == 0)
        fail(op::slice, errc::invalid_argument,
             "step along axis " + detail::to_text(axis) + " is 0");
      if (is_symbol(n))
        fail(op::slice, errc::shape_mismatch,
             "axis " + detail::to_text(axis) + " of operand " + to_string(x.dims) +
                 " has a run-time size: a sliced axis needs a static size");
      if (n > 0x7fffffff || step > 0x7fffffff || step < -0x7fffffff)
        fail(op::slice, errc::unsupported,
             "axis " + detail::to_text(axis) + ": sizes and steps of 2^31 or more");
      auto clamp = [](std::int64_t v, std::int64_t lo, std::int64_t hi) {
        return v < lo ? lo : v > hi ? hi : v;
      };
      std::int64_t b = starts[k], e = ends[k];
      if (b < 0) b = b < -n ? -1 : b + n;  // below -n: before the first element
      if (e < 0) e = e < -n ? -1 : e + n;
      b = step > 0 ? clamp(b, 0, n) : clamp(b, 0, n - 1);
      e = step > 0 ? clamp(e, 0, n) : clamp(e, -1, n - 1);
      std::int64_t count = step > 0 ? (e - b + step - 1) / step : (b - e - step - 1) / -step;
      if (count <= 0) count = 0, b = 0;
      d.dims[axis] = count;
      m.starts[axis] = static_cast<std::int32_t>(b);
      m.steps[axis] = static_cast<std::int32_t>(step);
    }
    return view(op::slice, a, m, d);
  }

  // ONNX Gather: data's axis `axis` (negative from the end) replaced by the indices' dims; the
  // element at index j along them is data's at position indices[j] (negative from the end).
  // Positions outside [-n, n) are an error in ONNX; kiln clamps them to the axis (no read outside
  // the data, and no check that would need the indices on the host).
  constexpr std::int32_t gather(std::int32_t data, std::int32_t indices, std::int64_t axis) {
    const node& x = at(data, op::gather);
    const node& i = at(indices, op::gather);
    attributes m{};
    m.axis = gather_axis(op::gather, x, i, axis);
    if (x.dims.rank - 1 + i.dims.rank > max_rank)
      fail(op::gather, errc::invalid_argument,
           "data " + to_string(x.dims) + " and indices " + to_string(i.dims) +
               " give a result above kiln::max_rank (" + detail::to_text(max_rank) + ")");
    shape d;
    for (int k = 0; k < m.axis; ++k) d.dims[d.rank++] = x.dims.dims[k];
    for (int k = 0; k < i.dims.rank; ++k) d.dims[d.rank++] = i.dims.dims[k];
    for (int k = m.axis + 1; k < x.dims.rank; ++k) d.dims[d.rank++] = x.dims.dims[k];
    return append_gather(op::gather, data, indices, m, d);
  }

  // ONNX GatherElements: the result has the indices' dims; its element at index j is data's at
  // j with position indices[j] along `axis`. The indices' other sizes must be at most data's
  // (equal where either is a run-time size); positions are clamped as gather's.
  constexpr std::int32_t gather_elements(std::int32_t data, std::int32_t indices,
                                         std::int64_t axis) {
    const node& x = at(data, op::gather_elements);
    const node& i = at(indices, op::gather_elements);
    attributes m{};
    m.axis = gather_axis(op::gather_elements, x, i, axis);
    bool fits = i.dims.rank == x.dims.rank;
    for (int k = 0; fits && k < x.dims.rank; ++k) {
      std::int64_t have = x.dims.dims[k], want = i.dims.dims[k];
      fits = k == m.axis || have == want || (!is_symbol(have) && !is_symbol(want) && want <= have);
    }
    if (!fits)
      fail(op::gather_elements, errc::shape_mismatch,
           "indices " + to_string(i.dims) + " do not fit data " + to_string(x.dims) +
               " (the same rank, and no larger except along axis " + detail::to_text(m.axis) + ")");
    return append_gather(op::gather_elements, data, indices, m, i.dims);
  }

  // `size` positions along `axis`, position j reading a's position fold(j - begin): edge, reflect
  // and wrap padding and concat's pieces, with no position tensor. a's size along the axis and
  // the result's `size` may be run-time sizes; begin_symbol (a symbol, or -1) adds its run-time
  // size to `begin` (a piece of a concat after pieces of run-time sizes). A window subtracts it
  // instead and reads inside a only (attributes::window): a slice at run-time positions.
  constexpr std::int32_t shift(std::int32_t a, std::int64_t axis, std::int64_t size,
                               std::int64_t begin, position_fold fold,
                               std::int32_t begin_symbol = -1, bool window = false) {
    const node& x = at(a, op::shift);
    const int r = x.dims.rank;
    if (axis < -r || axis >= r)
      fail(op::shift, errc::invalid_argument,
           "axis " + detail::to_text(axis) + " is out of range for an operand of rank " +
               detail::to_text(r));
    const int ax = static_cast<int>(axis < 0 ? axis + r : axis);
    if ((size < 0 && symbol_of(size) >= static_cast<std::int32_t>(g_.symbols.size())) ||
        begin_symbol < -1 || begin_symbol >= static_cast<std::int32_t>(g_.symbols.size()) ||
        begin < -0x7fffffff || begin > 0x7fffffff)
      fail(op::shift, errc::invalid_argument,
           "size " + detail::to_text(size) + " or begin " + detail::to_text(begin) +
               " is out of range");
    if (x.dims.dims[ax] == 0 && size > 0)
      fail(op::shift, errc::shape_mismatch,
           "operand " + to_string(x.dims) + " has no positions along axis " + detail::to_text(ax) +
               " to read");
    attributes m{};
    m.axis = static_cast<std::int8_t>(ax);
    m.fold = static_cast<std::uint8_t>(fold);
    m.starts[ax] = static_cast<std::int32_t>(begin);
    m.begin_symbol = begin_symbol;
    m.window = window;
    shape d = x.dims;
    d.dims[ax] = size;
    return view(op::shift, a, m, d);
  }

  // shift() with its begin the size `begin` (static, or a run-time size) plus the static `offset`.
  constexpr std::int32_t shift_by(std::int32_t a, std::int64_t axis, std::int64_t size,
                                  std::int64_t begin, std::int64_t offset, position_fold fold) {
    return is_symbol(begin) ? shift(a, axis, size, offset, fold, symbol_of(begin))
                            : shift(a, axis, size, begin + offset, fold);
  }

  // A view node o of `a` with index map m and result dims d, as validated by the methods above
  // (canonicalize rebuilds views through it).
  constexpr std::int32_t view(op o, std::int32_t a, attributes m, const shape& d) {
    const node& x = at(a, o);
    if (info(o).cls != op_class::view) fail(o, errc::invalid_argument, "is not a view");
    if (is_gather(o))
      fail(o, errc::invalid_argument, "takes indices: use builder::" + std::string(name(o)));
    bool identity = d == x.dims;
    for (int i = 0; i < d.rank; ++i) {
      if (o == op::transpose) identity = identity && m.perm[i] == i;
      if (o == op::slice) identity = identity && m.starts[i] == 0 && m.steps[i] == 1;
      if (o == op::shift) identity = identity && m.starts[i] == 0 && m.begin_symbol < 0;
    }
    if (identity) return a;
    if (x.kind == o && o != op::shift) {  // a view of a view: one view of the first's operand
      const attributes& inner = x.attrs;
      if (o == op::transpose) {
        attributes c{};
        for (int i = 0; i < d.rank; ++i) c.perm[i] = inner.perm[m.perm[i]];
        return view(o, x.operands[0], c, d);
      }
      if (o == op::slice) {
        attributes c{};
        for (int i = 0; i < d.rank; ++i) {
          std::int64_t start = inner.starts[i] + std::int64_t{m.starts[i]} * inner.steps[i];
          std::int64_t step = std::int64_t{inner.steps[i]} * m.steps[i];
          if (step > 0x7fffffff || step < -0x7fffffff) return append_view(o, a, m, d);
          c.starts[i] = static_cast<std::int32_t>(d.dims[i] == 0 ? 0 : start);
          c.steps[i] = static_cast<std::int32_t>(step);
        }
        return view(o, x.operands[0], c, d);
      }
      return view(o, x.operands[0], {}, d);  // reshape, expand
    }
    if (o != op::shift || !m.window) return append_view(o, a, m, d);
    // A window reads positions -begin to size - begin - 1: the last inside x, checked at the call
    // where it is a run-time size (the check is made again wherever the view is rebuilt).
    const int ax = m.axis;
    const std::int64_t have = x.dims.dims[ax];
    std::int64_t end = size_plus(d.dims[ax], -std::int64_t{m.starts[ax]});
    if (m.begin_symbol >= 0) end = size_sum(end, dim_of_symbol(m.begin_symbol));
    const std::int32_t id = append_view(o, a, m, d);
    if (is_symbol(have))
      size_difference(have, end);
    else
      size_at_most(end, have, id);
    return id;
  }

  // Marks node id as the next function result.
  constexpr void output(std::int32_t id) {
    at(id, op::input);
    g_.outputs.push_back(id);
  }

  // Records node `id` under `name` when tracing is on (graph::trace_point); returns id.
  constexpr std::int32_t trace(std::string_view name, std::int32_t id) {
    auto refuse = [](const std::string& why) { throw error(errc::invalid_argument, "trace", why); };
    if (id < 0 || id >= static_cast<std::int32_t>(g_.nodes.size()))
      refuse("value %" + detail::to_text(id) + " is not in the graph");
    if (name.empty()) refuse("the name is empty");
    if (name.size() > trace_point::max_name)
      refuse("the name '" + std::string(name) + "' has " +
             detail::to_text(static_cast<std::int64_t>(name.size())) + " characters; at most " +
             detail::to_text(static_cast<std::int64_t>(trace_point::max_name)));
    for (const trace_point& t : g_.traces)
      if (t.text() == name) refuse("the name '" + std::string(name) + "' is traced twice");
    trace_point t;
    t.node = id;
    for (std::size_t i = 0; i < name.size(); ++i) t.name[i] = name[i];
    g_.traces.push_back(t);
    return id;
  }

  constexpr const graph& get() const { return g_; }
  constexpr graph take() { return std::move(g_); }

  // ---- contracted sizes known at the call ------------------------------------------------------
  // The size two operands contract over (a matmul's K, a convolution's channels) where one or both
  // are run-time sizes: a static one, or an `equal` symbol of the two, with a symbol that checks
  // at the call that they agree (`equal`, or `exactly` a static size). symbol: that symbol, whose
  // node the caller sets to the contraction (-1: the sizes were already one).
  struct contracted_size {
    std::int64_t size = 0;
    std::int32_t symbol = -1;
  };
  constexpr contracted_size contracted(op o, std::int64_t a, std::int64_t b) {
    if (a == b) return {a, -1};
    if (is_symbol(a) && is_symbol(b)) {
      const std::int32_t sa = std::min(symbol_of(a), symbol_of(b));
      const std::int32_t sb = std::max(symbol_of(a), symbol_of(b));
      for (std::size_t i = 0; i < g_.symbols.size(); ++i) {
        const symbol& s = g_.symbols[i];
        if (s.kind == symbol_kind::equal && s.a == sa && s.b == sb)
          return {dim_of_symbol(static_cast<std::int32_t>(i)), static_cast<std::int32_t>(i)};
      }
      const std::int32_t e = add_symbol({symbol_kind::equal, sa, sb, -1}, joined_leaves(sa, sb));
      return {dim_of_symbol(e), e};
    }
    const std::int32_t s = symbol_of(is_symbol(a) ? a : b);
    const std::int64_t size = is_symbol(a) ? b : a;
    if (size > 0x7fffffff)
      fail(o, errc::unsupported,
           "a contracted size of " + detail::to_text(size) + " against a run-time size");
    for (std::size_t i = 0; i < g_.symbols.size(); ++i) {
      const symbol& k = g_.symbols[i];
      if (k.kind == symbol_kind::exactly && k.a == s && k.b == size)
        return {size, static_cast<std::int32_t>(i)};
    }
    return {size, add_symbol({symbol_kind::exactly, s, static_cast<std::int32_t>(size), -1}, {})};
  }
  // The contraction that the check of contracted_size::symbol is for (its errors name it).
  constexpr void set_contraction(std::int32_t symbol, std::int32_t node) {
    if (symbol >= 0) g_.symbols[static_cast<std::size_t>(symbol)].node = node;
  }
  // x with axis `axis` given size d, which it has at the call (contracted() checks it): a view
  // that reads x unchanged.
  constexpr std::int32_t with_size(std::int32_t x, int axis, std::int64_t d) {
    shape s = g_.nodes[x].dims;
    if (s.dims[axis] == d) return x;
    s.dims[axis] = d;
    return view(op::expand, x, {}, s);
  }

 private:
  // Reached during constant evaluation, the throw is the compile error. (The condition only keeps
  // C++20's "a constexpr function must be able to yield a constant" rule satisfied.)
  static constexpr void fail(op o, errc code, const std::string& message) {
    if (!message.empty()) throw error(code, std::string(name(o)), message);
  }

  constexpr const node& at(std::int32_t id, op o) const {
    if (id < 0 || id >= static_cast<std::int32_t>(g_.nodes.size()))
      fail(o, errc::invalid_argument, "operand %" + detail::to_text(id) + " is not in the graph");
    return g_.nodes[id];
  }

  constexpr std::int32_t append_view(op o, std::int32_t a, const attributes& m, const shape& d) {
    node n;
    n.kind = o;
    n.type = g_.nodes[a].type;
    n.dims = d;
    n.attrs = m;
    n.operands = {a, -1, -1};
    return append(n);
  }

  // gather's and gather_elements' checks: integer indices, an axis of data, positions to read.
  constexpr std::int8_t gather_axis(op o, const node& x, const node& i, std::int64_t axis) const {
    if (i.type != dtype::i32 && i.type != dtype::i64)
      fail(o, errc::dtype_mismatch,
           "indices: expected i32 or i64, got " + std::string(name(i.type)));
    const int r = x.dims.rank;
    if (axis < -r || axis >= r)
      fail(o, errc::invalid_argument,
           "axis " + detail::to_text(axis) + " is out of range for data of rank " +
               detail::to_text(r));
    int a = static_cast<int>(axis < 0 ? axis + r : axis);
    if (x.dims.dims[a] == 0 && i.dims.element_count() != 0)
      fail(o, errc::shape_mismatch,
           "data " + to_string(x.dims) + " has no positions along axis " + detail::to_text(a) +
               " for indices " + to_string(i.dims) + " to select");
    return static_cast<std::int8_t>(a);
  }

  constexpr std::int32_t append_gather(op o, std::int32_t data, std::int32_t indices,
                                       const attributes& m, const shape& d) {
    node n;
    n.kind = o;
    n.type = g_.nodes[data].type;
    n.dims = d;
    n.attrs = m;
    n.operands = {data, indices, -1};
    return append(n);
  }

  static constexpr std::string dim_text(std::int64_t d) {
    return is_symbol(d) ? "a run-time number of" : detail::to_text(d);
  }

  static constexpr void expect_arity(op o, int n) {
    if (!is_valid(o))
      throw error(errc::invalid_argument, "apply",
                  "op value " + detail::to_text(static_cast<int>(o)) + " is not a kiln::ir::op");
    if (info(o).arity != n)
      fail(o, errc::invalid_argument,
           "takes " + detail::to_text(info(o).arity) + " operands, not " + detail::to_text(n));
  }

  static constexpr void check_type(op o, dtype t) {
    if (!accepts(info(o).types, t))
      fail(o, errc::dtype_mismatch, "does not accept element type " + std::string(name(t)));
  }

  // ---- hashed deduplication ------------------------------------------------------------------
  static constexpr std::uint64_t hash_of(const node& n) {
    std::uint64_t head[] = {static_cast<std::uint64_t>(n.kind),
                            static_cast<std::uint64_t>(n.type),
                            static_cast<std::uint64_t>(n.arg),
                            static_cast<std::uint64_t>(n.dims.rank),
                            std::bit_cast<std::uint64_t>(n.value.f),
                            static_cast<std::uint64_t>(n.value.i),
                            n.attrs.axes | (std::uint64_t{n.attrs.keepdims} << 32) |
                                (std::uint64_t{n.attrs.select_last} << 33) |
                                (std::uint64_t(std::uint8_t(n.attrs.axis)) << 34) |
                                (std::uint64_t{n.attrs.fold} << 42)};
    std::uint64_t h = detail::fnv1a(head);
    if (info(n.kind).cls == op_class::view || is_convolution(n.kind)) {
      h = detail::fnv1a(n.attrs.perm, h);
      h = detail::fnv1a(n.attrs.starts, h);
      h = detail::fnv1a(n.attrs.steps, h);
      h = detail::fnv1a(n.attrs.dilations, h);
      h = detail::fnv1a(std::array{n.attrs.groups}, h);
    }
    h = detail::fnv1a(n.operands, h);
    return detail::fnv1a(n.dims.dims, h);
  }

  // Open addressing over node ids (-1: empty), kept at most half full.
  constexpr std::size_t slot_of(const node& n, std::uint64_t h) const {
    std::size_t mask = table_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      std::int32_t id = table_[i];
      if (id < 0 || same_node(g_.nodes[id], n)) return i;
    }
  }
  constexpr void grow() {
    std::vector<std::int32_t> old(table_.size() < 16 ? 32 : table_.size() * 2, -1);
    table_.swap(old);
    for (std::int32_t id = 0; id < static_cast<std::int32_t>(g_.nodes.size()); ++id)
      table_[slot_of(g_.nodes[id], hash_of(g_.nodes[id]))] = id;
  }

  // Appends n, or returns the identical node already there.
  constexpr std::int32_t append(const node& n) {
    if (2 * (g_.nodes.size() + 1) > table_.size()) grow();
    std::size_t slot = slot_of(n, hash_of(n));
    if (table_[slot] >= 0) return table_[slot];
    table_[slot] = static_cast<std::int32_t>(g_.nodes.size());
    g_.nodes.push_back(n);
    return table_[slot];
  }
  // Appends n unconditionally (inputs: each parameter is its own node).
  constexpr std::int32_t push(const node& n) {
    if (2 * (g_.nodes.size() + 1) > table_.size()) grow();
    auto id = static_cast<std::int32_t>(g_.nodes.size());
    g_.nodes.push_back(n);
    table_[slot_of(n, hash_of(n))] = id;
    return id;
  }

  // ---- symbols ---------------------------------------------------------------------------------
  // Each symbol's sorted set of the input sizes it joins, kept beside the graph (flat: symbol i's
  // set is leaf_data_[leaf_begin_[i], leaf_begin_[i + 1])), so a broadcast is one merge and one
  // binary search, not a walk of the symbol tree.
  constexpr std::int32_t add_symbol(const symbol& s, const std::vector<std::int32_t>& leaves) {
    auto id = static_cast<std::int32_t>(g_.symbols.size());
    g_.symbols.push_back(s);
    if (leaf_begin_.empty()) leaf_begin_.push_back(0);
    if (s.kind == symbol_kind::input || is_computed_size(s.kind))  // atoms for broadcasts
      leaf_data_.push_back(id);
    else
      leaf_data_.insert(leaf_data_.end(), leaves.begin(), leaves.end());
    leaf_begin_.push_back(static_cast<std::int32_t>(leaf_data_.size()));
    by_leaves_.push_back(id);
    for (std::size_t k = by_leaves_.size() - 1; k > 0; --k) {  // keep by_leaves_ sorted
      if (compare_leaves(by_leaves_[k], by_leaves_[k - 1]) >= 0) break;
      std::swap(by_leaves_[k], by_leaves_[k - 1]);
    }
    return id;
  }
  constexpr std::span<const std::int32_t> leaves_of(std::int32_t sym) const {
    return {leaf_data_.data() + leaf_begin_[sym],
            static_cast<std::size_t>(leaf_begin_[sym + 1] - leaf_begin_[sym])};
  }
  static constexpr int compare(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
      if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
  }
  constexpr int compare_leaves(std::int32_t x, std::int32_t y) const {
    return compare(leaves_of(x), leaves_of(y));
  }
  // The union of two symbols' leaf sets, sorted.
  constexpr std::vector<std::int32_t> joined_leaves(std::int32_t sa, std::int32_t sb) const {
    auto a = leaves_of(sa), b = leaves_of(sb);
    std::vector<std::int32_t> joined;
    std::size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
      std::int32_t next = j == b.size() || (i < a.size() && a[i] <= b[j]) ? a[i] : b[j];
      if (i < a.size() && a[i] == next) ++i;
      if (j < b.size() && b[j] == next) ++j;
      joined.push_back(next);
    }
    return joined;
  }
  // The symbol that joins exactly `set`, or -1.
  constexpr std::int32_t symbol_with_leaves(const std::vector<std::int32_t>& set) const {
    std::span<const std::int32_t> want(set.data(), set.size());
    std::size_t lo = 0, hi = by_leaves_.size();
    while (lo < hi) {
      std::size_t mid = (lo + hi) / 2;
      if (compare(leaves_of(by_leaves_[mid]), want) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < by_leaves_.size() && compare(leaves_of(by_leaves_[lo]), want) == 0 ? by_leaves_[lo]
                                                                                   : -1;
  }

  constexpr std::int64_t broadcast_dim(op o, std::int64_t a, std::int64_t b) {
    if (a == b) return a;
    if (a == 1) return b;
    if (b == 1) return a;
    auto next = static_cast<std::int32_t>(g_.nodes.size());
    if (is_symbol(a) && is_symbol(b)) {
      // A broadcast symbol stands for the set of input sizes it joins: broadcasting x = bcast(a, b)
      // with b again is x, and bcast(bcast(a, b), c) is bcast(a, bcast(b, c)).
      std::int32_t sa = std::min(symbol_of(a), symbol_of(b));
      std::int32_t sb = std::max(symbol_of(a), symbol_of(b));
      auto joined = joined_leaves(sa, sb);
      std::int32_t same = symbol_with_leaves(joined);
      return dim_of_symbol(same >= 0 ? same
                                     : add_symbol({symbol_kind::broadcast, sa, sb, next}, joined));
    }
    if (is_symbol(a) || is_symbol(b)) {
      constraint c{symbol_of(is_symbol(a) ? a : b), is_symbol(a) ? b : a, next};
      bool known = false;
      for (const auto& k : g_.constraints) known = known || (k.sym == c.sym && k.size == c.size);
      if (!known) g_.constraints.push_back(c);
      return c.size;
    }
    fail(o, errc::shape_mismatch,
         "sizes " + detail::to_text(a) + " and " + detail::to_text(b) + " do not broadcast");
    return 0;
  }

  constexpr shape broadcast(op o, const shape& a, const shape& b) {
    auto static_only = [](shape s) {
      for (int i = 0; i < s.rank; ++i) s.dims[i] = s.dims[i] < 0 ? dyn : s.dims[i];
      return s;
    };
    if (!broadcastable(static_only(a), static_only(b)))
      fail(o, errc::shape_mismatch,
           "shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast");
    shape r;
    r.rank = std::max(a.rank, b.rank);
    for (int i = 0; i < r.rank; ++i) {
      int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
      r.dims[i] = broadcast_dim(o, ia >= 0 ? a.dims[ia] : 1, ib >= 0 ? b.dims[ib] : 1);
    }
    return r;
  }

  graph g_;
  std::vector<std::int32_t> table_;       // node ids by hash (open addressing)
  std::vector<std::int32_t> leaf_data_;   // the symbols' leaf sets, one after another
  std::vector<std::int32_t> leaf_begin_;  // where symbol i's set starts (and i + 1's ends)
  std::vector<std::int32_t> by_leaves_;   // symbol ids sorted by their leaf sets
};

}  // namespace kiln::ir
