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
    int n;
    uint32_t cp;
    if ((*p & 0xe0) == 0xc0) {
      n = 1;
      cp = *p & 0x1f;
    } else if ((*p & 0xf0) == 0xe0) {
      n = 2;
      cp = *p & 0x0f;
    } else if ((*p & 0xf8) == 0xf0) {
      n = 3;
      cp = *p & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return false;
    p += n + 1;
  }
  return true;
}

}  // namespace podshim::str
