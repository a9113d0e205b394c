// Benchmark: a CPU + memory resize of one container on the cgroupfs driver,
// against a real cgroup v2 (run inside tests/vm/vm-run). Prints median and
// p99 per resize next to a baseline measured in the same run: the bare
// writes of the same three attribute files on an already-open directory fd.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <vector>

#include "base/fs.h"
#include "cgroup/engine.h"

using namespace podshim;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
  double median_us, p99_us;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}
void print(const char* what, const std::vector<double>& v) {
  Stats s = stats(v);
  std::printf("%-44s n=%zu median=%.1f us p99=%.1f us\n", what, v.size(), s.median_us, s.p99_us);
}

}  // namespace

int main(int argc, char** argv) {
  const char* in_vm = std::getenv("PODSHIM_IN_VM");
  if (!in_vm || std::string(in_vm) != "1") {
    std::printf("resize_bench: skipped (runs inside tests/vm/vm-run, PODSHIM_IN_VM=1)\n");
    return 0;
  }
  int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::string root = "/sys/fs/cgroup", rel = "podshim-bench";
  if (mkdir((root + "/" + rel).c_str(), 0755) != 0) {
    std::perror("mkdir");
    return 1;
  }
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  {
    int fd = open((root + "/" + rel + "/cgroup.procs").c_str(), O_WRONLY);
    std::string pid = std::to_string(child);
    if (fd < 0 || write(fd, pid.data(), pid.size()) < 0) std::perror("cgroup.procs");
    close(fd);
  }

  cgroup::EngineOptions o;
  o.driver = cgroup::DriverKind::Cgroupfs;
  char state_tmpl[] = "/tmp/podshim-bench-state-XXXXXX";  // never a fixed name: an old journal would reach recover()
  if (!mkdtemp(state_tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  o.state_dir = state_tmpl;
  // The machinery's own cost: no settle watches (each shrink would otherwise
  // wait 2 × settle by design). The staged shrink with the default settle is
  // measured on its own below.
  const auto default_settle = o.settle;
  o.settle = std::chrono::milliseconds(0);
  auto engine = cgroup::Engine::create(o);
  auto engine_nj = cgroup::Engine::create(o);
  o.settle = default_settle;
  auto engine_settle = cgroup::Engine::create(o);
  if (!engine || !engine_nj || !engine_settle) {
    std::fprintf(stderr, "%s\n", engine.error().message.c_str());
    return 1;
  }
  const cgroup::K8sResources a{500, 1000, std::nullopt, 256 << 20}, b{250, 500, std::nullopt, 128 << 20},
      c{750, 1500, std::nullopt, 192 << 20};
  auto va = cgroup::attr_values(a, cgroup::WeightFormula::Quadratic);
  auto vb = cgroup::attr_values(b, cgroup::WeightFormula::Quadratic);

  std::vector<double> resize_us, resize_nj_us, noop_us, bare_us, read_us;
  for (int i = 0; i < n; ++i) {
    cgroup::PodResizeRequest req;
    req.containers.push_back({"bench", "/" + rel, i % 2 ? a : b});
    auto t0 = Clock::now();
    auto r = (*engine)->resize(req);
    auto t1 = Clock::now();
    if (!r || (i > 0 && r->steps.size() != 3)) {
      std::fprintf(stderr, "resize %d failed: %s\n", i, r ? "wrong step count" : r.error().message.c_str());
      return 1;
    }
    resize_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    // A third state, so each engine alternates growing and shrinking.
    req.containers[0].desired = c;
    t0 = Clock::now();
    r = (*engine_nj)->resize(req);
    t1 = Clock::now();
    if (!r || r->steps.size() != 3) return 1;
    resize_nj_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    // The same request again: read + plan, nothing to write.
    t0 = Clock::now();
    auto again = (*engine)->resize(req);
    t1 = Clock::now();
    if (!again || !again->steps.empty()) return 1;
    noop_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    t0 = Clock::now();
    auto act = (*engine)->read_actual("/" + rel);
    t1 = Clock::now();
    if (!act) return 1;
    read_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  // The staged shrink as podshimd runs it (watch + settle of the default
  // settle each): a few rounds, it waits by design.
  std::vector<double> staged_us;
  for (int i = 0; i < 10; ++i) {
    cgroup::PodResizeRequest req;
    req.containers.push_back({"bench", "/" + rel, a});
    if (!(*engine_settle)->resize(req)) return 1;
    req.containers[0].desired = b;
    auto t0 = Clock::now();
    auto r = (*engine_settle)->resize(req);
    auto t1 = Clock::now();
    if (!r) return 1;
    staged_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  auto dir = fs::open_dir(root + "/" + rel);
  if (!dir) return 1;
  for (int i = 0; i < n; ++i) {
    const auto& v = i % 2 ? va : vb;
    auto t0 = Clock::now();
    bool ok = fs::write_attr_at(dir->get(), "memory.max", v.memory_max) &&
              fs::write_attr_at(dir->get(), "cpu.weight", *v.cpu_weight) &&
              fs::write_attr_at(dir->get(), "cpu.max", v.cpu_max);
    auto t1 = Clock::now();
    if (!ok) return 1;
    bare_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::printf("cgroup resize benchmark (cgroupfs driver; under TCG absolute figures are 10-50x native)\n");
  print("engine resize (cpu.weight+cpu.max+memory.max)", resize_us);
  print("engine resize, a second engine (alternating)", resize_nj_us);
  print("baseline: bare writes of the same 3 files", bare_us);
  print("engine resize, already applied (no-op)", noop_us);
  print("read_actual", read_us);
  print(fmt::format("staged shrink, settle {} ms (memory.max 256→128 MiB)", default_settle.count()).c_str(),
        staged_us);
  Stats e = stats(resize_us), bw = stats(bare_us);
  std::printf("ratio engine/bare (median) = %.1fx\n", e.median_us / bw.median_us);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  rmdir((root + "/" + rel).c_str());
  return 0;
}
