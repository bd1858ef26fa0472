// expect: kiln::select: the condition must be a bool tensor
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return select(x, x, 0.f); });
int main() { return f.plan.dispatch_count(); }
