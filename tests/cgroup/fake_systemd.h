// A fake systemd for the systemd driver's D-Bus calls (tests/cgroup
// sdbus_test.cc, sdbus_bench.cc; podshimd itself, through
// DBUS_SYSTEM_BUS_ADDRESS, in tests/shim/daemon): an sd-bus server on a
// private unix socket, in its own thread, that records each
// SetUnitProperties and answers it after a delay, or never. And podshimd's
// scheduler on a private sd-event loop.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cgroup/unit_manager.h"
#include "tests/cgroup/schedule_on.h"

namespace podshim::cgroup::testing {

using Clock = std::chrono::steady_clock;

// A fake systemd: accepts one connection on `sock` and answers each
// SetUnitProperties `delay` after it arrived (never, when `delay` is unset).
class FakeSystemd {
 public:
  struct Call {
    std::string unit;
    std::vector<UnitProperty> props;
    Clock::time_point at;
  };

  FakeSystemd(std::string sock, std::optional<std::chrono::milliseconds> delay)
      : sock_(std::move(sock)), delay_(delay) {
    lfd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_.c_str());
    ok_ = lfd_ >= 0 && ::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(lfd_, 4) == 0;
    if (ok_) th_ = std::thread([this] { serve(); });
  }
  ~FakeSystemd() {
    stop_ = true;
    if (th_.joinable()) th_.join();
    if (lfd_ >= 0) ::close(lfd_);
  }
  bool ok() const { return ok_; }
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }

 private:
  void serve() {
    int fd = -1;
    while (!stop_ && fd < 0) {
      pollfd p{lfd_, POLLIN, 0};
      if (::poll(&p, 1, 20) == 1) fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (fd < 0) return;
    sd_bus* b = nullptr;
    sd_id128_t id;
    sd_id128_randomize(&id);
    if (sd_bus_new(&b) < 0 || sd_bus_set_fd(b, fd, fd) < 0 || sd_bus_set_server(b, 1, id) < 0 ||
        sd_bus_add_filter(b, nullptr, &FakeSystemd::on_message, this) < 0 || sd_bus_start(b) < 0) {
      std::fprintf(stderr, "fake systemd: setting up the server bus failed\n");
      sd_bus_unref(b);
      return;
    }
    while (!stop_) {
      int r = sd_bus_process(b, nullptr);
      if (r < 0) break;  // the client went away
      if (r > 0) continue;
      auto now = Clock::now();
      for (auto it = due_.begin(); it != due_.end();) {
        if (it->first <= now) {
          sd_bus_reply_method_return(it->second, nullptr);
          sd_bus_message_unref(it->second);
          it = due_.erase(it);
        } else {
          ++it;
        }
      }
      sd_bus_flush(b);
      sd_bus_wait(b, 2000);
    }
    for (auto& [t, m] : due_) sd_bus_message_unref(m);
    for (auto* m : never_) sd_bus_message_unref(m);
    sd_bus_flush_close_unref(b);
  }

  static int on_message(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<FakeSystemd*>(userdata);
    // A client of the system bus (sd_bus_open_system, as podshimd's) first
    // says Hello to the bus itself and needs a unique name back.
    if (sd_bus_message_is_method_call(m, "org.freedesktop.DBus", "Hello")) {
      sd_bus_reply_method_return(m, "s", ":1.1");
      return 1;
    }
    if (!sd_bus_message_is_method_call(m, "org.freedesktop.systemd1.Manager", "SetUnitProperties")) return 0;
    Call c;
    c.at = Clock::now();
    const char* unit = nullptr;
    int runtime = 0;
    if (sd_bus_message_read(m, "sb", &unit, &runtime) >= 0 && unit) c.unit = unit;
    if (sd_bus_message_enter_container(m, 'a', "(sv)") > 0) {
      while (sd_bus_message_enter_container(m, 'r', "sv") > 0) {
        const char* name = nullptr;
        uint64_t v = 0;
        sd_bus_message_read(m, "s", &name);
        if (sd_bus_message_enter_container(m, 'v', "t") > 0) {
          sd_bus_message_read(m, "t", &v);
          sd_bus_message_exit_container(m);
        }
        sd_bus_message_exit_container(m);
        c.props.push_back({name ? name : "", v});
      }
      sd_bus_message_exit_container(m);
    }
    {
      std::lock_guard<std::mutex> l(self->mu_);
      self->calls_.push_back(c);
    }
    if (self->delay_)
      self->due_.emplace_back(c.at + *self->delay_, sd_bus_message_ref(m));
    else
      self->never_.push_back(sd_bus_message_ref(m));
    return 1;
  }

  std::string sock_;
  std::optional<std::chrono::milliseconds> delay_;
  int lfd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread th_;
  std::mutex mu_;
  std::vector<Call> calls_;
  std::vector<std::pair<Clock::time_point, sd_bus_message*>> due_;  // server thread only
  std::vector<sd_bus_message*> never_;
};

}  // namespace podshim::cgroup::testing
