#include "base/str.h"

#include <charconv>
#include <cstring>

namespace podshim::str {

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t i = 0;
  for (;;) {
    size_t j = s.find(sep, i);
    if (j == std::string_view::npos) {
      out.push_back(s.substr(i));
      return out;
    }
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view x) {
  return s.size() >= x.size() && s.substr(s.size() - x.size()) == x;
}

template <typename T>
static Result<T> parse_int(std::string_view in) {
  std::string_view s = trim(in);
  if (s.empty()) return fail(EINVAL, "invalid integer '{}': empty", in);
  if (s.front() == '+') s.remove_prefix(1);
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec == std::errc::result_out_of_range) return fail(ERANGE, "integer '{}' out of range", in);
  if (ec != std::errc() || p != s.data() + s.size()) return fail(EINVAL, "invalid integer '{}'", in);
  return v;
}

Result<uint64_t> parse_u64(std::string_view s) { return parse_int<uint64_t>(s); }
Result<int64_t> parse_i64(std::string_view s) { return parse_int<int64_t>(s); }

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    // Eight ASCII bytes at a time: ids, names, paths and annotation keys
    // are almost all ASCII, and this check was a tenth of a Synchronize.
    if (end - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        p += 8;
        continue;
      }
    }
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const size_t i = static_cast<size_t>(p - reinterpret_cast<const unsigned char*>(s.data()));
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    p += n;
  }
  return true;
}

size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n;                           // continuation bytes
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (table 3-7)
  if (c >= 0xC2 && c <= 0xDF) n = 1;
  else if (c == 0xE0) n = 2, lo = 0xA0;  // no overlong forms
  else if (c == 0xED) n = 2, hi = 0x9F;  // no surrogates
  else if (c >= 0xE1 && c <= 0xEF) n = 2;
  else if (c == 0xF0) n = 3, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 3;
  else if (c == 0xF4) n = 3, hi = 0x8F;  // nothing past U+10FFFF
  else return 0;
  if (s.size() - i <= n) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k <= n; k++)
    if ((b(k) & 0xC0) != 0x80) return 0;
  return n + 1;
}

}  // namespace podshim::str
