#!/usr/bin/env bash
# Compile time and peak memory of g++ -O2 on: a TU including kiln.hpp, one with a 30-op kiln::fn
# that is called (kernels instantiated), one including executable.hpp (the run-time door), one that
# builds, compiles and runs a graph (the interpreter's primitives instantiated), and one including
# <Eigen/Dense> as the anchor; then the 30-op fn and the graph again with KILN_SEPARATE_RUNTIME
# (the Vulkan runtime and the interpreter only declared) and the one implementation file that
# compiles them for the program.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-g++}
flags="-std=c++20 -O2 -fopenmp -I$here/include -I/usr/include/eigen3 -c"

cat > "$work/include_kiln.cpp" <<'CPP'
#include <kiln/kiln.hpp>
int main() {}
CPP
cat > "$work/include_eigen.cpp" <<'CPP'
#include <Eigen/Dense>
int main() {}
CPP
cat > "$work/include_executable.cpp" <<'CPP'
#include <kiln/executable.hpp>
int main() {}
CPP
cat > "$work/graph_run.cpp" <<'CPP'
#include <vector>
#include <kiln/executable.hpp>
using namespace kiln;
void run(std::vector<float>& x, std::vector<float>& o) {
  graph g;
  g.output("o", g.tanh(g.input("x", dtype::f32, {dyn})));
  compile(g).run({x}, {o});
}
CPP
cat > "$work/fn30.cpp" <<'CPP'
#include <vector>
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y, auto z) {
  auto a = x * y + z;                       // 2
  auto b = tanh(a) * 0.5f - exp(-a);        // 4 + 1 const
  auto c = sqrt(abs(b) + 1.f) / (a + 2.f);  // 5
  auto d = max(c, y) - min(b, z);           // 3
  auto e = sigmoid(d) * erf(c) + log(1.f + x * x);  // 7
  auto g = select(e > 0.f, e, -e) * relu(a - b);    // 6
  return g + floor(c) * 0.25f;                      // 3
});
static_assert(f.plan.dispatch_count() == 1);
void run(std::vector<float>& x, std::vector<float>& y, std::vector<float>& z, std::vector<float>& o) {
  f(x, y, z, into(o));
}
CPP
cat > "$work/implementation.cpp" <<'CPP'
#define KILN_RUNTIME_IMPLEMENTATION
#include <kiln/executable.hpp>
CPP
printf '%-28s %10s %12s\n' "translation unit" "seconds" "peak MB"
for tu in include_kiln include_eigen fn30 include_executable graph_run; do
  /usr/bin/time -f "%e %M" -o "$work/t" $cxx $flags "$work/$tu.cpp" -o "$work/$tu.o"
  read -r secs kb < "$work/t"
  printf '%-28s %10s %12d\n' "$tu.cpp" "$secs" $((kb / 1024))
done
for tu in fn30 graph_run implementation; do
  /usr/bin/time -f "%e %M" -o "$work/t" $cxx $flags -DKILN_SEPARATE_RUNTIME "$work/$tu.cpp" \
    -o "$work/$tu.o"
  read -r secs kb < "$work/t"
  printf '%-28s %10s %12d\n' "$tu.cpp (separate)" "$secs" $((kb / 1024))
done
