// What a caller can learn about a compiled function before calling it: its signature as a string
// in IREE's raw function ABI grammar (parsed back by parse_signature), and the buffer-description
// oracle that says whether a buffer laid out a given way can be passed as it is.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/view.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln {

// One argument or result of a signature: its element type and extents (-1: a run-time size).
struct signature_buffer {
  dtype type = dtype::f32;
  std::vector<std::int64_t> dims;
  friend bool operator==(const signature_buffer&, const signature_buffer&) = default;
};

struct signature {
  std::vector<signature_buffer> inputs, results;
  friend bool operator==(const signature&, const signature&) = default;
};

// The signature of parameters `inputs` and results `results` (a negative, symbolic size is -1).
KILN_RUNTIME_API signature make_signature(std::span<const ir::input_decl> inputs,
                                          std::span<const ir::input_decl> results);

// The raw function ABI's string: 'I' length-prefixed(types) 'R' length-prefixed(types), a buffer
// 'B' length-prefixed('t' code, then 'd' extent per axis), where length-prefixed(x) is x's length
// + 1, '!', x. Element codes are the ABI's (0 f32, 1 f16, 2 f64, 3 bf16, 4 i8, 5 i16, 6 i32, 7
// i64, 8 u8, 10 u32) and kiln's beyond them (12 bool, 13 f8e4m3, 14 f8e5m2). [2, ?] f32 -> f32
// [2]: "I11!B8!t0d2d-1R8!B5!t0d2".
KILN_RUNTIME_API std::string to_string(const signature& s);

// The signature a string spells; a kiln::error naming the byte where it goes wrong otherwise. A
// buffer without 't' is f32, as in the grammar; 'S' (a scalar) reads as a rank-0 buffer.
KILN_RUNTIME_API signature parse_signature(std::string_view text);

// A buffer as a caller holds it: element type, extents and strides in elements (empty strides:
// row-major).
struct buffer_description {
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape, strides;
};

// The oracle's answer for one buffer.
struct acceptance {
  enum class verdict : std::uint8_t {
    as_is,             // pass it as it is
    needs_conversion,  // copy it into `wanted` first (the same elements, another layout)
    unsupported,       // no layout of these elements fits: `why`
  };
  verdict answer = verdict::as_is;
  std::string why;            // what does not fit, or the conversion needed
  buffer_description wanted;  // the layout to pass (needs_conversion; as_is: the given one)
};

// How a function reads an argument's elements: at any strides, in place; or row-major only (a
// reshape of it, a gather's positions: compiler::reads_any_layout), so a call copies a strided
// buffer first. Results are always written at their strides.
enum class layout_use : std::uint8_t { any_strides, row_major };

// Whether a buffer described by `given` can be passed where `declared` is expected (`what`:
// "argument 2", for the messages). Element types and sizes must match (a run-time size takes any
// extent; kiln does not convert element types on a call). Any strides are read in place where
// `use` allows, else they need a row-major copy; a result's strides must give each index an
// element of its own.
KILN_RUNTIME_API acceptance accept_buffer(const signature_buffer& declared,
                                          const buffer_description& given, const std::string& what,
                                          bool result = false,
                                          layout_use use = layout_use::any_strides);
// accept_buffer for entry i of `list`, an argument or result list (`kind`: "argument" or
// "result"; `names`: the entries' names, or empty; `uses`: each entry's layout_use, or empty for
// any strides). An i out of range is a kiln::error from `who`.
KILN_RUNTIME_API acceptance accept_entry(std::span<const signature_buffer> list, int i,
                                         const buffer_description& given, const std::string& who,
                                         const std::string& kind,
                                         std::span<const std::string> names = {},
                                         std::span<const layout_use> uses = {});

#if KILN_RUNTIME_BODY
namespace detail {

// The ABI's element code of each dtype, in dtype order (f32, f64, f16, bf16, f8e4m3, f8e5m2, i8,
// i16, i32, i64, u8, u16, u32, u64, bool).
inline constexpr int abi_codes[dtype_count] = {0, 2, 1, 3, 13, 14, 4, 5, 6, 7, 8, 9, 10, 11, 12};

inline std::string length_prefixed(char tag, const std::string& body) {
  return tag + std::to_string(body.size() + 1) + "!" + body;
}

// Reads the grammar's tagged spans and integers from `text`, naming the byte of any mistake.
class signature_reader {
 public:
  explicit signature_reader(std::string_view text, std::size_t base = 0)
      : text_(text), base_(base) {}
  bool done() const { return at_ == text_.size(); }
  char peek() const { return done() ? '\0' : text_[at_]; }
  [[noreturn]] void fail(const std::string& what) const { fail_at(at_, what); }
  // At the start of the last number read.
  [[noreturn]] void fail_at_number(const std::string& what) const { fail_at(number_at_, what); }
  void expect(char tag) {
    if (peek() != tag)
      fail(std::string("expected '") + tag + "', found " +
           (done() ? std::string("the end") : "'" + std::string(1, peek()) + "'"));
    ++at_;
  }
  std::int64_t integer() {
    number_at_ = at_;
    const bool negative = peek() == '-';
    if (negative) ++at_;
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a number");
    // In unsigned arithmetic up to the magnitude allowed: every int64 is taken, INT64_MIN too.
    const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : INT64_MAX;
    std::uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[at_] - '0');
      if (v > (limit - digit) / 10) fail_at_number("the number does not fit in 64 bits");
      v = v * 10 + digit;
      ++at_;
    }
    return negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  }
  // tag, then length-prefixed(body): a reader over the body.
  signature_reader span(char tag) {
    expect(tag);
    const std::int64_t length = integer();
    expect('!');
    if (length < 1 || static_cast<std::size_t>(length - 1) > text_.size() - at_)
      fail("a length of " + std::to_string(length) + " runs past the end of its span");
    signature_reader inner(text_.substr(at_, static_cast<std::size_t>(length - 1)), base_ + at_);
    at_ += static_cast<std::size_t>(length - 1);
    return inner;
  }

 private:
  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const {
    throw error(errc::invalid_argument, "parse_signature",
                "at byte " + std::to_string(base_ + at) + ": " + what);
  }

  std::string_view text_;
  std::size_t base_ = 0, at_ = 0, number_at_ = 0;
};

inline std::vector<signature_buffer> read_types(signature_reader r) {
  std::vector<signature_buffer> out;
  while (!r.done()) {
    const char tag = r.peek();
    if (tag != 'B' && tag != 'S')
      r.fail(std::string("'") + tag + "' is not a buffer ('B') or scalar ('S'): kiln's " +
             "functions take and give tensors only");
    signature_reader body = r.span(tag);
    signature_buffer b;
    if (body.peek() == 't') {
      body.expect('t');
      const std::int64_t code = body.integer();
      int found = -1;
      for (int t = 0; t < dtype_count; ++t)
        if (abi_codes[t] == code) found = t;
      if (found < 0)
        body.fail_at_number("element type " + std::to_string(code) + " is not a kiln dtype");
      b.type = static_cast<dtype>(found);
    }
    while (tag == 'B' && !body.done()) {
      body.expect('d');
      const std::int64_t d = body.integer();
      if (d < -1) body.fail_at_number("an extent of " + std::to_string(d));
      b.dims.push_back(d);
    }
    if (!body.done()) body.fail("a scalar has no extents");
    out.push_back(std::move(b));
  }
  return out;
}

// "[2, ?, 3]": extents (sizes: a negative one is a run-time size), or strides.
inline std::string list_text(std::span<const std::int64_t> values, bool sizes = true) {
  std::string s = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    s += (i ? ", " : "") + (sizes && values[i] < 0 ? std::string("?") : std::to_string(values[i]));
  return s + "]";
}

}  // namespace detail

KILN_RUNTIME_API signature make_signature(std::span<const ir::input_decl> inputs,
                                          std::span<const ir::input_decl> results) {
  auto one = [](const ir::input_decl& d) {
    signature_buffer b{d.type, {}};
    for (int a = 0; a < d.dims.rank; ++a)
      b.dims.push_back(d.dims.dims[a] < 0 ? -1 : d.dims.dims[a]);
    return b;
  };
  signature s;
  for (const ir::input_decl& d : inputs) s.inputs.push_back(one(d));
  for (const ir::input_decl& d : results) s.results.push_back(one(d));
  return s;
}

KILN_RUNTIME_API std::string to_string(const signature& s) {
  auto types = [](const std::vector<signature_buffer>& list) {
    std::string out;
    for (const signature_buffer& b : list) {
      std::string body = "t" + std::to_string(detail::abi_codes[static_cast<int>(b.type)]);
      for (std::int64_t d : b.dims) body += "d" + std::to_string(d);
      out += detail::length_prefixed('B', body);
    }
    return out;
  };
  return detail::length_prefixed('I', types(s.inputs)) +
         detail::length_prefixed('R', types(s.results));
}

KILN_RUNTIME_API signature parse_signature(std::string_view text) {
  detail::signature_reader r(text);
  signature s;
  s.inputs = detail::read_types(r.span('I'));
  s.results = detail::read_types(r.span('R'));
  if (!r.done()) r.fail("text after the results");
  return s;
}

KILN_RUNTIME_API acceptance accept_buffer(const signature_buffer& declared,
                                          const buffer_description& given, const std::string& what,
                                          bool result, layout_use use) {
  acceptance a;
  a.wanted = given;
  auto refuse = [&](const std::string& why) {
    a.answer = acceptance::verdict::unsupported;
    a.why = what + ": " + why;
    return a;
  };
  if (given.type != declared.type)
    return refuse("its elements are " + std::string(name(given.type)) + ", the function takes " +
                  std::string(name(declared.type)) + " (a call does not convert element types)");
  const std::string wanted_text =
      std::string(name(declared.type)) + " " + detail::list_text(declared.dims);
  if (given.shape.size() != declared.dims.size())
    return refuse("rank " + std::to_string(given.shape.size()) + " " +
                  detail::list_text(given.shape) + ", the function takes " + wanted_text);
  for (std::size_t i = 0; i < given.shape.size(); ++i) {
    if (given.shape[i] < 0) return refuse("axis " + std::to_string(i) + " has a negative extent");
    if (declared.dims[i] >= 0 && given.shape[i] != declared.dims[i])
      return refuse("axis " + std::to_string(i) + " has " + std::to_string(given.shape[i]) +
                    ", the function takes " + wanted_text);
  }
  if (!given.strides.empty() && given.strides.size() != given.shape.size())
    return refuse(std::to_string(given.strides.size()) + " strides for " +
                  std::to_string(given.shape.size()) + " axes");
  shape dims;
  dims.rank = static_cast<int>(given.shape.size());
  stride_list steps{};
  std::copy(given.shape.begin(), given.shape.end(), dims.dims.begin());
  std::copy(given.strides.begin(), given.strides.end(), steps.begin());
  // The call's own checks (one function for both): extents whose bytes overflow, and strides that
  // reach past the address space (none given: nothing to check), refused here too, before any
  // stride is computed or multiplied.
  try {
    checked_element_count(dims, size_in_bytes(given.type), "accepts", what);
    check_strides(dims, steps, size_in_bytes(given.type), "accepts", what);
  } catch (const error& e) {
    return refuse(std::string(e.what()).substr(std::string("kiln: accepts: ").size()));
  }
  const stride_list row_major = row_major_strides(dims);
  a.wanted.strides.assign(row_major.begin(), row_major.begin() + dims.rank);
  // Row-major, where an axis of extent 1 may have any stride (it is never stepped along).
  if (given.strides.empty() || dims.element_count() == 0 || is_row_major(dims, steps)) return a;
  const std::string strides_text = "strides " + detail::list_text(given.strides, false);
  if (result && shares_elements(dims, steps))
    return refuse(strides_text +
                  " give two indices the same element; a result needs an "
                  "element of its own for each index");
  if (result || use == layout_use::any_strides) {
    a.wanted = given;
    return a;
  }
  a.answer = acceptance::verdict::needs_conversion;
  a.why = what + ": " + strides_text + " (elements); the function reads it row-major (strides " +
          detail::list_text(a.wanted.strides, false) +
          ") through a reshape or a gather, so a call copies it into that layout: pass it so to "
          "save the copy";
  return a;
}

KILN_RUNTIME_API acceptance accept_entry(std::span<const signature_buffer> list, int i,
                                         const buffer_description& given, const std::string& who,
                                         const std::string& kind,
                                         std::span<const std::string> names,
                                         std::span<const layout_use> uses) {
  if (i < 0 || static_cast<std::size_t>(i) >= list.size())
    throw error(errc::invalid_argument, who,
                "accepts: " + kind + " index " + std::to_string(i) + " (the function has " +
                    std::to_string(list.size()) + ")");
  std::string what = kind + " " + std::to_string(i + 1);
  if (static_cast<std::size_t>(i) < names.size()) what += " ('" + names[i] + "')";
  return accept_buffer(
      list[i], given, what, kind == "result",
      static_cast<std::size_t>(i) < uses.size() ? uses[i] : layout_use::any_strides);
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln
