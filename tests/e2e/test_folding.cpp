// Constant folding gives the kernels' bits: every op the compiler folds, on constants at the edges
// (±0, ±inf, NaN, integer extremes, shift counts past the width), against the same op on the same
// values as run-time inputs, computed by the default device and by the CPU interpreter.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include <kiln/executable.hpp>

using namespace kiln;
using ir::op;
using ir::op_class;

namespace {

struct value_bits {
  double f = 0;
  std::int64_t i = 0;
};

// The operand type an op is checked on: f32 where it accepts it, else i32, else bool.
dtype operand_type(const ir::op_info& info) {
  if (ir::accepts(info.types, dtype::f32)) return dtype::f32;
  if (ir::accepts(info.types, dtype::i32)) return dtype::i32;
  return dtype::boolean;
}

std::vector<value_bits> edge_values(dtype t) {
  if (t == dtype::f32) return {{0.0}, {-0.0}, {1.5}, {-2.5}, {3.0}, {INFINITY}, {-INFINITY}, {NAN}};
  if (t == dtype::i32)
    return {{0, 0}, {0, -1}, {0, 7}, {0, -7}, {0, 33}, {0, INT32_MIN}, {0, INT32_MAX}};
  return {{0, 0}, {0, 1}};
}

graph::value constant_of(graph& g, dtype t, const value_bits& v) {
  if (t == dtype::f32) return g.constant(v.f, dtype::f32);
  return g.constant(v.i, t);
}

// The result of op o on `operands`, folded by the compiler (nullopt where it does not fold).
std::optional<value_bits> folded(op o, dtype t, std::span<const value_bits> operands) {
  graph g;
  std::vector<graph::value> c;
  for (const auto& v : operands) c.push_back(constant_of(g, t, v));
  g.output("r", operands.size() == 1   ? g.apply(o, {c[0]})
                : operands.size() == 2 ? g.apply(o, {c[0], c[1]})
                                       : g.apply(o, {c[0], c[1], c[2]}));
  auto p = compiler::compile(g.ir());
  const ir::node& r = p.graph.nodes[p.graph.outputs[0]];
  if (r.kind != op::constant) return std::nullopt;
  return value_bits{r.value.f, r.value.i};
}

// Op o with its operands as run-time inputs.
executable with_inputs(op o, dtype t) {
  graph g;
  std::vector<graph::value> in;
  for (int k = 0; k < ir::info(o).arity; ++k)
    in.push_back(g.input(std::string("x").append(std::to_string(k)), t, {}));
  g.output("r", in.size() == 1   ? g.apply(o, {in[0]})
                : in.size() == 2 ? g.apply(o, {in[0], in[1]})
                                 : g.apply(o, {in[0], in[1], in[2]}));
  return compile(g);
}

// exe (with_inputs(o, t)) on `operands`, on device d.
value_bits computed(executable& exe, op o, dtype t, std::span<const value_bits> operands,
                    const device& d) {
  dtype result = ir::result_dtype(o, t);
  std::array<float, 3> f{};
  std::array<std::int32_t, 3> i{};
  std::array<bool, 3> b{};
  std::vector<tensor_ref> args;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    f[k] = static_cast<float>(operands[k].f);
    i[k] = static_cast<std::int32_t>(operands[k].i);
    b[k] = operands[k].i != 0;
    if (t == dtype::f32) args.emplace_back(&f[k], dtype::f32, shape{});
    if (t == dtype::i32) args.emplace_back(&i[k], dtype::i32, shape{});
    if (t == dtype::boolean) args.emplace_back(&b[k], dtype::boolean, shape{});
  }
  float rf = 0;
  std::int32_t ri = 0;
  bool rb = false;
  void* out = result == dtype::f32   ? static_cast<void*>(&rf)
              : result == dtype::i32 ? static_cast<void*>(&ri)
                                     : static_cast<void*>(&rb);
  std::vector<tensor_ref> results{tensor_ref(out, result, shape{})};
  exe.run(args, results, d);
  if (result == dtype::f32) return {rf, 0};
  if (result == dtype::i32) return {0, ri};
  return {0, rb};
}

bool same(dtype t, const value_bits& a, const value_bits& b) {
  if (t != dtype::f32) return a.i == b.i;
  auto fa = static_cast<float>(a.f), fb = static_cast<float>(b.f);
  if (std::isnan(fa) || std::isnan(fb)) return std::isnan(fa) && std::isnan(fb);
  return std::memcmp(&fa, &fb, 4) == 0;
}

}  // namespace

TEST(Folding, AgreesWithTheKernelsAtTheEdges) {
  const device devices[] = {device::default_device(), device::cpu()};
  int compared = 0;
  for (int k = 0; k < ir::op_count; ++k) {
    const ir::op_info& info = ir::op_table[k];
    // Reductions and views are never folded: constants are rank 0, and they need axes.
    if (info.cls == op_class::leaf || info.cls == op_class::select || info.cls == op_class::cast ||
        ir::is_root(info.cls) || info.cls == op_class::view)
      continue;
    auto o = static_cast<op>(k);
    dtype t = operand_type(info);
    dtype result = ir::result_dtype(o, t);
    auto values = edge_values(t);
    executable exe = with_inputs(o, t);
    std::size_t n = values.size(), combos = 1;
    for (int a = 0; a < info.arity; ++a) combos *= n;
    for (std::size_t c = 0; c < combos; c += info.arity == 3 ? 7 : 1) {
      std::vector<value_bits> operands;
      for (std::size_t a = 0, rest = c; a < static_cast<std::size_t>(info.arity); ++a, rest /= n)
        operands.push_back(values[rest % n]);
      auto f = folded(o, t, operands);
      if (!f) continue;  // left to the kernels (transcendental functions, float remainders)
      for (const device& d : devices) {
        value_bits r = computed(exe, o, t, operands, d);
        ++compared;
        std::string args;
        for (const auto& v : operands)
          args += (t == dtype::f32 ? std::to_string(v.f) : std::to_string(v.i)) + " ";
        EXPECT_TRUE(same(result, *f, r))
            << info.name << "(" << args << ") folds to " << (result == dtype::f32 ? f->f : f->i)
            << " but computes " << (result == dtype::f32 ? r.f : r.i) << " on " << d.name();
      }
    }
  }
  EXPECT_GT(compared, 500);
}
