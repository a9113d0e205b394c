#include "shim/status/http.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

// Beast is used header-only and without asio's sockets: only its parser
// (basic_parser) and buffer types, fed from our own loop.
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <fmt/format.h>

#include "base/str.h"

namespace podshim::status {

namespace bhttp = boost::beast::http;

std::string shown(std::string_view s) {
  std::string o;
  for (unsigned char c : s.substr(0, 200)) {
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '"') o += fmt::format("\\x{:02x}", c);
    else o += static_cast<char>(c);
  }
  if (s.size() > 200) o += "...";
  return o;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

namespace {

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// ASCII case-insensitive equality (field names and tokens are ASCII).
bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

// RFC 3986 reg-name characters (unreserved, sub-delims; '%' starts an escape).
constexpr str::ByteSet kRegName = str::byte_set([](char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~!$&'()*+,;=%").find(c) != std::string_view::npos;
});
constexpr str::ByteSet kIpLiteral = str::byte_set([](char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' || c == '.';
});

// Host = uri-host [ ":" port ] (RFC 9112 §3.2, RFC 3986 §3.2.2); an empty
// value is allowed (a target without an authority, as on a unix socket).
bool valid_host(std::string_view h) {
  if (h.empty()) return true;
  std::string_view host = h, port;
  if (h.front() == '[') {
    auto close = h.find(']');
    if (close == std::string_view::npos || close < 2) return false;
    if (str::find_not_in(h.substr(1, close - 1), kIpLiteral) != std::string_view::npos) return false;
    host = h.substr(0, close + 1);
    if (close + 1 < h.size()) {
      if (h[close + 1] != ':') return false;
      port = h.substr(close + 2);
    }
  } else {
    auto colon = h.rfind(':');
    if (colon != std::string_view::npos) {
      host = h.substr(0, colon);
      port = h.substr(colon + 1);
    }
    if (str::find_not_in(host, kRegName) != std::string_view::npos) return false;
    for (size_t i = 0; i < host.size(); ++i) {
      if (host[i] == '%' && (i + 2 >= host.size() || hexval(host[i + 1]) < 0 || hexval(host[i + 2]) < 0)) return false;
    }
  }
  return port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The first line of a head, for messages.
std::string_view first_line(std::string_view head) { return head.substr(0, head.find_first_of("\r\n")); }

// The first field line of a head (the lines after the request line, up to
// the empty one) for which `pick` is true, or empty.
template <typename Pick>
std::string_view find_field_line(std::string_view head, Pick pick) {
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const size_t start = pos + 2;
    const size_t end = head.find("\r\n", start);
    std::string_view line = head.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (line.empty()) break;
    if (pick(line)) return line;
    pos = end;
  }
  return {};
}

// The raw field line whose name is `name` (case-insensitive), for messages.
std::string_view raw_field(std::string_view head, std::string_view name) {
  return find_field_line(head, [&](std::string_view line) {
    auto colon = line.find(':');
    return colon != std::string_view::npos && iequals(line.substr(0, colon), name);
  });
}

// The first field line that is not `token ":" value` with visible value
// bytes, for the message of Beast's bad_field/bad_value.
std::string_view bad_field_line(std::string_view head) {
  constexpr str::ByteSet kTchar = str::byte_set([](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
  return find_field_line(head, [&](std::string_view line) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 ||
        str::find_not_in(line.substr(0, colon), kTchar) != std::string_view::npos) {
      return true;
    }
    for (unsigned char ch : line.substr(colon + 1)) {
      if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return true;
    }
    return false;
  });
}

}  // namespace

Result<std::string> canonical_path(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    return fail(EINVAL, "request target '{}' must be an absolute path", shown(target));
  }
  std::string_view whole = target;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    // No endpoint reads the query, but its bytes are checked like the path's.
    for (unsigned char c : target.substr(q + 1)) {
      if (c < 0x20 || c == 0x7f) {
        return fail(EINVAL, "query of '{}' contains a control character (0x{:02x})", shown(whole), c);
      }
    }
    target = target.substr(0, q);
  }
  std::string out;
  out.reserve(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(target[i]);
    if (c == '%') {
      int hi = i + 2 < target.size() ? hexval(target[i + 1]) : -1;
      int lo = hi >= 0 ? hexval(target[i + 2]) : -1;
      if (hi < 0 || lo < 0) return fail(EINVAL, "path '{}' has a malformed percent-escape", shown(whole));
      c = static_cast<unsigned char>(hi * 16 + lo);
      if (c == 0) return fail(EINVAL, "path '{}' contains an encoded NUL (%00)", shown(whole));
      if (c == '/' || c == '%' || c == '?' || c == '#') {
        return fail(EINVAL, "path '{}' encodes '{}', which would change what the path means", shown(whole),
                    static_cast<char>(c));
      }
      i += 2;
    } else if (c == 0) {
      return fail(EINVAL, "path '{}' contains a NUL byte", shown(whole));
    } else if (c == '#') {
      return fail(EINVAL, "path '{}' contains a fragment", shown(whole));
    }
    if (c < 0x20 || c == 0x7f) {
      return fail(EINVAL, "path '{}' contains a control character (0x{:02x})", shown(whole), c);
    }
    out += static_cast<char>(c);
  }
  // Decoded once, checked once: nothing after this point (access control,
  // the router, error messages, logs, JSON answers) meets bytes that are
  // not UTF-8.
  if (!str::valid_utf8(out)) return fail(EINVAL, "path '{}' is not valid UTF-8", shown(whole));
  if (out.size() > 1) {
    if (out.back() == '/') return fail(EINVAL, "path '{}' ends in '/'", shown(whole));
    bool ok = true;
    std::string why;
    str::each_component(std::string_view(out).substr(1), [&](std::string_view seg) {
      if (seg.empty()) why = fmt::format("path '{}' has an empty segment", shown(whole));
      else if (seg == "." || seg == "..") why = fmt::format("path '{}' has a '{}' segment", shown(whole), seg);
      ok = why.empty();
      return ok;
    });
    if (!ok) return fail(EINVAL, "{}", why);
  }
  return out;
}

struct HttpRequestReader::Parser {
  bhttp::request_parser<bhttp::string_body> p;
  std::uint64_t chunked_bytes = 0;  // the sizes of the chunk headers taken so far
  bool body_started = false;  // the body limit is set once, when the body begins
  bool ext_too_long = false;
  std::uint64_t chunk_left = 0;  // data bytes of the current chunk Beast has yet to take
  // Kept alive across put() calls: Beast stores a reference to the callback.
  std::function<void(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)> on_chunk;
};

HttpRequestReader::HttpRequestReader(HttpLimits limits) : limits_(limits) { reset(); }
HttpRequestReader::~HttpRequestReader() = default;

void HttpRequestReader::reset() {
  p_ = std::make_unique<Parser>();
  p_->p.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits_.max_head_bytes, UINT32_MAX)));
  // No body limit while the head is read: Beast would refuse a too-long
  // Content-Length before the head is complete, and the caller could not
  // answer 405 or 403 first. Our own limit applies from the head on. Not
  // boost::none: Boost 1.74's parser compares `len_ > body_limit_` on the
  // optional, and any length is greater than an empty optional.
  p_->p.body_limit(std::numeric_limits<std::uint64_t>::max());
  p_->p.eager(false);  // stop after the head: the caller decides before any body is read
  Parser* raw = p_.get();
  p_->on_chunk = [raw](std::uint64_t size, boost::beast::string_view ext, boost::beast::error_code& ec) {
    if (ext.size() > kMaxChunkExtension) {
      raw->ext_too_long = true;
      ec = bhttp::error::bad_chunk_extension;
      return;
    }
    // RFC 9112 §7.1.1: a quoted extension value is qdtext and quoted-pairs,
    // no control bytes; Boost 1.74 does not look inside the quotes.
    for (char c : ext) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
        ec = bhttp::error::bad_chunk_extension;
        return;
      }
    }
    raw->chunk_left = size;
    raw->chunked_bytes += size;
  };
  p_->p.on_chunk_header(p_->on_chunk);
  req_ = HttpRequest{};
  refusal_ = HttpRefusal{};
  scanned_ = 0;
  head_end_ = 0;
  started_ = head_done_ = refused_ = false;
}

HttpRequestReader::Step HttpRequestReader::refuse(int status, std::string message) {
  refused_ = true;
  refusal_ = HttpRefusal{status, std::move(message)};
  return Step::Refused;
}

// Line ends and NULs in the head, checked as bytes arrive: each verdict needs
// at most the next three bytes, so it is the same however the head was
// split. A head ends with its empty line within the first max_head_bytes or
// is too large (431): a verdict that would need a byte past them is 431,
// whatever that byte is, so it never depends on whether the byte has come.
HttpRequestReader::Step HttpRequestReader::check_head_bytes(std::string_view in) {
  const size_t max = limits_.max_head_bytes;
  const size_t limit = std::min(in.size(), max);
  // The verdict on the byte at `i` needs the byte at `k`, not here yet.
  const auto wait_for = [&](size_t i, size_t k) {
    if (k >= max) return refuse(431, head_too_large());
    scanned_ = i;
    return Step::More;
  };
  constexpr str::ByteSet kPlain = str::byte_set([](char c) { return c != '\0' && c != '\n' && c != '\r'; });
  for (size_t i = scanned_; i < limit; ++i) {
    const size_t plain = str::find_not_in(in.substr(i, limit - i), kPlain);
    if (plain == std::string_view::npos) break;
    i += plain;
    const char c = in[i];
    // Messages quote only bytes up to the offending one: they are all here
    // however the head was split.
    if (c == '\0') {
      const size_t line = i == 0 ? 0 : in.rfind('\n', i - 1) == std::string_view::npos ? 0 : in.rfind('\n', i - 1) + 1;
      return refuse(400, fmt::format("request contains a NUL byte: '{}'", shown(in.substr(line, i + 1 - line))));
    }
    if (c == '\n') return refuse(400, "request head has a bare LF line end; use CRLF");
    if (c != '\r') continue;
    if (i + 1 >= limit) return wait_for(i, i + 1);
    if (in[i + 1] != '\n') return refuse(400, "request head has a bare CR");
    // A CRLF: the end of the head, or a line that must not start with
    // white space (obs-fold, RFC 9112 §5.2; or white space before the first
    // field, §2.2).
    if (i + 2 >= limit) return wait_for(i, i + 2);
    const char next = in[i + 2];
    if (next == ' ' || next == '\t') {
      const size_t prev = i == 0 ? 0 : in.rfind('\n', i - 1) == std::string_view::npos ? 0 : in.rfind('\n', i - 1) + 1;
      return refuse(400, fmt::format("folded header line (a line starting with white space) after '{}' is not accepted",
                                     shown(in.substr(prev, i - prev))));
    }
    if (next == '\r') {
      // The empty line that ends the head, once its LF is here; the rest is
      // body or the next request.
      if (i + 3 >= limit) return wait_for(i, i + 3);
      if (in[i + 3] != '\n') return refuse(400, "request head has a bare CR");
      head_end_ = i + 4;
      scanned_ = SIZE_MAX;
      return Step::More;
    }
    ++i;  // past the LF
  }
  if (limit == max) return refuse(431, head_too_large());
  scanned_ = limit;
  return Step::More;
}

std::string HttpRequestReader::head_too_large() const {
  return fmt::format("request head larger than {} bytes", limits_.max_head_bytes);
}

namespace {

// Beast's bad_chunk, and a missing CR LF after chunk data found before Beast
// looks for it: one message for both.
constexpr std::string_view kBadChunkFraming = "invalid chunk size line or chunk framing";

// A chunk header line (size, extension, CR LF) longer than any accepted.
std::string chunk_header_too_long() {
  return fmt::format("chunk header longer than {} bytes", HttpRequestReader::kMaxChunkExtension + 24);
}

// The status and message for a head Beast refused, quoting the part of
// `head` it refused.
// The size limits are the reader's own (head_too_large, body_too_large).
std::pair<int, std::string> head_refusal(const boost::system::error_code& ec, std::string_view head) {
  if (ec == bhttp::error::bad_version) {
    std::string_view line = first_line(head);
    std::string_view version = line.substr(std::min(line.size(), line.rfind(' ') + 1));
    // 505 only for a request line of three fields whose version is
    // well-formed and not 1.x (RFC 9112 §3: method SP target SP version);
    // "GET a b HTTP/1.1" is a malformed line, not an unsupported version.
    const bool three_fields = std::count(line.begin(), line.end(), ' ') == 2;
    if (three_fields && version.size() == 8 && str::starts_with(version, "HTTP/") && isdigit(version[5]) &&
        version[6] == '.' && isdigit(version[7]) && version[5] != '1') {
      return {505, fmt::format("HTTP version '{}' is not supported (use HTTP/1.1)", shown(version))};
    }
    return {400, fmt::format("malformed request line '{}'", shown(line))};
  }
  if (ec == bhttp::error::bad_method || ec == bhttp::error::bad_target) {
    return {400, fmt::format("malformed request line '{}'", shown(first_line(head)))};
  }
  if (ec == bhttp::error::bad_field || ec == bhttp::error::bad_value) {
    return {400, fmt::format("malformed header line '{}'", shown(bad_field_line(head)))};
  }
  if (ec == bhttp::error::bad_content_length) {
    return {400, fmt::format("invalid Content-Length in '{}'", shown(raw_field(head, "content-length")))};
  }
  if (ec == bhttp::error::bad_transfer_encoding) {
    if (!raw_field(head, "content-length").empty()) {
      return {400, "both Content-Length and Transfer-Encoding given"};
    }
    return {400, fmt::format("invalid or repeated Transfer-Encoding ('{}')", shown(raw_field(head, "transfer-encoding")))};
  }
  return {400, fmt::format("malformed request head ({}): '{}'", ec.message(), shown(first_line(head)))};
}

}  // namespace

HttpRequestReader::Step HttpRequestReader::feed(std::string& in) {
  if (refused_) return Step::Refused;
  return head_done_ ? feed_body(in) : feed_head(in);
}

HttpRequestReader::Step HttpRequestReader::feed_head(std::string& in) {
  boost::beast::error_code ec;
  if (!started_) {
    // Empty lines before a request are ignored (RFC 9112 §2.2).
    size_t skip = 0;
    while (in.size() >= skip + 2 && in[skip] == '\r' && in[skip + 1] == '\n') skip += 2;
    in.erase(0, skip);
    if (in.empty() || in == "\r") return Step::More;
    started_ = true;
  }
  if (scanned_ != SIZE_MAX) {
    if (check_head_bytes(in) == Step::Refused) return Step::Refused;
  }
  // Beast judges the request line, and some field bytes, as they come, so
  // a message quoting them would depend on how much had arrived: it gets
  // the head only once the head is whole (the byte checks above still act
  // at once, each on a byte whose verdict no later byte changes).
  if (scanned_ != SIZE_MAX) return Step::More;
  // Beast gets the head and nothing after it, so what follows the head
  // cannot change its verdict. It wants eight bytes for a version
  // (detail/basic_parser.ipp, parse_version), so a short one ("GET / H")
  // would leave it waiting for bytes that belong to the body or the next
  // request; and after asking for more it resumes its search for the end of
  // the head past the head's own CR LF CR LF, so it would never find it. A
  // whole head it cannot finish is a malformed one.
  const size_t n = p_->p.put(boost::asio::buffer(in.data(), head_end_), ec);
  if (ec == bhttp::error::need_more) ec = n == 0 ? bhttp::error::bad_version : bhttp::error::bad_field;
  // Neither limit can trip here (the head is within max_head_bytes, and the
  // body limit is off until feed_body): mapped so that a change to either
  // still answers with the reader's own message.
  if (ec == bhttp::error::header_limit) return refuse(431, head_too_large());
  if (ec == bhttp::error::body_limit) return refuse(413, body_too_large());
  if (ec) {
    auto [status, message] = head_refusal(ec, std::string_view(in.data(), head_end_));
    return refuse(status, std::move(message));
  }
  // The head is complete: n bytes of `in`.
  head_done_ = true;
  Step s = on_head_checked();
  in.erase(0, n);
  return s;
}


HttpRequestReader::Step HttpRequestReader::feed_body(std::string& in) {
  if (!req_.has_body) return Step::Done;
  if (req_.content_length > limits_.max_body_bytes) return refuse(413, body_too_large());
  if (!p_->body_started) {
    p_->body_started = true;
    p_->p.body_limit(limits_.max_body_bytes);  // a chunked body counts down from it as it comes
    p_->p.eager(true);
  }
  if (!req_.chunked) {
    auto s = put_body(in, in.size());
    if (s != Step::Done) return s;
    return p_->p.is_done() ? finish_body() : Step::More;
  }
  // Chunked: Beast is given a chunk's data, or one whole chunk header line,
  // per call, never a piece of a header. Boost 1.74 misreads a header in
  // pieces: it looks for a quoted extension's closing quote past the end of
  // the line (so the verdict depended on what followed) and takes the
  // chunk's size off the body limit again on every retry; and fed "0\r\n"
  // then one byte it fails an assertion and aborts (boostorg/beast#2861).
  for (;;) {
    if (p_->chunk_left > 0) {
      if (in.empty()) return Step::More;
      const size_t want = static_cast<size_t>(std::min<std::uint64_t>(p_->chunk_left, in.size()));
      const size_t before = in.size();
      auto s = put_body(in, want);
      if (s != Step::Done) return s;
      p_->chunk_left -= before - in.size();
      continue;
    }
    size_t line = 0;
    if (auto verdict = chunk_header_line(in, &line)) return *verdict;
    const size_t before = in.size();
    auto s = put_body(in, line);
    if (s != Step::Done) return s;
    if (p_->p.is_done()) return finish_body();
    // A whole line Beast neither took nor refused would loop here forever.
    if (in.size() == before) return refuse(400, std::string(kBadChunkFraming));
  }
}

// Gives Beast the first `n` bytes of `in` and drops what it took. Done: it
// took them without complaint (whether the body is complete is the
// caller's question); More: it wants more; else its refusal. A chunk header
// line is given whole, so Beast wanting more of one means the line is
// malformed (an extension it could not end).
HttpRequestReader::Step HttpRequestReader::put_body(std::string& in, size_t n) {
  boost::beast::error_code ec;
  const size_t took = p_->p.put(boost::asio::buffer(in.data(), n), ec);
  in.erase(0, took);
  if (ec == bhttp::error::need_more && !req_.chunked) return Step::More;
  if (!ec) return Step::Done;
  if (p_->ext_too_long) return refuse(400, chunk_header_too_long());
  if (ec == bhttp::error::body_limit) return refuse(413, body_too_large());
  if (ec == bhttp::error::bad_chunk_extension || ec == bhttp::error::need_more) {
    return refuse(400, "invalid chunk extension");
  }
  if (ec == bhttp::error::bad_chunk) return refuse(400, std::string(kBadChunkFraming));
  return refuse(400, fmt::format("malformed request body ({})", ec.message()));
}

HttpRequestReader::Step HttpRequestReader::finish_body() {
  req_.body = std::move(p_->p.get().body());
  return Step::Done;
}

std::string HttpRequestReader::body_too_large() const {
  return fmt::format("request body larger than {} bytes", limits_.max_body_bytes);
}

// The next chunk header at the front of `in`: nullopt and its length in
// `*line` once it is whole (the CR LF that ends the previous chunk's data,
// which Beast reads as part of the next header, the line, and for the last
// chunk the CR LF that ends the body: trailer fields are not accepted), else
// More or a refusal. Each verdict rests on bytes that are all here however
// they were split:
//  - after a chunk, its data must be followed by CR LF (400);
//  - a line longer than a header may be before its CR: by its size when its
//    digits are all there (413 for a chunk past the body limit), else by
//    its length (400);
//  - a CR not followed by LF: 400.
std::optional<HttpRequestReader::Step> HttpRequestReader::chunk_header_line(std::string_view in, size_t* line) {
  // Every chunk taken so far had a size above zero (the last one ends the
  // body), so a chunk was taken iff the sum is.
  const size_t lead = p_->chunked_bytes > 0 ? 2 : 0;
  if (lead && ((!in.empty() && in[0] != '\r') || (in.size() >= 2 && in[1] != '\n'))) {
    return refuse(400, std::string(kBadChunkFraming));
  }
  const std::string_view header = in.substr(std::min(lead, in.size()));
  const size_t cr = header.find('\r');
  std::uint64_t size = 0;
  size_t digits = 0;
  for (int v; digits < header.size() && digits < 16 && (v = hexval(header[digits])) >= 0; ++digits) {
    size = size * 16 + static_cast<std::uint64_t>(v);
  }
  if (std::min(cr, header.size()) > kMaxChunkExtension + 24) {
    if (digits > 0 && digits < header.size() && hexval(header[digits]) < 0 &&
        (size > limits_.max_body_bytes || p_->chunked_bytes + size > limits_.max_body_bytes)) {
      return refuse(413, body_too_large());
    }
    return refuse(400, chunk_header_too_long());
  }
  if (cr == std::string_view::npos || cr + 1 >= header.size()) return Step::More;
  if (header[cr + 1] != '\n') return refuse(400, "malformed request body (bad line ending)");
  *line = lead + cr + 2;
  // The last chunk: a size of zero (its digits all there, as the CR is).
  if (digits > 0 && size == 0) {
    if (in.size() < *line + 2) return Step::More;
    if (in.compare(*line, 2, "\r\n") != 0) return refuse(400, "trailer fields after the last chunk are not accepted");
    *line += 2;
  }
  return std::nullopt;
}

HttpRequestReader::Step HttpRequestReader::on_head_checked() {
  const auto& m = p_->p.get();
  req_.method.assign(m.method_string().data(), m.method_string().size());
  req_.target.assign(m.target().data(), m.target().size());
  req_.http10 = m.version() == 10;
  if (m.version() != 10 && m.version() != 11) {
    return refuse(505, fmt::format("HTTP version {}.{} is not supported (use HTTP/1.1)", m.version() / 10,
                                   m.version() % 10));
  }
  size_t hosts = 0, lengths = 0, encodings = 0;
  std::string_view host, length, encoding, expect;
  // Beast has already matched each name to its registry entry (f.name(),
  // case-insensitively); no name is compared again here.
  for (const auto& f : m) {
    const std::string_view value(f.value().data(), f.value().size());
    switch (f.name()) {
      case bhttp::field::host:
        ++hosts;
        host = value;
        break;
      case bhttp::field::content_length:
        ++lengths;
        length = value;
        break;
      case bhttp::field::transfer_encoding:
        ++encodings;
        encoding = value;
        break;
      case bhttp::field::expect: expect = value; break;
      default: break;
    }
  }
  // Host: one in every HTTP/1.1 request, and a valid one wherever it is sent
  // (RFC 9112 §3.2: "A server MUST respond with a 400 ... to any HTTP/1.1
  // request message that lacks a Host header field and to any request
  // message that contains more than one Host header field line or a Host
  // header field with an invalid field value").
  if (hosts > 1) return refuse(400, fmt::format("request has {} Host fields; one is required", hosts));
  if (hosts == 0 && !req_.http10) return refuse(400, "HTTP/1.1 request without a Host field");
  if (hosts == 1 && !valid_host(host)) return refuse(400, fmt::format("invalid Host '{}'", shown(host)));
  if (lengths > 1) return refuse(400, "repeated Content-Length");
  if (lengths == 1) {
    if (length.empty() || length.size() > 19 ||
        !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return refuse(400, fmt::format("invalid Content-Length '{}'", shown(length)));
    }
    req_.content_length = *str::parse_u64(length);
  }
  if (encodings > 0) {
    if (req_.http10) return refuse(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (!iequals(str::trim(encoding), "chunked")) {
      return refuse(501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked)", shown(encoding)));
    }
    req_.chunked = true;
  }
  if (!expect.empty()) {
    if (!iequals(str::trim(expect), "100-continue")) {
      return refuse(417, fmt::format("Expect '{}' is not supported", shown(expect)));
    }
  }
  auto path = canonical_path(req_.target);
  if (!path) return refuse(400, path.error().message);
  req_.path = std::move(*path);
  req_.has_body = req_.chunked || req_.content_length > 0;
  // RFC 9110 §10.1.1: a 100-continue expectation on HTTP/1.0 is ignored.
  req_.expect_continue = !expect.empty() && !req_.http10 && req_.has_body;
  req_.keep_alive = !req_.http10 && p_->p.keep_alive();
  return Step::Head;
}

}  // namespace podshim::status
