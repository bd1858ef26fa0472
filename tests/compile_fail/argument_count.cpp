// expect: kiln::fn: the lambda must take exactly one argument per declared tensor parameter
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, dyn>>([](auto x, auto y) { return x + y; });
int main() { return 0; }
