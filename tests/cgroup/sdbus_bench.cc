// Benchmark: how late a 10 ms timer on the daemon's sd-event loop fires
// while the systemd driver waits for a slow systemd. A fake systemd (tests/cgroup/fake_systemd.h) answers each
// SetUnitProperties after `delay_ms`; `rounds` resizes run one after the
// other. Three phases in the same run:
//   idle      the timer alone (the baseline),
//   async     during resizes with the call asynchronous on the loop (podshimd),
//   blocking  during the same resizes with the call blocking (the old path),
// each printing the lateness median / p99 / max and the ratio to idle.
// Usage: sdbus_bench [rounds=3] [delay_ms=1500]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cgroup/engine.h"
#include "tests/cgroup/fake_systemd.h"
#include "tests/cgroup/fake_tree.h"

using namespace podshim::cgroup;
using namespace std::chrono_literals;
using testing::Clock;

namespace {

const std::string kRel =
    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu1.slice/cri-containerd-c1.scope";
const std::string kPath = "kubepods-burstable-podu1.slice:cri-containerd:c1";

struct Ticker {
  sd_event* loop;
  Clock::time_point next;
  std::vector<double> late;  // ms
  bool stop = false;
  void start() {
    next = Clock::now() + 10ms;
    testing::schedule_on(loop, 10ms, [this] { tick(); });
  }
  void tick() {
    auto now = Clock::now();
    late.push_back(std::chrono::duration<double, std::milli>(now - next).count());
    if (stop) return;
    next = now + 10ms;
    testing::schedule_on(loop, 10ms, [this] { tick(); });
  }
};

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

struct Figures {
  double median, p99, max;
  size_t n;
};

Figures figures(const std::vector<double>& v) { return {pct(v, 0.5), pct(v, 0.99), pct(v, 1.0), v.size()}; }

// Runs `rounds` resizes against a fake systemd answering after `delay`,
// with the call asynchronous on the loop or blocking; the ticker runs throughout.
Figures phase(bool async, int rounds, std::chrono::milliseconds delay, bool* ok) {
  testing::FakeTree tree;
  tree.add(kRel, std::to_string(32 << 20));
  sd_event* loop = nullptr;
  sd_event_new(&loop);
  testing::FakeSystemd systemd(tree.state() + "/systemd.sock", delay);
  SdBusOptions so;
  so.call_timeout = delay + 2000ms;
  so.event = async ? loop : nullptr;
  so.address = "unix:path=" + tree.state() + "/systemd.sock";
  EngineOptions o;
  o.cgroup_root = tree.cg_root();
  o.state_dir = tree.state();
  o.unit_manager = make_sdbus_unit_manager(so);
  o.event = loop;
  o.schedule = [loop](std::chrono::milliseconds d, std::function<void()> fn) {
    testing::schedule_on(loop, d, std::move(fn));
  };
  o.before_write = [&tree](const std::string&, const std::string& file, const std::string&) -> podshim::Result<void> {
    ::truncate((tree.cg_root() + "/" + kRel + "/" + file).c_str(), 0);
    return {};
  };
  auto e = Engine::create(o);
  if (!e || !systemd.ok()) {
    std::fprintf(stderr, "setup failed\n");
    *ok = false;
    return {};
  }
  Ticker t{loop, {}, {}};
  t.start();
  int done = 0;
  std::function<void()> next = [&] {
    PodResizeRequest req;
    req.containers.push_back(ResizeTarget{"c1", kPath, {std::nullopt, std::nullopt, std::nullopt, (64 + done) << 20}});
    (*e)->resize(req, [&](podshim::Result<ResizeReport> r) {
      if (!r) {
        std::fprintf(stderr, "resize failed: %s\n", r.error().message.c_str());
        *ok = false;
      }
      if (++done < rounds) testing::schedule_on(loop, 0ms, next);
    });
  };
  testing::schedule_on(loop, 5ms, next);
  auto stop = Clock::now() + rounds * (delay + 3000ms);
  while (done < rounds && Clock::now() < stop) sd_event_run(loop, 50000);
  if (done < rounds) *ok = false;
  t.stop = true;
  e->reset();
  o.unit_manager.reset();
  sd_event_unref(loop);
  return figures(t.late);
}

Figures idle(std::chrono::milliseconds span) {
  sd_event* loop = nullptr;
  sd_event_new(&loop);
  Ticker t{loop, {}, {}};
  t.start();
  auto stop = Clock::now() + span;
  while (Clock::now() < stop) sd_event_run(loop, 50000);
  t.stop = true;
  sd_event_unref(loop);
  return figures(t.late);
}

void print(const char* name, const Figures& f, const Figures& base) {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::printf("%-9s timer firings %5zu  lateness median %8.3f ms  p99 %8.3f ms  max %8.3f ms  "
              "(x idle: median %.1f, p99 %.1f)\n",
              name, f.n, f.median, f.p99, f.max, ratio(f.median, base.median), ratio(f.p99, base.p99));
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  auto delay = std::chrono::milliseconds(argc > 2 ? std::atoi(argv[2]) : 1500);
  if (rounds <= 0 || delay.count() <= 0) {
    std::fprintf(stderr, "usage: sdbus_bench [rounds>0] [delay_ms>0]\n");
    return 2;
  }
  bool ok = true;
  auto base = idle(rounds * delay);
  auto a = phase(true, rounds, delay, &ok);
  auto b = phase(false, rounds, delay, &ok);
  std::printf("10 ms loop timer while %d resizes each wait %lld ms for SetUnitProperties:\n", rounds,
              static_cast<long long>(delay.count()));
  print("idle", base, base);
  print("async", a, base);
  print("blocking", b, base);
  return ok ? 0 : 1;
}
