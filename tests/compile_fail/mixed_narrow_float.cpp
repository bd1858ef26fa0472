// expect: kiln::mul: the operands have different element types
#include <kiln/kiln.hpp>
using namespace kiln;
// One mistake deep inside an expression: one error, nothing after it.
constexpr auto f =
    fn<tensor<f16, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return exp(x * y) + 1.f; });
int main() { return f.plan.dispatch_count(); }
