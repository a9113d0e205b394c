#include "base/quantity.h"

#include <cerrno>
#include <cstdint>
#include <string>

namespace podshim::quantity {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Decimal digit strings are multiplied by powers of two exactly, so "1.5Gi"
// and "0.1Ki" round the way resource.Quantity (inf.Dec) does, with no
// floating point anywhere.
void double_digits(std::string* d) {
  int carry = 0;
  for (size_t i = d->size(); i-- > 0;) {
    int v = ((*d)[i] - '0') * 2 + carry;
    (*d)[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  if (carry) d->insert(d->begin(), static_cast<char>('0' + carry));
}

struct Suffix {
  int exp10 = 0;
  int exp2 = 0;
};

// The suffixes of resource.Quantity: binarySI, decimalSI and a decimal
// exponent ("e3", "E-2"). "E" alone is exa; "E" followed by a number is an
// exponent, exactly as the Kubernetes grammar resolves the ambiguity.
Result<Suffix> parse_suffix(std::string_view s, std::string_view input) {
  static constexpr struct {
    std::string_view name;
    Suffix v;
  } kTable[] = {
      {"", {0, 0}},   {"n", {-9, 0}}, {"u", {-6, 0}},  {"m", {-3, 0}},  {"k", {3, 0}},
      {"M", {6, 0}},  {"G", {9, 0}},  {"T", {12, 0}},  {"P", {15, 0}},  {"E", {18, 0}},
      {"Ki", {0, 10}}, {"Mi", {0, 20}}, {"Gi", {0, 30}}, {"Ti", {0, 40}}, {"Pi", {0, 50}},
      {"Ei", {0, 60}},
  };
  for (const auto& e : kTable)
    if (s == e.name) return e.v;
  if (s.size() >= 2 && (s[0] == 'e' || s[0] == 'E')) {
    std::string_view n = s.substr(1);
    bool neg = false;
    if (n[0] == '+' || n[0] == '-') {
      neg = n[0] == '-';
      n.remove_prefix(1);
    }
    if (n.empty() || n.size() > 6) return fail(EINVAL, "invalid quantity '{}': bad exponent", input);
    int v = 0;
    for (char c : n) {
      if (!is_digit(c)) return fail(EINVAL, "invalid quantity '{}': bad exponent", input);
      v = v * 10 + (c - '0');
    }
    return Suffix{neg ? -v : v, 0};
  }
  return fail(EINVAL, "invalid quantity '{}': unknown suffix '{}'", input, s);
}

}  // namespace

Result<int64_t> parse_scaled(std::string_view q, int scale10) {
  if (q.empty()) return fail(EINVAL, "invalid quantity '': empty");
  size_t i = 0;
  bool negative = false;
  if (q[i] == '+' || q[i] == '-') {
    negative = q[i] == '-';
    ++i;
  }
  std::string int_digits, frac_digits;
  while (i < q.size() && is_digit(q[i])) int_digits += q[i++];
  if (i < q.size() && q[i] == '.') {
    ++i;
    while (i < q.size() && is_digit(q[i])) frac_digits += q[i++];
  }
  if (int_digits.empty() && frac_digits.empty())
    return fail(EINVAL, "invalid quantity '{}': expected a number", q);
  auto suffix = parse_suffix(q.substr(i), q);
  if (!suffix) return Unexpected(suffix.error());

  // value = D * 10^k * 2^b with D the digits without the point.
  std::string d = int_digits + frac_digits;
  size_t nz = d.find_first_not_of('0');
  if (nz == std::string::npos) return 0;  // any zero, "-0" included
  if (negative) return fail(EINVAL, "invalid quantity '{}': negative values are not allowed", q);
  d.erase(0, nz);
  long k = static_cast<long>(suffix->exp10) + scale10 - static_cast<long>(frac_digits.size());
  for (int b = 0; b < suffix->exp2; ++b) double_digits(&d);

  // int64 holds at most 19 digits; anything longer after scaling overflows.
  constexpr size_t kMaxDigits = 19;
  std::string whole;
  bool round_up = false;
  if (k >= 0) {
    if (d.size() + static_cast<size_t>(k) > kMaxDigits)
      return fail(ERANGE, "quantity '{}' is out of range", q);
    whole = d + std::string(static_cast<size_t>(k), '0');
  } else {
    size_t drop = static_cast<size_t>(-k);
    if (drop >= d.size()) {
      whole = "0";
      round_up = true;  // d is non-zero, so 0 < value < 1
    } else {
      whole = d.substr(0, d.size() - drop);
      round_up = d.find_first_not_of('0', d.size() - drop) != std::string::npos;
    }
    if (whole.size() > kMaxDigits) return fail(ERANGE, "quantity '{}' is out of range", q);
  }
  unsigned __int128 v = 0;
  for (char c : whole) v = v * 10 + static_cast<unsigned>(c - '0');
  if (round_up) ++v;
  if (v > static_cast<unsigned __int128>(INT64_MAX))
    return fail(ERANGE, "quantity '{}' is out of range", q);
  return static_cast<int64_t>(v);
}

Result<int64_t> parse_cpu_milli(std::string_view q) {
  auto r = parse_scaled(q, 3);
  if (!r) return wrap(r, "cpu");
  return r;
}

Result<int64_t> parse_memory_bytes(std::string_view q) {
  auto r = parse_scaled(q, 0);
  if (!r) return wrap(r, "memory");
  return r;
}

}  // namespace podshim::quantity
