#include "shim/hook/registrar.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "base/str.h"
#include "base/unique_fd.h"

namespace podshim::hook {
namespace {

using Clock = std::chrono::steady_clock;

// A response larger than this is not podshimd's (it answers with a small
// JSON object); refusing it keeps the hook's memory bounded.
constexpr size_t kMaxResponseBytes = 64 << 10;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(left.count());
}

// Waits for `events` on fd until the deadline; ETIMEDOUT when it passes.
Result<void> wait_fd(int fd, short events, Clock::time_point deadline, std::string_view doing) {
  for (;;) {
    int ms = remaining_ms(deadline);
    if (ms == 0) return fail(ETIMEDOUT, "{}: timed out", doing);
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno("{}: poll", doing);
    }
    if (n == 0) return fail(ETIMEDOUT, "{}: timed out", doing);
    return {};
  }
}

Result<UniqueFd> connect_unix(const std::string& path, Clock::time_point deadline) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return fail(ENAMETOOLONG, "socket path '{}' is empty or too long", path);
  std::memcpy(addr.sun_path, path.data(), path.size());
  int raw = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (raw < 0) return fail_errno("creating a unix socket");
  UniqueFd fd(raw);
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0)
      return fd;
    if (errno == EINTR) continue;
    // A non-blocking AF_UNIX connect never returns EINPROGRESS; EAGAIN means
    // the listener's backlog is full (unix(7)). Retry until the deadline.
    if (errno == EAGAIN) {
      if (remaining_ms(deadline) == 0) return fail(ETIMEDOUT, "connecting to '{}': timed out", path);
      ::poll(nullptr, 0, std::min(10, remaining_ms(deadline)));
      continue;
    }
    return fail_errno("connecting to '{}'", path);
  }
}

// Parses "HTTP/1.1 200 OK\r\n...\r\n\r\nbody" once the headers are complete.
// Returns true in *done when the whole response (per Content-Length) is in.
Result<bool> parse_response(const std::string& buf, bool eof, HttpResponse* out) {
  size_t hdr_end = buf.find("\r\n\r\n");
  if (hdr_end == std::string::npos) {
    if (eof) return fail(EPROTO, "connection closed before the HTTP headers were complete");
    return false;
  }
  std::string_view head(buf.data(), hdr_end);
  size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (!str::starts_with(status_line, "HTTP/1."))
    return fail(EPROTO, "not an HTTP response: '{}'", status_line.substr(0, 64));
  auto parts = str::split(status_line, ' ');
  if (parts.size() < 2 || parts[1].size() != 3)
    return fail(EPROTO, "malformed HTTP status line '{}'", status_line.substr(0, 64));
  auto code = str::parse_u64(parts[1]);
  if (!code || *code < 100 || *code > 599)
    return fail(EPROTO, "malformed HTTP status line '{}'", status_line.substr(0, 64));
  out->status = static_cast<int>(*code);

  std::optional<uint64_t> content_length;
  if (line_end != std::string_view::npos) {
    for (std::string_view line : str::split(head.substr(line_end + 2), '\n')) {
      line = str::trim(line);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string name(line.substr(0, colon));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name == "content-length") {
        auto n = str::parse_u64(line.substr(colon + 1));
        if (!n) return fail(EPROTO, "malformed Content-Length '{}'", line.substr(colon + 1));
        content_length = *n;
      }
    }
  }
  const size_t body_start = hdr_end + 4;
  const size_t have = buf.size() - body_start;
  if (content_length) {
    if (*content_length > kMaxResponseBytes)
      return fail(EPROTO, "HTTP response body of {} bytes is too large", *content_length);
    if (have < *content_length) {
      if (eof) return fail(EPROTO, "connection closed in the middle of the HTTP body");
      return false;
    }
    out->body = buf.substr(body_start, *content_length);
    return true;
  }
  // No Content-Length (e.g. a bare 204): the body runs to EOF, as we sent
  // Connection: close. Chunked encoding is not expected from podshimd.
  if (!eof) return false;
  out->body = buf.substr(body_start);
  return true;
}

class SocketRegistrar final : public Registrar {
 public:
  SocketRegistrar(std::string path, std::chrono::milliseconds timeout)
      : path_(std::move(path)), timeout_(timeout) {}

  Result<void> register_container(const Registration& r) override {
    auto resp = unix_http_request(path_, "POST", "/v1/containers", registration_body(r), timeout_);
    if (!resp) return wrap(resp, "registering with podshimd");
    if (resp->status < 200 || resp->status > 299)
      return fail(EPROTO, "registering with podshimd: HTTP {}: {}", resp->status,
                  str::trim(resp->body.substr(0, 200)));
    return {};
  }

  Result<void> deregister_container(std::string_view id) override {
    auto resp = unix_http_request(path_, "DELETE", fmt::format("/v1/containers/{}", id), "",
                                  timeout_);
    if (!resp) return wrap(resp, "deregistering from podshimd");
    // 404: already gone (a second poststop, or podshimd restarted): the goal is reached.
    if (resp->status == 404) return {};
    if (resp->status < 200 || resp->status > 299)
      return fail(EPROTO, "deregistering from podshimd: HTTP {}: {}", resp->status,
                  str::trim(resp->body.substr(0, 200)));
    return {};
  }

 private:
  std::string path_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::string registration_body(const Registration& r) {
  nlohmann::json j = {
      {"id", r.id},
      {"cgroupPath", r.cgroup_path},
      {"pid", r.pid},
      {"annotations", r.annotations},
      {"source", "hook"},
  };
  if (!r.pod_uid.empty()) j["podUid"] = r.pod_uid;
  // error_handler replace: an annotation value with invalid UTF-8 must not
  // throw out of the hook; podshimd sees U+FFFD instead.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<HttpResponse> unix_http_request(const std::string& socket_path, std::string_view method,
                                       std::string_view target, std::string_view body,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto fd = connect_unix(socket_path, deadline);
  if (!fd) return Unexpected(fd.error());

  std::string req = fmt::format(
      "{} {} HTTP/1.1\r\nHost: podshim\r\nUser-Agent: podshim-hook\r\nConnection: close\r\n",
      method, target);
  if (!body.empty() || method == "POST" || method == "PUT")
    req += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size());
  req += "\r\n";
  req += body;

  size_t off = 0;
  while (off < req.size()) {
    // MSG_NOSIGNAL: a peer that closed early must give EPIPE, not kill the hook.
    ssize_t n = ::send(fd->get(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        PODSHIM_TRY(wait_fd(fd->get(), POLLOUT, deadline, "sending the request"));
        continue;
      }
      return fail_errno("sending the request to '{}'", socket_path);
    }
    off += static_cast<size_t>(n);
  }

  std::string buf;
  HttpResponse resp;
  for (;;) {
    PODSHIM_TRY(wait_fd(fd->get(), POLLIN, deadline, "waiting for the response"));
    char chunk[4096];
    ssize_t n = ::recv(fd->get(), chunk, sizeof chunk, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return fail_errno("reading the response from '{}'", socket_path);
    }
    if (buf.size() + static_cast<size_t>(n) > kMaxResponseBytes + 8192)
      return fail(EPROTO, "HTTP response from '{}' is too large", socket_path);
    buf.append(chunk, static_cast<size_t>(n));
    auto done = parse_response(buf, n == 0, &resp);
    if (!done) return Unexpected(done.error());
    if (*done) return resp;
  }
}

std::unique_ptr<Registrar> make_socket_registrar(std::string socket_path,
                                                 std::chrono::milliseconds timeout) {
  return std::make_unique<SocketRegistrar>(std::move(socket_path), timeout);
}

}  // namespace podshim::hook
