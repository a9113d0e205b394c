// Benchmark: podshim-hook exec'd with a real state on stdin (createRuntime:
// config.json read, one device checked, registration with a fake podshimd),
// next to /bin/true fed the same state, interleaved in one run on this host.
// The difference is what the hook adds to a container start beyond the
// fork+exec any hook costs. The in-VM figure under a real runtime is
// tests/kernel/hook/hook_vm_bench.cc.
#include <fcntl.h>
#include <csignal>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/shim/hook/fixtures.h"
#include "tests/shim/hook/stats.h"

extern char** environ;

namespace {

using podshim::hook::testing::FakeServer;
using podshim::hook::testing::make_config;
using podshim::hook::testing::make_state;
using podshim::hook::testing::print_row;
using podshim::hook::testing::TempDir;
using Clock = std::chrono::steady_clock;

// Spawns argv with `input` on stdin (a pipe, as runc and crun give it) and
// stderr to /dev/null; returns wall microseconds, or -1 on a failed run.
double time_exec(const std::vector<std::string>& argv, const std::string& input) {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) < 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto t0 = Clock::now();
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  if (rc != 0) {
    ::close(in[1]);
    return -1;
  }
  // The state is small (well under the pipe buffer): one write, then EOF.
  ssize_t n = ::write(in[1], input.data(), input.size());
  ::close(in[1]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  auto t1 = Clock::now();
  // /bin/true exits without reading: EPIPE is expected there, as runtimes see it.
  if ((n < 0 && errno != EPIPE) || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

}  // namespace

int main() {
  std::signal(SIGPIPE, SIG_IGN);
  const char* hook = std::getenv("PODSHIM_HOOK");
  if (!hook) {
    std::fprintf(stderr, "PODSHIM_HOOK not set\n");
    return 1;
  }
  TempDir dir;
  nlohmann::json ann = {{"io.kubernetes.pod.uid", "0c5a4d53-0000-4000-8000-000000000001"},
                        {"podshim.io/injected-devices", "[\"/dev/null\"]"}};
  dir.write("config.json",
            make_config({{{"path", "/dev/null"}, {"type", "c"}, {"major", 1}, {"minor", 3}}}, ann)
                .dump());
  const std::string state = make_state(dir.path(), "creating", ann).dump();
  const std::string sock = dir.sub("podshim.sock");
  FakeServer server(sock);

  const std::vector<std::string> hook_argv = {hook, "--socket", sock, "createRuntime"};
  const std::vector<std::string> true_argv = {"/bin/true", "createRuntime"};
  constexpr int kWarmup = 20, kRuns = 300;
  std::vector<double> h, t;
  for (int i = 0; i < kWarmup + kRuns; ++i) {
    double a = time_exec(hook_argv, state);
    double b = time_exec(true_argv, state);
    if (a < 0 || b < 0) {
      std::fprintf(stderr, "a run failed (hook %.0f, true %.0f)\n", a, b);
      return 1;
    }
    if (i >= kWarmup) {
      h.push_back(a);
      t.push_back(b);
    }
  }
  if (server.requests().size() != static_cast<size_t>(kWarmup + kRuns)) {
    std::fprintf(stderr, "expected %d registrations, podshimd saw %zu\n", kWarmup + kRuns,
                 server.requests().size());
    return 1;
  }
  std::printf("podshim-hook exec (host, createRuntime + registration), interleaved runs:\n");
  print_row("podshim-hook", h);
  print_row("/bin/true (baseline)", t);
  std::vector<double> d;
  for (size_t i = 0; i < h.size(); ++i) d.push_back(h[i] - t[i]);
  print_row("difference (paired)", d);
  // Target: the hook's median within 1.5x of /bin/true's in the same run.
  std::printf("ratio podshim-hook / /bin/true (medians): %.2fx (target <= 1.50x)\n",
              podshim::hook::testing::percentile(h, 50) / podshim::hook::testing::percentile(t, 50));
  return 0;
}
