// Benchmark of the read-back (shim/core/readback.h): the cost of one full
// pass over N containers, µs per container, for
//   baseline  Engine::read_actual per container (what the NRI adapter's
//             read-back does today: open the directory, 7 files incl.
//             memory.stat),
//   nothing   ReadBack keeping no fd: open the directory from the root,
//             openat + read + close per file,
//   dir       the directory fd kept, files opened per read (fd_cache 0),
//   all       directory and file fds kept, pread (fd_cache N; capped at
//             half the soft RLIMIT_NOFILE),
// with the kernel slab the kept fds cost (/proc/meminfo Slab),
// and how the sliced pass holds the loop (slices, longest slice) at the
// default 2 ms budget. Steady state: the first pass (store writes, fd opens)
// is a warm-up and not counted.
//
// Usage: readback_bench [N...]   (default 1000 3000)
// On the host it runs on a fake cgroup tree (plain files in /tmp). Inside the
// test VM (PODSHIM_IN_VM=1, tests/vm/vm-run) it runs on real cgroup v2
// directories under /sys/fs/cgroup/podshim-bench, which it removes after.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cgroup/engine.h"
#include "shim/core/readback.h"
#include "shim/core/state.h"
#include "tests/cgroup/fake_tree.h"

namespace {

using namespace podshim;
using Clock = std::chrono::steady_clock;
constexpr int kPasses = 15;
constexpr int64_t kMi = 1 << 20;

bool in_vm() {
  const char* v = std::getenv("PODSHIM_IN_VM");
  return v && std::string(v) == "1";
}

bool put(const std::string& p, const std::string& v) {
  std::ofstream o(p);
  o << v;
  o.flush();
  return o.good();
}

struct Tree {
  std::unique_ptr<cgroup::testing::FakeTree> fake;
  std::string root;  // the cgroup root podshim is given
  std::vector<std::string> made;  // real cgroups to remove, deepest first

  explicit Tree(bool real) {
    if (!real) {
      fake = std::make_unique<cgroup::testing::FakeTree>();
      root = fake->cg_root();
      return;
    }
    root = "/sys/fs/cgroup";
    for (const char* d : {"podshim-bench", "podshim-bench/pod"}) {
      ::mkdir((root + "/" + d).c_str(), 0755);
      made.insert(made.begin(), d);
      put(root + "/" + d + "/cgroup.subtree_control", "+cpu +memory");
    }
  }
  ~Tree() {
    for (const auto& d : made) ::rmdir((root + "/" + d).c_str());
  }
  // rel under the root; values as the runtime writes them for 250m/500m/256Mi.
  void add(const std::string& rel) {
    const std::string w = std::to_string(cgroup::milli_cpu_to_weight(250, cgroup::WeightFormula::Quadratic));
    if (fake) {
      fake->add(rel, std::to_string(256 * kMi), "50000 100000", w);
      return;
    }
    ::mkdir((root + "/" + rel).c_str(), 0755);
    made.insert(made.begin(), rel);
    put(root + "/" + rel + "/memory.max", std::to_string(256 * kMi));
    put(root + "/" + rel + "/cpu.max", "50000 100000");
    put(root + "/" + rel + "/cpu.weight", w);
  }
};

struct Figures {
  double median = 0, p99 = 0;  // µs per container, over the passes
};

// Kernel slab memory in kB (/proc/meminfo "Slab:"): what kept fds cost the
// kernel (struct file, and for cgroup files the seq_file buffer each keeps).
long slab_kb() {
  std::ifstream in("/proc/meminfo");
  std::string k;
  long v = 0;
  std::string unit;
  while (in >> k >> v >> unit)
    if (k == "Slab:") return v;
  return -1;
}

Figures figures(std::vector<double> per_ctr_us) {
  std::sort(per_ctr_us.begin(), per_ctr_us.end());
  Figures f;
  f.median = per_ctr_us[per_ctr_us.size() / 2];
  f.p99 = per_ctr_us[std::min(per_ctr_us.size() - 1, (per_ctr_us.size() * 99) / 100)];
  return f;
}

template <class F>
Figures time_passes(size_t n, F pass) {
  pass();  // warm-up
  std::vector<double> v;
  for (int i = 0; i < kPasses; ++i) {
    auto t0 = Clock::now();
    pass();
    v.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / static_cast<double>(n));
  }
  return figures(v);
}

int run(size_t n, bool real) {
  Tree tree(real);
  auto store = core::Store::in_memory();
  cgroup::EngineOptions eo;
  eo.cgroup_root = tree.root;
  char state[] = "/tmp/podshim-rb-bench.XXXXXX";
  if (!::mkdtemp(state)) return 1;
  eo.state_dir = state;
  eo.driver = cgroup::DriverKind::Cgroupfs;
  auto engine = cgroup::Engine::create(eo);
  if (!engine) {
    std::fprintf(stderr, "engine: %s\n", engine.error().message.c_str());
    return 1;
  }
  std::vector<std::string> paths;
  for (size_t i = 0; i < n; ++i) {
    const std::string id = "c" + std::to_string(i);
    const std::string rel = std::string(real ? "podshim-bench/pod/" : "kubepods/pod1/") + id;
    tree.add(rel);
    core::Container c;
    c.id = id;
    c.pod_uid = "p1";
    c.cgroup_path = "/" + rel;
    c.state = "running";
    c.allocated.cpu_request_milli = 250;
    c.allocated.cpu_limit_milli = 500;
    c.allocated.memory_limit_bytes = 256 * kMi;
    paths.push_back(c.cgroup_path);
    if (!store->upsert_container(c)) return 1;
  }

  const Figures base = time_passes(n, [&] {
    for (const auto& p : paths) {
      auto a = (*engine)->read_actual(p);
      if (!a) std::abort();
    }
  });

  auto readback = [&](size_t fd_cache, bool keep_dirs) {
    core::ReadBackOptions o;
    o.cgroup_root = tree.root;
    o.driver = cgroup::DriverKind::Cgroupfs;
    o.fd_cache = fd_cache;
    o.keep_dirs = keep_dirs;
    o.log = [](log::Level, const std::string&, const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
    auto rb = core::ReadBack::create(*store, engine->get(), nullptr, o);
    if (!rb) std::abort();
    return std::move(*rb);
  };
  struct Mode {
    const char* name;
    size_t fd_cache;
    bool keep_dirs;
    Figures f;
    size_t files_kept = 0, dirs_kept = 0;
    long slab_kb = 0;
  };
  std::vector<Mode> modes = {{"nothing kept: open dir + files", 0, false, {}},
                             {"dir fd kept, files opened", 0, true, {}},
                             {"dir + file fds kept, pread", n, true, {}}};
  std::vector<double> slice_us;
  double pass_us = 0;
  for (auto& m : modes) {
    const long slab0 = slab_kb();
    auto rb = readback(m.fd_cache, m.keep_dirs);
    rb->read_all();  // opens (and keeps) the fds
    m.slab_kb = slab_kb() - slab0;
    m.f = time_passes(n, [&] { rb->read_all(); });
    if (rb->stats().errors) std::abort();
    m.files_kept = rb->cached_containers();
    m.dirs_kept = rb->cached_dirs();
    if (&m != &modes.back()) continue;
    // The sliced pass as the loop runs it (default budget).
    rb->tick();
    const auto t0 = Clock::now();
    while (rb->pending()) {
      const auto s0 = Clock::now();
      rb->run_slice();
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - s0);
      slice_us.push_back(static_cast<double>(us.count()));
    }
    pass_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  const char* where = real ? "real cgroup v2 (VM)" : "fake tree";
  std::printf("readback N=%zu on %s, %d passes, us per container (median / p99), ratio of medians to baseline:\n", n,
              where, kPasses);
  std::printf("  %-34s %8.2f / %8.2f\n", "baseline: engine read_actual", base.median, base.p99);
  for (const auto& m : modes)
    std::printf("  %-34s %8.2f / %8.2f  ratio %.2f  (kept: %zu dirs, %zu file sets; slab %+ld kB)\n", m.name,
                m.f.median, m.f.p99, m.f.median / base.median, m.dirs_kept, m.files_kept, m.slab_kb);
  std::sort(slice_us.begin(), slice_us.end());
  std::printf("  sliced pass (all kept, 2 ms budget): %zu slices, median %.0f us, longest %.0f us, pass %.1f ms\n",
              slice_us.size(), slice_us[slice_us.size() / 2], slice_us.back(), pass_us / 1000.0);
  std::string rm = std::string("rm -rf ") + state;
  if (std::system(rm.c_str()) != 0) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // As podshimd does: the soft fd limit up to the hard one. In the VM (root,
  // a busybox init's 4096) also the hard one, to a systemd host's figure,
  // so every container of the largest N can keep its fds.
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    if (in_vm()) rl.rlim_cur = rl.rlim_max = std::max<rlim_t>(rl.rlim_max, 65536);
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0 && ::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
      rl.rlim_cur = rl.rlim_max;
      (void)::setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  std::vector<size_t> ns;
  for (int i = 1; i < argc; ++i) ns.push_back(std::strtoull(argv[i], nullptr, 10));
  if (ns.empty()) ns = {1000, 3000};
  for (size_t n : ns)
    if (int r = run(n, in_vm()); r != 0) return r;
  return 0;
}
