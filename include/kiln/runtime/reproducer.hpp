// Files kiln writes for a person to read: dumps (KILN_DUMP_DIR) and reproducers (KILN_REPRO_DIR:
// a failure to compile a graph, build a pipeline or run a dispatch leaves in a fresh folder there
// what reproduces it, and its kiln::error names the folder). The doors write the contents (the
// graph; or the module, the call's arguments and a kiln-run command); this is the folder, the
// message and the one way to write a file.
#pragma once

#include <string>

#include "kiln/core/error.hpp"
#include "kiln/core/runtime_boundary.hpp"

namespace kiln::runtime {

// A fresh folder under KILN_REPRO_DIR for a failure of `function` (<dir>/<function>-<pid>-<n>),
// or "" when KILN_REPRO_DIR is unset or the folder cannot be made.
KILN_RUNTIME_API std::string reproducer_folder(const std::string& function);
// Writes `bytes` of `data` to `path`, making its folders: a dump or a reproducer's part, so a
// failure to write is ignored (what was being done matters more).
KILN_RUNTIME_API void write_file(const std::string& path, const void* data, std::size_t bytes);
// e again, with its message naming the reproducer's folder.
[[noreturn]] KILN_RUNTIME_API void rethrow_naming(const error& e, const std::string& folder);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kiln::runtime {

KILN_RUNTIME_API std::string reproducer_folder(const std::string& function) {
  const char* root = std::getenv("KILN_REPRO_DIR");
  if (!root || !*root) return {};
  static std::atomic<int> next{0};
  for (int tries = 0; tries < 1000; ++tries) {
    auto folder = std::filesystem::path(root) /
                  (function + "-" + std::to_string(::getpid()) + "-" + std::to_string(++next));
    std::error_code ec;
    if (std::filesystem::create_directories(folder, ec)) return folder.string();
    if (ec) return {};
  }
  return {};
}

KILN_RUNTIME_API void write_file(const std::string& path, const void* data, std::size_t bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

[[noreturn]] KILN_RUNTIME_API void rethrow_naming(const error& e, const std::string& folder) {
  std::string what = e.what();
  const std::string prefix = "kiln: " + e.op() + ": ";
  std::string message = what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
  throw error(e.code(), e.op(), message + " (reproducer: " + folder + ")");
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
