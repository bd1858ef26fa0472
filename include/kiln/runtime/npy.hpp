// NumPy's .npy files (format 1.0 written, 1.0 to 3.0 read): tensors in and out of kiln-run, and
// the trace points dumped under KILN_DUMP_DIR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/shape.hpp"

namespace kiln::runtime {

// A tensor as a .npy file holds it: element type, extents, row-major bytes.
struct npy_array {
  dtype type = dtype::f32;
  shape dims;
  std::vector<std::uint8_t> bytes;
};

// Writes `data` (dims' elements of t, row-major) to `path`; bf16 and the f8 types, which numpy
// has no type for, are widened to f32. Throws kiln::error when the file cannot be written.
KILN_RUNTIME_API void write_npy(const std::string& path, dtype t, const shape& dims,
                                const void* data);
// Reads a little-endian, C-ordered .npy file of a dtype kiln has; anything else is a kiln::error
// naming the file and what it holds.
KILN_RUNTIME_API npy_array read_npy(const std::string& path);

// Element i of row-major data of dtype t, as a double (narrow floats widened).
KILN_RUNTIME_API double element_as_double(dtype t, const void* data, std::int64_t i);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <cstring>
#include <fstream>
#include <iterator>

#include "kiln/core/error.hpp"
#include "kiln/runtime/files.hpp"

namespace kiln::runtime {
namespace detail {

// numpy's name of a dtype; narrow floats without one are written as f32.
inline const char* npy_descr(dtype t) {
  switch (t) {
    case dtype::f64:
      return "<f8";
    case dtype::f16:
      return "<f2";
    case dtype::i8:
      return "|i1";
    case dtype::i16:
      return "<i2";
    case dtype::i32:
      return "<i4";
    case dtype::i64:
      return "<i8";
    case dtype::u8:
      return "|u1";
    case dtype::u16:
      return "<u2";
    case dtype::u32:
      return "<u4";
    case dtype::u64:
      return "<u8";
    case dtype::boolean:
      return "|b1";
    default:  // f32, and bf16 / f8 widened to it
      return "<f4";
  }
}

}  // namespace detail

KILN_RUNTIME_API double element_as_double(dtype t, const void* data, std::int64_t i) {
  double out = 0;
  visit_dtype(t, [&]<dtype D>() {
    storage_t<D> v;
    std::memcpy(&v, static_cast<const unsigned char*>(data) + i * size_in_bytes(t), sizeof v);
    if constexpr (is_storage_only(D))
      out = static_cast<double>(static_cast<float>(v));
    else
      out = static_cast<double>(v);
  });
  return out;
}

KILN_RUNTIME_API void write_npy(const std::string& path, dtype t, const shape& dims,
                                const void* data) {
  const bool widen = t == dtype::bf16 || t == dtype::f8e4m3 || t == dtype::f8e5m2;
  std::string shape_text = "(";
  for (int i = 0; i < dims.rank; ++i)
    shape_text += std::to_string(dims.dims[i]) + (dims.rank == 1 ? "," : "") +
                  (i + 1 < dims.rank ? ", " : "");
  shape_text += ")";
  std::string header = "{'descr': '" + std::string(detail::npy_descr(t)) +
                       "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Magic (6), version (2), length (2), then the dict padded so the data starts at a multiple
  // of 64 bytes, ending in a newline.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, sizeof magic);
  const char length[] = {static_cast<char>(header.size() & 0xff),
                         static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  const std::int64_t n = dims.element_count();
  if (!widen) {
    out.write(static_cast<const char*>(data), n * size_in_bytes(t));
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      auto f = static_cast<float>(element_as_double(t, data, i));
      out.write(reinterpret_cast<const char*>(&f), sizeof f);
    }
  }
  out.close();
  if (!out) throw error(errc::invalid_argument, "npy", "could not write " + path);
}

KILN_RUNTIME_API npy_array read_npy(const std::string& path) {
  auto fail = [&](const std::string& why) -> void {
    throw error(errc::invalid_argument, "npy", path + ": " + why);
  };
  const std::vector<std::uint8_t> all = read_file(path, "npy");
  if (all.size() < 10 || std::memcmp(all.data(), "\x93NUMPY", 6) != 0)
    fail("not a .npy file (no \\x93NUMPY magic)");
  const int major = all[6];
  std::size_t length = 0, start = 0;
  if (major == 1) {
    length = all[8] | (std::size_t{all[9]} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (all.size() < 12) fail("truncated header");
    length = all[8] | (std::size_t{all[9]} << 8) | (std::size_t{all[10]} << 16) |
             (std::size_t{all[11]} << 24);
    start = 12;
  } else {
    fail("format version " + std::to_string(major) + " (kiln reads 1 to 3)");
  }
  if (all.size() - start < length) fail("truncated header");
  std::string header(all.begin() + static_cast<std::ptrdiff_t>(start),
                     all.begin() + static_cast<std::ptrdiff_t>(start + length));
  auto field = [&](const std::string& key) {
    auto at = header.find("'" + key + "'");
    if (at == std::string::npos) fail("the header has no '" + key + "'");
    at = header.find(':', at);
    if (at == std::string::npos) fail("malformed header");
    return at + 1;
  };
  npy_array a;
  {
    auto at = header.find('\'', field("descr"));
    auto end = at == std::string::npos ? at : header.find('\'', at + 1);
    if (end == std::string::npos) fail("malformed descr");
    std::string descr = header.substr(at + 1, end - at - 1);
    if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';
    if (descr.size() == 3 && (descr[1] == 'b' || descr[2] == '1')) descr[0] = '|';
    bool known = false;
    for (int t = 0; t < dtype_count && !known; ++t)  // (f32 comes first of those written "<f4")
      if (descr == detail::npy_descr(static_cast<dtype>(t))) {
        a.type = static_cast<dtype>(t);
        known = true;
      }
    if (!known) fail("element type '" + descr + "' is none of kiln's (or not little-endian)");
  }
  {
    auto at = field("fortran_order");
    while (at < header.size() && header[at] == ' ') ++at;
    if (header.compare(at, 5, "False") != 0) fail("Fortran-ordered data (kiln reads C order)");
  }
  {
    auto at = header.find('(', field("shape"));
    auto end = at == std::string::npos ? at : header.find(')', at);
    if (end == std::string::npos) fail("malformed shape");
    std::string dims = header.substr(at + 1, end - at - 1);
    std::size_t i = 0;
    while (i < dims.size()) {
      while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
      if (i == dims.size()) break;
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(dims.substr(i), &used);
      } catch (...) {
        fail("malformed shape '(" + dims + ")'");
      }
      if (v < 0 || a.dims.rank == max_rank) fail("shape '(" + dims + ")' is not one kiln takes");
      a.dims.dims[a.dims.rank++] = v;
      i += used;
    }
  }
  const std::int64_t bytes =
      checked_element_count(a.dims, size_in_bytes(a.type), "npy", path) * size_in_bytes(a.type);
  const std::size_t data = start + length;
  if (all.size() - data != static_cast<std::size_t>(bytes))
    fail("holds " + std::to_string(all.size() - data) + " data bytes where its shape needs " +
         std::to_string(bytes));
  a.bytes.assign(all.begin() + static_cast<std::ptrdiff_t>(data), all.end());
  return a;
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
