// metrics.listen parsing and the per-container families' bounds, without a
// daemon (the daemon end to end: deploy-alert-rules).
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "shim/core/config.h"
#include "shim/core/state.h"
#include "shim/status/container_metrics.h"
#include "shim/status/metrics_listener.h"

namespace podshim {
namespace {

// The TCP listener itself, on a real sd-event loop and loopback sockets.
class Listener : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sd_event_new(&loop_), 0);
    auto l = status::MetricsListener::start(loop_, "127.0.0.1:0", [this] {
      ++renders_;
      return std::string("podshim_up 1\n");
    });
    ASSERT_TRUE(l) << l.error().message;
    listener_ = std::move(*l);
    port_ = static_cast<uint16_t>(std::stoi(listener_->address().substr(listener_->address().rfind(':') + 1)));
  }
  void TearDown() override {
    listener_.reset();
    sd_event_unref(loop_);
  }
  // from: the client's source address (loopback is all of 127/8).
  int connect_fd(uint32_t from = INADDR_LOOPBACK) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(from);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)), 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }
  // Runs `client` on a thread while this thread drives the loop.
  void with_loop(const std::function<void()>& client) {
    std::atomic<bool> done{false};
    std::thread t([&] {
      client();
      done = true;
    });
    while (!done) sd_event_run(loop_, 20'000);
    t.join();
  }
  static std::string read_all(int fd) {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  std::string ask(const std::string& req) {
    std::string out;
    with_loop([&] {
      int fd = connect_fd();
      EXPECT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
      out = read_all(fd);
      close(fd);
    });
    return out;
  }

  sd_event* loop_ = nullptr;
  std::unique_ptr<status::MetricsListener> listener_;
  uint16_t port_ = 0;
  int renders_ = 0;
};

TEST_F(Listener, ServesMetricsAndNothingElse) {
  std::string r = ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length: 13\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\n\r\npodshim_up 1\n"), std::string::npos) << r;
  r = ask("GET /metrics?x=1 HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  r = ask("HEAD /metrics HTTP/1.1\r\nHost: p\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(r.find("podshim_up"), std::string::npos) << "HEAD carries no body: " << r;
  r = ask("POST /metrics HTTP/1.1\r\nHost: p\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(r.rfind("HTTP/1.1 405 ", 0), 0u) << r;
  EXPECT_NE(r.find("Allow: GET, HEAD\r\n"), std::string::npos) << r;
  r = ask("GET /v1/containers HTTP/1.1\r\nHost: p\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 404 ", 0), 0u) << r;
  r = ask("garbage\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 400 ", 0), 0u) << r;
  EXPECT_EQ(renders_, 3) << "rendered for the two GETs and the HEAD only";
}

TEST_F(Listener, RefusesAnOversizeHead) {
  std::string req = "GET /metrics HTTP/1.1\r\nHost: p\r\nX-Pad: " + std::string(20000, 'a') + "\r\n\r\n";
  std::string r;
  with_loop([&] {
    int fd = connect_fd();
    (void)!write(fd, req.data(), req.size());
    r = read_all(fd);
    close(fd);
  });
  EXPECT_EQ(r.rfind("HTTP/1.1 431 ", 0), 0u) << r.substr(0, 200);
  EXPECT_EQ(renders_, 0);
}

// All 16 slots held by clients that never finish their head: a scrape still
// gets in, by taking the slot of the one that has waited longest.
TEST_F(Listener, AFullListenerStillServesAScrape) {
  std::string scrape;
  int closed_idle = 0;
  bool oldest_closed = false;
  double elapsed_ms = 0;
  with_loop([&] {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int> idle;
    for (int i = 0; i < 16; ++i) {
      idle.push_back(connect_fd());
      (void)!write(idle.back(), "GET /met", 8);
    }
    int fd = connect_fd();
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: p\r\n\r\n";
    (void)!write(fd, req.data(), req.size());
    scrape = read_all(fd);
    close(fd);
    for (size_t i = 0; i < idle.size(); ++i) {
      pollfd p{idle[i], POLLIN, 0};
      if (poll(&p, 1, 0) == 1) {
        char c;
        // Closed without an answer: a FIN (0), or a reset when the listener
        // had not yet read the client's bytes (a close with unread data sends
        // RST, RFC 1122 §4.2.2.13).
        if (read(idle[i], &c, 1) <= 0) {
          ++closed_idle;
          if (i == 0) oldest_closed = true;
        }
      }
      close(idle[i]);
    }
    elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  });
  EXPECT_EQ(scrape.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << scrape;
  EXPECT_TRUE(oldest_closed) << "the oldest idle connection gives up its slot";
  // On a loaded machine the others may also reach their 2 s head deadline
  // before they are looked at; within it, only the oldest is closed.
  if (elapsed_ms < 1500) {
    EXPECT_EQ(closed_idle, 1) << "only the oldest, after " << elapsed_ms << " ms";
  }
}

// 16 clients that dribble a byte at a time and reconnect as soon as they are
// cut off, against sequential scrapes from another address: every scrape is
// answered, even when the scraper takes 20 ms between connecting and
// sending (a loaded node's scheduler can do that). Each eviction lets one
// dribbler reconnect and evict the next oldest, so under the old rule
// (oldest first, whoever it is) a scraper was cut off after 16 such turns;
// now the victim comes from the address holding the most waiting
// connections. The figures are printed (latency is a benchmark's business,
// not an assertion).
TEST_F(Listener, ScrapesGetThroughSixteenDribblingClients) {
  std::vector<double> ms;
  int ok = 0;
  constexpr int kScrapes = 20;
  std::atomic<bool> stop{false};
  std::atomic<int> reconnects{0};
  with_loop([&] {
    std::vector<std::thread> dribblers;
    for (int i = 0; i < 16; ++i) {
      dribblers.emplace_back([&] {
        while (!stop) {
          int fd = connect_fd();
          ++reconnects;
          const std::string head = "GET /metrics HTTP/1.1\r\nX-Drip: ";
          bool alive = write(fd, head.data(), head.size()) > 0;
          while (alive && !stop) {
            pollfd p{fd, POLLIN, 50};  // the drip's pace; the server's cut ends the wait early
            if (poll(&p, 1, 50) != 0) break;  // answered or closed: reconnect
            alive = write(fd, "a", 1) == 1;
          }
          close(fd);
        }
      });
    }
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: p\r\n\r\n";
    for (int i = 0; i < kScrapes; ++i) {
      int fd = connect_fd(INADDR_LOOPBACK + 1);  // 127.0.0.2
      if (i % 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const auto t0 = std::chrono::steady_clock::now();  // latency: request sent to answer read
      (void)!write(fd, req.data(), req.size());
      std::string r = read_all(fd);
      close(fd);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (r.rfind("HTTP/1.1 200 OK\r\n", 0) == 0) ++ok;
    }
    stop = true;
    for (auto& t : dribblers) t.join();
  });
  std::sort(ms.begin(), ms.end());
  std::printf("metrics listener under 16 dribbling clients: %d/%d scrapes answered 200, median %.1f ms, max %.1f ms, "
              "%d dribbler connections\n",
              ok, kScrapes, ms[ms.size() / 2], ms.back(), reconnects.load());
  EXPECT_EQ(ok, kScrapes);
}

TEST_F(Listener, AnswersALargeBodyThroughPartialWrites) {
  listener_.reset();
  const std::string big(3 << 20, 'x');
  auto l = status::MetricsListener::start(loop_, "127.0.0.1:0", [&] { return big; });
  ASSERT_TRUE(l);
  listener_ = std::move(*l);
  port_ = static_cast<uint16_t>(std::stoi(listener_->address().substr(listener_->address().rfind(':') + 1)));
  std::string r = ask("GET /metrics HTTP/1.1\r\nHost: p\r\n\r\n");
  ASSERT_GT(r.size(), big.size());
  EXPECT_EQ(r.substr(r.size() - big.size()), big);
}

TEST(ListenAddress, AcceptsLiteralsOnly) {
  for (const char* ok : {"127.0.0.1:9464", ":9464", "0.0.0.0:0", "[::1]:9464", "[::]:80"}) {
    EXPECT_TRUE(status::parse_listen_address(ok)) << ok;
  }
  for (const char* bad : {"9464", "localhost:9464", "127.0.0.1:", "127.0.0.1:65536", "[::1:9464", "1.2.3:4",
                          "127.0.0.1:-1", "[nothost]:1"}) {
    auto r = status::parse_listen_address(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("metrics.listen"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}

TEST(Config, MetricsKeys) {
  auto c = core::parse_config("metrics:\n  listen: 127.0.0.1:9464\n  max_containers: 10\n", "t.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(c->metrics_max_containers, 10u);
  EXPECT_TRUE(core::Config{}.metrics_listen.empty()) << "off by default";
  auto bad = core::parse_config("metrics:\n  lisen: x\n", "t.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("metrics.lisen"), std::string::npos) << bad.error().message;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) n++;
  return n;
}

// Every container at its most (both conditions, all resources, actual read
// back, a resize outcome) stays within kSeriesPerContainer, the cap on
// containers holds, and a removed container's series go.
TEST(ContainerMetrics, CardinalityIsBounded) {
  auto store = core::Store::in_memory();
  status::ContainerMetrics m(*store, 3, true);
  for (int i = 0; i < 5; ++i) {
    core::Container c;
    c.id = "c" + std::to_string(i);
    c.pod_uid = "p";
    c.name = "n" + std::to_string(i);
    c.allocated = {100, 200, 1 << 20, 2 << 20};
    core::ActualResources a;
    a.resources = {100, 200, std::nullopt, 2 << 20};
    c.actual = a;
    ASSERT_TRUE(store->upsert_container(c));
    c.generation = 1;
    c.conditions.pending = core::Condition{"Deferred", "m", 1, 1};
    c.conditions.in_progress = core::Condition{"Error", "m", 1, 1};
    ASSERT_TRUE(store->upsert_container(c));
  }
  std::string out;
  m.render(out);
  size_t series = 0;
  for (size_t p = 0; (p = out.find("podshim_container_", p)) != std::string::npos; ++p) {
    if (p == 0 || out[p - 1] == '\n') series++;
  }
  EXPECT_LE(series, 3 * status::kSeriesPerContainer) << out;
  EXPECT_EQ(count(out, "container=\"n3\""), 0u) << "beyond max_containers";
  EXPECT_NE(out.find("podshim_container_metrics_dropped 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("outcome=\"deferred\""), std::string::npos) << out;
  EXPECT_NE(out.find("podshim_nri_enabled 1\n"), std::string::npos) << out;
  ASSERT_TRUE(store->remove_container("c0"));
  out.clear();
  m.render(out);
  EXPECT_EQ(count(out, "container=\"n0\""), 0u) << out;
}

}  // namespace
}  // namespace podshim
