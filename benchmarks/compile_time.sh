#!/usr/bin/env bash
# Compile time and peak memory of g++ at -O2, then -O3 (OPT="-O2 -O3" by default) on: a TU
# including kiln.hpp, one with a 30-op kiln::fn that is called (kernels instantiated), the same 30
# ops written with Eigen arrays (the anchor), one including <Eigen/Dense>, one including
# executable.hpp (the run-time door), one that builds, compiles and runs a graph; all as kiln::kiln
# compiles them (KILN_SEPARATE_RUNTIME: the runtime declared only), then the runtime's one file
# (src/runtime.cpp, once per program), then the kiln files again header-only (a plain #include).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-g++}
common="-std=c++20 -I$here/include -I/usr/include/eigen3 -c"

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
cat > "$work/eigen30.cpp" <<'CPP'
#include <vector>
#include <Eigen/Dense>
#include <unsupported/Eigen/SpecialFunctions>
using A = Eigen::Map<Eigen::ArrayXf>;
void run(std::vector<float>& xv, std::vector<float>& yv, std::vector<float>& zv, std::vector<float>& o) {
  auto n = static_cast<Eigen::Index>(xv.size());
  A x(xv.data(), n), y(yv.data(), n), z(zv.data(), n);
  Eigen::ArrayXf a = x * y + z;
  Eigen::ArrayXf b = a.tanh() * 0.5f - (-a).exp();
  Eigen::ArrayXf c = (b.abs() + 1.f).sqrt() / (a + 2.f);
  Eigen::ArrayXf d = c.max(y) - b.min(z);
  Eigen::ArrayXf e = (1.f / (1.f + (-d).exp())) * c.erf() + (1.f + x * x).log();
  Eigen::ArrayXf g = (e > 0.f).select(e, -e) * (a - b).max(0.f);
  A(o.data(), n) = g + c.floor() * 0.25f;
}
CPP
for opt in ${OPT:-"-O2" "-O3"}; do
  flags="$common $opt"
  printf '%-34s %10s %12s\n' "translation unit ($opt)" "seconds" "peak MB"
  measure() {  # name, extra flags, source
    /usr/bin/time -f "%e %M" -o "$work/t" $cxx $flags $2 "$3" -o "$work/out.o"
    read -r secs kb < "$work/t"
    printf '%-34s %10s %12d\n' "$1" "$secs" $((kb / 1024))
  }
  for tu in include_eigen eigen30; do measure "$tu.cpp" "" "$work/$tu.cpp"; done
  for tu in include_kiln fn30 include_executable graph_run; do
    measure "$tu.cpp" -DKILN_SEPARATE_RUNTIME "$work/$tu.cpp"
  done
  measure "src/runtime.cpp (once)" "" "$here/src/runtime.cpp"
  for tu in include_kiln fn30 include_executable graph_run; do
    measure "$tu.cpp (header-only)" "" "$work/$tu.cpp"
  done
done
