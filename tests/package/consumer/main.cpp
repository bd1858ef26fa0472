// A program built against an installed kiln: computes relu(x * y + z) through both doors (a
// kiln::fn here, a run-time kiln::graph in the program's static library) and checks it by hand.
#include <cstdio>
#include <vector>

#include <kiln/codegen/spirv/tools.hpp>
#include <kiln/kiln.hpp>

#include "graph_part.hpp"

int main() {
  using namespace kiln;
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
      [](auto x, auto y, auto z) { return relu(x * y + z); });
  std::vector<float> x = {1, 2, 3, 4}, y = {2, -2, 0.5f, 1}, z = {1, 1, 1, -5}, out(4);
  f(x, y, z, into(out));
  const float expected[] = {3, 0, 2.5f, 0};  // 1*2+1, max(-4+1,0), 1.5+1, max(4-5,0)
  std::vector<float> out_graph(4), out_cpu(4), out_graph_cpu(4);
  bool validated = relu_fma_graph(x, y, z, out_graph, device::default_device());
  // On the CPU: this file's compiled kernel (built with -march=native where the compiler takes
  // it) and the library's interpreter (built with kiln's flags) in one program.
  f.on(device::cpu())(x, y, z, into(out_cpu));
  relu_fma_graph(x, y, z, out_graph_cpu, device::cpu());
  int matches = 0;
  for (int i = 0; i < 4; ++i)
    matches += (out[i] == expected[i]) + (out_graph[i] == expected[i]) +
               (out_cpu[i] == expected[i]) + (out_graph_cpu[i] == expected[i]);
  std::printf("consumer: %d elements match%s\n", matches,
              spirv::have_tools ? ", spirv-val available" : "");
  return matches == 16 && validated ? 0 : 1;
}
