// expect: kiln::mul: the static extents of the operands do not broadcast
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, 3>, tensor<f32, 4>>([](auto x, auto y) { return x * y; });
int main() { return f.plan.dispatch_count(); }
