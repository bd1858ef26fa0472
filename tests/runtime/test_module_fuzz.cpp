// Forged modules: the decoded fields of real modules mutated (sizes, indices, ops, attributes,
// region lists, names, constants) and sealed again with a valid checksum, as someone editing a
// file on purpose would. Each mutant must load as a kiln::error, or load and then run (on the CPU,
// and on Vulkan for a sample) as a kiln::error or a result; anything else (a crash, a sanitizer
// report, another exception) fails. KILN_MODULE_MUTANTS sets the count (the sanitizer build's
// default is 100,000; tests/CMakeLists.txt). To find a crash: KILN_FUZZ_TRACE=all prints each
// mutant's number before it runs, KILN_FUZZ_TRACE=N prints mutant N's plan beside its seed's.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

using namespace kiln;

#ifndef KILN_MODULE_MUTANTS_DEFAULT
#define KILN_MODULE_MUTANTS_DEFAULT 20000
#endif

namespace {

// Modules whose plans reach every kind of region: a matmul with its epilogue and a reduction, a
// row group, views (transpose, slice, gather), a convolution, run-time sizes.
std::vector<std::vector<std::uint8_t>> seed_modules() {
  std::vector<std::vector<std::uint8_t>> seeds;
  {
    graph g;
    auto x = g.input("x", dtype::f32, {dyn, 8});
    auto b = g.input("b", dtype::f32, {8});
    std::vector<float> w(64);
    for (int i = 0; i < 64; ++i) w[i] = float(i % 7) - 3;
    auto y = g.relu(g.add(g.matmul(x, g.constant(w, {8, 8})), b));
    g.output("y", y);
    g.output("s", g.reduce_sum(y, {1}, false));
    seeds.push_back(compile(g).to_bytes());
  }
  {
    graph g;
    auto x = g.input("x", dtype::f32, {4, dyn});
    auto s = g.input("s", dtype::f32, {dyn});
    g.output("n", g.layer_norm(x, s, s, -1, 1e-5));
    g.output("p", g.softmax(g.mul(x, g.constant(0.5)), -1));
    seeds.push_back(compile(g).to_bytes());
  }
  {
    graph g;
    auto x = g.input("x", dtype::f32, {6, 5});
    auto i = g.input("i", dtype::i64, {3});
    auto t = g.transpose(x, {1, 0});
    g.output("t", g.add(g.slice(t, {1, 0}, {4, 6}, {0, 1}, {1, 2}), g.constant(1.0)));
    g.output("g", g.gather(x, i, 0));
    g.output("m", g.reduce_max(x, {0}, true));
    seeds.push_back(compile(g).to_bytes());
  }
  {
    graph g;
    auto x = g.input("x", dtype::f32, {1, 2, 6, 6});
    std::vector<float> w(3 * 2 * 3 * 3);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = float(k % 5) * 0.25f - 0.5f;
    g.output("y",
             g.relu(g.conv(x, g.constant(w, {3, 2, 3, 3}), conv_params{.pads = {1, 1, 1, 1}})));
    seeds.push_back(compile(g).to_bytes());
  }
  return seeds;
}

// One random change to a decoded module.
void mutate(runtime::module_contents& m, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  // A value near one that is there: small changes find off-by-one checks, large ones overflow
  // (in wrapping arithmetic: the mutator itself must not overflow).
  auto near = [&](std::int64_t signed_v) -> std::int64_t {
    const auto v = static_cast<std::uint64_t>(signed_v);
    std::uint64_t out = v * 2;
    switch (rng() % 8) {
      case 0:
        out = v + 1;
        break;
      case 1:
        out = v - 1;
        break;
      case 2:
        out = 0 - v;
        break;
      case 3:
        out = rng() % 64 - 32;
        break;
      case 4:
        out = std::uint64_t{1} << (rng() % 63);
        break;
      case 5:
        out = 0 - (std::uint64_t{1} << (rng() % 63));
        break;
      case 6:
        out = rng();
        break;
      default:
        break;
    }
    return static_cast<std::int64_t>(out);
  };

  auto list = [&](std::vector<std::int32_t>& v) {
    switch (rng() % 3) {
      case 0:
        if (!v.empty()) v.erase(v.begin() + static_cast<std::ptrdiff_t>(pick(v.size())));
        break;
      case 1:
        v.push_back(static_cast<std::int32_t>(near(v.empty() ? 0 : v.back())));
        break;
      default:
        if (!v.empty()) {
          auto& x = v[pick(v.size())];
          x = static_cast<std::int32_t>(near(x));
        }
    }
  };
  ir::graph& g = m.plan.graph;
  compiler::plan& p = m.plan;
  switch (rng() % 12) {
    case 0: {  // a declaration
      if (g.inputs.empty()) break;
      auto& in = g.inputs[pick(g.inputs.size())];
      if (rng() % 4 == 0)
        in.type = static_cast<dtype>(rng() % dtype_count);
      else if (in.dims.rank > 0)
        in.dims.dims[pick(in.dims.rank)] = near(in.dims.dims[0]);
      break;
    }
    case 1:
    case 2: {  // a node
      if (g.nodes.empty()) break;
      ir::node& n = g.nodes[pick(g.nodes.size())];
      switch (rng() % 8) {
        case 0:
          n.kind = static_cast<ir::op>(rng() % ir::op_count);
          break;
        case 1:
          n.type = static_cast<dtype>(rng() % dtype_count);
          break;
        case 2:
          if (n.dims.rank > 0) {
            auto& d = n.dims.dims[pick(n.dims.rank)];
            d = near(d);
          } else {
            n.dims.rank = 1 + static_cast<int>(rng() % max_rank);
          }
          break;
        case 3:
          n.operands[pick(3)] = static_cast<std::int32_t>(near(n.operands[0]));
          break;
        case 4:
          n.arg = static_cast<std::int32_t>(near(n.arg));
          break;
        case 5:
          n.attrs.axes ^= 1u << (rng() % 8);
          break;
        case 6: {
          auto i = pick(max_rank);
          n.attrs.starts[i] = static_cast<std::int32_t>(near(n.attrs.starts[i]));
          n.attrs.steps[pick(max_rank)] = static_cast<std::int32_t>(near(1));
          break;
        }
        default:
          n.attrs.perm[pick(max_rank)] = static_cast<std::int8_t>(rng() % 10);
          n.attrs.axis = static_cast<std::int8_t>(rng() % 10) - 2;
          n.attrs.groups = static_cast<std::int32_t>(near(n.attrs.groups));
      }
      break;
    }
    case 3:  // symbols and constraints
      if (!g.symbols.empty() && rng() % 2) {
        auto& s = g.symbols[pick(g.symbols.size())];
        (rng() % 2 ? s.a : s.b) = static_cast<std::int32_t>(near(s.a));
      } else if (!g.constraints.empty()) {
        auto& c = g.constraints[pick(g.constraints.size())];
        c.size = near(c.size);
      } else {
        g.constraints.push_back({static_cast<std::int32_t>(near(0)), near(2), 0});
      }
      break;
    case 4:
      list(g.outputs);
      break;
    case 5:
    case 6:
    case 7: {  // a region
      if (p.regions.empty()) break;
      compiler::region& r = p.regions[pick(p.regions.size())];
      std::vector<std::int32_t>* lists[] = {&r.nodes,  &r.args,  &r.results,    &r.reads,
                                            &r.writes, &r.views, &r.view_reads, &r.indices};
      switch (rng() % 4) {
        case 0:
          if (r.space.rank > 0) r.space.dims[pick(r.space.rank)] = near(r.space.dims[0]);
          break;
        case 1:
          (rng() % 2 ? r.root : r.contraction) = static_cast<std::int32_t>(near(r.root));
          break;
        case 2:
          r.group = static_cast<std::int32_t>(near(r.group));
          break;
        default:
          list(*lists[pick(8)]);
      }
      break;
    }
    case 8:
      list(rng() % 3 == 0 ? p.transients : rng() % 2 ? p.views : p.view_bases);
      break;
    case 9:  // names
      if (rng() % 2 && !m.parts.inputs.empty())
        m.parts.inputs.pop_back();
      else
        m.parts.outputs.push_back("extra");
      break;
    case 10:  // constants and variables
      if (!m.parts.constants.empty()) {
        auto& c = m.parts.constants[pick(m.parts.constants.size())];
        if (rng() % 2)
          c.arg = static_cast<std::int32_t>(near(c.arg));
        else
          c.bytes = shared_bytes(std::vector<unsigned char>(pick(c.bytes.size() + 8)));
      }
      break;
    default:  // a tensor's dims wholesale: a rank change
      if (!g.nodes.empty()) {
        ir::node& n = g.nodes[pick(g.nodes.size())];
        n.dims.rank = static_cast<int>(rng() % (max_rank + 1));
        for (int i = 0; i < n.dims.rank; ++i) n.dims.dims[i] = 1 + std::int64_t(rng() % 4);
      }
  }
}

// Runs a loaded mutant on `d` with arguments of its declared sizes (3 for a run-time size).
void run_once(const executable& e, const device& d) {
  const ir::graph& g = e.plan().graph;
  std::vector<std::vector<unsigned char>> memory;
  std::vector<tensor_ref> args, results;
  std::vector<shape> arg_dims;
  for (std::size_t k = 0; k < e.input_names().size() && k < g.inputs.size(); ++k) {
    shape s = g.inputs[k].dims;
    for (int i = 0; i < s.rank; ++i)
      if (s.dims[i] < 0) s.dims[i] = 3;
    arg_dims.push_back(s);
  }
  for (std::size_t k = 0; k < arg_dims.size(); ++k) {
    // Small integers: index tensors then mostly point inside their operands, and every value is a
    // number of every type.
    const dtype t = g.inputs[k].type;
    memory.emplace_back(static_cast<std::size_t>(arg_dims[k].element_count() * size_in_bytes(t)),
                        std::uint8_t{1});
    args.emplace_back(memory.back().data(), t, arg_dims[k]);
  }
  std::vector<shape> result_dims = e.result_dims(arg_dims);
  for (std::size_t r = 0; r < result_dims.size() && r < g.outputs.size(); ++r) {
    const dtype t = g.nodes[g.outputs[r]].type;
    memory.emplace_back(
        static_cast<std::size_t>(result_dims[r].element_count() * size_in_bytes(t)));
    results.emplace_back(memory.back().data(), t, result_dims[r]);
  }
  e.run(args, results, d);
}

TEST(ModuleFuzz, ForgedModulesAreErrorsOrRunNeverCrash) {
  long mutants = KILN_MODULE_MUTANTS_DEFAULT;
  if (const char* n = std::getenv("KILN_MODULE_MUTANTS")) mutants = std::atol(n);
  const auto seeds = seed_modules();
  std::vector<runtime::module_contents> decoded;
  for (const auto& s : seeds) decoded.push_back(runtime::decode_module(s, "seed", true));
  std::mt19937_64 rng(20261127);
  const device cpu = device::cpu();
  long loaded = 0, ran = 0, on_vulkan = 0;
  for (long i = 0; i < mutants; ++i) {
    runtime::module_contents m = decoded[static_cast<std::size_t>(i) % decoded.size()];
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) mutate(m, rng);
    const std::vector<std::uint8_t> bytes = runtime::encode_module(m);
    std::optional<executable> e;
    try {
      e = executable::from_bytes(bytes, "mutant " + std::to_string(i));
      ++loaded;
    } catch (const error&) {
      continue;
    }
    if (const char* t = std::getenv("KILN_FUZZ_TRACE"); t && std::string(t) == "all")
      std::fprintf(stderr, "mutant %ld\n", i);
    if (const char* t = std::getenv("KILN_FUZZ_TRACE"); t && std::atol(t) == i)
      std::fprintf(stderr, "mutant %ld\n%s\nseed\n%s\n", i, compiler::print(e->plan()).c_str(),
                   compiler::print(decoded[i % decoded.size()].plan).c_str());
    try {
      run_once(*e, cpu);
      ++ran;
    } catch (const error&) {
    }
    // Vulkan pipelines cost milliseconds each: a sample of the mutants that load.
    if (loaded % 50 == 1) {
      try {
        run_once(*e, device::vulkan());
        ++on_vulkan;
      } catch (const error&) {
      }
    }
  }
  std::printf("%ld mutants: %ld loaded, %ld ran on the CPU, %ld on Vulkan\n", mutants, loaded, ran,
              on_vulkan);
  // The mutations are not all refused: the fuzz reaches the runtime too.
  EXPECT_GT(loaded, 0);
}

}  // namespace
