// expect: kiln::reshape: the sizes must hold the operand's element count
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, 3, 4>>([](auto x) { return reshape<5, 2>(x); });
int main() { return f.plan.dispatch_count(); }
