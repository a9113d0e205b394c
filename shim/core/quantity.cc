#include "shim/core/quantity.h"

#include <fmt/format.h>

#include <limits>

namespace podshim::core {

namespace {

using i128 = __int128;

// value = mantissa / 10^frac_digits × 2^bin_exp × 10^dec_exp (resource.Quantity
// grammar: <digits>[.<digits>][<suffix> | e<exp>]). Returns ceil(value × scale).
Result<int64_t> parse_scaled(std::string_view q, int64_t scale, std::string_view what) {
  std::string_view s = q;
  if (s.empty()) return fail(EINVAL, "empty {} quantity", what);
  if (s.front() == '+') s.remove_prefix(1);
  if (!s.empty() && s.front() == '-') return fail(EINVAL, "negative {} quantity '{}'", what, q);
  i128 mant = 0;
  int digits = 0, frac = 0;
  bool dot = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (++digits > 30) return fail(ERANGE, "{} quantity '{}' out of range", what, q);
    mant = mant * 10 + (c - '0');
    if (dot) ++frac;
  }
  if (digits == 0) return fail(EINVAL, "invalid {} quantity '{}'", what, q);
  std::string_view suf = s.substr(i);
  int bin_exp = 0, dec_exp = 0;
  if (suf.empty()) {
  } else if (suf == "Ki") bin_exp = 10;
  else if (suf == "Mi") bin_exp = 20;
  else if (suf == "Gi") bin_exp = 30;
  else if (suf == "Ti") bin_exp = 40;
  else if (suf == "Pi") bin_exp = 50;
  else if (suf == "Ei") bin_exp = 60;
  else if (suf == "n") dec_exp = -9;
  else if (suf == "u") dec_exp = -6;
  else if (suf == "m") dec_exp = -3;
  else if (suf == "k") dec_exp = 3;
  else if (suf == "M") dec_exp = 6;
  else if (suf == "G") dec_exp = 9;
  else if (suf == "T") dec_exp = 12;
  else if (suf == "P") dec_exp = 15;
  else if (suf == "E") dec_exp = 18;
  else if (suf.front() == 'e' || suf.front() == 'E') {
    std::string_view e = suf.substr(1);
    bool neg = false;
    if (!e.empty() && (e.front() == '-' || e.front() == '+')) {
      neg = e.front() == '-';
      e.remove_prefix(1);
    }
    if (e.empty() || e.size() > 3) return fail(EINVAL, "invalid {} quantity '{}'", what, q);
    for (char c : e) {
      if (c < '0' || c > '9') return fail(EINVAL, "invalid {} quantity '{}'", what, q);
      dec_exp = dec_exp * 10 + (c - '0');
    }
    if (neg) dec_exp = -dec_exp;
  } else {
    return fail(EINVAL, "invalid suffix '{}' in {} quantity '{}'", suf, what, q);
  }
  dec_exp -= frac;
  if (dec_exp > 30 || dec_exp < -40) return fail(ERANGE, "{} quantity '{}' out of range", what, q);
  const i128 max = std::numeric_limits<int64_t>::max();
  i128 num = mant * scale;
  for (int k = 0; k < bin_exp; ++k) {
    num *= 2;
    if (num > max * 1000000000LL) return fail(ERANGE, "{} quantity '{}' out of range", what, q);
  }
  for (int k = 0; k < dec_exp; ++k) {
    num *= 10;
    if (num > max * 1000000000LL) return fail(ERANGE, "{} quantity '{}' out of range", what, q);
  }
  i128 den = 1;
  for (int k = 0; k < -dec_exp; ++k) {
    den *= 10;
    if (den > max * 1000000000LL) {
      // Smaller than anything representable: rounds up to 1 unless zero.
      return num == 0 ? int64_t{0} : int64_t{1};
    }
  }
  i128 v = (num + den - 1) / den;  // Kubernetes rounds up (Quantity.MilliValue/Value)
  if (v > max) return fail(ERANGE, "{} quantity '{}' out of range", what, q);
  return static_cast<int64_t>(v);
}

}  // namespace

Result<int64_t> parse_cpu_milli(std::string_view q) { return parse_scaled(q, 1000, "cpu"); }
Result<int64_t> parse_memory_bytes(std::string_view q) { return parse_scaled(q, 1, "memory"); }

std::string format_cpu_milli(int64_t milli) {
  if (milli % 1000 == 0) return fmt::format("{}", milli / 1000);
  return fmt::format("{}m", milli);
}

std::string format_memory_bytes(int64_t bytes) {
  static constexpr struct {
    const char* suffix;
    int shift;
  } units[] = {{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
  if (bytes > 0) {
    for (const auto& u : units) {
      int64_t unit = int64_t{1} << u.shift;
      if (bytes % unit == 0) return fmt::format("{}{}", bytes / unit, u.suffix);
    }
  }
  return fmt::format("{}", bytes);
}

}  // namespace podshim::core
