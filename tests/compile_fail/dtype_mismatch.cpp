// expect: kiln::add: the operands have different element types
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, dyn>, tensor<f64, dyn>>([](auto x, auto y) { return x + y; });
int main() { return f.plan.dispatch_count(); }
