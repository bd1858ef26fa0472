// The run-time door, in a static library of the consumer program: it links kiln::kiln like the
// executable does, and the program still has one copy of kiln's runtime.
#include "graph_part.hpp"

#include <kiln/codegen/spirv/tools.hpp>
#include <kiln/executable.hpp>

bool relu_fma_graph(const std::vector<float>& x, const std::vector<float>& y,
                    const std::vector<float>& z, std::vector<float>& out, const kiln::device& d) {
  using namespace kiln;
  graph g;
  auto gx = g.input("x", dtype::f32, {dyn});
  auto gy = g.input("y", dtype::f32, {dyn});
  auto gz = g.input("z", dtype::f32, {dyn});
  g.output("out", g.relu(g.add(g.mul(gx, gy), gz)));
  executable exe = compile(g);
  exe.run({{"x", x}, {"y", y}, {"z", z}}, {{"out", out}}, d);
  // kiln::spirv_tools from the installed package: spirv-val on the kernels the call emitted.
  bool validated = true;
  for (const auto& k : exe.kernels())
    validated = validated && (k.code.empty() || spirv::validate(k.code, 0x00402000).empty());
  return validated;
}
