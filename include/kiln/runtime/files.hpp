// Reading a whole file that kiln or kiln-run is given (a module, a .npy): a path that is not a
// regular file (a directory, a FIFO, a device), or that cannot be read, is a kiln::error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/runtime_boundary.hpp"

namespace kiln::runtime {

// The bytes of the regular file at `path`; `who` names the reader in the error.
KILN_RUNTIME_API std::vector<std::uint8_t> read_file(const std::string& path, const char* who);

}  // namespace kiln::runtime

#if KILN_RUNTIME_BODY
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "kiln/core/error.hpp"

namespace kiln::runtime {

KILN_RUNTIME_API std::vector<std::uint8_t> read_file(const std::string& path, const char* who) {
  struct stat about {};
  if (::stat(path.c_str(), &about) != 0)
    throw error(errc::invalid_argument, who, "cannot open " + path + ": " + std::strerror(errno));
  // A directory opens as a stream and fails at its first read; a FIFO may never end.
  if (!S_ISREG(about.st_mode))
    throw error(errc::invalid_argument, who, "cannot open " + path + ": not a regular file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw error(errc::invalid_argument, who, "cannot open " + path + ": " + std::strerror(errno));
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(about.st_size));
  unsigned char chunk[1 << 16];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;)
    bytes.insert(bytes.end(), chunk, chunk + n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw error(errc::invalid_argument, who, "could not read " + path);
  return bytes;
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
