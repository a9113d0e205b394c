// Benchmark: a registry of 1000 spec files, then 100 devices resolved and
// injected into an OCI config, podshim next to the reference Go library
// (Debian's v0.5.2 via tools/cdi-ref) on the same corpus in the same run.
// Prints median and p99 (the max, with this few samples) and peak RSS.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cdi/registry.h"
#include "tests/cdi/cdi_ref.h"
#include "tests/cdi/cdi_test_util.h"

using namespace podshim;
using namespace podshim::cdi;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSpecs = 1000;
constexpr int kRequests = 100;
constexpr int kIterations = 15;

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

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main() {
  testing::TempDir t;
  std::string dir = t.sub("cdi");
  for (int i = 0; i < kSpecs; i++)
    testing::write_file(fmt::format("{}/k8s.gpu.example.com-gpu_{:04}.yaml", dir, i), claim_spec(i));
  std::vector<std::string> names;
  for (int i = 0; i < kRequests; i++) names.push_back(device_name(i * (kSpecs / kRequests)));
  const char* config_text = R"({"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"cwd":"/","env":["PATH=/bin"]},
    "mounts":[{"destination":"/proc","type":"proc","source":"proc"}]})";
  testing::write_file(t.path() + "/config.json", config_text);

  // podshim, in a child so its peak RSS is its own.
  int pipefd[2];
  if (::pipe(pipefd) != 0) return 1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    std::vector<double> load, inject;
    size_t devices = 0;
    for (int it = 0; it < kIterations; it++) {
      auto t0 = Clock::now();
      RegistryOptions o;
      o.spec_dirs = {dir};
      o.required_owner = ::getuid();
      Registry reg(o);
      reg.refresh();
      auto t1 = Clock::now();
      nlohmann::json config = nlohmann::json::parse(config_text);
      auto r = inject_oci(reg, config, names);
      auto t2 = Clock::now();
      if (!r) {
        std::fprintf(stderr, "inject failed: %s\n", r.error().message.c_str());
        ::_exit(1);
      }
      devices = reg.devices().size();
      load.push_back(ms(t1 - t0));
      inject.push_back(ms(t2 - t1));
    }
    Stats l = stats(load), i = stats(inject);
    std::string line = fmt::format("{} {} {} {} {}\n", l.median_ms, l.p99_ms, i.median_ms, i.p99_ms, devices);
    if (::write(pipefd[1], line.data(), line.size()) < 0) ::_exit(1);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  char buf[256] = {};
  ssize_t n = ::read(pipefd[0], buf, sizeof buf - 1);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "podshim run failed\n");
    return 1;
  }
  double ours_lm, ours_lp, ours_im, ours_ip;
  size_t devices;
  std::sscanf(buf, "%lf %lf %lf %lf %zu", &ours_lm, &ours_lp, &ours_im, &ours_ip, &devices);
  long ours_rss = ru.ru_maxrss;

  std::string err;
  std::string bin = testing::build_cdi_ref(&err);
  if (bin.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  std::string joined;
  for (const auto& d : names) joined += (joined.empty() ? "" : ",") + d;
  auto go = testing::run_cdi_ref(bin, {"-dir", dir, "-config", t.path() + "/config.json", "-devices", joined,
                                       "-repeat", std::to_string(kIterations)},
                                 t.path());
  if (go.exit_code != 0 || !go.json.is_object() || !go.json["inject"]["ok"].get<bool>()) {
    std::fprintf(stderr, "cdi-ref failed: %s\n%s\n", go.err.c_str(), go.out.substr(0, 2000).c_str());
    return 1;
  }
  std::vector<double> gl, gi;
  for (const auto& v : go.json["load_ns"]) gl.push_back(v.get<double>() / 1e6);
  for (const auto& v : go.json["inject_ns"]) gi.push_back(v.get<double>() / 1e6);
  Stats gls = stats(gl), gis = stats(gi);
  long go_rss = go.json["maxrss_kb"].get<long>();
  if (go.json["devices"].size() != devices) {
    std::fprintf(stderr, "device count differs: ours %zu, go %zu\n", devices, go.json["devices"].size());
    return 1;
  }

  std::printf("CDI registry: %d spec files (%zu devices), resolve+inject %d devices, %d iterations\n", kSpecs,
              devices, kRequests, kIterations);
  std::printf("%-28s %12s %12s %12s %12s %12s\n", "", "load med ms", "load p99 ms", "inject med", "inject p99",
              "peak RSS KiB");
  std::printf("%-28s %12.2f %12.2f %12.3f %12.3f %12ld\n", "podshim (C++)", ours_lm, ours_lp, ours_im, ours_ip,
              ours_rss);
  std::printf("%-28s %12.2f %12.2f %12.3f %12.3f %12ld\n", "reference Go v0.5.2", gls.median_ms, gls.p99_ms,
              gis.median_ms, gis.p99_ms, go_rss);
  std::printf("ratio podshim/go: load %.2fx, inject %.2fx, peak RSS %.2fx\n", ours_lm / gls.median_ms,
              ours_im / gis.median_ms, static_cast<double>(ours_rss) / static_cast<double>(go_rss));
  return 0;
}
