// kiln: the umbrella header (DSL, compiler, CPU back end).
#pragma once

#include "kiln/function.hpp"
