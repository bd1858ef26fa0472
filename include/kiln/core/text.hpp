// Small constexpr text helpers: integer formatting for messages built during constant evaluation.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::detail {

constexpr std::string to_text(std::int64_t v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  std::string digits;
  while (u != 0) {
    digits.insert(digits.begin(), static_cast<char>('0' + u % 10));
    u /= 10;
  }
  return negative ? "-" + digits : digits;
}

}  // namespace kiln::detail
