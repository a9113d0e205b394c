// Benchmark, in the test VM: podshim-hook's wall time per invocation when a
// real runtime (crun) runs it, next to /bin/true configured as the same hook,
// in one run.
//
// A runtime gives no per-hook timing, so each round runs three containers
// from one bundle: no hook, K × /bin/true at createRuntime, and K ×
// podshim-hook at createRuntime (registering with a fake podshimd in this
// process). Per invocation = (T_variant − T_nohook) / K for that round; the
// rounds give the median and p99. Rounds interleave the variants so drift in
// the (TCG) guest hits all three alike.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/kernel/hook/run_cmd.h"
#include "tests/shim/hook/fixtures.h"
#include "tests/shim/hook/stats.h"

using nlohmann::json;
using podshim::hook::testing::FakeServer;
using podshim::hook::testing::print_row;
using podshim::hook::testing::run_cmd;
using podshim::hook::testing::TempDir;
using Clock = std::chrono::steady_clock;

int main() {
  const char* in_vm = std::getenv("PODSHIM_IN_VM");
  const char* hook = std::getenv("PODSHIM_HOOK");
  if (!in_vm || std::string(in_vm) != "1") {
    std::printf("SKIP: needs the test VM (PODSHIM_IN_VM=1)\n");
    return 77;
  }
  if (!hook) {
    std::fprintf(stderr, "PODSHIM_HOOK not set\n");
    return 1;
  }
  constexpr int kHooks = 10;
  const int rounds = std::getenv("PODSHIM_BENCH_ROUNDS") ? std::atoi(std::getenv("PODSHIM_BENCH_ROUNDS")) : 15;

  TempDir dir;
  const std::string bundle = dir.sub("bundle");
  std::filesystem::create_directories(bundle + "/rootfs/bin");
  std::filesystem::copy_file("/bin/busybox", bundle + "/rootfs/bin/busybox");
  if (run_cmd({"crun", "spec"}, bundle).status != 0) {
    std::fprintf(stderr, "crun spec failed\n");
    return 1;
  }
  json base;
  {
    std::ifstream in(bundle + "/config.json");
    base = json::parse(in);
  }
  base["process"]["terminal"] = false;
  base["process"]["args"] = {"/bin/busybox", "true"};
  base["linux"]["cgroupsPath"] = "/podshim-hookbench";
  base["annotations"] = {{"io.kubernetes.pod.uid", "0c5a4d53-0000-4000-8000-000000000001"}};
  const std::string sock = dir.sub("podshim.sock");
  FakeServer server(sock);

  auto with_hooks = [&](const std::vector<std::string>& args) {
    json s = base;
    s["hooks"]["createRuntime"] = json::array();
    for (int i = 0; i < kHooks; ++i)
      s["hooks"]["createRuntime"].push_back({{"path", args[0]}, {"args", args}, {"timeout", 60}});
    return s;
  };
  const json variants[3] = {
      base,
      with_hooks({"/bin/true", "createRuntime"}),
      with_hooks({hook, "--socket", sock, "createRuntime"}),
  };

  auto time_run = [&](const json& spec, int n) -> double {
    std::ofstream(bundle + "/config.json") << spec.dump();
    const std::string id = "hookbench-" + std::to_string(n);
    auto t0 = Clock::now();
    auto r = run_cmd({"crun", "run", "--no-pivot", "--bundle", bundle, id});
    auto t1 = Clock::now();
    if (r.status != 0) {
      std::fprintf(stderr, "crun run failed: %s\n", r.output.c_str());
      std::exit(1);
    }
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  };

  // One warm-up round: page cache, crun's first cgroup creation.
  int n = 0;
  for (const json& v : variants) time_run(v, n++);
  std::vector<double> per_true, per_hook, diff;
  for (int r = 0; r < rounds; ++r) {
    double t0 = time_run(variants[0], n++);
    double tt = time_run(variants[1], n++);
    double th = time_run(variants[2], n++);
    per_true.push_back((tt - t0) / kHooks);
    per_hook.push_back((th - t0) / kHooks);
    diff.push_back((th - tt) / kHooks);
  }
  const size_t expected = static_cast<size_t>(kHooks) * (rounds + 1);
  if (server.requests().size() != expected) {
    std::fprintf(stderr, "expected %zu registrations, the fake podshimd saw %zu\n", expected,
                 server.requests().size());
    return 1;
  }
  std::printf("createRuntime hook wall time per invocation under crun (VM, TCG), %d hooks per "
              "container, %d rounds:\n", kHooks, rounds);
  print_row("podshim-hook", per_hook);
  print_row("/bin/true (baseline)", per_true);
  print_row("difference (paired)", diff);
  return 0;
}
