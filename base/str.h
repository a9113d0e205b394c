// Small string helpers with errors as values (no exceptions, no locale).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshim::str {

// Strips ASCII whitespace (space, \t, \n, \r) from both ends.
std::string_view trim(std::string_view s);

// Splits on `sep`; keeps empty fields ("a,,b" → {"a","","b"}).
std::vector<std::string_view> split(std::string_view s, char sep);

// Calls fn(component) for each '/'-separated part of `s` in order, empty
// parts included ("a//b" → "a", "", "b"), without building a vector; stops
// at the first call that returns false and returns false then.
template <typename F>
bool each_component(std::string_view s, F&& fn) {
  size_t i = 0;
  while (true) {
    const size_t j = s.find('/', i);
    if (!fn(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i))) return false;
    if (j == std::string_view::npos) return true;
    i = j + 1;
  }
}

// A set of bytes as a 256-entry table built at compile time from a
// predicate: membership is one load instead of a chain of comparisons (ids
// and cgroup path components are checked on every runtime event).
using ByteSet = std::array<bool, 256>;
template <typename Pred>
constexpr ByteSet byte_set(Pred in) {
  ByteSet t{};
  for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = in(static_cast<char>(c));
  return t;
}
// The offset of the first byte of `s` outside `set`, or npos.
inline size_t find_not_in(std::string_view s, const ByteSet& set) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!set[static_cast<unsigned char>(s[i])]) return i;
  return std::string_view::npos;
}

// Whether `s` is well-formed UTF-8 (Unicode 15, table 3-7: no overlong
// forms, no surrogates, nothing past U+10FFFF). The one check of text that
// enters podshim from outside (NRI strings, HTTP paths).
bool valid_utf8(std::string_view s);
// The length of the well-formed UTF-8 sequence at s[i] (a byte >= 0x80), or
// 0 when none starts there: the step of valid_utf8, for writers that escape
// as they go (cdi::JsonWriter).
size_t utf8_sequence(std::string_view s, size_t i);

bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);

// Parses a base-10 integer that spans the whole string (after trim); errors
// name the input ("invalid integer 'abc'", "integer '99999999999999999999' out of range").
Result<uint64_t> parse_u64(std::string_view s);
Result<int64_t> parse_i64(std::string_view s);

}  // namespace podshim::str
