// expect: kiln::fn call: an argument's element type differs from its declared tensor
#include <kiln/kiln.hpp>
#include <vector>
using namespace kiln;
constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return x + 1.f; });
int main() {
  std::vector<double> x(4);
  std::vector<float> out(4);
  f(x, into(out));
}
