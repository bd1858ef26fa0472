// The tests' way to look at a kiln::error: the message of the one a call throws.
#pragma once

#include <string>

#include <kiln/core/error.hpp>

// The message of the kiln::error f throws (empty when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kiln::error& e) {
    return e.what();
  }
  return "";
}
