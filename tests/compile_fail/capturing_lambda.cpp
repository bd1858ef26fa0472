// expect: kiln::fn: the lambda must not capture anything
// errors: 2 (the second is the compiler's: a run-time capture in a consteval call)
#include <kiln/kiln.hpp>
using namespace kiln;
int main() {
  float scale = 2.f;
  auto f = fn<tensor<f32, dyn>>([scale](auto x) { return x * scale; });
  (void)f;
}
