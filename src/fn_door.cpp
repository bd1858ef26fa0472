// kiln::fn's services from the run-time door (function.hpp's detail::fn_door), filled in an
// object of their own: the programs that use kiln::fn link it through fn_door_registered, and a
// program that only runs saved modules does not, nor the compiler compile_traced_fn brings.
// (runtime.cpp includes this file where a build compiles that one file alone.)
#include <kiln/executable.hpp>

namespace kiln::detail {

extern const bool fn_door_registered;
const bool fn_door_registered = [] {
  fn_door_services = {&compile_traced_fn, &run_traced_fn, &save_fn, &reproduce_fn};
  return true;
}();

}  // namespace kiln::detail
