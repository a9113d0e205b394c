// The read-only TCP listener for Prometheus: GET /metrics and nothing else
// (every other path is 404, every other method 405), no request body read,
// no access to the status API. Off unless metrics.listen is set. Served on
// the daemon's sd-event loop: one request per connection, at most 16
// connections, an 8 KiB request head and 10 s per connection.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

typedef struct sd_event sd_event;

namespace podshim::status {

// A parsed listen address: "HOST:PORT" with HOST an IPv4 literal, "[IPv6]"
// or empty (all IPv4 addresses); no name resolution.
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string text;
};
Result<ListenAddress> parse_listen_address(std::string_view s);

class MetricsListener {
 public:
  // Binds `address` and serves the text `render()` returns on GET /metrics.
  static Result<std::unique_ptr<MetricsListener>> start(sd_event* loop, std::string_view address,
                                                        std::function<std::string()> render);
  ~MetricsListener();
  // The bound address (with the kernel's port when ":0" was asked).
  const std::string& address() const;

  struct Impl;

 private:
  explicit MetricsListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace podshim::status
