#include "base/str.h"

#include <charconv>

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

}  // namespace podshim::str
