// kiln::error: the one exception type of the public API, naming the op, the argument and what was
// expected.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln {

enum class errc {
  invalid_argument,  // a call argument is malformed (null data, wrong count)
  shape_mismatch,    // extents do not match or do not broadcast
  dtype_mismatch,    // element types differ where they must agree
  invalid_graph,     // the IR violates a rule (verifier)
  unsupported,       // valid request that this build or device cannot serve
  device_error,      // a device API call failed
};

constexpr std::string_view to_string(errc c) {
  switch (c) {
    case errc::invalid_argument:
      return "invalid argument";
    case errc::shape_mismatch:
      return "shape mismatch";
    case errc::dtype_mismatch:
      return "dtype mismatch";
    case errc::invalid_graph:
      return "invalid graph";
    case errc::unsupported:
      return "unsupported";
    case errc::device_error:
      return "device error";
  }
  return "error";
}

// what(): "kiln: <op>: <message>". The op is the IR op, the function or the API call that refused.
class error : public std::runtime_error {
 public:
  error(errc code, std::string op, const std::string& message)
      : std::runtime_error("kiln: " + op + ": " + message), code_(code), op_(std::move(op)) {}

  errc code() const noexcept { return code_; }
  const std::string& op() const noexcept { return op_; }

 private:
  errc code_;
  std::string op_;
};

}  // namespace kiln
