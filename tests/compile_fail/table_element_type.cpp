// expect: kiln::add: the literal does not fit the tensor's element type
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, 2>>([](auto x) { return x + table<double, 2>{{1, 2}}; });
int main() { return f.plan.dispatch_count(); }
