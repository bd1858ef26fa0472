// Small constexpr text helpers: integer formatting for messages built during constant evaluation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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

// "[2, -1, 0]": a list of sizes as given (reshape's, split's).
constexpr std::string sizes_text(std::span<const std::int64_t> sizes) {
  std::string t = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) t += (i ? ", " : "") + to_text(sizes[i]);
  return t + "]";
}

// A compiled function's name (graph::set_name, a module's): 1 to 63 letters, digits, '_', '-' or
// '.', not starting with '.' or '-': it names a folder under KILN_DUMP_DIR and KILN_REPRO_DIR.
constexpr bool is_function_name(std::string_view name) {
  if (name.empty() || name.size() > 63 || name[0] == '.' || name[0] == '-') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.'))
      return false;
  return true;
}

// "'name'": a name quoted for a message. Appended, not "'" + std::string(name) + "'": at -O3
// GCC 12 takes the literal's insertion before the string for an overflow (-Wstringop-overflow)
// in every program that calls graph::input.
constexpr std::string quoted(std::string_view name) {
  std::string q;
  q.reserve(name.size() + 2);
  q += '\'';
  q += name;
  q += '\'';
  return q;
}

}  // namespace kiln::detail
