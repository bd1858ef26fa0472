// expect: kiln::fn call: pass one argument per declared tensor parameter
#include <kiln/kiln.hpp>
#include <vector>
using namespace kiln;
constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return x + y; });
int main() {
  std::vector<float> x(4), out(4);
  f(x, into(out));
}
