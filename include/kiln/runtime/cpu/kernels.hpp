// The CPU kernels whose speed depends on the vector width (the GEMM and convolutions, reductions,
// the run-time door's interpreter) as one table per instruction set. The prebuilt runtime library
// holds a table for each x86-64 level it is built for and uses the widest this CPU runs, as
// oneDNN and ONNX Runtime's MLAS do; KILN_CPU_ISA=sse2|avx2|avx512 asks for another. A program
// that includes kiln header-only has its own files' set alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/codegen/cpu/isa.hpp"
#include "kiln/compiler/plan.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/arena.hpp"
#include "kiln/runtime/cpu/convolution.hpp"
#include "kiln/runtime/cpu/reduction.hpp"
#include "kiln/runtime/cpu/run_plan.hpp"

namespace kiln::cpu {

// One instruction set's kernels. Each entry has the signature of the kiln::cpu function of the
// same name, which calls the chosen table's.
struct kernel_table {
  const char* isa;    // the set's namespace (codegen/cpu/isa.hpp): "isa_avx2_fma_f16c"
  const char* level;  // its name in KILN_CPU_ISA: "sse2", "avx2", "avx512" (elsewhere: isa)
  void (*run_matmul)(dtype, const matmul_operand&, const matmul_operand&, tile_ref);
  bool (*packing_computes_once)(dtype, int, std::int64_t);
  std::size_t (*pack_weights)(dtype, const matmul_operand&, void*);
  void (*run_conv)(dtype, const shape&, const operand_layout&, const shape&, const operand_layout&,
                   const shape&, const conv_geometry&, tile_ref);
  std::size_t (*pack_conv_weights)(dtype, const shape&, const operand_layout&, const shape&,
                                   const conv_geometry&, void*);
  void (*run_reduction)(row_ref, fold_fn, ir::op, dtype, const shape&, const ir::attributes&,
                        std::span<const std::int32_t>, std::span<const operand_layout>,
                        std::span<const std::int32_t>, std::span<const operand_layout>, int,
                        row_block);
  void (*reduce_rows)(row_ref, fold_fn, ir::op, dtype, const ir::attributes&,
                      std::span<const row_walk>, std::size_t, std::size_t, int, std::int64_t,
                      row_block);
  // The interpreter: a plan's regions as this set's tile programs (owned by the handle), and a
  // call of the plan over them.
  std::shared_ptr<const void> (*interpret)(const compiler::plan&);
  void (*run_interpreted)(const compiler::plan&, const void* programs,
                          std::span<const runtime::buffer_ref> args,
                          std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                          const std::vector<bool>* only, const runtime::arena& transients,
                          std::string_view program, packed_weights* weights);
};

// A table this program holds, and whether this CPU (and its operating system) runs it.
struct built_kernel {
  const kernel_table* table;
  bool runs;
};

// Every table this program holds, narrowest first.
KILN_RUNTIME_API std::vector<built_kernel> built_kernels();

// The table the CPU path uses, chosen at its first use: KILN_CPU_ISA's where it is set (a set not
// built, or one this CPU cannot run, is a kiln::error naming both), else the widest this CPU
// runs.
KILN_RUNTIME_API const kernel_table& chosen_kernels();

// The choice itself, from KILN_CPU_ISA's value (null: unset) and the built tables.
KILN_RUNTIME_API const kernel_table& choose_kernels(const char* requested,
                                                    std::span<const built_kernel> built);

// What the CPU path runs for plan p, for KILN_DUMP_DIR's 4-cpu.txt: the instruction set chosen and,
// per region, its loop (rows in tiles, a reduction's fold, the packed GEMM with its epilogue),
// the ops it evaluates in order, what it loads and what it stores.
KILN_RUNTIME_API std::string describe_plan(const compiler::plan& p);

// A run-time plan's regions compiled by the chosen set's interpreter.
class interpreted_plan {
 public:
  explicit interpreted_plan(const compiler::plan& p)
      : kernels_(&chosen_kernels()), programs_(kernels_->interpret(p)) {}

  // Runs the regions of p marked in `only` (or all) on host data, as run_plan does.
  void run(const compiler::plan& p, std::span<const runtime::buffer_ref> args,
           std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
           const std::vector<bool>* only, const runtime::arena& transients,
           std::string_view program, packed_weights* weights = nullptr) const {
    kernels_->run_interpreted(p, programs_.get(), args, results, sym, only, transients, program,
                              weights);
  }

 private:
  const kernel_table* kernels_;
  std::shared_ptr<const void> programs_;
};

}  // namespace kiln::cpu

// This set's table: wherever the runtime is compiled, and in each per-set object of the library.
#if KILN_CPU_KERNELS_BODY
#include "kiln/codegen/cpu/interpreter.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA::kernels {

inline std::shared_ptr<const void> interpret(const compiler::plan& p) {
  auto programs = std::make_shared<std::vector<tile_program>>();
  for (const compiler::region& reg : p.regions) programs->emplace_back(p, reg);
  return programs;
}

inline void run_interpreted(const compiler::plan& p, const void* programs,
                            std::span<const runtime::buffer_ref> args,
                            std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                            const std::vector<bool>* only, const runtime::arena& transients,
                            std::string_view program, packed_weights* weights) {
  const auto& regions = *static_cast<const std::vector<tile_program>*>(programs);
  run_plan(
      p,
      [&](int region, const void* const* in, const std::int64_t* step, void* const* out,
          std::int64_t n) { regions[region].row(in, step, out, n); },
      {},  // the tile programs store a reduction's operand: run_reduction folds it
      args, results, sym, only, transients, program, weights);
}

inline const kernel_table& table() {
  static constexpr kernel_table t{
      KILN_CPU_ISA_NAME, KILN_CPU_LEVEL, &run_matmul,        &packing_computes_once,
      &pack_weights,     &run_conv,      &pack_conv_weights, &run_reduction,
      &reduce_rows,      &interpret,     &run_interpreted};
  return t;
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA::kernels
#endif  // KILN_CPU_KERNELS_BODY

// The choice and the kiln::cpu functions that call the chosen table.
#if KILN_RUNTIME_BODY
#include <cstdlib>
#include <string>

namespace kiln::cpu {

#if defined(KILN_CPU_DISPATCH)
// The library's per-level objects (src/cpu_kernels.cpp, built by CMake on x86-64).
extern "C" const kernel_table* kiln_cpu_kernels_x86_64_v3();
extern "C" const kernel_table* kiln_cpu_kernels_x86_64_v4();
#endif

KILN_RUNTIME_API std::vector<built_kernel> built_kernels() {
  std::vector<built_kernel> built{{&kernels::table(), true}};  // the runtime's own: its build's
#if defined(KILN_CPU_DISPATCH)
  __builtin_cpu_init();
  built.push_back({kiln_cpu_kernels_x86_64_v3(), __builtin_cpu_supports("x86-64-v3") != 0});
  built.push_back({kiln_cpu_kernels_x86_64_v4(), __builtin_cpu_supports("x86-64-v4") != 0});
#endif
  return built;
}

KILN_RUNTIME_API const kernel_table& choose_kernels(const char* requested,
                                                    std::span<const built_kernel> built) {
  const kernel_table* widest = built.front().table;
  std::string names, runnable;
  for (const built_kernel& k : built) {
    if (k.runs) widest = k.table;
    names += std::string(names.empty() ? "" : ", ") + k.table->level;
    if (k.runs) runnable += std::string(runnable.empty() ? "" : ", ") + k.table->level;
  }
  if (!requested || !*requested) return *widest;
  const std::string want = requested;
  const built_kernel* found = nullptr;
  for (const built_kernel& k : built)
    if (want == k.table->level) found = &k;
  if (!found)
    throw error(errc::invalid_argument, "KILN_CPU_ISA",
                "'" + want + "' is not an instruction set of this runtime (built: " + names + ")");
  if (!found->runs)
    throw error(errc::unsupported, "KILN_CPU_ISA",
                "this CPU cannot run '" + want + "' (it runs: " + runnable + ")");
  return *found->table;
}

KILN_RUNTIME_API const kernel_table& chosen_kernels() {
  static const kernel_table* const chosen = [] {
    const std::vector<built_kernel> built = built_kernels();
    return &choose_kernels(std::getenv("KILN_CPU_ISA"), built);
  }();
  return *chosen;
}

KILN_RUNTIME_API const char* runtime_isa() { return chosen_kernels().isa; }

KILN_RUNTIME_API std::string describe_plan(const compiler::plan& p) {
  const ir::graph& g = p.graph;
  auto value_text = [&](std::int32_t id) {
    return "%" + std::to_string(id) + " : " + ir::type_text(g.nodes[id].type, g.nodes[id].dims);
  };
  std::string out = std::string("instruction set: ") + chosen_kernels().level + " (" +
                    chosen_kernels().isa + "); threads: up to " + std::to_string(thread_count()) +
                    "\nrows: the graph door's interpreter takes a row in tiles of " +
                    std::to_string(tile_elements) +
                    " elements; a kiln::fn's row function is compiled into the program with its "
                    "flags\n";
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const compiler::region& reg = p.regions[r];
    std::size_t last = r;  // a row group's regions, from its first
    while (last + 1 < p.regions.size() && p.regions[last + 1].group == reg.group) ++last;
    if ((r == 0 || p.regions[r - 1].group != reg.group) && last > r)
      out += "dispatch " + std::to_string(reg.group) + ": regions " + std::to_string(r) + " to " +
             std::to_string(last) + " as a row group (each block of rows through all of them)\n";
    out += "region " + std::to_string(r) + " (dispatch " + std::to_string(reg.group) + ") over " +
           ir::dims_text(reg.space) + ": ";
    if (reg.contraction >= 0) {
      out += std::string(ir::name(g.nodes[reg.contraction].kind)) +
             " as the packed GEMM (operand panels packed per cache block, the " +
             chosen_kernels().level +
             " micro-kernel over register tiles, output tiles split across threads), the ops "
             "below run on each finished tile\n";
    } else if (reg.root >= 0) {
      out += std::string(ir::name(g.nodes[reg.root].kind)) +
             ": the operand's rows computed by the ops below, each row folded as it is made "
             "(rows split across threads)\n";
    } else {
      out += "rows of the space through the ops below (rows split across threads)\n";
    }
    const std::vector<bool> evaluated = compiler::evaluated_nodes(p, reg);
    for (auto id : reg.nodes) {
      if (!evaluated[static_cast<std::size_t>(id)] || id == reg.root) continue;
      const ir::node& n = g.nodes[id];
      out += "  ";
      if (id == reg.contraction) {
        out += value_text(id) + " = the finished tile\n";
      } else if (const int slot = compiler::load_slot(p, reg, id); slot >= 0) {
        out += value_text(id) + " = load " + compiler::slot_text(p, slot) + "\n";
      } else if (n.kind == ir::op::constant) {
        out += value_text(id) + " = constant\n";
      } else {
        out += value_text(id) + " = " + std::string(ir::name(n.kind));
        for (int k = 0; k < n.arity(); ++k)
          out += (k ? ", %" : " %") + std::to_string(n.operands[k]);
        out += "\n";
      }
    }
    for (const compiler::store& st : compiler::region_stores(p, reg))
      out += "  store %" + std::to_string(st.node) + " -> " +
             (reg.root >= 0 ? std::string("the fold")
              : st.slot < static_cast<std::int32_t>(g.outputs.size())
                  ? "result" + std::to_string(st.slot)
                  : "t" + std::to_string(st.slot - static_cast<std::int32_t>(g.outputs.size()))) +
             "\n";
  }
  return out;
}

KILN_RUNTIME_API void run_matmul(dtype type, const matmul_operand& a, const matmul_operand& b,
                                 tile_ref epilogue) {
  chosen_kernels().run_matmul(type, a, b, epilogue);
}

KILN_RUNTIME_API bool packing_computes_once(dtype type, int operand, std::int64_t n) {
  return chosen_kernels().packing_computes_once(type, operand, n);
}

KILN_RUNTIME_API std::size_t pack_weights(dtype type, const matmul_operand& b, void* to) {
  return chosen_kernels().pack_weights(type, b, to);
}

KILN_RUNTIME_API void run_conv(dtype type, const shape& x_dims, const operand_layout& x,
                               const shape& w_dims, const operand_layout& w, const shape& y_dims,
                               const conv_geometry& c, tile_ref epilogue) {
  chosen_kernels().run_conv(type, x_dims, x, w_dims, w, y_dims, c, epilogue);
}

KILN_RUNTIME_API std::size_t pack_conv_weights(dtype type, const shape& w_dims,
                                               const operand_layout& w, const shape& y_dims,
                                               const conv_geometry& c, void* to) {
  return chosen_kernels().pack_conv_weights(type, w_dims, w, y_dims, c, to);
}

KILN_RUNTIME_API void run_reduction(row_ref row, fold_fn fold, ir::op kind, dtype type,
                                    const shape& space, const ir::attributes& attrs,
                                    std::span<const std::int32_t> in_slots,
                                    std::span<const operand_layout> ins,
                                    std::span<const std::int32_t> out_slots,
                                    std::span<const operand_layout> outs, int direct,
                                    row_block rows) {
  chosen_kernels().run_reduction(row, fold, kind, type, space, attrs, in_slots, ins, out_slots,
                                 outs, direct, rows);
}

KILN_RUNTIME_API void reduce_rows(row_ref row, fold_fn fold, ir::op kind, dtype type,
                                  const ir::attributes& attrs, std::span<const row_walk> walks,
                                  std::size_t in_slots, std::size_t out_slots, int direct,
                                  std::int64_t row_size, row_block rows) {
  chosen_kernels().reduce_rows(row, fold, kind, type, attrs, walks, in_slots, out_slots, direct,
                               row_size, rows);
}

}  // namespace kiln::cpu
#endif  // KILN_RUNTIME_BODY
