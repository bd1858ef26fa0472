// Contractions: a matmul or a convolution (implicit GEMM) as a tiled GEMM in shared memory, its
// prologues computed as the blocks are staged and its epilogue run on the result's rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kiln/codegen/spirv/region_emitter.hpp"

namespace kiln::spirv::detail {

// A GEMM, C[b] = A[b] x B[b] (a matmul; a convolution as implicit GEMM, b = image x groups +
// group: A the group's weights [out channels, in channels x kernel cells], B the input under each
// output cell's window, gathered as the block is staged, zero in the padding and, transposed,
// where no input cell lands on the output cell; C's columns the output cells): workgroup (x, y,
// z) computes the tile of batch z at rows y rows(), columns x cols() (target::gemm); invocation i
// keeps rows b (i / threads_x) + 0..b-1 (b = block_rows) x columns 4 (i % threads_x) + 0..3 in b
// vector accumulators. Each step along K, the workgroup stages a rows x depth block of A and a
// depth x cols block of B in shared memory (zero past the edges, so every load is in bounds),
// gathered in the step before, then gathers the next step's blocks and adds its products. The
// epilogue then runs on each of its rows before they are stored. The steps are K / depth loop
// iterations (the executor keeps them under the drivers' 65535).
inline void region_emitter::contraction_body() {
  const target::gemm_tile tile = this->tile();
  const ir::node& c = g_.nodes[mb_->r->contraction];
  const dtype in_t = g_.nodes[c.operands[0]].type;
  const lane_kind lk = lane_of(c.type);
  const id v4 = vec(lk);
  const int rank = mb_->rank, spatial = rank - 2;
  const bool conv = ir::is_convolution(c.kind), transposed = c.kind == ir::op::conv_transpose;
  const std::uint32_t invocations = tile.invocations();
  id uvec3 = m_.type_vector(u32(), 3);
  local_ = lane(m_.emit(Op::OpLoad, uvec3, {local_id_}), u32(), 0);
  id wg = m_.emit(Op::OpLoad, uvec3, {group_id_});
  id tx = m_.emit(Op::OpUMod, u32(), {local_, cu(tile.threads_x)});
  id ty = m_.emit(Op::OpUDiv, u32(), {local_, cu(tile.threads_x)});
  auto word = [&](int i) { return metadata(mb_->gemm_at + static_cast<std::uint32_t>(i)); };
  id K = word(0), M = word(1), N = word(2);
  // Operand o's (0: A, 1: B) stride along its axis a (a == rank: its offset).
  auto stride = [&](int o, int a) { return word(3 + o * (rank + 1) + a); };
  const int conv_at = 3 + 2 * (rank + 1);
  id groups = 0, in_group = 0, kernel_cells = 0;
  // A convolution's spatial axis a: its stride, start, dilation, kernel and input extents.
  auto axis = [&](int a, int what) { return word(conv_at + 3 + 5 * a + what); };
  if (conv) {
    groups = word(conv_at);
    in_group = word(conv_at + 1);
    kernel_cells = word(conv_at + 2);
  }
  auto add = [&](id a, id b) { return m_.emit(Op::OpIAdd, u32(), {a, b}); };
  auto mul = [&](id a, id b) { return m_.emit(Op::OpIMul, u32(), {a, b}); };
  id batch = lane(wg, u32(), 2);
  id offset[2] = {stride(0, rank), stride(1, rank)};
  // A convolution's weights along A's rows (output channels) and its input channels: w [M, C /
  // groups, kernel...], or transposed w [C, M / groups, kernel...].
  const int row_axis = transposed ? 1 : 0, channel_axis = transposed ? 0 : 1;
  if (conv) {  // batch = image x groups + group: the group's weights, the image's channels
    id image = m_.emit(Op::OpUDiv, u32(), {batch, groups});
    id group = m_.emit(Op::OpUMod, u32(), {batch, groups});
    offset[0] = add(offset[0], mul(mul(group, transposed ? in_group : M), stride(0, 0)));
    offset[1] =
        add(offset[1], add(mul(image, stride(1, 0)), mul(mul(group, in_group), stride(1, 1))));
  } else {
    id left = batch;
    for (int d = rank - 3; d >= 0; --d) {
      id coord = m_.emit(Op::OpUMod, u32(), {left, mb_->dims[d]});
      left = m_.emit(Op::OpUDiv, u32(), {left, mb_->dims[d]});
      for (int o = 0; o < 2; ++o) offset[o] = add(offset[o], mul(coord, stride(o, d)));
    }
  }
  // A convolution's k: input channel k / kernel_cells, and the kernel cell's coordinates.
  auto kernel_cell = [&](id k, std::vector<id>& cell) {
    id at = m_.emit(Op::OpUMod, u32(), {k, kernel_cells});
    cell.assign(spatial, 0);
    for (int a = spatial - 1; a >= 0; --a) {
      cell[a] = m_.emit(Op::OpUMod, u32(), {at, axis(a, 3)});
      at = m_.emit(Op::OpUDiv, u32(), {at, axis(a, 3)});
    }
    return m_.emit(Op::OpUDiv, u32(), {k, kernel_cells});
  };
  id row0 = m_.emit(Op::OpIMul, u32(), {lane(wg, u32(), 1), cu(tile.rows())});
  id col0 = m_.emit(Op::OpIMul, u32(), {lane(wg, u32(), 0), cu(tile.cols())});
  auto uv = [&](id x) { return compose(uvec4(), x, x, x, x); };
  id zero = is_float_lane(lk) ? fsplat(lk, 0) : isplat(lk, 0);
  auto inputs = compiler::input_slots(p_, *mb_->r);
  // GEMM operand o's input slot (0: A, 1: B): a convolution's A is its second operand, the
  // weights.
  const int slots[2] = {compiler::load_slot(p_, *mb_->r, c.operands[conv ? 1 : 0]),
                        compiler::load_slot(p_, *mb_->r, c.operands[conv ? 0 : 1])};
  auto var_of = [&](int o) {
    return binding(static_cast<std::size_t>(std::find(inputs.begin(), inputs.end(), slots[o]) -
                                            inputs.begin()));
  };
  const id vars[2] = {var_of(0), var_of(1)};
  // The operands that a prologue member computes (the members after the first): the transient
  // it would write is the operand's row-major storage, so an element's index there is its index
  // in the prologue's space.
  std::size_t computed[2] = {0, 0};  // a member's index, 0 for none
  for (std::size_t m = 1; m < members_.size(); ++m)
    for (int o = 0; o < 2; ++o)
      if (slots[o] == static_cast<int>(g_.inputs.size()) + members_[m].r->writes[0])
        computed[o] = m;
  // Operand o's elements at indices idx where ok holds, else 0.
  auto gather = [&](int o, id idx, id ok) {
    id safe = m_.emit(Op::OpSelect, uvec4(), {ok, idx, usplat(0)});
    id l[4];
    const int bytes = size_in_bytes(in_t);
    id v;
    if (computed[o]) {
      v = evaluate_prologue(computed[o], safe);
    } else if (bytes == 8) {
      for (std::uint32_t i = 0; i < 4; ++i) l[i] = element64(vars[o], lane(safe, u32(), i), lk);
      v = compose(v4, l[0], l[1], l[2], l[3]);
    } else {
      for (std::uint32_t i = 0; i < 4; ++i)
        l[i] = element_bits(vars[o], lane(safe, u32(), i), bytes);
      v = from_bits(in_t, compose(uvec4(), l[0], l[1], l[2], l[3]));
    }
    return m_.emit(Op::OpSelect, v4, {ok, v, zero});
  };
  auto below = [&](id a, id b) { return m_.emit(Op::OpULessThan, bvec4(), {a, b}); };
  auto both = [&](id a, id b) { return m_.emit(Op::OpLogicalAnd, bvec4(), {a, b}); };
  auto at = [&](id x, id s) { return m_.emit(Op::OpIMul, uvec4(), {x, uv(s)}); };
  // The element indices of A at rows `rows` (lanes), column k.
  auto a_index = [&](id rows, id k) {
    id off;
    if (conv) {
      std::vector<id> cell;
      off = add(offset[0], mul(kernel_cell(k, cell), stride(0, channel_axis)));
      for (int a = 0; a < spatial; ++a) off = add(off, mul(cell[a], stride(0, 2 + a)));
    } else {
      off = add(offset[0], mul(k, stride(0, rank - 1)));
    }
    return m_.emit(Op::OpIAdd, uvec4(), {uv(off), at(rows, stride(0, conv ? row_axis : rank - 2))});
  };
  // The element indices of B at row k, columns `cols` (lanes); `ok` loses the lanes whose window
  // cell is padding (transposed: where no input cell lands on the output cell).
  auto b_index = [&](id k, id cols, id& ok) {
    if (!conv)
      return m_.emit(
          Op::OpIAdd, uvec4(),
          {uv(add(offset[1], mul(k, stride(1, rank - 2)))), at(cols, stride(1, rank - 1))});
    std::vector<id> cell;
    id idx = uv(add(offset[1], mul(kernel_cell(k, cell), stride(1, 1))));
    id rest = cols;
    for (int a = spatial - 1; a >= 0; --a) {  // the output cell's coordinates, last axis first
      id out = m_.emit(Op::OpUMod, uvec4(), {rest, uv(mb_->dims[2 + a])});
      rest = m_.emit(Op::OpUDiv, uvec4(), {rest, uv(mb_->dims[2 + a])});
      id shift = add(axis(a, 1), mul(cell[a], axis(a, 2)));  // start + cell x dilation
      id in;
      if (!transposed) {  // in = out x stride + shift
        in = m_.emit(Op::OpIAdd, uvec4(), {at(out, axis(a, 0)), uv(shift)});
      } else {  // in x stride + shift = out: where out - shift is a non-negative multiple
        id num = m_.emit(Op::OpISub, uvec4(), {out, uv(shift)});
        id step = uv(axis(a, 0));
        ok = both(ok, m_.emit(Op::OpSGreaterThanEqual, bvec4(), {num, usplat(0)}));
        ok = both(ok, m_.emit(Op::OpIEqual, bvec4(),
                              {m_.emit(Op::OpUMod, uvec4(), {num, step}), usplat(0)}));
        in = m_.emit(Op::OpUDiv, uvec4(), {num, step});
      }
      ok = both(ok, below(in, uv(axis(a, 4))));  // (a negative position wraps past it)
      idx = m_.emit(Op::OpIAdd, uvec4(), {idx, at(in, stride(1, 2 + a))});
    }
    return idx;
  };
  // Operand o's block (0: A, 1: B) for one step along K is groups of four elements (A: four rows
  // at one k; B: four columns at one k), group q0 + local_ of them in an invocation's turn q0:
  // slot_of gives its k within the step and its group of rows or columns.
  const std::uint32_t block_groups[2] = {tile.rows() / 4 * tile.depth, tile.depth * tile.threads_x};
  auto slot_of = [&](int o, std::uint32_t q0) -> std::pair<id, id> {
    id q = m_.emit(Op::OpIAdd, u32(), {local_, cu(q0)});
    const std::uint32_t d = o == 0 ? tile.depth : tile.threads_x;
    id major = m_.emit(Op::OpUDiv, u32(), {q, cu(d)}),
       minor = m_.emit(Op::OpUMod, u32(), {q, cu(d)});
    return o == 0 ? std::pair{minor, major} : std::pair{major, minor};
  };
  // The staging of operand o's block for the step at k0: each group of four elements in turn is
  // gathered and passed to store(kk, g, v), kk its k within the step, g its group of rows or
  // columns. The caller puts the barrier after the blocks.
  auto stage = [&](id k0, int o, function_ref<void(id kk, id g, id v)> store) {
    for (std::uint32_t q0 = 0; q0 < block_groups[o]; q0 += invocations) {
      auto [kk, g] = slot_of(o, q0);
      id k = m_.emit(Op::OpIAdd, u32(), {k0, kk});
      id first = m_.emit(Op::OpIAdd, u32(),
                         {o == 0 ? row0 : col0, m_.emit(Op::OpIMul, u32(), {g, cu(4)})});
      id lanes = consecutive_from(first);
      id ok = both(below(lanes, uv(o == 0 ? M : N)), below(uv(k), uv(K)));
      id idx = o == 0 ? a_index(lanes, k) : b_index(k, lanes, ok);
      store(kk, g, gather(o, idx, ok));
    }
  };
  // The epilogue of four columns col .. col + 3 of row `row` of the result, v their products: the
  // product as the contraction's dtype (a narrow float rounded, as the CPU's tile holds it), at
  // element e of the result.
  const bool narrow = lk == lane_kind::f32 && c.type != dtype::f32;
  auto epilogue = [&](id row, id col, id v) {
    id inside = m_.emit(Op::OpLogicalAnd, m_.type_bool(),
                        {m_.emit(Op::OpULessThan, m_.type_bool(), {row, M}),
                         m_.emit(Op::OpULessThan, m_.type_bool(), {col, N})});
    only_where(inside, [&] {
      id e = m_.emit(
          Op::OpIAdd, u32(),
          {m_.emit(Op::OpIMul, u32(),
                   {m_.emit(Op::OpIAdd, u32(), {m_.emit(Op::OpIMul, u32(), {batch, M}), row}), N}),
           col});
      forget_coordinates();
      product_ = narrow ? from_bits(c.type, to_bits(c.type, v)) : v;
      if (whole_quads_) {
        g_index_ = m_.emit(Op::OpShiftRightLogical, u32(), {e, cu(2)});
      } else {
        id last = m_.emit(Op::OpISub, u32(), {mb_->total, cu(1)});
        lanes_ = m_.ext(uvec4(), GLSLstd450UMin, {consecutive_from(e), uv(last)});
        lane_ok_ = below(consecutive_from(col), uv(N));
      }
      store_all(evaluate());
    });
  };
  if (tile.on_matrix_units()) {
    // A matmul's f16 operand that no prologue computes, contiguous along K (A) or N (B), its
    // offset, its other stride and that extent multiples of 8, is read as whole 16-byte groups of
    // eight (matrix_unit_steps); whether it is, each workgroup finds at run time.
    packed_operand packed[2];
    if (!conv && in_t == dtype::f16)
      for (int o = 0; o < 2; ++o) {
        if (computed[o]) continue;
        auto eq = [&](id a, id b) { return m_.emit(Op::OpIEqual, m_.type_bool(), {a, b}); };
        auto eighths = [&](id x) {
          return eq(m_.emit(Op::OpBitwiseAnd, u32(), {x, cu(7)}), cu(0));
        };
        auto all = [&](id a, id b) { return m_.emit(Op::OpLogicalAnd, m_.type_bool(), {a, b}); };
        id lead = stride(o, rank - 2);
        packed[o] = {vars[o], offset[o], lead,
                     all(all(eq(stride(o, rank - 1), cu(1)), eighths(lead)),
                         all(eighths(offset[o]), eighths(o == 0 ? K : N)))};
      }
    matrix_unit_steps(tile, M, N, K, row0, col0, packed, stage, epilogue);
    lanes_ = lane_ok_ = 0;
    return;
  }
  // A: quad q holds rows 4 (q / depth) + 0..3 at column k0 + q % depth, stored at (q % depth)
  // rows / 4 + q / depth, so that four of an invocation's rows at one k are one quad. B: quad q
  // holds row k0 + q / threads_x at columns 4 (q % threads_x) + 0..3.
  auto tile_ptr = [&](std::size_t block, id i) {
    return m_.emit(Op::OpAccessChain, m_.type_pointer(spv::StorageClass::Workgroup, v4),
                   {shared_[block], i});
  };
  const std::uint32_t row_quads = tile.rows() / 4, block_quads = tile.block_rows / 4;
  // Each step stores the blocks gathered in the step before (or before the loop) and gathers the
  // next step's, so that their loads are in flight while this step's products are added rather
  // than between the barriers (no driver hoists a load above a barrier).
  auto gather_step = [&](id k0) {
    carried v;
    for (int o = 0; o < 2; ++o) stage(k0, o, [&](id, id, id x) { v.push_back(x); });
    return v;
  };
  auto store_step = [&](const carried& v, std::size_t at) {
    for (int o = 0; o < 2; ++o)
      for (std::uint32_t q0 = 0; q0 < block_groups[o]; q0 += invocations) {
        auto [kk, g] = slot_of(o, q0);
        id slot =
            m_.emit(Op::OpIAdd, u32(),
                    {m_.emit(Op::OpIMul, u32(), {kk, cu(o == 0 ? row_quads : tile.threads_x)}), g});
        m_.inst(Op::OpStore, {tile_ptr(static_cast<std::size_t>(o), slot), v[at++]});
      }
  };
  carried init(tile.block_rows, zero);
  std::vector<id> types(tile.block_rows, v4);
  for (id v : gather_step(cu(0))) {
    init.push_back(v);
    types.push_back(v4);
  }
  carried acc = counted_loop(
      cu(0), K, cu(tile.depth), init, types, [&](id k0, const carried& now) -> carried {
        store_step(now, tile.block_rows);
        barrier();
        carried next(now.begin(), now.begin() + tile.block_rows);
        for (id v : gather_step(m_.emit(Op::OpIAdd, u32(), {k0, cu(tile.depth)})))
          next.push_back(v);
        id my_quads = m_.emit(Op::OpIMul, u32(), {ty, cu(block_quads)});
        for (std::uint32_t kk = 0; kk < tile.depth; ++kk) {
          id b = m_.emit(Op::OpLoad, v4,
                         {tile_ptr(1, m_.emit(Op::OpIAdd, u32(), {cu(kk * tile.threads_x), tx}))});
          for (std::uint32_t q = 0; q < block_quads; ++q) {
            id a = m_.emit(
                Op::OpLoad, v4,
                {tile_ptr(0, m_.emit(Op::OpIAdd, u32(), {cu(kk * row_quads + q), my_quads}))});
            for (std::uint32_t i = 0; i < 4; ++i) {
              id ai = lane(a, scalar_type(lk), i);
              id product = is_float_lane(lk)
                               ? m_.emit(Op::OpVectorTimesScalar, v4, {b, ai})
                               : m_.emit(Op::OpIMul, v4, {b, compose(v4, ai, ai, ai, ai)});
              id& to = next[4 * q + i];
              to = m_.emit(is_float_lane(lk) ? Op::OpFAdd : Op::OpIAdd, v4, {to, product});
            }
          }
        }
        barrier();  // the next step overwrites the blocks
        return next;
      });
  // The epilogue, a row of the invocation's block at a time.
  for (std::uint32_t i = 0; i < tile.block_rows; ++i) {
    id row =
        m_.emit(Op::OpIAdd, u32(),
                {row0, m_.emit(Op::OpIAdd, u32(),
                               {m_.emit(Op::OpIMul, u32(), {ty, cu(tile.block_rows)}), cu(i)})});
    epilogue(row, m_.emit(Op::OpIAdd, u32(), {col0, m_.emit(Op::OpIMul, u32(), {tx, cu(4)})}),
             acc[i]);
  }
  lanes_ = lane_ok_ = 0;
}

// Prologue member `which`'s value at elements `at` (uvec4) of its space, as its transient
// would hold it (a narrow type's rounding is the store's).
inline id region_emitter::evaluate_prologue(std::size_t which, id at) {
  member* product = mb_;
  const member& m = members_[which];
  mb_ = &members_[which];
  lanes_ = at;
  forget_coordinates();
  const std::int32_t node = m.stores[0].node;
  const dtype t = g_.nodes[node].type;
  id v = evaluate()[node];
  if (size_in_bytes(t) < 4) v = from_bits(t, to_bits(t, v));
  lanes_ = 0;
  forget_coordinates();
  mb_ = product;
  return v;
}

// The steps along K and the epilogue on the matrix units (target::gemm_tile::on_matrix_units):
// each step stages A's block column-major and B's row-major as f16 (rows of `pad` halves more
// than the tile's), then subgroup s (2 x 4 of them) multiplies its rows()/2 x cols()/4 part of the
// tile, rows (s / 4) rows()/2, columns (s % 4) cols()/4, as matrix_m x matrix_n accumulators, K
// matrix_k at a time. After the last step, each accumulator in turn goes through a scratch
// matrix per subgroup in shared memory, from which each invocation takes groups of four columns
// to the same epilogue as the tiled kernel's.
inline void region_emitter::matrix_unit_steps(
    const target::gemm_tile& tile, id M, id N, id K, id row0, id col0,
    const packed_operand (&packed)[2],
    function_ref<void(id k0, int o, function_ref<void(id, id, id)> store)> stage,
    function_ref<void(id row, id col, id v)> epilogue) {
  const std::uint32_t mm = tile.matrix_m, mn = tile.matrix_n, mk = tile.matrix_k;
  const std::uint32_t lda = tile.rows() + tile.pad, ldb = tile.cols() + tile.pad;
  const std::uint32_t sub_rows = tile.rows() / tile.subgroups_y,
                      sub_cols = tile.cols() / tile.subgroups_x;
  const std::uint32_t across = sub_cols / mn, count = sub_rows / mm * across;
  id f16 = m_.type_float(16), f32 = m_.type_float(32);
  id scope = cu(static_cast<std::uint32_t>(spv::Scope::Subgroup));
  id a_type = m_.type_cooperative_matrix(f16, scope, cu(mm), cu(mk));
  id b_type = m_.type_cooperative_matrix(f16, scope, cu(mk), cu(mn));
  id c_type = m_.type_cooperative_matrix(f32, scope, cu(mm), cu(mn));
  id f16_ptr = m_.type_pointer(spv::StorageClass::Workgroup, f16);
  id f32_ptr = m_.type_pointer(spv::StorageClass::Workgroup, f32);
  auto add = [&](id a, id b) { return m_.emit(Op::OpIAdd, u32(), {a, b}); };
  auto mul = [&](id a, id b) { return m_.emit(Op::OpIMul, u32(), {a, b}); };
  id s = m_.emit(Op::OpLoad, u32(), {subgroup_id_});
  id sub_row0 = mul(m_.emit(Op::OpUDiv, u32(), {s, cu(tile.subgroups_x)}), cu(sub_rows));
  id sub_col0 = mul(m_.emit(Op::OpUMod, u32(), {s, cu(tile.subgroups_x)}), cu(sub_cols));
  // The four values of v as f16, stored at elements at .. at + 3 of shared array `block`.
  auto store_halves = [&](std::size_t block, id at, id v) {
    id h = m_.emit(Op::OpFConvert, m_.type_vector(f16, 4), {v});
    for (std::uint32_t l = 0; l < 4; ++l)
      m_.inst(Op::OpStore, {m_.emit(Op::OpAccessChain, f16_ptr, {shared_[block], add(at, cu(l))}),
                            lane(h, f16, l)});
  };
  // Operand o's block from whole groups of eight halves (packed[o]): A's as 128 rows of four
  // groups (four invocations a row, so that a row's 64 bytes are read together), B's as 32 rows
  // of 16, each group one 16-byte load (zero past M, N or K) and eight 16-bit stores.
  auto stage_packed = [&](int o, id k0) {
    const std::uint32_t per_line = o == 0 ? tile.depth / 8 : tile.cols() / 8;
    const std::uint32_t groups = (o == 0 ? tile.rows() : tile.depth) * per_line;
    id f16x2 = m_.type_vector(f16, 2);
    auto below = [&](id a, id b) { return m_.emit(Op::OpULessThan, m_.type_bool(), {a, b}); };
    for (std::uint32_t q0 = 0; q0 < groups; q0 += tile.invocations()) {
      id q = add(local_, cu(q0));
      id line = m_.emit(Op::OpUDiv, u32(), {q, cu(per_line)});  // A: its row; B: its k
      id at = mul(m_.emit(Op::OpUMod, u32(), {q, cu(per_line)}), cu(8));
      id row = o == 0 ? add(row0, line) : add(k0, line);
      id col = o == 0 ? add(k0, at) : add(col0, at);
      id ok = m_.emit(Op::OpLogicalAnd, m_.type_bool(),
                      {below(row, o == 0 ? M : K), below(col, o == 0 ? K : N)});
      id e = add(packed[o].offset, add(mul(row, packed[o].lead), col));
      id group = m_.emit(Op::OpSelect, u32(),
                         {ok, m_.emit(Op::OpShiftRightLogical, u32(), {e, cu(3)}), cu(0)});
      id words = m_.emit(Op::OpSelect, uvec4(),
                         {compose(bvec4(), ok, ok, ok, ok), quad(packed[o].var, group), usplat(0)});
      for (std::uint32_t w = 0; w < 4; ++w) {
        id halves = m_.emit(Op::OpBitcast, f16x2, {lane(words, u32(), w)});
        for (std::uint32_t h = 0; h < 2; ++h) {
          id j = add(at, cu(2 * w + h));
          // A column-major (k j of row `line`), B row-major (k `line`, column j)
          id slot = o == 0 ? add(mul(j, cu(lda)), line) : add(mul(line, cu(ldb)), j);
          m_.inst(Op::OpStore,
                  {m_.emit(Op::OpAccessChain, f16_ptr, {shared_[o], slot}), lane(halves, f16, h)});
        }
      }
    }
  };
  const carried init(count, m_.constant_composite(c_type, {m_.constant_f32(0.0f)}));
  const std::vector<id> types(count, c_type);
  carried acc = counted_loop(
      cu(0), K, cu(tile.depth), init, types, [&](id k0, const carried& now) -> carried {
        for (int o = 0; o < 2; ++o) {
          auto gathered = [&] {
            stage(k0, o, [&](id kk, id g, id v) {
              store_halves(o, add(mul(kk, cu(o == 0 ? lda : ldb)), mul(g, cu(4))), v);
            });
          };
          if (!packed[o].usable) {
            gathered();
            continue;
          }
          only_where(packed[o].usable, [&] { stage_packed(o, k0); });
          only_where(m_.emit(Op::OpLogicalNot, m_.type_bool(), {packed[o].usable}), gathered);
        }
        barrier();
        carried next = now;
        for (std::uint32_t k = 0; k < tile.depth; k += mk) {
          std::vector<id> b(across);
          for (std::uint32_t j = 0; j < across; ++j)
            b[j] = m_.emit(Op::OpCooperativeMatrixLoadNV, b_type,
                           {m_.emit(Op::OpAccessChain, f16_ptr,
                                    {shared_[1], add(sub_col0, cu(k * ldb + j * mn))}),
                            cu(ldb), m_.constant_bool(false)});
          for (std::uint32_t i = 0; i < count / across; ++i) {
            id a = m_.emit(Op::OpCooperativeMatrixLoadNV, a_type,
                           {m_.emit(Op::OpAccessChain, f16_ptr,
                                    {shared_[0], add(sub_row0, cu(k * lda + i * mm))}),
                            cu(lda), m_.constant_bool(true)});
            for (std::uint32_t j = 0; j < across; ++j) {
              id& to = next[i * across + j];
              to = m_.emit(Op::OpCooperativeMatrixMulAddNV, c_type, {a, b[j], to});
            }
          }
        }
        barrier();  // the next step overwrites the blocks
        return next;
      });
  // Scratch: subgroup s's matrix at s mm mn, row-major. A round passes accumulator a of every
  // subgroup: its groups of four columns, subgroups x mm x mn / 4 of them, shared among the
  // workgroup's invocations.
  const std::uint32_t quads = tile.subgroups_x * tile.subgroups_y * mm * mn / 4;
  for (std::uint32_t a = 0; a < count; ++a) {
    m_.inst(Op::OpCooperativeMatrixStoreNV,
            {m_.emit(Op::OpAccessChain, f32_ptr, {shared_[2], mul(s, cu(mm * mn))}), acc[a], cu(mn),
             m_.constant_bool(false)});
    barrier();
    for (std::uint32_t q0 = 0; q0 < quads; q0 += tile.invocations()) {
      id q = add(local_, cu(q0));
      id sub = m_.emit(Op::OpUDiv, u32(), {q, cu(mm * mn / 4)});
      id within = m_.emit(Op::OpUMod, u32(), {q, cu(mm * mn / 4)});
      id r = m_.emit(Op::OpUDiv, u32(), {within, cu(mn / 4)});
      id c4 = m_.emit(Op::OpUMod, u32(), {within, cu(mn / 4)});
      id at = add(mul(sub, cu(mm * mn)), add(mul(r, cu(mn)), mul(c4, cu(4))));
      id l[4];
      for (std::uint32_t i = 0; i < 4; ++i)
        l[i] = m_.emit(Op::OpLoad, f32,
                       {m_.emit(Op::OpAccessChain, f32_ptr, {shared_[2], add(at, cu(i))})});
      id row =
          add(add(row0, mul(m_.emit(Op::OpUDiv, u32(), {sub, cu(tile.subgroups_x)}), cu(sub_rows))),
              add(cu(a / across * mm), r));
      id col =
          add(add(col0, mul(m_.emit(Op::OpUMod, u32(), {sub, cu(tile.subgroups_x)}), cu(sub_cols))),
              add(cu(a % across * mn), mul(c4, cu(4))));
      epilogue(row, col, compose(vec(lane_kind::f32), l[0], l[1], l[2], l[3]));
    }
    barrier();  // the next round overwrites the scratch
  }
}

}  // namespace kiln::spirv::detail
