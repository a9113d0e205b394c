#include "shim/status/metrics_listener.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cstring>

#include "base/log.h"
#include "base/str.h"
#include "base/unique_fd.h"

namespace podshim::status {

struct MetricsListener::Impl {
  sd_event* loop = nullptr;
  MHD_Daemon* mhd = nullptr;
  sd_event_source* io = nullptr;
  sd_event_source* timer = nullptr;
  std::function<std::string()> render;
  std::string address;

  ~Impl() {
    if (mhd) MHD_stop_daemon(mhd);
    if (io) sd_event_source_disable_unref(io);
    if (timer) sd_event_source_disable_unref(timer);
  }

  void drive() {
    MHD_run(mhd);
    MHD_UNSIGNED_LONG_LONG to = 0;
    if (MHD_get_timeout(mhd, &to) != MHD_YES) {
      sd_event_source_set_enabled(timer, SD_EVENT_OFF);
      return;
    }
    uint64_t now = 0;
    sd_event_now(loop, CLOCK_MONOTONIC, &now);
    sd_event_source_set_time(timer, now + to * 1000);
    sd_event_source_set_enabled(timer, SD_EVENT_ONESHOT);
  }
};

namespace {

using Impl = MetricsListener::Impl;

MHD_Result reply(MHD_Connection* conn, unsigned status, std::string body, const char* type) {
  MHD_Response* resp =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", type);
  if (status == 405) MHD_add_response_header(resp, "Allow", "GET, HEAD");
  MHD_Result r = MHD_queue_response(conn, status, resp);
  MHD_destroy_response(resp);
  return r;
}

MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*,
                      const char*, size_t* upload_data_size, void** con_cls) {
  auto* impl = static_cast<Impl*>(cls);
  if (!*con_cls) {
    // First call: headers only. Mark the connection and wait for the end of
    // any body, which is discarded unread below.
    *con_cls = impl;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  std::string_view m(method), path(url);
  if (path != "/metrics") return reply(conn, 404, "not found: only /metrics is served here\n", "text/plain");
  if (m != "GET" && m != "HEAD") return reply(conn, 405, "use GET\n", "text/plain");
  return reply(conn, 200, impl->render(), "text/plain; version=0.0.4; charset=utf-8");
}

void log_mhd(void*, const char* fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  log::debug("microhttpd (metrics): {}", str::trim(buf));
}

int on_wake(sd_event_source*, int, uint32_t, void* userdata) {
  static_cast<Impl*>(userdata)->drive();
  return 0;
}

int on_timer(sd_event_source*, uint64_t, void* userdata) {
  static_cast<Impl*>(userdata)->drive();
  return 0;
}

std::string format_address(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return fmt::format("[{}]:{}", host, ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
  return fmt::format("{}:{}", host, ntohs(a->sin_port));
}

}  // namespace

Result<ListenAddress> parse_listen_address(std::string_view s) {
  auto bad = [&](std::string_view why) {
    return fail(EINVAL, "metrics.listen: '{}' is not HOST:PORT ({})", s, why);
  };
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = s.substr(0, colon), port_text = s.substr(colon + 1);
  auto port = str::parse_u64(port_text);
  if (!port || *port > 65535) return bad("port must be 0..65535");
  ListenAddress la;
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad("unterminated IPv6 literal");
    std::string h(host.substr(1, host.size() - 2));
    auto* a = reinterpret_cast<sockaddr_in6*>(&la.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(*port));
    if (inet_pton(AF_INET6, h.c_str(), &a->sin6_addr) != 1) return bad("bad IPv6 address");
    la.len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&la.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(*port));
    if (host.empty()) {
      a->sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET, std::string(host).c_str(), &a->sin_addr) != 1) {
      return bad("HOST must be an IPv4 address, [IPv6] or empty; names are not resolved");
    }
    la.len = sizeof(sockaddr_in);
  }
  la.text = std::string(s);
  return la;
}

MetricsListener::MetricsListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsListener::~MetricsListener() = default;
const std::string& MetricsListener::address() const { return impl_->address; }

Result<std::unique_ptr<MetricsListener>> MetricsListener::start(sd_event* loop, std::string_view address,
                                                                std::function<std::string()> render) {
  auto la = parse_listen_address(address);
  if (!la) return Unexpected(la.error());
  UniqueFd fd(socket(la->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("metrics listener socket");
  int one = 1;
  (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&la->addr), la->len) != 0) {
    return fail_errno("binding the metrics listener to {}", la->text);
  }
  if (listen(fd.get(), 64) != 0) return fail_errno("listen on {}", la->text);
  sockaddr_storage bound{};
  socklen_t blen = sizeof(bound);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &blen) != 0) {
    return fail_errno("getsockname on {}", la->text);
  }
  auto impl = std::make_unique<Impl>();
  impl->loop = loop;
  impl->render = std::move(render);
  impl->address = format_address(bound);
  int lfd = fd.release();  // MHD closes it in MHD_stop_daemon
  // Small limits: a scraper needs one connection at a time and no body.
  impl->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &on_request, impl.get(),
                               MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                               MHD_OPTION_CONNECTION_LIMIT, 16u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                               static_cast<size_t>(32 * 1024), MHD_OPTION_EXTERNAL_LOGGER, &log_mhd, nullptr,
                               MHD_OPTION_END);
  if (!impl->mhd) {
    close(lfd);
    return fail(EIO, "starting libmicrohttpd on {} failed", impl->address);
  }
  const MHD_DaemonInfo* di = MHD_get_daemon_info(impl->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  if (!di) return fail(EIO, "libmicrohttpd has no epoll fd");
  int r = sd_event_add_io(loop, &impl->io, di->epoll_fd, EPOLLIN, &on_wake, impl.get());
  if (r < 0) return fail_code(-r, "adding the metrics listener to the event loop");
  r = sd_event_add_time(loop, &impl->timer, CLOCK_MONOTONIC, 0, 1000, &on_timer, impl.get());
  if (r < 0) return fail_code(-r, "adding the metrics listener timer");
  impl->drive();
  return std::unique_ptr<MetricsListener>(new MetricsListener(std::move(impl)));
}

}  // namespace podshim::status
