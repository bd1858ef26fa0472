// Runs a plan's regions on the CPU for one call, for both doors (the compile-time kernels and the
// interpreter differ only in their row functions): operand layouts per region, the call's
// transient arena, elementwise regions through run_region and reductions through run_reduction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "kiln/compiler/plan.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/thread_kept.hpp"
#include "kiln/runtime/arena.hpp"
#include "kiln/runtime/cpu/convolution.hpp"
#include "kiln/runtime/cpu/executor.hpp"
#include "kiln/runtime/cpu/packed_weights.hpp"
#include "kiln/runtime/cpu/reduction.hpp"
#if KILN_RUNTIME_BODY  // for the definitions only
#include <chrono>
#include <cstdio>
#include <string>

#include "kiln/core/profile.hpp"
#endif

namespace kiln::cpu {

// A row group runs this many elements' rows through all its regions before the next rows: 256 KB
// of f32, in a core's L2 (smaller blocks pay the regions' per-call setup more often).
inline constexpr std::int64_t group_block_elements = 65536;

// Region i's row function: row_of(i, in, step, out, count).
using region_rows_ref =
    function_ref<void(int region, const void* const* in, const std::int64_t* step, void* const* out,
                      std::int64_t count)>;

// Runs the regions of p marked in `only` (or all) on host data. folds: by region, its row
// function's register fold (null where it has none; empty where no region has one, as in the
// interpreter). sym: the resolved symbols; transients: the call's arena (p's layout in host
// memory); weights: the caller's constant B operands packed once (null: packed at each product).
// Under KILN_PROFILE, prints each region's time, naming the program.
KILN_RUNTIME_API void run_plan(const compiler::plan& p, region_rows_ref rows,
                               std::span<const fold_fn> folds,
                               std::span<const runtime::buffer_ref> args,
                               std::span<const runtime::buffer_ref> results,
                               const std::int64_t* sym, const std::vector<bool>* only,
                               const runtime::arena& transients, std::string_view program,
                               packed_weights* weights = nullptr);

#if KILN_RUNTIME_BODY
namespace detail {
// KILN_PROFILE's record of one call: each region's (or row group's) wall time.
class region_profile {
 public:
  explicit region_profile(bool on) : on_(on) {}
  bool on() const { return on_; }
  // Regions [first, end) of p ran from `since` until now.
  void record(const compiler::plan& p, std::size_t first, std::size_t end,
              std::chrono::steady_clock::time_point since) {
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - since).count();
    std::string label = end - first > 1 ? "regions " + std::to_string(first) + "-" +
                                              std::to_string(end - 1) + " (a row group):"
                                        : "region " + std::to_string(first) + ":";
    for (std::size_t k = first; k < end; ++k) label += compiler::region_ops(p, k);
    lines_.emplace_back(std::move(label), us);
  }
  void print(std::string_view program) const {
    double total = 0;
    for (const auto& [label, us] : lines_) {
      std::fprintf(stderr, "kiln profile: %.*s cpu %10.2f us  %s\n", int(program.size()),
                   program.data(), us, label.c_str());
      total += us;
    }
    std::fprintf(stderr, "kiln profile: %.*s cpu %zu runs: %10.2f us\n", int(program.size()),
                 program.data(), lines_.size(), total);
  }

 private:
  bool on_;
  std::vector<std::pair<std::string, double>> lines_;
};

// A region's operand layouts by slot, for one tile.
struct slot_layouts {
  std::vector<operand_layout> ins, outs;
};

// A row group's lists for one call: all its members' walks, member k's from walk_begin[k];
// flat[k]: member k is an epilogue over the rows themselves (flat_walks); the row-local values
// that live a block at a time.
struct group_lists {
  std::vector<row_walk> walks;
  std::vector<std::size_t> walk_begin;
  std::vector<char> flat;
  std::vector<std::int32_t> block_locals;
};

// At least `bytes` of this thread's memory (64-byte aligned), kept for its next use: a row
// group's row-local values for a block of rows.
inline unsigned char* thread_block_memory(std::int64_t bytes) {
  struct alignas(64) line {
    unsigned char bytes[64];
  };
  thread_local std::vector<line> memory;
  auto lines = static_cast<std::size_t>((bytes + 63) / 64);
  if (memory.size() < lines) memory.resize(lines);
  return reinterpret_cast<unsigned char*>(memory.data());
}
}  // namespace detail

KILN_RUNTIME_API void run_plan(const compiler::plan& p, region_rows_ref rows,
                               std::span<const fold_fn> folds,
                               std::span<const runtime::buffer_ref> args,
                               std::span<const runtime::buffer_ref> results,
                               const std::int64_t* sym, const std::vector<bool>* only,
                               const runtime::arena& transients, std::string_view program,
                               packed_weights* weights) {
  const ir::graph& g = p.graph;
  const auto n_inputs = static_cast<int>(g.inputs.size());
  const auto n_outputs = static_cast<int>(g.outputs.size());
  // The regions' jobs follow one another closely: the workers wait for them awake.
  const workers_awake awake;
  // The call's transients, in one arena laid out by the plan (reused between regions). A
  // row-local one has no place there (unless the caller's layout keeps one): a row group run a
  // block at a time keeps it in a buffer of the block's thread (`blocking`: layouts made for
  // that, its memory set per block); a region run over all its rows gets memory for all of it,
  // for this call.
  auto local = [&](std::int32_t t) {
    return static_cast<std::size_t>(t) < transients.layout.row_local.size() &&
           transients.layout.row_local[t];
  };
  // (Sized at its first use: most calls need none, and what they get is freed with the call.)
  std::vector<std::unique_ptr<unsigned char[]>> local_memory;
  bool blocking = false;
  auto transient = [&](std::int32_t t) {
    const ir::node& n = g.nodes[p.transients[t]];
    shape dims = runtime::concrete(n.dims, sym);
    if (!local(t)) return std::pair{transients.host + transients.layout.offsets[t], dims};
    if (blocking) return std::pair{static_cast<unsigned char*>(nullptr), dims};
    if (local_memory.empty()) local_memory.resize(p.transients.size());
    if (!local_memory[t])
      local_memory[t].reset(new unsigned char[static_cast<std::size_t>(
          std::max<std::int64_t>(dims.element_count(), 1) * size_in_bytes(n.type))]);
    return std::pair{local_memory[t].get(), dims};
  };
  // A region ready to run: its operands' layouts over its space, by slot.
  struct prepared {
    const compiler::region* reg;
    shape space;
    const ir::node* root;
    std::vector<operand_layout> ins, outs;
    std::vector<std::int32_t> in_slots, out_slots;
  };
  // Where parameter a's elements are: row-major, or at the strides of a strided view.
  auto argument_layout = [&](std::int32_t a) {
    compiler::strided_layout l =
        compiler::row_major(runtime::argument_dims(args[a], g.inputs[a].dims));
    if (args[a].strided) std::copy_n(args[a].steps.begin(), l.dims.rank, l.strides.begin());
    return l;
  };
  auto slot_data = [&](std::int32_t s) -> const void* {  // a gather's indices (row-major)
    return s < n_inputs ? args[s].data : transient(s - n_inputs).first;
  };
  // Input slot `slot`'s layout over `space`: a parameter's, a transient's, or a view's.
  auto layout_of = [&](std::int32_t slot, const shape& space) -> operand_layout {
    if (slot < n_inputs)
      return layout_over(args[slot].data, size_in_bytes(g.inputs[slot].type), argument_layout(slot),
                         space, slot_data);
    if (slot < compiler::view_slot(p, 0)) {
      auto [data, dims] = transient(slot - n_inputs);
      return layout_over(data, size_in_bytes(g.nodes[p.transients[slot - n_inputs]].type), dims,
                         space);
    }
    const std::int32_t v = slot - compiler::view_slot(p, 0);
    const std::int32_t base = p.view_bases[v];
    const void* data;
    compiler::strided_layout base_layout;
    if (base < n_inputs) {
      data = args[base].data;
      base_layout = argument_layout(base);
    } else {
      shape dims;
      std::tie(data, dims) = transient(base - n_inputs);
      base_layout = compiler::row_major(dims);
    }
    return layout_over(data, size_in_bytes(g.nodes[p.views[v]].type),
                       compiler::view_layout(p, v, base_layout, sym), space, slot_data);
  };
  // Prepares region i in r, reusing r's memory.
  auto prepare_into = [&](std::size_t i, prepared& r) {
    const compiler::region& reg = p.regions[i];
    r.reg = &reg;
    r.space = runtime::concrete(reg.space, sym);
    r.root = reg.root >= 0 ? &g.nodes[reg.root] : nullptr;
    // By slot (a contraction's region reads its tile from one slot more); only the region's own
    // slots are set, as every reader goes through the slot lists (clearing them all made a
    // plan's preparation quadratic in its transients).
    r.ins.resize(compiler::input_slot_count(p) + 1);
    r.outs.resize(compiler::output_slot_count(p));
    if (reg.contraction < 0)
      compiler::input_slots(p, reg, r.in_slots);
    else
      r.in_slots = compiler::row_input_slots(p, reg);
    compiler::output_slots(p, reg, r.out_slots);
    for (auto s : r.in_slots) r.ins[s] = {};
    // Every input slot the region reads: its row function's, unless it is a contraction's.
    const std::vector<std::int32_t> contraction_slots =
        reg.contraction < 0 ? std::vector<std::int32_t>{} : compiler::input_slots(p, reg);
    for (auto s : reg.contraction < 0 ? r.in_slots : contraction_slots)
      r.ins[s] = layout_of(s, r.space);
    // What the region writes, over its space: a reduction's result keeps the reduced axes with
    // size 1 there, so they get stride 0.
    shape written = r.root ? ir::kept_dims(r.space, r.root->attrs) : r.space;
    for (auto res : reg.results) {
      // A strided result's axes of size other than 1 are written's in order (region formation
      // writes a result over its own extents, a reduction's with its reduced axes kept as 1s):
      // each takes its stride.
      compiler::strided_layout l = compiler::row_major(written);
      if (const runtime::buffer_ref& b = results[res]; b.strided)
        for (int i = 0, k = 0; i < written.rank; ++i) {
          while (written.dims[i] != 1 && k < b.dims.rank && b.dims.dims[k] == 1) ++k;
          l.strides[i] = written.dims[i] == 1 ? 0 : b.steps[k++];
        }
      r.outs[res] = layout_over(results[res].data, size_in_bytes(g.nodes[g.outputs[res]].type), l,
                                r.space, slot_data);
    }
    for (auto t : reg.writes)
      r.outs[n_outputs + t] = layout_over(
          transient(t).first, size_in_bytes(g.nodes[p.transients[t]].type), written, r.space);
  };
  // The regions prepared for this call, by region, in vectors this thread keeps from call to
  // call (a small call's allocations were a quarter of its instructions).
  thread_kept<std::vector<prepared>> call_regions;
  call_regions->resize(std::max(call_regions->size(), p.regions.size()));
  auto prepare = [&](std::size_t i) -> prepared& {
    prepare_into(i, (*call_regions)[i]);
    return (*call_regions)[i];
  };
  // The regions whose values a matmul's packing computes (compiler::packed_into) where both run
  // in this call and the packing computes each element once (packing_computes_once): by the
  // matmul's region, the region computing each operand (-1: it is read). (A convolution's stay
  // stored: its packing reads the weights as [M, C / groups x cells] and the input through its
  // windows.)
  std::vector<std::array<std::int32_t, 2>> packed_by;
  std::vector<bool> packed;  // by region, where packed_by has one
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (p.regions[i].contraction >= 0 || p.regions[i].root >= 0) continue;
    const compiler::packing into = compiler::packed_into(p, i);
    if (into.region < 0 || (only && !((*only)[i] && (*only)[into.region]))) continue;
    const ir::node& m = g.nodes[p.regions[into.region].contraction];
    if (m.kind != ir::op::matmul) continue;
    const shape b_dims = runtime::concrete(g.nodes[m.operands[1]].dims, sym);
    if (!packing_computes_once(m.type, into.operand, b_dims.dims[b_dims.rank - 1])) continue;
    if (packed_by.empty()) {
      packed_by.assign(p.regions.size(), {-1, -1});
      packed.assign(p.regions.size(), false);
    }
    packed_by[into.region][into.operand] = static_cast<std::int32_t>(i);
    packed[i] = true;
  }
  // Region r's contraction, its epilogue (the row function) run on each finished tile.
  auto contract = [&](const prepared& r, row_ref row) {
    const ir::node& m = g.nodes[r.reg->contraction];
    shape operand_dims[2];
    operand_layout operands[2];
    for (int k = 0; k < 2; ++k) {
      std::int32_t id = m.operands[k];
      operand_dims[k] = runtime::concrete(g.nodes[id].dims, sym);
      operands[k] = layout_of(compiler::load_slot(p, *r.reg, id), operand_dims[k]);
    }
    const int rank = r.space.rank;
    const int acc = compiler::accumulator_slot(p);
    const bool conv = ir::is_convolution(m.kind);
    // The plan input that operand 1 (a product's B, a convolution's w) is read from, directly or
    // through a view of it, or -1: a constant there is packed once.
    auto weight_input = [&]() -> std::int32_t {
      std::int32_t slot = compiler::load_slot(p, *r.reg, m.operands[1]);
      if (slot >= compiler::view_slot(p, 0)) slot = p.view_bases[slot - compiler::view_slot(p, 0)];
      return slot >= 0 && slot < n_inputs ? slot : -1;
    };
    // A tile's rows run along the space's axis row_axis (a convolution's output channels), its
    // columns along the last.
    const int row_axis = conv ? 1 : rank - 2, col_axis = rank - 1;
    const int bytes = size_in_bytes(m.type);
    // The epilogue over rows x cols of the space from `origin`, the contraction's values at
    // `values` (ld apart from row to row).
    auto epilogue_part = [&](std::array<std::int64_t, max_rank> origin, std::int64_t rows,
                             std::int64_t cols, const unsigned char* values, std::int64_t ld) {
      // The tile's layouts by slot, in this thread's kept memory (allocating them per tile was
      // most of a small product's time); only the region's slots are set and read.
      thread_kept<detail::slot_layouts> kept;
      std::vector<operand_layout>& ins = kept->ins;
      std::vector<operand_layout>& outs = kept->outs;
      ins.resize(r.ins.size());
      outs.resize(r.outs.size());
      shape tile;
      tile.rank = 2;
      tile.dims[0] = rows;
      tile.dims[1] = cols;
      // A row is written contiguously: a part one column wide is not, unless the space is
      // (one column), so it runs a row at a time.
      const bool strided = cols == 1 && r.space.dims[col_axis] > 1;
      if (strided) tile.dims[0] = 1;
      for (std::int64_t i = 0; i < (strided ? rows : 1); ++i) {
        for (auto s : r.in_slots)
          if (s != acc) ins[s] = tile_layout(r.ins[s], origin, rank, row_axis, col_axis);
        ins[acc] = {values + i * ld * bytes, bytes, {ld, 1}, {}};
        for (auto s : r.out_slots)
          outs[s] = tile_layout(r.outs[s], origin, rank, row_axis, col_axis);
        run_rows(row, tile, 0, {0, tile.dims[0] * cols}, r.in_slots, ins, r.out_slots, outs);
        ++origin[row_axis];
      }
    };
    if (!conv) {
      // An operand that region q computes: rows x cols of it from (r0, c0) through q's row
      // function, into the packing's memory.
      const std::int32_t index = static_cast<std::int32_t>(r.reg - p.regions.data());
      std::optional<prepared> computing[2];
      auto fill_from = [&](int k) {
        return [&, k](std::int64_t batch, std::int64_t r0, std::int64_t n_rows, std::int64_t c0,
                      std::int64_t cols, void* to) {
          const prepared& q = *computing[k];
          const int q_rank = q.space.rank;
          std::array<std::int64_t, max_rank> origin{};
          for (int d = rank - 3; d >= 0; --d) {  // the product's batch index, broadcast to q's
            if (const int qd = d - (rank - q_rank); qd >= 0)
              origin[qd] = batch % r.space.dims[d] % q.space.dims[qd];
            batch /= r.space.dims[d];
          }
          origin[q_rank - 2] = r0;
          origin[q_rank - 1] = c0;
          thread_kept<detail::slot_layouts> kept;
          std::vector<operand_layout>& ins = kept->ins;
          std::vector<operand_layout>& outs = kept->outs;
          ins.resize(q.ins.size());
          outs.resize(q.outs.size());
          for (auto s : q.in_slots)
            ins[s] = tile_layout(q.ins[s], origin, q_rank, q_rank - 2, q_rank - 1);
          outs[q.out_slots[0]] = {static_cast<const unsigned char*>(to), bytes, {cols, 1}, {}};
          shape block;
          block.rank = 2;
          block.dims[0] = n_rows;
          block.dims[1] = cols;
          const int qi = static_cast<int>(q.reg - p.regions.data());
          run_rows([&](const void* const* in, const std::int64_t* step, void* const* out,
                       std::int64_t n) { rows(qi, in, step, out, n); },
                   block, 0, {0, n_rows * cols}, q.in_slots, ins, q.out_slots, outs);
        };
      };
      auto fill_a = fill_from(0), fill_b = fill_from(1);
      const operand_fill_ref fills[2] = {fill_a, fill_b};
      matmul_operand ab[2];
      for (int k = 0; k < 2; ++k) {
        ab[k] = {operand_dims[k], operands[k], nullptr};
        if (!packed_by.empty() && packed_by[index][k] >= 0) {
          computing[k] = prepare(static_cast<std::size_t>(packed_by[index][k]));
          ab[k].fill = &fills[k];
        }
      }
      if (const std::int32_t slot = weights && !ab[1].fill ? weight_input() : -1; slot >= 0)
        ab[1].packed = weights->find(
            slot, ab[1].layout.data - static_cast<const unsigned char*>(args[slot].data), m.type,
            ab[1]);
      run_matmul(m.type, ab[0], ab[1], [&](const finished_tile& t) {
        std::array<std::int64_t, max_rank> origin{};
        for (std::int64_t d = rank - 3, b = t.batch; d >= 0; --d) {
          origin[d] = b % r.space.dims[d];
          b /= r.space.dims[d];
        }
        origin[rank - 2] = t.row;
        origin[rank - 1] = t.col;
        epilogue_part(origin, t.rows, t.cols, static_cast<const unsigned char*>(t.tile), t.ld);
      });
      return;
    }
    conv_geometry c{m.kind == ir::op::conv_transpose, m.attrs.groups, {}, {}, {}};
    for (int a = 2; a < rank; ++a) {
      c.strides[a - 2] = m.attrs.steps[a];
      c.starts[a - 2] = m.attrs.starts[a];
      c.dilations[a - 2] = m.attrs.dilations[a];
    }
    const std::int64_t out_group = r.space.dims[1] / c.groups;
    // Whether every operand of the epilogue walks the output cells in row-major order with one
    // stride (a contiguous NCHW result, a bias broadcast over the cells): then a tile is one part,
    // whatever output rows its columns cross.
    bool flat = true;
    auto walks_flat = [&](const operand_layout& l) {
      bool ok = l.terms.empty();
      for (int a = 2; a + 1 < rank; ++a)
        ok = ok && l.stride[a] == l.stride[a + 1] * r.space.dims[a + 1];
      return ok;
    };
    for (auto s : r.in_slots)
      if (s != acc) flat = flat && walks_flat(r.ins[s]);
    for (auto s : r.out_slots) flat = flat && walks_flat(r.outs[s]);
    if (const std::int32_t slot = weights ? weight_input() : -1; slot >= 0)
      c.packed_weights = weights->find_conv(
          slot, operands[1].data - static_cast<const unsigned char*>(args[slot].data), m.type,
          operand_dims[1], operands[1], r.space, c);
    run_conv(m.type, operand_dims[0], operands[0], operand_dims[1], operands[1], r.space, c,
             [&](const finished_tile& t) {
               // The tile's columns are output cells in row-major order: a part per run along
               // the last axis.
               std::array<std::int64_t, max_rank> origin{};
               origin[0] = t.batch / c.groups;
               origin[1] = (t.batch % c.groups) * out_group + t.row;
               for (std::int64_t a = rank - 1, j = t.col; a >= 2; --a) {
                 origin[a] = j % r.space.dims[a];
                 j /= r.space.dims[a];
               }
               const auto* values = static_cast<const unsigned char*>(t.tile);
               if (flat) return epilogue_part(origin, t.rows, t.cols, values, t.ld);
               for (std::int64_t done = 0; done < t.cols;) {
                 const std::int64_t run =
                     std::min(r.space.dims[rank - 1] - origin[rank - 1], t.cols - done);
                 epilogue_part(origin, t.rows, run, values + done * bytes, t.ld);
                 done += run;
                 origin[rank - 1] += run;
                 for (int a = rank - 1; a > 2 && origin[a] == r.space.dims[a]; --a) {
                   origin[a] = 0;
                   ++origin[a - 1];
                 }
               }
             });
  };
  // Runs region i (prepared as r): all of it, or rows of its row group (axes: the group's;
  // walks: its operands' row walks, where they are affine, and the row's length).
  // walks: flat_walks where `flat` (an epilogue over the rows themselves).
  auto run = [&](std::size_t i, const prepared& r, row_block block, std::uint32_t axes,
                 std::span<const row_walk> walks = {}, std::int64_t row_size = 0,
                 bool flat = false) {
    auto row = [&](const void* const* in, const std::int64_t* step, void* const* out,
                   std::int64_t n) { rows(static_cast<int>(i), in, step, out, n); };
    const fold_fn fold = folds.empty() ? nullptr : folds[i];
    if (!walks.empty() && flat)
      run_flat(row, walks, r.ins.size(), r.outs.size(), block);
    else if (!walks.empty() && r.root)
      reduce_rows(row, fold, r.root->kind, g.nodes[r.root->operands[0]].type, r.root->attrs, walks,
                  r.ins.size(), r.outs.size(), compiler::load_slot(p, *r.reg, r.root->operands[0]),
                  row_size, block);
    else if (!walks.empty())
      run_walks(row, walks, r.ins.size(), r.outs.size(), row_size, block);
    else if (r.reg->contraction >= 0)
      contract(r, row);
    else if (r.root)
      run_reduction(row, fold, r.root->kind, g.nodes[r.root->operands[0]].type, r.space,
                    r.root->attrs, r.in_slots, r.ins, r.out_slots, r.outs,
                    compiler::load_slot(p, *r.reg, r.root->operands[0]), block);
    else if (block.last >= 0)
      run_rows(row, r.space, axes, block, r.in_slots, r.ins, r.out_slots, r.outs);
    else
      run_region(row, r.space, r.in_slots, r.ins, r.out_slots, r.outs);
  };
  detail::region_profile profile(profile_wanted());
  auto since = [&] {
    return profile.on() ? std::chrono::steady_clock::now()
                        : std::chrono::steady_clock::time_point{};
  };
  for (std::size_t i = 0; i < p.regions.size();) {
    std::size_t end = i + 1;
    while (end < p.regions.size() && p.regions[end].group == p.regions[i].group) ++end;
    bool whole = end - i > 1;
    for (std::size_t k = i; k < end; ++k) whole = whole && (!only || (*only)[k]);
    if (!whole) {  // a single region, or some of a group's: each alone, all its rows
      for (std::size_t k = i; k < end; ++k)
        if ((!only || (*only)[k]) && (packed.empty() || !packed[k])) {
          const auto t0 = since();
          run(k, prepare(k), {}, 0);
          if (profile.on()) profile.record(p, k, k + 1, t0);
        }
      i = end;
      continue;
    }
    const auto group_t0 = since();
    // A row group: a block of rows at a time through every region, while the rows are in cache.
    const ir::node& root = g.nodes[p.regions[i].root];
    const shape space = runtime::concrete(p.regions[i].space, sym);
    const std::uint32_t axes = root.attrs.axes;
    const shape rows_dims = ir::kept_dims(space, root.attrs);
    const std::int64_t rows_total = rows_dims.element_count();
    const std::int64_t total = space.element_count();
    const std::int64_t row_size = rows_total > 0 ? total / rows_total : 0;
    // At this call every region must cover the group's rows (a run-time broadcast may make one
    // larger): else the regions run one by one. So they do when the rows are too few to share
    // among the threads: each region over all of them, on every thread.
    bool fits = true;
    for (std::size_t k = i + 1; k < end; ++k) {
      shape s = runtime::concrete(p.regions[k].space, sym);
      fits = fits && (s == space || (p.regions[k].root < 0 && s.element_count() == rows_total &&
                                     squeezed(s) == squeezed(rows_dims)));
    }
    const int threads = total >= parallel_threshold ? split_threads() : 1;
    const bool by_blocks = fits && (threads == 1 || rows_total >= 4 * std::int64_t{threads});
    // Row-local values live a block at a time where a block's rows are consecutive elements.
    thread_kept<detail::group_lists> lists;
    std::vector<std::int32_t>& block_locals = lists->block_locals;
    block_locals.clear();
    if (by_blocks && ir::trailing_axes(axes, space.rank))
      for (std::size_t k = i; k < end; ++k)
        for (auto t : p.regions[k].writes)
          if (local(t)) block_locals.push_back(t);
    blocking = !block_locals.empty();
    for (std::size_t k = i; k < end; ++k) prepare(k);
    const std::span<const prepared> members(call_regions->data() + i, end - i);
    blocking = false;
    if (!by_blocks) {  // every region over all its rows, one after another
      for (std::size_t k = 0; k < members.size(); ++k) run(i + k, members[k], {}, 0);
      if (profile.on()) profile.record(p, i, end, group_t0);
      i = end;
      continue;
    }
    // The members over the group's space whose operands walk the rows affinely (all, for a
    // softmax or a layer_norm over the last axes): their rows need no collapsed space. An
    // epilogue over the rows themselves walks them flat: a block is one call. All members' walks
    // in one list, member k's from walk_begin[k].
    std::vector<row_walk>& walks = lists->walks;
    std::vector<std::size_t>& walk_begin = lists->walk_begin;
    std::vector<char>& flat = lists->flat;
    walks.clear();
    walk_begin.assign(members.size() + 1, 0);
    flat.assign(members.size(), false);
    bool every_member_walks = true;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const prepared& m = members[k];
      bool walked = false;
      if (ir::trailing_axes(axes, space.rank) && m.space == space && m.reg->contraction < 0)
        walked = row_walks(space, axes, m.root != nullptr, m.in_slots, m.ins, m.out_slots, m.outs,
                           walks);
      else if (m.space != space && m.reg->contraction < 0 && !m.root)
        flat[k] = walked = flat_walks(m.space, m.in_slots, m.ins, m.out_slots, m.outs, walks);
      every_member_walks = every_member_walks && walked;
      walk_begin[k + 1] = walks.size();
    }
    // Results too large to stay in cache are written around it (streaming_stores.hpp): where the
    // arguments that the members over the group's space read along its rows, and the results they
    // write, hold more bytes than the cache. Each operand counts once; one the same in every row
    // (layer_norm's scale), a view's and a transient's not at all.
    std::int64_t traffic = 0;
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (flat[k]) continue;
      for (std::size_t a = walk_begin[k]; a < walk_begin[k + 1]; ++a) {
        const row_walk& w = walks[a];
        bool counted =
            w.step != 1 || w.row_stride == 0 || w.slot >= (w.output ? n_outputs : n_inputs);
        for (std::size_t b = 0; b < a && !counted; ++b)
          counted = walks[b].output == w.output && walks[b].slot == w.slot;
        if (!counted) traffic += total * w.bytes;
      }
    }
    if (streams_results(traffic))
      for (std::size_t k = 0; k < members.size(); ++k)
        for (std::size_t a = walk_begin[k]; a < walk_begin[k + 1]; ++a)
          walks[a].stream = !flat[k] && walks[a].output && walks[a].slot < n_outputs;
    // Rows [first, last) through every region, a few at a time: a block's operands stay in
    // cache from one region to the next.
    const std::int64_t block_rows =
        std::max<std::int64_t>(group_block_elements / std::max<std::int64_t>(row_size, 1), 1);
    auto run_block = [&](std::int64_t first, std::int64_t last) {
      // This thread's copies of the walks (and of the layouts of members that do not walk) that
      // name a row-local value, pointed at its buffer for each block (rows b.. at its start).
      std::vector<row_walk> own_walks;
      std::vector<prepared> own;
      const std::int64_t each = (block_rows * row_size * 8 + 63) / 64 * 64;
      unsigned char* memory = nullptr;
      if (!block_locals.empty()) {
        own_walks = walks;
        if (!every_member_walks) own.assign(members.begin(), members.end());
        memory = detail::thread_block_memory(each * static_cast<std::int64_t>(block_locals.size()));
      }
      for (std::int64_t b = first; b < last; b += block_rows) {
        for (std::size_t l = 0; l < block_locals.size(); ++l) {
          const std::int32_t t = block_locals[l];
          const std::int64_t before = b * row_size * size_in_bytes(g.nodes[p.transients[t]].type);
          // The address element 0 would have: an integer, as it lies outside the buffer.
          auto* at = reinterpret_cast<const unsigned char*>(
              reinterpret_cast<std::uintptr_t>(memory + l * each) -
              static_cast<std::uintptr_t>(before));
          for (row_walk& w : own_walks)
            if (w.slot == (w.output ? n_outputs : n_inputs) + t) w.data = at;
          for (prepared& m : own) {
            for (auto u : m.reg->reads)
              if (u == t) m.ins[n_inputs + t].data = at;
            for (auto u : m.reg->writes)
              if (u == t) m.outs[n_outputs + t].data = at;
          }
        }
        const std::span<const prepared> these = own.empty() ? members : own;
        const std::span<const row_walk> block_walks = own_walks.empty() ? walks : own_walks;
        for (std::size_t k = 0; k < these.size(); ++k) {
          // An epilogue's space is the rows themselves: nothing of it is reduced.
          bool over_rows = these[k].space == space;
          run(i + k, these[k], {b, std::min(last, b + block_rows)}, over_rows ? axes : 0,
              block_walks.subspan(walk_begin[k], walk_begin[k + 1] - walk_begin[k]), row_size,
              flat[k]);
        }
      }
    };
    if (threads == 1) {
      run_block(0, rows_total);
    } else {
      parallel_for(rows_total,
                   std::max<std::int64_t>(
                       claim_elements(total, threads) / std::max<std::int64_t>(row_size, 1), 1),
                   run_block);
    }
    if (profile.on()) profile.record(p, i, end, group_t0);
    i = end;
  }
  if (profile.on()) profile.print(program);
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu

#if KILN_RUNTIME_BODY  // the definitions of the kernels it calls: the chosen set's
#include "kiln/runtime/cpu/kernels.hpp"
#endif
