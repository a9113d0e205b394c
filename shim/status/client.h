// A tiny HTTP/1.1 client over a unix socket for podshimctl and podshim-hook:
// one request per connection (http_request), or several on one kept-alive
// Connection (the status benchmark, and any caller that asks repeatedly);
// bounded in time (connect, send and every read
// share one deadline), Content-Length, chunked and read-until-close bodies.
// Deliberately minimal: podshimd is the only server it talks to.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "shim/core/defaults.h"

namespace podshim::status {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

struct ClientOptions {
  std::string socket_path = std::string(core::kDefaultSocketPath);
  std::chrono::milliseconds timeout{5000};  // whole request, for http_request
  size_t max_body = 64 << 20;
};

// Sends one request and reads the whole response. Connection failures are
// ECONNREFUSED/ENOENT/EACCES (podshimd unreachable); a missed deadline is
// ETIMEDOUT.
Result<HttpResponse> http_request(const ClientOptions& opts, std::string_view method,
                                  std::string_view target, std::string_view body = {});

// Several requests over one connection (HTTP/1.1 keep-alive). A connection
// podshimd has closed (its idle deadline, or "Connection: close") is replaced
// by a new one before the next request; a failed request drops it.
class Connection {
 public:
  explicit Connection(ClientOptions opts);
  ~Connection();
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;

  // As http_request, with opts.timeout for each request.
  Result<HttpResponse> request(std::string_view method, std::string_view target, std::string_view body = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Sends a GET and calls `on_line` for each newline-terminated line of the
// (streamed) body until the server ends it or `on_line` returns false. The
// status is checked first: a non-200 answer is returned as an error carrying
// the body. `opts.timeout` bounds connecting and the response head only.
Result<void> http_stream_lines(const ClientOptions& opts, std::string_view target,
                               const std::function<bool(std::string_view line)>& on_line);

}  // namespace podshim::status
