// podshim-demo: podshim end to end on a real cgroup v2 kernel (the README's
// main job). Runs inside the qemu guest (tools/demo → tests/demo/run-demo →
// tests/vm/vm-run). It plays containerd: it creates a pod's cgroups and
// starts real processes in them the way a runtime places them, starts
// podshimd as an NRI plugin, and drives it through our runtime simulator over
// the real NRI wire protocol, writing cgroup files afterwards as runc would.
//
// Every step prints one line saying what it shows, its evidence, and a
// verdict; the program exits non-zero if any step did not behave as
// described, so the kernel test suite runs the very same scenario.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/str.h"
#include "cgroup/convert.h"
#include "shim/nri/simulator.h"
#include "shim/status/client.h"
#include "tests/kernel/kernel_env.h"
#include "tests/testutil/shell.h"

namespace {

using namespace podshim;
namespace api = podshim::nri::api;
using json = nlohmann::json;
using kernel_test::slurp;
using kernel_test::put;

constexpr int64_t kMi = 1 << 20;
const std::string kCg = "/sys/fs/cgroup";
const std::string kPodUid = "6d3b4a5e-0000-4000-8000-00000000de70";
const std::string kPodRel = "kubepods/burstable/pod" + kPodUid;
const std::string kSock = "/run/podshim/podshim.sock";
const std::string kNriSock = "/run/nri/nri.sock";

int g_failures = 0;
int g_steps = 0;

void say(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}
void step(const std::string& what) {
  ++g_steps;
  say("");
  say(fmt::format("== STEP {}: {}", g_steps, what));
}
void check(bool ok, const std::string& claim) {
  say(fmt::format("   {} {}", ok ? "[ok]  " : "[FAIL]", claim));
  if (!ok) ++g_failures;
}

uint64_t stat_field(const std::string& rel, const std::string& key) {
  return kernel_test::keyed(kCg + "/" + rel + "/memory.stat", key);
}
uint64_t events_field(const std::string& rel, const std::string& key) {
  return kernel_test::keyed(kCg + "/" + rel + "/memory.events", key);
}
uint64_t current(const std::string& rel) {
  auto v = str::parse_u64(slurp(kCg + "/" + rel + "/memory.current"));
  return v ? *v : 0;
}
std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / kMi); }
bool alive(pid_t pid) {
  int st;
  return pid > 0 && waitpid(pid, &st, WNOHANG) == 0 && kill(pid, 0) == 0;
}

void show_files(const std::string& label, const std::string& rel) {
  say(fmt::format("   {:<7} {}: cpu.weight={} cpu.max=\"{}\" memory.max={} memory.current={}", label,
                  rel.substr(rel.rfind('/') + 1), slurp(kCg + "/" + rel + "/cpu.weight"),
                  slurp(kCg + "/" + rel + "/cpu.max"), slurp(kCg + "/" + rel + "/memory.max"),
                  mib(current(rel))));
}

// A workload process placed in a container cgroup as a runtime does
// (kernel_test::start_in_cgroup): every page it touches is charged there.
pid_t start_workload(const std::string& rel, const std::function<void()>& work) {
  return kernel_test::start_in_cgroup(kCg + "/" + rel, work);
}

void touch_anon(size_t bytes) {
  auto* m = static_cast<char*>(malloc(bytes));
  for (size_t i = 0; i < bytes; i += 4096) m[i] = 1;
  // Keep it: the pointer escapes to an asm barrier so it stays resident.
  asm volatile("" : : "r"(m) : "memory");
}

// Reads a block device: the pages land in the page cache, charged to the
// reader's cgroup, clean and reclaimable (tmpfs would be shmem, which is not).
void read_block_device(const char* dev, size_t bytes) {
  int fd = open(dev, O_RDONLY | O_CLOEXEC);
  if (fd < 0) _exit(3);
  std::vector<char> buf(1 << 20);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  // The fd stays open for the process's life: closing the last fd of a block
  // device drops its page cache, and the demo needs that cache to reclaim.
}

bool run_until(sd_event* loop, const std::function<bool()>& pred, double seconds = 60) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    if (sd_event_run(loop, 10'000) < 0) return false;
  }
  return true;
}

api::PodSandbox make_pod() {
  api::PodSandbox p;
  p.set_id("sandbox-demo");
  p.set_uid(kPodUid);
  p.set_name("demo");
  p.set_namespace_("default");
  p.mutable_linux()->set_cgroup_parent("/" + kPodRel);
  return p;
}

api::LinuxResources resources(uint64_t shares, int64_t quota, int64_t mem) {
  api::LinuxResources r;
  r.mutable_cpu()->mutable_shares()->set_value(shares);
  r.mutable_cpu()->mutable_quota()->set_value(quota);
  r.mutable_cpu()->mutable_period()->set_value(100000);
  r.mutable_memory()->mutable_limit()->set_value(mem);
  return r;
}

api::Container make_container(const api::PodSandbox& p, const std::string& id, uint64_t shares,
                              int64_t quota, int64_t mem, pid_t pid) {
  api::Container c;
  c.set_id(id);
  c.set_pod_sandbox_id(p.id());
  c.set_name(id);
  c.set_state(api::CONTAINER_RUNNING);
  c.set_pid(static_cast<uint32_t>(pid));
  c.mutable_linux()->set_cgroups_path("/" + kPodRel + "/" + id);
  *c.mutable_linux()->mutable_resources() = resources(shares, quota, mem);
  return c;
}

// What runc does after the plugins answered UpdateContainer: write the
// (possibly adjusted) resources to the container's cgroup files.
void runc_update(const std::string& rel, const api::LinuxResources& r) {
  const std::string d = kCg + "/" + rel;
  if (r.cpu().shares().value())
    put(d + "/cpu.weight", std::to_string(cgroup::shares_to_weight(
                                 r.cpu().shares().value(), cgroup::WeightFormula::Quadratic)));
  if (r.cpu().quota().value())
    put(d + "/cpu.max", fmt::format("{} {}", r.cpu().quota().value(), r.cpu().period().value()));
  if (r.memory().limit().value()) put(d + "/memory.max", std::to_string(r.memory().limit().value()));
}

std::optional<json> get_json(const std::string& target) {
  status::ClientOptions o;
  o.socket_path = kSock;
  auto r = status::http_request(o, "GET", target);
  if (!r || r->status != 200) return std::nullopt;
  try {
    return json::parse(r->body);
  } catch (...) {
    return std::nullopt;
  }
}

std::string run_capture(const std::string& cmd) { return testutil::run_shell(cmd); }

struct Args {
  std::string podshimd, podshimctl, curl = "curl", brd_ko;
};

int demo(const Args& a) {
  say("podshim demo: in-place resize and DRA/CDI devices on a real cgroup v2 kernel");
  say(fmt::format("kernel {}; podshimd {}", str::trim(run_capture("uname -r")), a.podshimd));

  // ---- the node: cgroups of one burstable pod with two containers --------
  for (const auto& dir : {"/run/podshim", "/run/nri", "/var/lib/podshim", "/etc/podshim", "/etc/cdi",
                          "/var/run/cdi", "/var/lib/demo-gpu"})
    (void)fs::mkdir_p(dir, 0755);
  std::string rel;
  for (const std::string& part : std::vector<std::string>{"kubepods", "burstable", "pod" + kPodUid}) {
    rel += (rel.empty() ? "" : "/") + part;
    mkdir((kCg + "/" + rel).c_str(), 0755);
    put(kCg + "/" + rel + "/cgroup.subtree_control", "+cpu +memory +pids");
  }
  const std::string app = kPodRel + "/ctr-app", cache = kPodRel + "/ctr-cache";
  mkdir((kCg + "/" + app).c_str(), 0755);
  mkdir((kCg + "/" + cache).c_str(), 0755);
  // As the kubelet and runc set them at creation: pod 1 CPU / 640 MiB,
  // ctr-app 500m / 256 MiB, ctr-cache 250m / 256 MiB.
  put(kCg + "/" + kPodRel + "/memory.max", std::to_string(640 * kMi));
  put(kCg + "/" + kPodRel + "/cpu.max", "100000 100000");
  runc_update(app, resources(512, 50000, 256 * kMi));
  runc_update(cache, resources(256, 25000, 256 * kMi));

  if (!a.brd_ko.empty() && access("/dev/ram0", F_OK) != 0)
    (void)system(("insmod " + a.brd_ko + " rd_nr=1 rd_size=262144").c_str());

  step("a pod with two containers runs for real; ctr-app allocates memory, ctr-cache fills page cache");
  pid_t app_pid = start_workload(app, [] { touch_anon(96 * kMi); });
  pid_t cache_pid = start_workload(cache, [] {
    touch_anon(4 * kMi);
    read_block_device("/dev/ram0", 160 * kMi);
  });
  for (int i = 0; i < 600 && (stat_field(app, "anon") < 90 * kMi || stat_field(cache, "file") < 150 * kMi); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  say(fmt::format("   ctr-app   pid {} memory.current={} (anon {})", app_pid, mib(current(app)),
                  mib(stat_field(app, "anon"))));
  say(fmt::format("   ctr-cache pid {} memory.current={} (anon {}, file {})", cache_pid,
                  mib(current(cache)), mib(stat_field(cache, "anon")), mib(stat_field(cache, "file"))));
  check(alive(app_pid) && stat_field(app, "anon") >= 90 * kMi, "ctr-app holds >= 90 MiB of anonymous memory");
  check(alive(cache_pid) && stat_field(cache, "file") >= 100 * kMi,
        "ctr-cache holds >= 100 MiB of reclaimable page cache");

  // ---- podshimd as an NRI plugin of our runtime simulator ----------------
  put("/etc/podshim/config.yaml",
        "log_level: info\n"
        "state_dir: /var/lib/podshim\n"
        "socket:\n  path: " + kSock + "\n"
        "cgroup:\n  root: /sys/fs/cgroup\n  driver: cgroupfs\n  shrink_timeout_ms: 1500\n"
        "nri:\n  enabled: true\n  socket: " + kNriSock + "\n  plugin_index: \"10\"\n"
        "cdi:\n  spec_dirs: [/etc/cdi, /var/run/cdi]\n");
  sd_event* loop = nullptr;
  sd_event_new(&loop);
  podshim::nri::SimOptions so;
  so.runtime_name = "containerd";
  so.runtime_version = "v2.3.0";
  podshim::nri::Simulator sim(loop, so);
  auto pod = make_pod();
  auto c_app = make_container(pod, "ctr-app", 512, 50000, 256 * kMi, app_pid);
  auto c_cache = make_container(pod, "ctr-cache", 256, 25000, 256 * kMi, cache_pid);
  sim.set_state({pod}, {c_app, c_cache});
  if (auto r = sim.listen(kNriSock); !r) {
    say("cannot listen on the NRI socket: " + r.error().message);
    return 1;
  }
  pid_t daemon = fork();
  if (daemon == 0) {
    // podshimd's own log goes to a file, shown at the end, so the steps read cleanly.
    int log = open("/run/podshim/podshimd.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (log >= 0) dup2(log, STDERR_FILENO);
    execl(a.podshimd.c_str(), "podshimd", "--config", "/etc/podshim/config.yaml", nullptr);
    _exit(127);
  }
  step("podshimd starts, registers with the runtime over NRI and synchronizes the pod");
  bool synced = run_until(loop, [&] { return sim.synchronized(); }, 60);
  for (int i = 0; i < 100 && !get_json("/v1/containers/ctr-app"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  say(fmt::format("   plugin {}-{} (NRI {}), events 0x{:x}", sim.plugin().index, sim.plugin().name,
                  sim.plugin().nri_version, sim.plugin().events));
  check(synced, "the NRI handshake (RegisterPlugin, Configure, Synchronize) completed");
  check(get_json("/v1/containers/ctr-app").has_value(), "the status socket knows ctr-app");

  auto update = [&](const api::Container& c, const api::LinuxResources& r) {
    std::optional<podshim::nri::Status> st;
    sim.update_container(pod, c, r, [&](podshim::nri::Status s, api::UpdateContainerResponse) { st = s; });
    run_until(loop, [&] { return st.has_value(); }, 30);
    return st.value_or(podshim::nri::Status{-1, "no reply from podshimd"});
  };
  auto post_update = [&](const api::Container& c) {
    std::optional<podshim::nri::Status> st;
    sim.observe(api::POST_UPDATE_CONTAINER, pod, &c, [&](podshim::nri::Status s) { st = s; });
    run_until(loop, [&] { return st.has_value(); }, 30);
  };

  // ---- CPU and memory increase, in place --------------------------------
  step("a CPU increase and a memory increase of ctr-app are applied in place");
  show_files("before", app);
  auto grow = resources(1024, 100000, 384 * kMi);
  auto st = update(c_app, grow);
  if (st.ok()) runc_update(app, grow);  // the runtime writes after the plugins said yes
  post_update(c_app);
  show_files("after", app);
  check(st.ok(), "podshimd accepted the UpdateContainer");
  check(slurp(kCg + "/" + app + "/cpu.max") == "100000 100000", "cpu.max is now 1 CPU (100000 100000)");
  check(slurp(kCg + "/" + app + "/cpu.weight") == "100", "cpu.weight is now 100 (1024 shares, quadratic)");
  check(slurp(kCg + "/" + app + "/memory.max") == std::to_string(384 * kMi), "memory.max is now 384 MiB");
  check(alive(app_pid), "ctr-app kept running (no restart)");
  *c_app.mutable_linux()->mutable_resources() = grow;

  // ---- memory shrink that needs reclaim ---------------------------------
  step("a memory shrink of ctr-cache below its usage (mostly page cache) is applied with no OOM kill");
  show_files("before", cache);
  const uint64_t before_cur = current(cache), oom_before = events_field(cache, "oom_kill");
  auto shrink = resources(0, 0, 64 * kMi);  // memory-only, cpu fields zero as the kubelet sends them
  st = update(c_cache, shrink);
  if (st.ok()) runc_update(cache, shrink);
  post_update(c_cache);
  show_files("after", cache);
  say(fmt::format("   usage {} -> {}, memory.events oom_kill {} -> {}", mib(before_cur), mib(current(cache)),
                  oom_before, events_field(cache, "oom_kill")));
  check(st.ok(), "podshimd reclaimed first and accepted the shrink" + (st.ok() ? "" : ": " + st.message));
  check(slurp(kCg + "/" + cache + "/memory.max") == std::to_string(64 * kMi), "memory.max is now 64 MiB");
  check(current(cache) <= 64 * kMi, "usage is below the new limit");
  check(events_field(cache, "oom_kill") == oom_before, "no OOM kill (memory.events oom_kill unchanged)");
  check(alive(cache_pid), "ctr-cache is still running");

  // ---- memory shrink below anonymous usage: refused ---------------------
  step("a memory shrink of ctr-app below its anonymous usage is refused; the container lives");
  show_files("before", app);
  const uint64_t app_oom = events_field(app, "oom_kill");
  st = update(c_app, resources(0, 0, 48 * kMi));
  if (st.ok()) runc_update(app, resources(0, 0, 48 * kMi));
  show_files("after", app);
  say(fmt::format("   runtime got: code {} \"{}\"", st.code, st.message));
  auto cj = get_json("/v1/containers/ctr-app");
  std::string cond_type, cond_reason, cond_msg;
  if (cj) {
    for (const auto& c : cj->value("conditions", json::array())) {
      if (c.value("type", "") == "PodResizeInProgress") {
        cond_type = c.value("type", "");
        cond_reason = c.value("reason", "");
        cond_msg = c.value("message", "");
      }
    }
  }
  say(fmt::format("   status socket: {} reason={} message=\"{}\"", cond_type, cond_reason, cond_msg));
  check(!st.ok() && std::regex_search(st.message, std::regex(R"(memory limit \(\d+\) below current usage \(\d+\))")),
        "the runtime got an error 'memory limit (N) below current usage (M)'");
  check(cond_type == "PodResizeInProgress" && cond_reason == "Error" &&
            cond_msg.find("below current usage") != std::string::npos,
        "the status socket reports PodResizeInProgress/Error with the usage");
  check(slurp(kCg + "/" + app + "/memory.max") == std::to_string(384 * kMi), "memory.max is unchanged (384 MiB)");
  check(events_field(app, "oom_kill") == app_oom, "no OOM kill");
  check(alive(app_pid), "ctr-app is still running");

  // ---- a DRA driver's CDI spec appears while podshimd runs --------------
  step("a DRA-style CDI spec dropped into /var/run/cdi is used at once: the container gets node, mount, env");
  mknod("/dev/demo-gpu0", S_IFCHR | 0666, makedev(1, 3));
  const std::string claim = "9f0e5d2c-7b1a-4c3d-8e9f-0a1b2c3d4e5f";
  put("/var/lib/demo-gpu/info", "demo accelerator\n");
  const std::string spec_path = "/var/run/cdi/k8s.gpu.example.com-gpu_" + claim + ".yaml";
  put(spec_path + ".tmp",
        "cdiVersion: 0.6.0\nkind: k8s.gpu.example.com/gpu\ndevices:\n"
        "- name: " + claim + "-gpu-0\n  containerEdits:\n    deviceNodes:\n    - path: /dev/demo-gpu0\n"
        "    mounts:\n    - hostPath: /var/lib/demo-gpu\n      containerPath: /usr/local/demo-gpu\n"
        "      options: [ro, nosuid, nodev, bind]\ncontainerEdits:\n  env: [DEMO_GPU_CLAIM=" + claim + "]\n");
  rename((spec_path + ".tmp").c_str(), spec_path.c_str());  // atomically, as drivers write specs
  say("   wrote " + spec_path);
  const std::string dev = "k8s.gpu.example.com/gpu=" + claim + "-gpu-0";
  api::Container c_gpu = make_container(pod, "ctr-gpu", 256, 25000, 64 * kMi, 0);
  c_gpu.set_state(api::CONTAINER_CREATED);
  c_gpu.add_cdi_devices()->set_name(dev);
  std::optional<api::CreateContainerResponse> created;
  podshim::nri::Status cst;
  for (int attempt = 0; attempt < 50 && !created; ++attempt) {
    std::optional<podshim::nri::Status> s;
    sim.create_container(pod, c_gpu, [&](podshim::nri::Status x, api::CreateContainerResponse r) {
      s = x;
      if (x.ok()) created = r;
    });
    run_until(loop, [&] { return s.has_value(); }, 30);
    cst = s.value_or(podshim::nri::Status{-1, "no reply"});
    if (!created) run_until(loop, [] { return false; }, 0.1);  // inotify may still be on its way
  }
  bool node = false, mount = false, env = false;
  if (created) {
    const auto& adj = created->adjust();
    for (const auto& d : adj.linux().devices()) {
      say(fmt::format("   device {} type {} {}:{}", d.path(), d.type(), d.major(), d.minor()));
      node |= d.path() == "/dev/demo-gpu0" && d.type() == "c" && d.major() == 1 && d.minor() == 3;
    }
    for (const auto& m : adj.mounts()) {
      say(fmt::format("   mount  {} -> {} ({})", m.source(), m.destination(), fmt::join(m.options(), ",")));
      mount |= m.destination() == "/usr/local/demo-gpu" && m.source() == "/var/lib/demo-gpu";
    }
    for (const auto& e : adj.env()) {
      say(fmt::format("   env    {}={}", e.key(), e.value()));
      env |= e.key() == "DEMO_GPU_CLAIM" && e.value() == claim;
    }
  } else {
    say("   CreateContainer failed: " + cst.message);
  }
  check(node, "the device node /dev/demo-gpu0 (c 1:3) is in the adjustment");
  check(mount, "the mount /usr/local/demo-gpu is in the adjustment");
  check(env, "the env DEMO_GPU_CLAIM is in the adjustment");

  // ---- what operators see --------------------------------------------------
  step("podshimctl and the Prometheus endpoint report what happened");
  std::string table = run_capture(a.podshimctl + " --socket " + kSock + " get containers 2>&1");
  say(table);
  std::string metrics = run_capture(a.curl + " -s --unix-socket " + kSock + " http://localhost/metrics 2>&1");
  std::istringstream ms(metrics);
  std::string line;
  while (std::getline(ms, line))
    if (line.rfind("podshim_", 0) == 0) say("   " + line);
  check(table.find("ctr-app") != std::string::npos && table.find("ctr-cache") != std::string::npos,
        "podshimctl get containers lists the containers");
  check(metrics.find("podshim_memory_shrinks_refused_total 1") != std::string::npos,
        "metrics count the refused shrink");

  // ---- done -----------------------------------------------------------------
  kill(daemon, SIGTERM);
  int dst = 0;
  for (int i = 0; i < 100 && waitpid(daemon, &dst, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  say("");
  say("podshimd's log:");
  std::istringstream lg(slurp("/run/podshim/podshimd.log"));
  while (std::getline(lg, line)) say("   " + line);
  kill(app_pid, SIGKILL);
  kill(cache_pid, SIGKILL);
  sd_event_unref(loop);
  say("");
  if (g_failures == 0)
    say(fmt::format("demo: all {} steps behaved as described", g_steps));
  else
    say(fmt::format("demo: {} claim(s) did not hold", g_failures));
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* v = getenv("PODSHIM_IN_VM"); !v || std::string(v) != "1") {
    std::fprintf(stderr, "podshim-demo: runs only inside the test VM (it owns /sys/fs/cgroup there); "
                         "use tools/demo\n");
    return 2;
  }
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--podshimd") a.podshimd = v;
    else if (k == "--podshimctl") a.podshimctl = v;
    else if (k == "--curl") a.curl = v;
    else if (k == "--brd-ko") a.brd_ko = v;
    else {
      std::fprintf(stderr, "podshim-demo: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.brd_ko.empty()) {
    if (const char* b = getenv("PODSHIM_BRD_KO")) a.brd_ko = b;  // shipped by vm-run
  }
  if (a.podshimd.empty() || a.podshimctl.empty()) {
    std::fprintf(stderr, "usage: podshim-demo --podshimd PATH --podshimctl PATH [--curl PATH] [--brd-ko PATH]\n");
    return 2;
  }
  return demo(a);
}
