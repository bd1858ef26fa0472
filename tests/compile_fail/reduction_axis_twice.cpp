// expect: kiln reduction: an axis is given twice
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, 3, 4>>([](auto x) { return reduce_max<1, -1>(x); });
int main() { return f.plan.dispatch_count(); }
