// kiln::device: where a function runs. The CPU always exists; the default device is read from
// KILN_DEVICE once (cpu until a Vulkan back end is built in).
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "kiln/core/error.hpp"

namespace kiln {

class device {
 public:
  enum class kind { cpu };

  static device cpu() { return device(kind::cpu); }

  // KILN_DEVICE=cpu (or unset): the CPU. Any other value names a device this build lacks.
  static device default_device() {
    static const device d = [] {
      const char* env = std::getenv("KILN_DEVICE");
      std::string_view v = env ? env : "";
      if (v.empty() || v == "cpu") return cpu();
      throw error(errc::unsupported, "KILN_DEVICE",
                  "'" + std::string(v) + "' is not a device this build of kiln has (expected cpu)");
    }();
    return d;
  }

  kind type() const { return kind_; }
  std::string name() const { return "cpu"; }
  friend bool operator==(const device&, const device&) = default;

 private:
  explicit device(kind k) : kind_(k) {}
  kind kind_;
};

}  // namespace kiln
