// Benchmark: a registry of 1000 spec files (2000 devices), then 100 devices,
// and separately 8 (one GPU container), resolved and injected into an OCI
// config (podshim: parsed, edited and written out again as JSON text by
// inject_oci_text, the OCI back end; the Go side: a deep copy of the parsed
// config edited in memory, never serialized); podshim next to the reference Go library (Debian's v0.5.2 via
// tools/cdi-ref) on the same corpus in the same run. Prints median and p99
// (the max, with this few samples), peak RSS and the ratios against issue
// 20's targets. The peak RSS is of a fresh process (this program run again
// with --go-side-work, as the Go side's is a fresh process) doing what the
// Go side's run does (load, inject, list the devices); podshim's rows
// without a Go counterpart run in forked children of their own. Without Go or the Go CDI package it prints podshim's figures
// and exits 77 (skip): there is no baseline to compare with.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/ranges.h>

#include "cdi/registry.h"
#include "tests/cdi/cdi_ref.h"
#include "tests/cdi/cdi_test_util.h"

using namespace podshim;
using namespace podshim::cdi;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSpecs = 1000;
constexpr int kRequests = 100;
constexpr int kIterations = 30;
constexpr int kRounds = 5;  // kIterations split into rounds alternating with the Go side
constexpr int kFew = 8;         // devices of the "one GPU container" row
constexpr int kFewRepeat = 1;  // samples per iteration, as many as the Go side gives

// A DRA-style transient spec per claim: two devices, spec-level env and a hook.
std::string claim_spec(int i) {
  std::string uid = fmt::format("{:08x}-0000-4000-8000-{:012x}", i * 2654435761u, i);
  return fmt::format(R"(cdiVersion: 0.5.0
kind: k8s.gpu.example.com/gpu
containerEdits:
  env: [DRA_CLAIM_{0}=1]
  hooks:
  - {{hookName: createContainer, path: /usr/bin/hook, args: [hook, "{1}"]}}
devices:
- name: {1}-gpu-0
  containerEdits:
    env: [GPU_DEVICE_{0}=gpu-{0}]
    deviceNodes:
    - {{path: /dev/gpu{0}, type: c, major: 195, minor: {2}}}
    - {{path: /dev/gpu{0}-null, hostPath: /dev/null}}
    mounts:
    - {{hostPath: /var/lib/gpu/{0}, containerPath: /usr/lib/gpu/{0}, options: [ro, bind]}}
- name: {1}-gpu-1
  containerEdits:
    env: [GPU_DEVICE_{0}_1=gpu-{0}-1]
    deviceNodes:
    - {{path: /dev/gpu{0}b, type: c, major: 195, minor: {3}}}
)",
                     i, uid, i % 256, (i + 1) % 256);
}

std::string device_name(int i) {
  return fmt::format("k8s.gpu.example.com/gpu={:08x}-0000-4000-8000-{:012x}-gpu-0", i * 2654435761u, i);
}

struct Stats {
  double median_ms, p99_ms;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t p99 = std::min(v.size() - 1, static_cast<size_t>(v.size() * 0.99));
  return {v[v.size() / 2], v[p99]};
}

// podshim's samples, pooled over the rounds.
struct Ours {
  std::vector<double> load, inject, few, mem, resolve, tree;
  size_t devices = 0, lookups = 0;
  long rss = 0;  // KiB, the largest of the rounds' children
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr const char* kConfigText = R"({"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"cwd":"/","env":["PATH=/bin"]},
    "mounts":[{"destination":"/proc","type":"proc","source":"proc"}]})";

// The 100 devices asked for, one per tenth spec file.
std::vector<std::string> hundred() {
  std::vector<std::string> names;
  for (int i = 0; i < kRequests; i++) names.push_back(device_name(i * (kSpecs / kRequests)));
  return names;
}

// The common GPU case: one container asking for 8 of the 2000 devices.
std::vector<std::string> eight() {
  std::vector<std::string> few;
  for (int i = 0; i < kFew; i++) few.push_back(device_name(i * (kSpecs / kFew) + 7));
  return few;
}

RegistryOptions registry_options(const std::string& dir) {
  RegistryOptions opts;
  opts.spec_dirs = {dir};
  opts.required_owner = ::getuid();
  return opts;
}

// One timed injection of `want` into the config's text, as the Go side's.
double inject_timed(const Registry& reg, const std::vector<std::string>& want) {
  auto t0 = Clock::now();
  auto r = inject_oci_text(reg, nlohmann::json::parse(kConfigText), want);
  auto t1 = Clock::now();
  if (!r) {
    std::fprintf(stderr, "inject failed: %s\n", r.error().message.c_str());
    ::_exit(1);
  }
  return ms(t1 - t0);
}

// Only what the Go side does in its run (load, inject, list the devices),
// so that the peak RSS compares the same work.
void go_side_work(const std::string& dir, int iterations, Ours& o) {
  const std::vector<std::string> names = hundred(), few = eight();
  for (int it = 0; it < iterations; it++) {
    auto t0 = Clock::now();
    Registry reg(registry_options(dir));
    reg.refresh();
    auto t1 = Clock::now();
    o.inject.push_back(inject_timed(reg, names));
    for (int k = 0; k < kFewRepeat; k++) o.few.push_back(inject_timed(reg, few));
    o.devices = reg.devices().size();
    o.load.push_back(ms(t1 - t0));
  }
}

// What a child measured, as text for the parent.
std::string encode(const Ours& o) {
  std::string text = fmt::format("{} {}\n", o.devices, o.lookups);
  for (const auto* v : {&o.load, &o.inject, &o.few, &o.mem, &o.resolve, &o.tree})
    text += fmt::format("{} {}\n", v->size(), fmt::join(*v, " "));
  return text;
}

// Runs child(fd) in a forked child, which writes its figures (encode) to
// fd and exits, and appends them to `acc` (its peak RSS is the child's own).
template <typename F>
bool run_child(bool first, F&& child, Ours& acc) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return false;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    child(pipefd[1]);
    ::_exit(1);
  }
  ::close(pipefd[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  if (text.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "podshim run failed\n");
    return false;
  }
  std::istringstream in(text);
  size_t devices = 0, lookups = 0;
  in >> devices >> lookups;
  if (first) acc.devices = devices, acc.lookups = lookups;
  for (auto* v : {&acc.load, &acc.inject, &acc.few, &acc.mem, &acc.resolve, &acc.tree}) {
    size_t n = 0;
    in >> n;
    for (size_t k = 0; k < n; k++) {
      double x;
      in >> x;
      v->push_back(x);
    }
  }
  acc.rss = std::max(acc.rss, static_cast<long>(ru.ru_maxrss));
  return static_cast<bool>(in);
}

// body(iterations, first, samples) in a forked child.
template <typename F>
bool run_ours(int iterations, bool first, F&& body, Ours& acc) {
  return run_child(first, [&](int fd) {
    Ours o;
    body(iterations, first, o);
    const std::string text = encode(o);
    ::_exit(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 1);
  }, acc);
}

// go_side_work on `dir` in a fresh process (this program run again with
// --go-side-work), as the Go side's is: a forked child's peak RSS counted
// the parent's heap at the fork (from the second round on, the Go side's
// parsed results, about 1.5 MiB) and left out the shared-library pages only
// the parent had faulted in (the loader's relocations, static
// initialisers): 6.1 MiB forked, 7.1 fresh.
bool run_fresh(const std::string& dir, int iterations, bool first, Ours& acc) {
  return run_child(first, [&](int fd) {
    if (::dup2(fd, STDOUT_FILENO) < 0) ::_exit(1);
    const std::string n = std::to_string(iterations);
    ::execl("/proc/self/exe", "cdi_bench", "--go-side-work", dir.c_str(), n.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }, acc);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--go-side-work") {
    // The child run_ours starts afresh: measures, writes its figures to stdout.
    Ours o;
    go_side_work(argv[2], std::atoi(argv[3]), o);
    const std::string text = encode(o);
    return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0 ? 0 : 1;
  }
  testing::TempDir t;
  std::string dir = t.dir("cdi");
  for (int i = 0; i < kSpecs; i++)
    testing::write_file(fmt::format("{}/k8s.gpu.example.com-gpu_{:04}.yaml", dir, i), claim_spec(i));
  const std::vector<std::string> names = hundred(), few = eight();
  // 100 other devices, of spec files `names` does not touch (the split of
  // the first injection's time below).
  std::vector<std::string> others;
  for (int i = 0; i < kRequests; i++) others.push_back(device_name(i * (kSpecs / kRequests) + 5));
  const char* config_text = kConfigText;
  testing::write_file(t.path() + "/config.json", config_text);

  // Ours and the Go library's alternate in rounds, so that both see the
  // same share of a machine other jobs are using (one after the other, a
  // burst of load during one side's run skewed the ratio either way).
  Ours ours;
  std::vector<double> gl, gi, gf;
  long go_rss = 0;
  std::string why_no_go = testing::cdi_ref_missing(), go_bin;
  if (why_no_go.empty()) {
    std::string err;
    go_bin = testing::build_cdi_ref(&err);
    if (go_bin.empty()) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
  }
  auto run_go = [&](const std::vector<std::string>& want, int repeat) {
    std::string joined;
    for (const auto& d : want) joined += (joined.empty() ? "" : ",") + d;
    auto go = testing::run_cdi_ref(go_bin, {"-dir", dir, "-config", t.path() + "/config.json", "-devices", joined,
                                            "-repeat", std::to_string(repeat)},
                                   t.path());
    if (go.exit_code != 0 || !go.json.is_object() || !go.json["inject"]["ok"].get<bool>()) {
      std::fprintf(stderr, "cdi-ref failed: %s\n%s\n", go.err.c_str(), go.out.substr(0, 2000).c_str());
      std::exit(1);
    }
    return go;
  };
  for (int round = 0; round < kRounds; round++) {
    // podshim, in a child so its peak RSS is its own.
    if (!run_fresh(dir, kIterations / kRounds, round == 0, ours))
      return 1;
    if (go_bin.empty()) continue;
    auto go = run_go(names, kIterations / kRounds);
    for (const auto& v : go.json["load_ns"]) gl.push_back(v.get<double>() / 1e6);
    for (const auto& v : go.json["inject_ns"]) gi.push_back(v.get<double>() / 1e6);
    go_rss = std::max(go_rss, go.json["maxrss_kb"].get<long>());
    if (go.json["devices"].size() != ours.devices) {
      std::fprintf(stderr, "device count differs: ours %zu, go %zu\n", ours.devices, go.json["devices"].size());
      return 1;
    }
    // The 8-device row: its inject timings only (each repeat loads the
    // registry again, untimed here), as many samples as ours.
    auto go_few = run_go(few, kIterations / kRounds);
    for (const auto& v : go_few.json["inject_ns"]) gf.push_back(v.get<double>() / 1e6);
  }
  // The rows that have no Go counterpart, in a child of their own: run in
  // the child above, the tree injection's nlohmann nodes alone raised its
  // peak RSS by about 200 KiB over the work the Go side's figure covers.
  Ours extra;
  if (!run_ours(kIterations / kRounds, true, [&](int iterations, bool, Ours& o) {
        for (int it = 0; it < iterations; it++) {
          Registry reg(registry_options(dir));
          reg.refresh();
          // The same 100 with every host lookup answered from memory: inject
          // apart from its lstat(2) calls (one per host path of a node that
          // is not fully specified, as fillMissingInfo).
          auto t2 = Clock::now();
          auto r = inject_oci_text(reg, nlohmann::json::parse(config_text), names, -1,
                                   [](const std::string&) -> Result<HostDevice> {
                                     return HostDevice{"c", 1, 3, 0666};
                                   });
          if (!r) ::_exit(1);
          o.mem.push_back(ms(Clock::now() - t2));
          // The same 100 through the tree API (inject_oci: edits built as
          // nlohmann nodes in the parsed config, not serialized).
          auto t4 = Clock::now();
          nlohmann::json config = nlohmann::json::parse(config_text);
          if (!inject_oci(reg, config, names)) ::_exit(1);
          o.tree.push_back(ms(Clock::now() - t4));
          // What podshimd does on CreateContainer before the NRI conversion:
          // resolution to ResolvedEdits, no OCI JSON.
          auto t3 = Clock::now();
          auto e = resolve_devices(reg, names, process_ids_from_oci(config));
          if (!e) ::_exit(1);
          o.resolve.push_back(ms(Clock::now() - t3));
          if (it == 0) {
            // Untimed: how many host lookups one injection of the 100 makes.
            nlohmann::json c = nlohmann::json::parse(config_text);
            auto counted = inject_oci(reg, c, names, [&](const std::string& p) {
              o.lookups++;
              return lstat_host_device(p);
            });
            if (!counted) ::_exit(1);
          }
        }
      }, extra))
    return 1;
  // Where the first injection after a load spends its time, in a child of
  // its own (its extra rows would add to the peak RSS above): the 100, then
  // the same 100 again (code and data warm), then 100 others (code warm,
  // their spec data untouched since the load). first - others is the cost
  // of cold code, others - again that of cold data.
  Ours split;
  if (!run_ours(kIterations / kRounds, false, [&](int iterations, bool, Ours& o) {
        for (int it = 0; it < iterations; it++) {
          Registry reg(registry_options(dir));
          reg.refresh();
          o.inject.push_back(inject_timed(reg, names));
          o.mem.push_back(inject_timed(reg, names));
          o.few.push_back(inject_timed(reg, others));
        }
      }, split))
    return 1;
  Stats l = stats(ours.load), i = stats(ours.inject), f = stats(ours.few);
  double ours_lm = l.median_ms, ours_lp = l.p99_ms, ours_im = i.median_ms, ours_ip = i.p99_ms, ours_fm = f.median_ms,
         ours_fp = f.p99_ms, ours_mem = stats(extra.mem).median_ms, ours_resolve = stats(extra.resolve).median_ms,
         ours_tree = stats(extra.tree).median_ms;
  size_t devices = ours.devices, lookups = extra.lookups;
  long ours_rss = ours.rss;
  std::printf("CDI registry: %d spec files (%zu devices), %d iterations in %d rounds alternating with the Go "
              "library's\n",
              kSpecs, devices, kIterations, kRounds);
  std::printf("podshim (C++): load %.2f ms median (p99 %.2f); inject %d devices %.3f ms (p99 %.3f); "
              "inject %d devices %.3f ms (p99 %.3f); peak RSS %ld KiB\n",
              ours_lm, ours_lp, kRequests, ours_im, ours_ip, kFew, ours_fm, ours_fp, ours_rss);

  if (go_bin.empty()) {
    std::printf("SKIP: no baseline to compare with: %s\n", why_no_go.c_str());
    return 77;
  }
  Stats gls = stats(gl), gis = stats(gi), gfs = stats(gf);

  std::printf("\n%-24s %12s %12s %12s %12s %12s %12s %12s\n", "", "load med ms", "load p99 ms", "inj100 med",
              "inj100 p99", "inj8 med", "inj8 p99", "peak RSS KiB");
  std::printf("%-24s %12.2f %12.2f %12.3f %12.3f %12.3f %12.3f %12ld\n", "podshim (C++)", ours_lm, ours_lp,
              ours_im, ours_ip, ours_fm, ours_fp, ours_rss);
  std::printf("%-24s %12.2f %12.2f %12.3f %12.3f %12.3f %12.3f %12ld\n", "reference Go v0.5.2", gls.median_ms,
              gls.p99_ms, gis.median_ms, gis.p99_ms, gfs.median_ms, gfs.p99_ms, go_rss);
  double r_load = ours_lm / gls.median_ms, r_inj = ours_im / gis.median_ms, r_few = ours_fm / gfs.median_ms;
  double r_rss = static_cast<double>(ours_rss) / static_cast<double>(go_rss);
  auto verdict = [](double r, double target) { return r <= target ? "met" : "NOT met"; };
  // The memory row is, like the inject row, the first injection after a
  // load (in the other child): the difference is the lstat(2) calls.
  std::printf("podshim inject %d, first after a load, host lookups answered from memory: %.3f ms median; one "
              "injection "
              "of the %d makes %zu lstat calls (v0.5.2: %d, one per node it does not take as given)\n",
              kRequests, ours_mem, kRequests, lookups, kRequests);
  std::printf("podshim inject %d into the parsed config as nlohmann nodes (inject_oci, no JSON text): %.3f ms "
              "median\n",
              kRequests, ours_tree);
  {
    double first = stats(split.inject).median_ms, again = stats(split.mem).median_ms,
           other = stats(split.few).median_ms;
    std::printf("podshim inject %d, first after a load / again / %d other devices next (code warm, data cold): "
                "%.3f / %.3f / %.3f ms median: cold code %.3f ms, cold spec data %.3f ms\n",
                kRequests, kRequests, first, again, other, first - other, other - again);
  }
  std::printf("podshim resolve %d to ResolvedEdits (podshimd's CreateContainer path, before the NRI "
              "conversion; no OCI JSON): %.3f ms median\n",
              kRequests, ours_resolve);
  std::printf("podshim peak RSS of the child that runs the lookups-from-memory, tree and resolve rows (no Go "
              "counterpart): %ld KiB\n",
              extra.rss);
  std::printf("\nratio podshim/go (medians), against the targets:\n");
  std::printf("  load           %.2fx  (target <= 0.50x: %s)\n", r_load, verdict(r_load, 0.5));
  std::printf("  inject 100     %.2fx  (target <= 0.30x: %s)\n", r_inj, verdict(r_inj, 0.3));
  std::printf("  inject 8       %.2fx\n", r_few);
  std::printf("  peak RSS       %.2fx  (target <= 0.40x: %s)\n", r_rss, verdict(r_rss, 0.4));
  return 0;
}
