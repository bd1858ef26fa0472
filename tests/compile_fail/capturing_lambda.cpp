// expect: kiln::fn: the lambda must not capture anything
#include <kiln/kiln.hpp>
using namespace kiln;
int main() {
  float scale = 2.f;
  auto f = fn<tensor<f32, dyn>>([scale](auto x) { return x * scale; });
  (void)f;
}
