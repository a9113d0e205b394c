// One strict, incremental HTTP/1.1 request reader for both of podshimd's
// listeners (the status socket and the TCP metrics listener).
//
// The grammar (request line, field syntax, Content-Length and chunked
// framing, header and body limits) is Boost.Beast's request parser
// (boost/beast/http/basic_parser.hpp), fed from our own sd-event loop without
// asio sockets. Beast is deliberately lenient in a few places where an agent
// that runs as root must not be, so the reader adds, on top of it:
//  - line ends: a bare LF, a bare CR or a NUL anywhere in the head is refused
//    as soon as it arrives (Beast would wait for a CRLFCRLF that never
//    comes, or report "bad version");
//  - obs-fold (a field line starting with SP or HT) is refused (RFC 9112
//    §5.2; Beast unfolds it);
//  - Host: exactly one in an HTTP/1.1 request, with a valid value (RFC 9112
//    §3.2 requires 400 otherwise); Beast does not look at Host;
//  - Content-Length: one field, digits only (Beast accepts a repeated equal
//    value and a "2, 2" list);
//  - Transfer-Encoding: "chunked" alone, or 501 (Beast treats
//    "Transfer-Encoding: gzip" on a request as no body at all, which lets
//    the "body" be read as the next request);
//  - Expect: "100-continue" only, and only honoured on HTTP/1.1 (RFC 9110
//    §10.1.1: ignored on HTTP/1.0); anything else is 417;
//  - chunk extensions longer than kMaxChunkExtension and trailer fields are
//    refused, so what a chunk header costs does not depend on how its bytes
//    were split;
//  - the request target is reduced to one canonical, UTF-8 path
//    (canonical_path below).
// Whatever is refused gets a status and a message naming the input, and the
// answer is the same however the bytes were segmented: every rule looks only
// at complete units (the whole head, a whole chunk header), or at a prefix
// whose verdict no later byte can change.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::status {

// Parses a request target into the one path it stands for. Refused: a raw or
// percent-encoded NUL or control byte, bytes that are not UTF-8 (raw or after
// decoding), a malformed escape, an encoded '/' '%' '?' '#', empty or dot
// segments, a trailing '/', and non-origin forms. The query string, which no
// endpoint uses, is checked for control bytes and then dropped. The error
// names the target.
Result<std::string> canonical_path(std::string_view target);

// Printable form of client bytes for messages and logs: control, DEL and
// non-ASCII bytes as \xNN, cut at 200 bytes.
std::string shown(std::string_view s);

// The reason phrase of a status code podshimd sends ("Not Found").
std::string_view reason_phrase(int status);

struct HttpLimits {
  size_t max_head_bytes = 16 << 10;  // request line + fields; over it: 431
  uint64_t max_body_bytes = 1 << 20;  // over it: 413
};

struct HttpRequest {
  std::string method;   // as sent (a token)
  std::string target;   // as sent
  std::string path;     // canonical_path(target)
  bool http10 = false;
  bool keep_alive = true;       // false: answer, then close
  bool expect_continue = false;  // HTTP/1.1 "Expect: 100-continue" with a body to come
  bool has_body = false;         // Content-Length > 0 or chunked
  bool chunked = false;
  uint64_t content_length = 0;
  std::string body;
};

struct HttpRefusal {
  int status = 400;
  std::string message;
};

class HttpRequestReader {
 public:
  explicit HttpRequestReader(HttpLimits limits);
  ~HttpRequestReader();
  HttpRequestReader(const HttpRequestReader&) = delete;
  HttpRequestReader& operator=(const HttpRequestReader&) = delete;

  enum class Step {
    More,     // needs more bytes
    Head,     // the head is complete and checked: request() has everything but the body
    Done,     // the request is complete (body included)
    Refused,  // refusal() says why; the connection must be closed after the answer
  };

  // Reads from the front of `in`, erasing what it consumed. Returns Head once
  // per request (the caller decides access, 405, 413 before any body is
  // read, then calls feed again), and Done when the body is complete; bytes
  // after it (a pipelined request) stay in `in`.
  Step feed(std::string& in);

  // Whether a head has begun (bytes other than the empty lines that may
  // precede a request; RFC 9112 §2.2).
  bool started() const { return started_; }
  bool head_done() const { return head_done_; }
  const HttpRequest& request() const { return req_; }
  HttpRequest& request() { return req_; }
  const HttpRefusal& refusal() const { return refusal_; }

  // Ready for the next request on the same connection.
  void reset();

  // The longest chunk extension accepted (bytes after ';').
  static constexpr size_t kMaxChunkExtension = 256;

 private:
  struct Parser;
  Step refuse(int status, std::string message);
  Step check_head_bytes(std::string_view in);
  std::string head_too_large() const;
  Step on_head_checked();
  Step feed_head(std::string& in);
  Step feed_body(std::string& in);
  Step put_body(std::string& in, size_t n);
  Step finish_body();
  std::string body_too_large() const;
  std::optional<Step> chunk_header_line(std::string_view in, size_t* line);

  HttpLimits limits_;
  std::unique_ptr<Parser> p_;
  HttpRequest req_;
  HttpRefusal refusal_;
  size_t scanned_ = 0;  // head bytes already checked for line ends
  size_t head_end_ = 0;  // where the head ends (past its empty line), once scanned_ found it
  bool started_ = false;
  bool head_done_ = false;
  bool refused_ = false;
};

}  // namespace podshim::status
