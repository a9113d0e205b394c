// Slow clients for the status socket: a forked child that drops
// to an unprivileged uid and keeps N connections dripping one header line
// (or one body byte) per interval, reconnecting whenever the server closes
// one, for a bounded time; and a stream of good requests from root (GET
// /healthz) and from the hook's registration path (hook::make_socket_registrar,
// what podshim-hook uses) measured meanwhile. Unix sockets only; every loop
// is bounded in time.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shim/hook/registrar.h"
#include "shim/status/client.h"

namespace podshim::testing {

struct SlowOptions {
  std::string socket;
  int clients = 70;
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<gid_t> groups;  // supplementary
  std::chrono::milliseconds duration{6000};
  std::chrono::milliseconds drip{500};
  bool body = false;  // drip the body of a POST instead of header lines
};

struct SlowResult {
  int connects = 0;     // connections the child opened
  int refused_503 = 0;  // answered 503 (a connection limit)
  int timed_out = 0;    // answered 408 (the request deadline)
  int other = 0;        // closed with anything else or nothing
  int longest_ms = 0;   // the longest any connection stayed open
  std::string sample;   // one 503 body
};

inline int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class SlowClients {
 public:
  explicit SlowClients(SlowOptions o) : o_(std::move(o)) {}
  ~SlowClients() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Forks the child; returns once it has opened (or tried to open) every
  // one of its connections and sent each its first bytes, or false when it
  // did not get that far within 10 s. Callers need no sleep to "let them
  // connect".
  bool start() {
    int p[2], ready[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return false;
    if (::pipe2(ready, O_CLOEXEC) != 0) return false;
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      ::close(p[0]);
      ::close(ready[0]);
      if (::setgroups(o_.groups.size(), o_.groups.data()) != 0 || ::setgid(o_.gid) != 0 || ::setuid(o_.uid) != 0) _exit(3);
      ready_fd_ = ready[1];
      SlowResult r = run_child();
      std::string out = std::to_string(r.connects) + " " + std::to_string(r.refused_503) + " " +
                        std::to_string(r.timed_out) + " " + std::to_string(r.other) + " " +
                        std::to_string(r.longest_ms) + " " + r.sample;
      (void)!::write(p[1], out.data(), out.size());
      _exit(0);
    }
    ::close(p[1]);
    ::close(ready[1]);
    rfd_ = p[0];
    pollfd pf{ready[0], POLLIN, 0};
    char c = 0;
    const bool connected = ::poll(&pf, 1, 10000) == 1 && ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    return connected;
  }

  // Waits for the child to finish (it stops by itself after `duration`).
  SlowResult finish() {
    SlowResult r;
    std::string in;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(rfd_, buf, sizeof buf)) > 0) in.append(buf, static_cast<size_t>(n));
    ::close(rfd_);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    std::sscanf(in.c_str(), "%d %d %d %d %d", &r.connects, &r.refused_503, &r.timed_out, &r.other,
                &r.longest_ms);
    for (int i = 0, pos = 0; i < 5 && pos != -1; ++i) {
      auto sp = in.find(' ', static_cast<size_t>(pos));
      pos = sp == std::string::npos ? -1 : static_cast<int>(sp) + 1;
      if (i == 4 && pos > 0) r.sample = in.substr(static_cast<size_t>(pos));
    }
    return r;
  }

 private:
  int ready_fd_ = -1;  // the child's end of start()'s ready pipe
  using Clock = std::chrono::steady_clock;
  struct Slot {
    int fd = -1;
    Clock::time_point opened;
    std::string reply;
  };

  SlowResult run_child() {
    SlowResult r;
    std::vector<Slot> slots(static_cast<size_t>(o_.clients));
    const auto end = Clock::now() + o_.duration;
    auto next_drip = Clock::now();
    const std::string head = o_.body ? "POST /v1/containers HTTP/1.1\r\nHost: p\r\nContent-Length: 100000\r\n\r\n"
                                     : "GET /v1/containers HTTP/1.1\r\n";
    auto close_slot = [&](Slot& s) {
      int status = s.reply.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(s.reply.c_str() + 9) : 0;
      if (status == 503) {
        ++r.refused_503;
        if (r.sample.empty()) {
          auto b = s.reply.find("\r\n\r\n");
          if (b != std::string::npos) r.sample = s.reply.substr(b + 4, 200);
        }
      } else if (status == 408) {
        ++r.timed_out;
      } else {
        ++r.other;
      }
      int ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - s.opened).count());
      r.longest_ms = std::max(r.longest_ms, ms);
      ::close(s.fd);
      s.fd = -1;
      s.reply.clear();
    };
    while (Clock::now() < end) {
      if (Clock::now() >= next_drip) {
        next_drip += o_.drip;
        for (auto& s : slots) {
          if (s.fd < 0) {
            s.fd = connect_unix(o_.socket);
            if (s.fd < 0) continue;
            ++r.connects;
            s.opened = Clock::now();
            (void)::send(s.fd, head.data(), head.size(), MSG_NOSIGNAL);
          } else {
            const char* more = o_.body ? "x" : "X-Drip: 1\r\n";
            (void)::send(s.fd, more, std::strlen(more), MSG_NOSIGNAL);
          }
        }
        if (ready_fd_ >= 0) {  // the first round is out: start() may return
          (void)!::write(ready_fd_, "r", 1);
          ::close(ready_fd_);
          ready_fd_ = -1;
        }
      }
      std::vector<pollfd> pf;
      for (auto& s : slots) {
        if (s.fd >= 0) pf.push_back({s.fd, POLLIN, 0});
      }
      int wait_ms = static_cast<int>(
          std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(next_drip - Clock::now()).count()));
      ::poll(pf.data(), pf.size(), wait_ms);
      for (auto& s : slots) {
        if (s.fd < 0) continue;
        char buf[4096];
        ssize_t n = ::recv(s.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          s.reply.append(buf, static_cast<size_t>(n));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          close_slot(s);
        }
      }
    }
    for (auto& s : slots) {
      if (s.fd >= 0) {
        int ms = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - s.opened).count());
        r.longest_ms = std::max(r.longest_ms, ms);
        ::close(s.fd);
      }
    }
    return r;
  }

  SlowOptions o_;
  pid_t pid_ = -1;
  int rfd_ = -1;
};

// Good requests, one after another, for `duration`: root's GET /healthz and,
// every fifth request, a registration through the hook's registrar.
struct GoodResult {
  std::vector<double> root_ms, hook_ms;
  int failed = 0;
  std::string first_failure;
};

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

inline GoodResult good_stream(const std::string& socket, const std::string& cgroup_path,
                              std::chrono::milliseconds duration, std::chrono::milliseconds gap) {
  using Clock = std::chrono::steady_clock;
  GoodResult g;
  auto reg = hook::make_socket_registrar(socket, std::chrono::milliseconds(5000));
  status::ClientOptions co;
  co.socket_path = socket;
  co.timeout = std::chrono::milliseconds(5000);
  const auto end = Clock::now() + duration;
  for (int i = 0; Clock::now() < end; ++i) {
    auto t0 = Clock::now();
    bool ok;
    std::string why;
    if (i % 5 == 4) {
      hook::Registration r;
      r.id = "good-" + std::to_string(i);
      r.pod_uid = "pgood";
      r.cgroup_path = cgroup_path;
      auto res = reg->register_container(r);
      ok = res.has_value();
      if (!ok) why = "registration: " + res.error().message;
      g.hook_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    } else {
      auto res = status::http_request(co, "GET", "/healthz");
      ok = res && res->status == 200;
      if (!ok) why = "GET /healthz: " + (res ? std::to_string(res->status) + " " + res->body : res.error().message);
      g.root_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    if (!ok) {
      ++g.failed;
      if (g.first_failure.empty()) g.first_failure = why;
    }
    std::this_thread::sleep_for(gap);
  }
  return g;
}

}  // namespace podshim::testing
