// expect: kiln::mul: the literal does not fit the tensor's element type
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<i32, dyn>>([](auto x) { return x * 0.5; });
int main() { return f.plan.dispatch_count(); }
