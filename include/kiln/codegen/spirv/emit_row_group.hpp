// Reductions and row groups: a workgroup per four results (or rows), its invocations' partials
// joined through subgroups and shared memory; a row group's members run over those rows in turn.
//
// A workgroup computes four results at a time (lane l: result 4g + l). Invocation i folds the
// operand elements r = i, i + W, i + 2W ... of each (element e = result * count + r of the
// operand's space with the kept axes first), then the W partials are joined in shared memory as
// a tree, and invocation 0 stores. Where the last reduced axis is whole groups of four
// (whole_quads), invocation i folds each result's groups of four i, i + W ... instead, its
// lanes along the row, and joins the lanes before the tree. The order is fixed, so the bits are
// the same from run to run on a device; and no invocation loops more than count / W times
// (llvmpipe stops an invocation's loops after 65535 iterations in all).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "kiln/codegen/spirv/region_emitter.hpp"

namespace kiln::spirv::detail {

// One step of a row group's kernel: rows 4g .. 4g + 3 through every member in turn. A
// reduction folds them as a reduction's kernel does; a member over the rows' elements takes
// their groups of four (the reduced axes are the trailing ones, so a row's elements are
// consecutive) among the workgroup's invocations; a member over one value per row runs in
// invocation 0. The barrier between members makes the values one stored visible to the next.
inline void region_emitter::group_step(id g) {
  mb_ = &members_[0];
  id count = metadata(mb_->words - 1);  // elements per row
  id rows = mb_->total;
  const compiler::region& root = *members_[0].r;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    mb_ = &members_[i];
    forget_coordinates();
    if (i > 0) group_barrier();
    g_index_ = g;
    if (mb_->r->root >= 0) {
      reduction_loop();
    } else if (over_rows(p_, root, *mb_->r)) {
      id four = m_.emit(Op::OpIMul, u32(), {g, cu(4)});
      id row_end = m_.ext(u32(), GLSLstd450UMin, {m_.emit(Op::OpIAdd, u32(), {four, cu(4)}), rows});
      if (whole_quads_) {
        over_whole_rows(four, row_end, count);
      } else {  // the rows' groups of four as one run (a group may hold the next row's start)
        id end = m_.emit(
            Op::OpShiftRightLogical, u32(),
            {m_.emit(Op::OpIAdd, u32(), {m_.emit(Op::OpIMul, u32(), {row_end, count}), cu(3)}),
             cu(2)});
        id first = m_.emit(Op::OpIAdd, u32(), {m_.emit(Op::OpIMul, u32(), {g, count}), local_});
        counted_loop(first, end, wg_size_, {}, {}, [&](id q, const carried&) -> carried {
          g_index_ = q;
          forget_coordinates();
          store_all(evaluate());
          return {};
        });
      }
    } else {
      in_first_invocation([&] { store_all(evaluate()); });
    }
  }
  group_barrier();  // the next rows' reductions reuse the shared partials
}

// A row group's member over the elements of rows [first, end) (`count` each, whole groups of
// four, at most four rows), the rows side by side: each row's coordinates once (so no group of
// four divides its index by the extents to find them, an integer division that GPUs emulate; a
// per-row operand is read at the row's own index), then one loop over the groups of four among
// the workgroup's invocations, each turn computing group q of every row before storing them, so
// that a GPU has the rows' loads in flight together (a row at a time waited on each load in
// turn). A row past `end` (the last rows' group) repeats the last row and stores nothing.
inline void region_emitter::over_whole_rows(id first, id end, id count) {
  const std::uint32_t axes = g_.nodes[members_[0].r->root].attrs.axes;
  id quads = m_.emit(Op::OpShiftRightLogical, u32(), {count, cu(2)});
  id last = m_.emit(Op::OpISub, u32(), {end, cu(1)});
  std::array<row_state, 4> rows;
  std::array<id, 4> inside{};
  for (std::uint32_t j = 0; j < 4; ++j) {
    id wanted = m_.emit(Op::OpIAdd, u32(), {first, cu(j)});
    id row = m_.ext(u32(), GLSLstd450UMin, {wanted, last});
    inside[j] = m_.emit(Op::OpULessThan, m_.type_bool(), {wanted, end});
    rows[j] = enter_row_state(row, axes, m_.emit(Op::OpIMul, u32(), {row, quads}));
  }
  counted_loop(local_, quads, wg_size_, {}, {}, [&](id q, const carried&) -> carried {
    std::array<std::vector<id>, 4> values;
    auto at_row = [&](std::uint32_t j) {
      use_row(rows[j]);
      g_index_ = m_.emit(Op::OpIAdd, u32(), {rows[j].first, q});
      along_r_ = m_.emit(Op::OpIMul, u32(), {q, cu(4)});
      along_ = true;
      forget_coordinates();
    };
    for (std::uint32_t j = 0; j < 4; ++j) {
      at_row(j);
      values[j] = evaluate();
    }
    for (std::uint32_t j = 0; j < 4; ++j) {
      at_row(j);
      if (j == 0)
        store_all(values[j]);  // row `first` is always in the group
      else
        only_where(inside[j], [&] { store_all(values[j]); });
    }
    along_ = false;
    forget_coordinates();
    return {};
  });
  row_values_.clear();
}

// The row state of `row` (enter_row), kept so that several rows can be worked on side by side;
// `first` is where the caller's walk along the row starts.
inline region_emitter::row_state region_emitter::enter_row_state(id row, std::uint32_t axes,
                                                                 id first) {
  enter_row(row, axes);
  return {first, row_coords_, std::move(row_values_)};
}

// Makes `r` the row that evaluate() reads (row_coords_, row_values_).
inline void region_emitter::use_row(const row_state& r) {
  row_coords_ = r.coords;
  row_values_ = r.values;
}

// Enters row `row` of the current member's space, reduced along `axes` (its root's): the
// row's coordinates once (row_coords_), and its repeated arguments' values (read_row_values),
// which row_values_ keeps until the caller clears it after the row.
inline void region_emitter::enter_row(id row, std::uint32_t axes) {
  const int reduced = std::popcount(axes & ((1u << mb_->rank) - 1));
  const int kept = mb_->rank - reduced;
  row_coords_.assign(kept, 0);
  split_index(row, 0, kept, row_coords_);
  read_row_values(reduced);
}

// Reads, once for the row in row_coords_, the current member's arguments that are constant
// along it, for evaluate() to reuse in each of the row's groups of four: those repeated along
// the row's one reduced axis (stride 0: softmax's max and sum). Such a value was otherwise
// read again for every group of four, from a Coherent transient that caches may not keep.
inline void region_emitter::read_row_values(int reduced_axes) {
  row_values_.clear();
  if (reduced_axes != 1) return;  // a repeated argument may still vary along another axis
  auto inputs = compiler::input_slots(p_, *mb_->r);
  along_ = true;
  along_r_ = cu(0);
  forget_coordinates();
  std::map<std::pair<std::size_t, dtype>, id> values;
  for (auto nid : mb_->r->nodes) {
    int slot = compiler::load_slot(p_, *mb_->r, nid);
    if (slot < 0 || nid == mb_->r->root) continue;
    const std::size_t k = argument_of(inputs, slot);
    if (mb_->kinds[k] == operand_kind::repeated)
      values.emplace(std::pair{k, g_.nodes[nid].type}, load_argument(k, g_.nodes[nid].type));
  }
  along_ = false;
  forget_coordinates();
  row_values_ = std::move(values);
}

// Joins the workgroup's partials (slot i = join(slot i, slot i + s) for s = W/2, W/4 ... 1)
// and, in invocation 0 only, calls finish with the total. With `subgroup` (the join as the
// device's subgroup operation), each subgroup first joins its own partials, its first
// invocation keeps the result in slot (subgroup id), and the tree joins the subgroups' slots:
// W/S values through shared memory instead of W (S: the subgroup size).
inline void region_emitter::workgroup_join(
    const carried& partial, const std::vector<id>& types,
    function_ref<carried(const carried& mine, const carried& other)> join,
    function_ref<void(const carried& total)> finish,
    const function_ref<carried(const carried&)>* subgroup) {
  id slots = wg_size_;
  if (subgroup) {
    carried total = (*subgroup)(partial);
    id leader = m_.emit(Op::OpIEqual, m_.type_bool(), {builtin_u32(subgroup_local_id_), cu(0)});
    id slot = builtin_u32(subgroup_id_);
    only_where(leader, [&] {
      for (std::size_t k = 0; k < total.size(); ++k)
        m_.inst(Op::OpStore, {shared_slot(k, types[k], slot), total[k]});
    });
    slots = builtin_u32(subgroups_id_);
  } else {
    for (std::size_t k = 0; k < partial.size(); ++k)
      m_.inst(Op::OpStore, {shared_slot(k, types[k], local_), partial[k]});
  }
  barrier();
  id before = current_label_;
  id half = m_.emit(Op::OpShiftRightLogical, u32(), {slots, cu(1)});
  id header = m_.fresh(), check = m_.fresh(), body = m_.fresh(), then = m_.fresh(),
     join_label = m_.fresh(), cont = m_.fresh(), merge = m_.fresh(), s_next = m_.fresh();
  m_.inst(Op::OpBranch, {header});
  m_.label(header);
  id step = m_.emit(Op::OpPhi, u32(), {half, before, s_next, cont});
  m_.inst(Op::OpLoopMerge,
          {merge, cont, static_cast<std::uint32_t>(spv::LoopControlMask::MaskNone)});
  m_.inst(Op::OpBranch, {check});
  m_.label(check);
  id steps_left = m_.emit(Op::OpUGreaterThan, m_.type_bool(), {step, cu(0)});
  m_.inst(Op::OpBranchConditional, {steps_left, body, merge});
  m_.label(body);
  id joins = m_.emit(Op::OpULessThan, m_.type_bool(), {local_, step});
  m_.inst(Op::OpSelectionMerge,
          {join_label, static_cast<std::uint32_t>(spv::SelectionControlMask::MaskNone)});
  m_.inst(Op::OpBranchConditional, {joins, then, join_label});
  m_.label(then);
  id partner = m_.emit(Op::OpIAdd, u32(), {local_, step});
  carried mine, other;
  for (std::size_t k = 0; k < partial.size(); ++k) {
    mine.push_back(m_.emit(Op::OpLoad, types[k], {shared_slot(k, types[k], local_)}));
    other.push_back(m_.emit(Op::OpLoad, types[k], {shared_slot(k, types[k], partner)}));
  }
  carried joined = join(mine, other);
  for (std::size_t k = 0; k < partial.size(); ++k)
    m_.inst(Op::OpStore, {shared_slot(k, types[k], local_), joined[k]});
  m_.inst(Op::OpBranch, {join_label});
  m_.label(join_label);
  barrier();
  m_.inst(Op::OpBranch, {cont});
  m_.label(cont);
  m_.emit_to(s_next, Op::OpShiftRightLogical, u32(), {step, cu(1)});
  m_.inst(Op::OpBranch, {header});
  m_.label(merge);
  // Invocation 0 finishes. No barrier is needed before the next group: each invocation first
  // writes only its own slot, and slot 0's one reader here is the invocation that writes it.
  current_label_ = merge;
  in_first_invocation([&] {
    carried total;
    for (std::size_t k = 0; k < partial.size(); ++k)
      total.push_back(m_.emit(Op::OpLoad, types[k], {shared_slot(k, types[k], cu(0))}));
    finish(total);
  });
}

// Folds the four results' rows (j = 0 .. 3) along the row, side by side: one loop over the
// invocation's groups of four (i, i + W ...) folds group q of every row into that row's own
// values (`start` each, fold(the row's first element, q, its values)), so that a GPU has the
// four rows' loads in flight together where a row at a time waited on each in turn; each row
// still sees its groups in the same order (the same bits). finish(a row's values) gives its
// totals, one scalar per value, which become lane j of vectors of the types `totals`.
inline region_emitter::carried region_emitter::along_rows(
    id count, const carried& start, const std::vector<id>& types,
    function_ref<carried(id row, id q, const carried& now)> fold,
    function_ref<carried(const carried& folded)> finish, const std::vector<id>& totals) {
  const std::uint32_t axes = g_.nodes[mb_->r->root].attrs.axes;
  id quads = m_.emit(Op::OpShiftRightLogical, u32(), {count, cu(2)});
  id results = lane_elements();
  const std::size_t n = start.size();
  std::array<row_state, 4> rows;
  carried init;
  std::vector<id> all_types;
  for (std::uint32_t j = 0; j < 4; ++j) {
    id result = lane(results, u32(), j);
    rows[j] = enter_row_state(result, axes, m_.emit(Op::OpIMul, u32(), {result, count}));
    init.insert(init.end(), start.begin(), start.end());
    all_types.insert(all_types.end(), types.begin(), types.end());
  }
  carried folded = strided_loop(quads, init, all_types, [&](id q, const carried& now) {
    carried next;
    for (std::uint32_t j = 0; j < 4; ++j) {
      use_row(rows[j]);
      carried f = fold(rows[j].first, q, carried(now.begin() + j * n, now.begin() + (j + 1) * n));
      next.insert(next.end(), f.begin(), f.end());
    }
    return next;
  });
  row_values_.clear();
  std::array<carried, 4> row_totals;
  for (std::uint32_t j = 0; j < 4; ++j)
    row_totals[j] = finish(carried(folded.begin() + j * n, folded.begin() + (j + 1) * n));
  carried out;
  for (std::size_t v = 0; v < totals.size(); ++v)
    out.push_back(
        compose(totals[v], row_totals[0][v], row_totals[1][v], row_totals[2][v], row_totals[3][v]));
  return out;
}

// Each of the four results' first operand element (a lane per result).
inline id region_emitter::result_firsts(id count) {
  return m_.emit(Op::OpIMul, uvec4(),
                 {lane_elements(), compose(uvec4(), count, count, count, count)});
}

// The operand's values at reduced index r of the four results (firsts: result_firsts).
inline id region_emitter::operand_at(id firsts, id r) {
  return operand_of(m_.emit(Op::OpIAdd, uvec4(), {firsts, compose(uvec4(), r, r, r, r)}), false);
}

// The operand's values at group of four q of the row whose first element is `row`
// (reduced indices 4q .. 4q + 3: along_r_ is the first).
inline id region_emitter::operand_along(id row, id q) {
  along_r_ = m_.emit(Op::OpIMul, u32(), {q, cu(4)});
  return operand_of(consecutive_from(m_.emit(Op::OpIAdd, u32(), {row, along_r_})), true);
}

inline id region_emitter::operand_of(id elements, bool along) {
  elements_ = elements;
  along_ = along;
  forget_coordinates();
  id x = evaluate()[g_.nodes[mb_->r->root].operands[0]];
  elements_ = 0;
  along_ = false;
  forget_coordinates();
  return x;
}

inline void region_emitter::reduction_loop() {
  const ir::node& root = g_.nodes[mb_->r->root];
  const ir::node& operand = g_.nodes[root.operands[0]];
  dtype acc_type = compute_dtype(operand.type);
  lane_kind k = lane_of(acc_type);
  id vk = vec(k);
  bool fl = is_float_lane(k);
  using ir::op;
  op kind = root.kind;
  auto node_of = [&](op o) {
    ir::node n;
    n.kind = o;
    n.type = acc_type;
    return n;
  };
  id count = metadata(mb_->words - 1);
  std::size_t outputs = compiler::output_slots(p_, *mb_->r).size();
  if (ir::info(kind).cls == ir::op_class::index_reduction) {
    index_reduction_loop(kind, root.attrs.select_last, k, count, outputs);
    return;
  }
  auto combine = [&](id a, id b) {
    switch (kind) {
      case op::reduce_max:
        return binary(node_of(op::max), a, b);
      case op::reduce_min:
        return binary(node_of(op::min), a, b);
      case op::reduce_prod:
        return binary(node_of(op::mul), a, b);
      default:
        return binary(node_of(op::add), a, b);
    }
  };
  id init = 0;
  switch (kind) {
    case op::reduce_max:
      init = fl ? fsplat(k, -INFINITY) : isplat(k, lowest_of(operand.type));
      break;
    case op::reduce_min:
      init = fl ? fsplat(k, INFINITY) : isplat(k, highest_of(operand.type));
      break;
    case op::reduce_prod:
      init = splat(k, 1, 1);
      break;
    default:
      init = splat(k, 0, 0);
  }
  // Float sums are compensated (Kahan): y = x - c; t = acc + y; c = (t - acc) - y, and c = 0
  // once t is infinite (inf - inf would make the sum NaN where ONNX's is +-inf).
  bool compensated =
      fl && kind != op::reduce_max && kind != op::reduce_min && kind != op::reduce_prod;
  carried start = {init};
  std::vector<id> types = {vk};
  if (compensated) {
    start.push_back(splat(k, 0, 0));
    types.push_back(vk);
  }
  auto fold = [&](const carried& now, id x) -> carried {
    if (kind == op::reduce_l1) x = unary(node_of(op::abs), x);
    if (kind == op::reduce_l2 || kind == op::reduce_sum_square) x = binary(node_of(op::mul), x, x);
    if (!compensated) return {combine(now[0], x)};
    id y = exact(m_.emit(Op::OpFSub, vk, {x, now[1]}));
    id t = exact(m_.emit(Op::OpFAdd, vk, {now[0], y}));
    id c = exact(m_.emit(Op::OpFSub, vk, {exact(m_.emit(Op::OpFSub, vk, {t, now[0]})), y}));
    return {t, select(k, m_.emit(Op::OpIsInf, bvec4(), {t}), splat(k, 0, 0), c)};
  };
  auto total_of = [&](const carried& folded) {
    return compensated ? exact(m_.emit(Op::OpFSub, vk, {folded[0], folded[1]})) : folded[0];
  };
  id partial = 0;
  if (!whole_quads_) {
    id firsts = result_firsts(count);
    partial = total_of(strided_loop(count, start, types, [&](id r, const carried& now) {
      return fold(now, operand_at(firsts, r));
    }));
  } else {
    // The rows are whole groups of four: each of the four results' rows is folded a group of
    // four consecutive elements at a time (invocation i: groups i, i + W ...; a GPU's vector
    // load, a CPU driver's contiguous one, where a lane per result gathers), the group's lanes
    // joined as (0 1) (2 3) at the end. The four totals are then `partial`'s lanes, as above.
    id scalar = scalar_type(k);
    partial = along_rows(
        count, start, types,
        [&](id row, id q, const carried& acc) { return fold(acc, operand_along(row, q)); },
        [&](const carried& folded) {
          id lanes = total_of(folded);
          id pairs = combine(lanes, m_.emit(Op::OpVectorShuffle, vk, {lanes, lanes, 1, 0, 3, 2}));
          id all = combine(pairs, m_.emit(Op::OpVectorShuffle, vk, {pairs, pairs, 2, 3, 0, 1}));
          return carried{lane(all, scalar, 0)};
        },
        {vk})[0];
  }
  // The device's subgroup operation for the join, where it has one with kiln's semantics: sums
  // and products, and integer min/max (float min/max propagate NaN in kiln, where the subgroup
  // operations skip it), on 32-bit lanes (64-bit ones need the extended-types feature).
  Op subgroup_op = Op::OpNop;
  if (t_.subgroup_arithmetic &&
      (k == lane_kind::f32 || k == lane_kind::s32 || k == lane_kind::u32)) {
    bool sgn = k == lane_kind::s32;
    switch (kind) {
      case op::reduce_max:
        subgroup_op = fl ? Op::OpNop : sgn ? Op::OpGroupNonUniformSMax : Op::OpGroupNonUniformUMax;
        break;
      case op::reduce_min:
        subgroup_op = fl ? Op::OpNop : sgn ? Op::OpGroupNonUniformSMin : Op::OpGroupNonUniformUMin;
        break;
      case op::reduce_prod:
        subgroup_op = fl ? Op::OpGroupNonUniformFMul : Op::OpGroupNonUniformIMul;
        break;
      default:
        subgroup_op = fl ? Op::OpGroupNonUniformFAdd : Op::OpGroupNonUniformIAdd;
    }
  }
  auto reduce_in_subgroup = [&](const carried& p) -> carried {
    return {m_.emit(subgroup_op, vk,
                    {cu(static_cast<std::uint32_t>(spv::Scope::Subgroup)),
                     static_cast<std::uint32_t>(spv::GroupOperation::Reduce), p[0]})};
  };
  function_ref<carried(const carried&)> in_subgroup = reduce_in_subgroup;
  workgroup_join(
      {partial}, {vk},
      [&](const carried& a, const carried& b) -> carried { return {combine(a[0], b[0])}; },
      [&](const carried& sum) {
        id total = sum[0];
        if (kind == op::reduce_mean) {
          id n = m_.emit(Op::OpConvertUToF, scalar_type(k), {count});
          total = divide(k, total, compose(vk, n, n, n, n));
        }
        if (kind == op::reduce_l2) total = m_.ext(vk, GLSLstd450Sqrt, {total});
        if (!fl) total = wrap(root.type, total);
        for (std::size_t out = 0; out < outputs; ++out) store_result(out, root.type, total);
      },
      subgroup_op == Op::OpNop ? nullptr : &in_subgroup);
}

// argmax / argmin: (value, index) pairs, index 2^32 - 1 for "nothing yet". NaN counts as the
// extreme; equal extremes keep the lower index, or the higher with select_last.
inline void region_emitter::index_reduction_loop(ir::op kind, bool select_last, lane_kind k,
                                                 id count, std::size_t outputs) {
  id vk = vec(k);
  bool fl = is_float_lane(k);
  id none = usplat(0xFFFFFFFFu);
  auto logic = [&](Op o, id a, id b) { return m_.emit(o, bvec4(), {a, b}); };
  auto negate = [&](id a) { return m_.emit(Op::OpLogicalNot, bvec4(), {a}); };
  // Whether (bv, bi) replaces (av, ai).
  auto wins = [&](id av, id ai, id bv, id bi) {
    id beyond = kind == ir::op::argmax ? less(k, av, bv) : less(k, bv, av);
    id equal = m_.emit(fl ? Op::OpFOrdEqual : Op::OpIEqual, bvec4(), {av, bv});
    if (fl) {
      id na = m_.emit(Op::OpIsNan, bvec4(), {av}), nb = m_.emit(Op::OpIsNan, bvec4(), {bv});
      beyond = logic(Op::OpLogicalOr, logic(Op::OpLogicalAnd, nb, negate(na)),
                     logic(Op::OpLogicalAnd, negate(na), beyond));
      equal = logic(Op::OpLogicalOr, equal, logic(Op::OpLogicalAnd, na, nb));
    }
    id order = m_.emit(select_last ? Op::OpUGreaterThan : Op::OpULessThan, bvec4(), {bi, ai});
    id better = logic(Op::OpLogicalOr, beyond, logic(Op::OpLogicalAnd, equal, order));
    id a_none = m_.emit(Op::OpIEqual, bvec4(), {ai, none});
    id b_some = m_.emit(Op::OpINotEqual, bvec4(), {bi, none});
    return logic(Op::OpLogicalAnd, b_some, logic(Op::OpLogicalOr, a_none, better));
  };
  auto pick = [&](id take, const carried& a, id bv, id bi) -> carried {
    return {select(k, take, bv, a[0]), select(lane_kind::u32, take, bi, a[1])};
  };
  const carried start = {splat(k, 0, 0), none};
  const std::vector<id> types = {vk, uvec4()};
  carried folded;
  if (!whole_quads_) {
    id firsts = result_firsts(count);
    folded = strided_loop(count, start, types, [&](id r, const carried& now) -> carried {
      id x = operand_at(firsts, r);
      id ri = m_.emit(Op::OpCompositeConstruct, uvec4(), {r, r, r, r});
      return pick(wins(now[0], now[1], x, ri), now, x, ri);
    });
  } else {
    // Along the rows, as reduction_loop folds them: each lane carries its own (value, index),
    // and the lanes' pairs are picked between as (0 1)(2 3), the indices deciding ties.
    auto pick_lanes = [&](const carried& a, std::uint32_t l0, std::uint32_t l1, std::uint32_t l2,
                          std::uint32_t l3) {
      id bv = m_.emit(Op::OpVectorShuffle, vk, {a[0], a[0], l0, l1, l2, l3});
      id bi = m_.emit(Op::OpVectorShuffle, uvec4(), {a[1], a[1], l0, l1, l2, l3});
      return pick(wins(a[0], a[1], bv, bi), a, bv, bi);
    };
    folded = along_rows(
        count, start, types,
        [&](id row, id q, const carried& acc) {
          id x = operand_along(row, q);
          id ri = consecutive_from(along_r_);
          return pick(wins(acc[0], acc[1], x, ri), acc, x, ri);
        },
        [&](const carried& lanes) {
          carried all = pick_lanes(pick_lanes(lanes, 1, 0, 3, 2), 2, 3, 0, 1);
          return carried{lane(all[0], scalar_type(k), 0), lane(all[1], u32(), 0)};
        },
        types);
  }
  workgroup_join(
      folded, {vk, uvec4()},
      [&](const carried& a, const carried& b) -> carried {
        return pick(wins(a[0], a[1], b[0], b[1]), a, b[0], b[1]);
      },
      [&](const carried& total) {
        // The u32 index as i64 (an empty axis is refused before the dispatch).
        id wide = m_.emit(Op::OpUConvert, m_.type_vector(m_.type_int(64, false), 4), {total[1]});
        id index = m_.emit(Op::OpBitcast, vec(lane_kind::s64), {wide});
        for (std::size_t out = 0; out < outputs; ++out) store_result(out, dtype::i64, index);
      });
}

}  // namespace kiln::spirv::detail
