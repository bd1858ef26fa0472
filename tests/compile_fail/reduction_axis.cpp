// expect: kiln reduction: an axis is out of range for the operand's rank
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, 3, 4>>([](auto x) { return reduce_sum<2>(x); });
int main() { return f.plan.dispatch_count(); }
