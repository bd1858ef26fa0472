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
// or "" when KILN_REPRO_DIR is unset or the folder cannot be made (which says so on stderr, once
// a process).
KILN_RUNTIME_API std::string reproducer_folder(const std::string& function);
// Writes `bytes` of `data` to `path`, making its folders; whether all of it was written. A dump
// or a reproducer's part: a failure does not stop what was being done, and setting (the
// variable that asked for the file) says so on stderr, once a process for each setting.
KILN_RUNTIME_API bool write_file(const std::string& path, const void* data, std::size_t bytes,
                                 const char* setting);
// e again, with its message naming the reproducer's folder where it was written whole (else e,
// after a line on stderr saying the folder holds only part of it).
[[noreturn]] KILN_RUNTIME_API void rethrow_naming(const error& e, const std::string& folder,
                                                  bool whole = true);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kiln::runtime {
namespace detail {
// Says once a process for each of the two settings that `path` could not be written.
inline void say_unwritable(const char* setting, const std::string& path, const std::string& why) {
  static std::atomic<bool> dump_said{false}, repro_said{false};
  std::atomic<bool>& said = std::strcmp(setting, "KILN_DUMP_DIR") == 0 ? dump_said : repro_said;
  if (said.exchange(true)) return;
  std::fprintf(stderr, "kiln: %s: cannot write %s (%s); %s\n", setting, path.c_str(), why.c_str(),
               std::strcmp(setting, "KILN_DUMP_DIR") == 0
                   ? "dumps there are incomplete"
                   : "errors name a reproducer only where it was written whole");
}
}  // namespace detail

KILN_RUNTIME_API std::string reproducer_folder(const std::string& function) {
  const char* root = std::getenv("KILN_REPRO_DIR");
  if (!root || !*root) return {};
  static std::atomic<int> next{0};
  std::error_code ec;
  for (int tries = 0; tries < 1000; ++tries) {
    auto folder = std::filesystem::path(root) /
                  (function + "-" + std::to_string(::getpid()) + "-" + std::to_string(++next));
    if (std::filesystem::create_directories(folder, ec)) return folder.string();
    if (ec) break;
  }
  detail::say_unwritable("KILN_REPRO_DIR", root,
                         ec ? ec.message() : std::string("no fresh folder name"));
  return {};
}

KILN_RUNTIME_API bool write_file(const std::string& path, const void* data, std::size_t bytes,
                                 const char* setting) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (out) return true;
  detail::say_unwritable(setting, path, ec ? ec.message() : std::string("a failed write"));
  return false;
}

[[noreturn]] KILN_RUNTIME_API void rethrow_naming(const error& e, const std::string& folder,
                                                  bool whole) {
  if (!whole) {
    std::fprintf(stderr, "kiln: KILN_REPRO_DIR: the reproducer in %s is incomplete: not named\n",
                 folder.c_str());
    throw e;
  }
  std::string what = e.what();
  const std::string prefix = "kiln: " + e.op() + ": ";
  std::string message = what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
  throw error(e.code(), e.op(), message + " (reproducer: " + folder + ")");
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
