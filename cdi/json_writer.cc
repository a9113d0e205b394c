#include "cdi/json_writer.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "base/str.h"

namespace podshim::cdi {

JsonWriter::JsonWriter(int indent, size_t size_hint) : step_(indent) { out_.resize(size_hint); }

std::string JsonWriter::take() {
  out_.resize(len_);
  len_ = 0;
  return std::move(out_);
}

void JsonWriter::grow(size_t n) { out_.resize(std::max(2 * out_.size(), len_ + n)); }

void JsonWriter::newline_indent(size_t depth) {
  size_t n = depth * static_cast<size_t>(step_);
  char* p = room(n + 1);
  p[0] = '\n';
  std::memset(p + 1, ' ', n);
  len_ += n + 1;
}

void JsonWriter::open(char c) {
  raw(c);
  nonempty_.push_back(0);
}

void JsonWriter::close(char c) {
  bool had = nonempty_.back();
  nonempty_.pop_back();
  if (had && step_ >= 0) newline_indent(nonempty_.size());
  raw(c);
}

void JsonWriter::separate() {
  if (nonempty_.back()) raw(',');
  nonempty_.back() = 1;
  if (step_ >= 0) newline_indent(nonempty_.size());
}

void JsonWriter::key(std::string_view k) {
  separate();
  string(k);
  raw(step_ >= 0 ? std::string_view(": ") : std::string_view(":"));
}

void JsonWriter::plain_key(std::string_view k) {
  separate();
  char* p = room(k.size() + 4);
  *p++ = '"';
  std::memcpy(p, k.data(), k.size());
  p += k.size();
  *p++ = '"';
  *p++ = ':';
  len_ += k.size() + 3;
  if (step_ >= 0) *p = ' ', len_++;
}

namespace {

// What string() does with each byte: copy it, escape it, or check the
// UTF-8 sequence it starts.
enum : uint8_t { kCopy, kEscape, kMulti };
constexpr std::array<uint8_t, 256> kByteClass = [] {
  std::array<uint8_t, 256> t{};
  for (size_t c = 0; c < 0x20; c++) t[c] = kEscape;
  t['"'] = t['\\'] = kEscape;
  for (size_t c = 0x80; c < 0x100; c++) t[c] = kMulti;
  return t;
}();

// Whether any of the 8 bytes in `w` needs string()'s byte-wise path: below
// 0x20, '"', '\\' or 0x80 and above. (x - 0x01..) & ~x & 0x80.. is non-zero
// exactly when some byte of x is below 1 (for a bound up to 0x80): a borrow
// can only mark a byte above one that is really below.
inline bool needs_care(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
  const uint64_t below = ((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash);
  return ((below | w) & kHigh) != 0;
}

}  // namespace

void JsonWriter::string(std::string_view s) {
  // At most 6 bytes out per byte in (\u00xx), plus the quotes.
  char* const start = room(s.size() * 6 + 2);
  char* p = start;
  *p++ = '"';
  for (size_t i = 0; i < s.size();) {
    // Eight plain bytes at a time (paths and names are mostly plain ASCII):
    // the byte-wise loop below was the largest part of writing the edits.
    if (i + 8 <= s.size()) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (!needs_care(w)) {
        std::memcpy(p, &w, 8);
        p += 8;
        i += 8;
        continue;
      }
    }
    auto c = static_cast<unsigned char>(s[i]);
    switch (kByteClass[c]) {
      case kCopy:
        *p++ = static_cast<char>(c);
        i++;
        continue;
      case kMulti: {
        size_t n = str::utf8_sequence(s, i);
        if (n == 0) {
          if (bad_utf8_.empty()) bad_utf8_ = std::string(s);
          n = 1;  // copied as is; the output is refused anyway
        }
        std::memcpy(p, s.data() + i, n);
        p += n;
        i += n;
        continue;
      }
      default: break;
    }
    i++;
    *p++ = '\\';
    switch (c) {
      case '"': *p++ = '"'; break;
      case '\\': *p++ = '\\'; break;
      case '\b': *p++ = 'b'; break;
      case '\f': *p++ = 'f'; break;
      case '\n': *p++ = 'n'; break;
      case '\r': *p++ = 'r'; break;
      case '\t': *p++ = 't'; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        *p++ = 'u';
        *p++ = '0';
        *p++ = '0';
        *p++ = kHex[c >> 4];
        *p++ = kHex[c & 0xF];
      }
    }
  }
  *p++ = '"';
  len_ += static_cast<size_t>(p - start);
}

void JsonWriter::integer(int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  raw(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

void JsonWriter::unsigned_integer(uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  raw(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

void JsonWriter::value(const nlohmann::json& j) {
  using vt = nlohmann::json::value_t;
  if (override_ && (j.is_array() || j.is_object()) && override_(j, *this)) return;
  switch (j.type()) {
    case vt::object:
      begin_object();
      for (const auto& [k, v] : j.items()) {
        key(k);
        value(v);
      }
      end_object();
      return;
    case vt::array:
      begin_array();
      for (const auto& v : j) {
        element();
        value(v);
      }
      end_array();
      return;
    case vt::string: string(j.get_ref<const std::string&>()); return;
    case vt::number_integer: integer(j.get<int64_t>()); return;
    case vt::number_unsigned: unsigned_integer(j.get<uint64_t>()); return;
    case vt::boolean: boolean(j.get<bool>()); return;
    default:
      // null, floats (nlohmann's own shortest round-trip form), binary and
      // discarded: scalars whose dump() does not depend on the depth.
      raw(j.dump());
      return;
  }
}

}  // namespace podshim::cdi
