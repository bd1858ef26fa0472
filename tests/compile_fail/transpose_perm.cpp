// expect: kiln::transpose: perm must name each axis of the operand once
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, 3, 4>>([](auto x) { return transpose<0, 0>(x); });
int main() { return f.plan.dispatch_count(); }
