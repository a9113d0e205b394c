// The NRI adapter: mappings on their own, then the whole path — our runtime
// simulator ↔ NRI plugin stub ↔ adapter ↔ store, cgroup engine (fake tree)
// and CDI registry — over a socketpair, as containerd would drive podshimd.
#include <sys/stat.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "shim/adapter/nri_adapter.h"
#include "shim/nri/simulator.h"
#include "shim/status/server.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/shim/nri/test_support.h"

namespace podshim::adapter {
namespace {

using cgroup::testing::FakeTree;

constexpr int64_t kMi = 1 << 20;

// A message as the adapter sees it: encoded by libprotobuf, read back by the
// zero-copy reader (the bytes live as long as the view).
template <typename V>
struct Viewed {
  std::unique_ptr<std::string> bytes;
  V v;
  operator const V&() const { return v; }
};
template <typename V, typename M, typename F>
Viewed<V> view_with(const M& m, F decode) {
  Viewed<V> out{std::make_unique<std::string>(m.SerializeAsString()), {}};
  auto r = decode(*out.bytes, &out.v);
  EXPECT_TRUE(r) << r.error().message;
  return out;
}
Viewed<pb::PodSandboxView> view(const api::PodSandbox& m) {
  return view_with<pb::PodSandboxView>(m, [](std::string_view b, pb::PodSandboxView* v) { return pb::decode_pod(b, v); });
}
Viewed<pb::ContainerView> view(const api::Container& m) {
  return view_with<pb::ContainerView>(m, [](std::string_view b, pb::ContainerView* v) { return pb::decode_container(b, v); });
}
Viewed<pb::LinuxResourcesView> view(const api::LinuxResources& m) {
  return view_with<pb::LinuxResourcesView>(
      m, [](std::string_view b, pb::LinuxResourcesView* v) { return pb::decode_linux_resources(b, v); });
}

api::PodSandbox pod(const std::string& uid) {
  api::PodSandbox p;
  p.set_id("sandbox-" + uid);
  p.set_uid(uid);
  p.set_name("web");
  p.set_namespace_("default");
  p.mutable_linux()->set_cgroup_parent("/kubepods/burstable/pod" + uid);
  (*p.mutable_annotations())["io.kubernetes.pod.uid"] = uid;
  return p;
}

api::Container container(const api::PodSandbox& p, const std::string& id, int64_t mem,
                         uint64_t shares, int64_t quota) {
  api::Container c;
  c.set_id(id);
  c.set_pod_sandbox_id(p.id());
  c.set_name("ctr-" + id);
  c.set_state(api::CONTAINER_RUNNING);
  c.mutable_linux()->set_cgroups_path(p.linux().cgroup_parent() + "/" + id);
  auto* r = c.mutable_linux()->mutable_resources();
  r->mutable_memory()->mutable_limit()->set_value(mem);
  r->mutable_cpu()->mutable_shares()->set_value(shares);
  r->mutable_cpu()->mutable_quota()->set_value(quota);
  r->mutable_cpu()->mutable_period()->set_value(100000);
  return c;
}

TEST(NriMap, PodAndContainer) {
  auto p = pod("0a1b2c3d-0000-4000-8000-000000000001");
  auto mp = pod_from_nri(view(p));
  ASSERT_TRUE(mp) << mp.error().message;
  EXPECT_EQ(mp->qos, core::QosClass::Burstable);
  EXPECT_EQ(mp->cgroup_path, p.linux().cgroup_parent());
  auto c = container(p, "c1", 256 * kMi, 512, 50000);
  auto mc = container_from_nri(p.uid(), view(c));
  ASSERT_TRUE(mc) << mc.error().message;
  EXPECT_EQ(mc->pod_uid, p.uid());
  EXPECT_EQ(*mc->desired.memory_limit_bytes, 256 * kMi);
  EXPECT_EQ(*mc->desired.cpu_limit_milli, 500);
  EXPECT_EQ(*mc->desired.cpu_request_milli, 500);  // ceil(512*1000/1024)
  EXPECT_EQ(mc->state, "running");
  EXPECT_EQ(qos_from_cgroup_parent("kubepods-besteffort-podx.slice"), core::QosClass::BestEffort);
  EXPECT_EQ(qos_from_cgroup_parent("/kubepods/podx"), core::QosClass::Guaranteed);

  auto bad = p;
  bad.set_uid("../../etc");
  EXPECT_FALSE(pod_from_nri(view(bad)));
}

TEST(NriMap, UnchangedShortcutSeesEveryChange) {
  auto p = pod("0a1b2c3d-0000-4000-8000-000000000001");
  (*p.mutable_labels())["app"] = "web";
  auto model = pod_from_nri(view(p));
  ASSERT_TRUE(model);
  EXPECT_TRUE(pod_unchanged(view(p), *model));
  auto changed = [&](auto edit) {
    auto q = p;
    edit(q);
    return !pod_unchanged(view(q), *model);
  };
  EXPECT_TRUE(changed([](api::PodSandbox& q) { (*q.mutable_annotations())["io.kubernetes.pod.uid"] = "x"; }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) { (*q.mutable_annotations())["new"] = "1"; }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) { q.mutable_annotations()->clear(); }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) { (*q.mutable_labels())["app"] = "db"; }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) { q.set_name("other"); }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) { q.set_id("sandbox-2"); }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) { q.mutable_linux()->set_cgroup_parent("/kubepods/besteffort/x"); }));
  EXPECT_TRUE(changed([](api::PodSandbox& q) {
    q.mutable_linux()->mutable_pod_resources()->mutable_memory()->mutable_limit()->set_value(kMi);
  }));
  auto api_pod = *model;
  api_pod.source = core::Source::Api;
  EXPECT_FALSE(pod_unchanged(view(p), api_pod));

  auto c = container(p, "c1", 256 * kMi, 512, 50000);
  (*c.mutable_annotations())["a"] = "1";
  auto mc = container_from_nri(p.uid(), view(c));
  ASSERT_TRUE(mc);
  EXPECT_TRUE(container_unchanged(p.uid(), view(c), true, *mc));
  EXPECT_FALSE(container_unchanged("other-uid", view(c), true, *mc));
  auto cchanged = [&](auto edit, bool take = true) {
    auto d = c;
    edit(d);
    return !container_unchanged(p.uid(), view(d), take, *mc);
  };
  EXPECT_TRUE(cchanged([](api::Container& d) { d.set_state(api::CONTAINER_STOPPED); }));
  EXPECT_TRUE(cchanged([](api::Container& d) { d.set_pid(42); }));
  EXPECT_TRUE(cchanged([](api::Container& d) { (*d.mutable_annotations())["a"] = "2"; }));
  EXPECT_TRUE(cchanged([](api::Container& d) { d.mutable_linux()->set_cgroups_path("/elsewhere"); }));
  auto more_memory = [](api::Container& d) {
    d.mutable_linux()->mutable_resources()->mutable_memory()->mutable_limit()->set_value(512 * kMi);
  };
  EXPECT_TRUE(cchanged(more_memory, true));
  EXPECT_FALSE(cchanged(more_memory, false)) << "resources are not taken from this event";
}

TEST(NriMap, MemoryOnlyUpdateKeepsCpu) {
  // A memory-only CRI update arrives with cpu fields present but 0 (cri-api
  // LinuxContainerResources is proto3: a field left out reads 0).
  cgroup::K8sResources cur;
  cur.cpu_request_milli = 250;
  cur.cpu_limit_milli = 500;
  cur.memory_limit_bytes = 128 * kMi;
  api::LinuxResources r;
  r.mutable_cpu()->mutable_shares()->set_value(0);
  r.mutable_cpu()->mutable_quota()->set_value(0);
  r.mutable_memory()->mutable_limit()->set_value(64 * kMi);
  auto next = resources_from_nri(view(r), cur);
  EXPECT_EQ(*next.cpu_request_milli, 250);
  EXPECT_EQ(*next.cpu_limit_milli, 500);
  EXPECT_EQ(*next.memory_limit_bytes, 64 * kMi);
}

TEST(NriMap, ResourcesRoundTrip) {
  cgroup::K8sResources k;
  k.cpu_request_milli = 1500;
  k.cpu_limit_milli = 2000;
  k.memory_limit_bytes = 512 * kMi;
  auto n = resources_to_nri(k);
  EXPECT_EQ(n.cpu().shares().value(), 1536u);
  EXPECT_EQ(n.cpu().quota().value(), 200000);
  EXPECT_EQ(n.cpu().period().value(), 100000u);
  auto back = resources_from_nri(view(n));
  EXPECT_EQ(*back.cpu_request_milli, 1500);
  EXPECT_EQ(*back.cpu_limit_milli, 2000);
  EXPECT_EQ(*back.memory_limit_bytes, 512 * kMi);
}

TEST(NriMap, AdjustmentSkipsWhatTheRuntimeAlreadyInjected) {
  cdi::ResolvedEdits e;
  e.env = {"GPU=1", "ALREADY=yes"};
  e.devices.push_back({"/dev/gpu0", "c", 195, 0, 0666, std::nullopt, std::nullopt, "/dev/host-gpu0", true});
  e.devices.push_back({"/dev/null", "c", 1, 3, std::nullopt, std::nullopt, std::nullopt, "/dev/null", true});
  e.devices.push_back({"/dev/nvidia-caps/cap1", "c", 238, 1, std::nullopt, std::nullopt, std::nullopt,
                       "/dev/nvidia-caps/cap1", false});
  e.device_rules.push_back({"c", 195, 0, "rwm"});
  e.device_rules.push_back({"c", 1, 3, "rwm"});
  e.mounts.push_back({"/opt/gpu", "/var/lib/gpu", "", {"ro", "bind"}});
  e.mounts.push_back({"/etc/hosts", "/x", "", {"bind"}});
  api::Container c;
  c.add_env("ALREADY=yes");
  c.mutable_linux()->add_devices()->set_path("/dev/null");
  c.add_mounts()->set_destination("/etc/hosts");
  api::ContainerAdjustment adj;
  AdjustmentOptions opts;
  auto added = edits_to_adjustment(e, view(c), opts, &adj);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0], "/dev/gpu0");
  ASSERT_EQ(adj.env_size(), 1);
  EXPECT_EQ(adj.env(0).key(), "GPU");
  ASSERT_EQ(adj.linux().devices_size(), 2);
  EXPECT_EQ(adj.linux().devices(0).major(), 195);
  // No allow rules: the runtime adds one for every node of an adjustment.
  EXPECT_EQ(adj.linux().resources().devices_size(), 0);
  ASSERT_EQ(adj.mounts_size(), 1);
  EXPECT_EQ(adj.mounts(0).destination(), "/opt/gpu");
  EXPECT_EQ(adj.mounts(0).type(), "bind");
  ASSERT_EQ(adj.hooks().create_runtime_size(), 1);
  EXPECT_EQ(adj.hooks().create_runtime(0).args(1), "createRuntime");
  ASSERT_EQ(adj.hooks().poststop_size(), 1);
  // The hook checks host nodes: hostPath carried, nodes the host lacks left out.
  EXPECT_EQ(adj.annotations().at("podshim.io/injected-devices"),
            R"([{"hostPath":"/dev/host-gpu0","path":"/dev/gpu0"},{"hostPath":"/dev/null","path":"/dev/null"}])");
  EXPECT_EQ(adj.annotations().at("podshim.io/injected-mounts"), R"(["/opt/gpu","/etc/hosts"])");

  opts.inject_hook = false;
  api::ContainerAdjustment adj2;
  edits_to_adjustment(e, view(c), opts, &adj2);
  EXPECT_FALSE(adj2.has_hooks());
}

// The OCI spec a runtime ends with after applying `adj` to what `c` already
// has, the way containerd/nri's pkg/runtime-tools/generate applies an
// adjustment: env replaced by key, device nodes by path (each one also
// allowed in the device cgroup with "rw", "rwm" for block), mounts by
// destination, hooks appended, linux.resources.devices appended (NRI
// v0.10+). `rules` starts with the rules the runtime's own CDI added.
struct FinalSpec {
  std::vector<std::string> env, devices, mounts;
  std::vector<std::string> rules;  // "allow|deny type major:minor access"
  std::map<std::string, std::vector<std::string>> hooks;  // stage → "path args..."
  size_t count(const std::vector<std::string>& v, const std::string& x) const {
    return static_cast<size_t>(std::count(v.begin(), v.end(), x));
  }
};
std::string hook_str(const api::Hook& h) {
  std::string s = h.path();
  for (const auto& a : h.args()) s += " " + a;
  return s;
}
FinalSpec apply(const api::Container& c, const std::vector<std::string>& runtime_rules,
                const api::ContainerAdjustment& adj) {
  FinalSpec f;
  for (const auto& e : c.env()) f.env.push_back(e);
  for (const auto& d : c.linux().devices()) f.devices.push_back(d.path());
  for (const auto& m : c.mounts()) f.mounts.push_back(m.destination());
  f.rules = runtime_rules;
  auto stages = [](const api::Hooks& h, auto fn) {
    fn("prestart", h.prestart());
    fn("createRuntime", h.create_runtime());
    fn("createContainer", h.create_container());
    fn("startContainer", h.start_container());
    fn("poststart", h.poststart());
    fn("poststop", h.poststop());
  };
  auto add_hooks = [&](const char* stage, const auto& list) {
    for (const auto& h : list) f.hooks[stage].push_back(hook_str(h));
  };
  stages(c.hooks(), add_hooks);
  for (const auto& kv : adj.env()) {
    std::erase_if(f.env, [&](const std::string& e) { return e.substr(0, e.find('=')) == kv.key(); });
    f.env.push_back(kv.key() + "=" + kv.value());
  }
  stages(adj.hooks(), add_hooks);
  for (const auto& d : adj.linux().devices()) {
    std::erase(f.devices, d.path());
    f.devices.push_back(d.path());
    f.rules.push_back(fmt::format("allow {} {}:{} {}", d.type(), d.major(), d.minor(),
                                  d.type() == "b" ? "rwm" : "rw"));
  }
  for (const auto& r : adj.linux().resources().devices())
    f.rules.push_back(fmt::format("{} {} {}:{} {}", r.allow() ? "allow" : "deny", r.type(), r.major().value(),
                                  r.minor().value(), r.access()));
  for (const auto& m : adj.mounts()) {
    std::erase(f.mounts, m.destination());
    f.mounts.push_back(m.destination());
  }
  return f;
}

cdi::ResolvedEdits gpu_edits() {
  cdi::ResolvedEdits e;
  e.env = {"GPU=1"};
  e.devices.push_back({"/dev/gpu0", "c", 195, 0, 0666, std::nullopt, std::nullopt, "/dev/gpu0", true});
  e.device_rules.push_back({"c", 195, 0, "rwm"});
  e.mounts.push_back({"/opt/gpu", "/var/lib/gpu", "", {"ro", "bind"}});
  e.hooks.poststart.push_back({"/usr/bin/gpu-hook", {"gpu-hook", "poststart"}, {"A=1"}, 5});
  e.hooks.create_container.push_back({"/usr/bin/gpu-hook", {"gpu-hook", "ldcache"}, {}, std::nullopt});
  return e;
}

// containerd 2.x / CRI-O with their own CDI on: the spec NRI shows already
// has every edit (hooks included, Container.hooks), so podshim adds nothing
// but its own hook, and the final spec has each item once.
TEST(NriMap, RuntimeAppliedCdiIsNotAppliedAgainHooksIncluded) {
  const cdi::ResolvedEdits e = gpu_edits();
  api::Container c;
  c.add_env("PATH=/bin");
  c.add_env("GPU=1");
  auto* dev = c.mutable_linux()->add_devices();
  dev->set_path("/dev/gpu0");
  dev->set_type("c");
  dev->set_major(195);
  c.add_mounts()->set_destination("/opt/gpu");
  auto* h = c.mutable_hooks()->add_poststart();
  h->set_path("/usr/bin/gpu-hook");
  h->add_args("gpu-hook");
  h->add_args("poststart");
  h->add_env("A=1");
  h->mutable_timeout()->set_value(5);
  auto* h2 = c.mutable_hooks()->add_create_container();
  h2->set_path("/usr/bin/gpu-hook");
  h2->add_args("gpu-hook");
  h2->add_args("ldcache");
  api::ContainerAdjustment adj;
  AdjustmentOptions opts;
  opts.hook_path = "/opt/podshim/bin/podshim-hook";
  auto added = edits_to_adjustment(e, view(c), opts, &adj);
  EXPECT_TRUE(added.empty());
  EXPECT_EQ(adj.env_size(), 0);
  EXPECT_EQ(adj.linux().devices_size(), 0);
  EXPECT_EQ(adj.linux().resources().devices_size(), 0);
  EXPECT_EQ(adj.mounts_size(), 0);
  EXPECT_EQ(adj.hooks().poststart_size(), 0);
  EXPECT_EQ(adj.hooks().create_container_size(), 0);
  ASSERT_EQ(adj.hooks().create_runtime_size(), 1);
  EXPECT_EQ(adj.hooks().create_runtime(0).path(), "/opt/podshim/bin/podshim-hook");

  const FinalSpec f = apply(c, {"allow c 195:0 rwm"}, adj);
  EXPECT_EQ(f.count(f.env, "GPU=1"), 1u);
  EXPECT_EQ(f.count(f.devices, "/dev/gpu0"), 1u);
  EXPECT_EQ(f.rules, std::vector<std::string>{"allow c 195:0 rwm"});
  EXPECT_EQ(f.count(f.mounts, "/opt/gpu"), 1u);
  EXPECT_EQ(f.count(f.hooks.at("poststart"), "/usr/bin/gpu-hook gpu-hook poststart"), 1u);
  EXPECT_EQ(f.count(f.hooks.at("createContainer"), "/usr/bin/gpu-hook gpu-hook ldcache"), 1u);
  EXPECT_EQ(f.count(f.hooks.at("createRuntime"), "/opt/podshim/bin/podshim-hook podshim-hook createRuntime"), 1u);

  // A hook with the same path but other args or env is another hook.
  api::Container c2 = c;
  c2.mutable_hooks()->mutable_poststart(0)->set_env(0, "A=2");
  api::ContainerAdjustment adj2;
  edits_to_adjustment(e, view(c2), opts, &adj2);
  EXPECT_EQ(adj2.hooks().poststart_size(), 1);
  EXPECT_EQ(adj2.hooks().create_container_size(), 0);
}

// The runtime's CDI off (podshim alone): podshim adds every edit once, and
// the device node gets one allow rule, the runtime's.
TEST(NriMap, PodshimAloneAddsEachCdiItemOnceWithOneDeviceRule) {
  cdi::ResolvedEdits e = gpu_edits();
  e.devices.push_back({"/dev/blk0", "b", 8, 0, std::nullopt, std::nullopt, std::nullopt, "/dev/blk0", true});
  e.device_rules.push_back({"b", 8, 0, "rwm"});
  api::Container c;
  c.add_env("PATH=/bin");
  api::ContainerAdjustment adj;
  AdjustmentOptions opts;
  auto added = edits_to_adjustment(e, view(c), opts, &adj);
  EXPECT_EQ(added, (std::vector<std::string>{"/dev/gpu0", "/dev/blk0"}));
  EXPECT_EQ(adj.linux().resources().devices_size(), 0) << "the runtime allows the nodes itself";
  const FinalSpec f = apply(c, {}, adj);
  EXPECT_EQ(f.count(f.env, "GPU=1"), 1u);
  EXPECT_EQ(f.count(f.devices, "/dev/gpu0"), 1u);
  EXPECT_EQ(f.rules, (std::vector<std::string>{"allow c 195:0 rw", "allow b 8:0 rwm"}));
  EXPECT_EQ(f.count(f.mounts, "/opt/gpu"), 1u);
  EXPECT_EQ(f.count(f.hooks.at("poststart"), "/usr/bin/gpu-hook gpu-hook poststart"), 1u);
  EXPECT_EQ(f.count(f.hooks.at("createContainer"), "/usr/bin/gpu-hook gpu-hook ldcache"), 1u);
  EXPECT_EQ(f.hooks.at("createRuntime").size(), 1u);
  EXPECT_EQ(f.hooks.at("poststop").size(), 1u);
}

// A CDI spec narrower than the runtime's "rw": a deny for the rest, after
// the runtime's allow (only honoured where NRI passes resources.devices).
TEST(NriMap, NarrowCdiPermissionsGetADenyNotASecondAllow) {
  cdi::ResolvedEdits e;
  e.devices.push_back({"/dev/ro0", "c", 10, 1, std::nullopt, std::nullopt, std::nullopt, "/dev/ro0", true});
  e.device_rules.push_back({"c", 10, 1, "r"});
  e.devices.push_back({"/dev/rw0", "c", 10, 2, std::nullopt, std::nullopt, std::nullopt, "/dev/rw0", true});
  e.device_rules.push_back({"c", 10, 2, "rw"});
  api::ContainerAdjustment adj;
  edits_to_adjustment(e, view(api::Container{}), AdjustmentOptions{}, &adj);
  const FinalSpec f = apply(api::Container{}, {}, adj);
  EXPECT_EQ(f.rules, (std::vector<std::string>{"allow c 10:1 rw", "allow c 10:2 rw", "deny c 10:1 w"}));
}

// CRI-O's hooks.d may run podshim-hook already: not added a second time.
TEST(NriMap, PodshimHookNotAddedWhenTheSpecHasIt) {
  cdi::ResolvedEdits e = gpu_edits();
  AdjustmentOptions opts;
  api::Container c;
  for (const char* stage : {"createRuntime", "poststop"}) {
    auto* h = std::string(stage) == "poststop" ? c.mutable_hooks()->add_poststop()
                                                : c.mutable_hooks()->add_create_runtime();
    h->set_path(opts.hook_path);
    h->add_args("podshim-hook");
    h->add_args(stage);
  }
  api::ContainerAdjustment adj;
  edits_to_adjustment(e, view(c), opts, &adj);
  EXPECT_EQ(adj.hooks().create_runtime_size(), 0);
  EXPECT_EQ(adj.hooks().poststop_size(), 0);
}

TEST(NriMap, HookDecision) {
  std::vector<std::string> probed;
  auto only = [&](std::string have) {
    return [&probed, have](const std::string& p) {
      probed.push_back(p);
      return p == have;
    };
  };
  // Present at the host path as podshimd sees it: injected under that path.
  auto d = decide_hook("/opt/podshim/bin/podshim-hook", "/opt/podshim/bin/podshim-hook",
                       only("/opt/podshim/bin/podshim-hook"));
  EXPECT_TRUE(d.inject);
  EXPECT_EQ(d.path, "/opt/podshim/bin/podshim-hook");
  EXPECT_EQ(probed, std::vector<std::string>{"/opt/podshim/bin/podshim-hook"});
  // Absent (the image's own copy does not count): not injected, and the
  // warning names the path.
  d = decide_hook("/opt/podshim/bin/podshim-hook", "/opt/podshim/bin/podshim-hook",
                  only("/usr/libexec/podshim/podshim-hook"));
  EXPECT_FALSE(d.inject);
  EXPECT_TRUE(d.path.empty());
  EXPECT_NE(d.warning.find("/opt/podshim/bin/podshim-hook"), std::string::npos) << d.warning;
  // Checked through another mount point: both paths named.
  d = decide_hook("/opt/podshim/bin/podshim-hook", "/host/opt/podshim/bin/podshim-hook", only("x"));
  EXPECT_FALSE(d.inject);
  EXPECT_NE(d.warning.find("/host/opt/podshim/bin/podshim-hook"), std::string::npos) << d.warning;
  // Not absolute: never probed, never injected.
  probed.clear();
  d = decide_hook("podshim-hook", "podshim-hook", only("podshim-hook"));
  EXPECT_FALSE(d.inject);
  EXPECT_TRUE(probed.empty());
  EXPECT_NE(d.warning.find("not absolute"), std::string::npos) << d.warning;

  // What the decision feeds: no hook in the adjustment when not injecting,
  // the host path when injecting.
  const cdi::ResolvedEdits e = gpu_edits();
  AdjustmentOptions opts;
  opts.inject_hook = false;
  api::ContainerAdjustment adj;
  edits_to_adjustment(e, view(api::Container{}), opts, &adj);
  EXPECT_EQ(adj.hooks().create_runtime_size(), 0);
  EXPECT_EQ(adj.hooks().poststop_size(), 0);
  EXPECT_EQ(adj.hooks().poststart_size(), 1);  // the CDI spec's own hook still goes in
}

// A Synchronize page as podshimd holds it: its bytes and the view decoded
// from them (with the items checked or not); `ok` when it decoded. The view
// points into the bytes, so a page is neither copied nor moved.
struct DecodedPage {
  explicit DecodedPage(const api::SynchronizeRequest& page, bool check_items = true)
      : bytes(page.SerializeAsString()), ok(static_cast<bool>(pb::decode_synchronize(bytes, &view, check_items))) {}
  DecodedPage(const DecodedPage&) = delete;
  DecodedPage& operator=(const DecodedPage&) = delete;

  const std::string bytes;
  pb::SynchronizeView view;
  const bool ok;
};

// Hands Synchronize pages to an adapter as the plugin does. `then` is what
// the adapter left to run once a page's answer is out; the answers
// themselves are not looked at here.
struct PageSync {
  explicit PageSync(NriAdapter& a) : adapter(a) {}

  NriAdapter& adapter;
  api::SynchronizeResponse reply;
  std::function<void()> then;

  Result<void> page(const pb::SynchronizeView& v, bool first) {
    return adapter.on_synchronize_page(v, first, &reply, &then);
  }
  // A page that did not decode fails here, before the adapter sees it.
  Result<void> page(const DecodedPage& p, bool first) {
    if (!p.ok) return fail(EINVAL, "the page did not decode");
    return page(p.view, first);
  }
  // The page's answer is out: runs (and clears) what the adapter left to
  // run then; false when it left nothing.
  bool answer_out() {
    if (!then) return false;
    auto run = std::move(then);
    then = nullptr;
    run();
    return true;
  }
};

TEST(NriAdapterSync, PagesGoIntoTheModelAsTheyArriveAndStaleObjectsGoAtTheEnd) {
  auto store = core::Store::in_memory();
  // Known from before the (re)connection: one pod and one container the
  // runtime no longer has, and one container registered through the API.
  core::Pod gone_pod;
  gone_pod.uid = "0a1b2c3d-0000-4000-8000-0000000000ff";
  gone_pod.source = core::Source::Nri;
  ASSERT_TRUE(store->upsert_pod(gone_pod));
  core::Container gone;
  gone.id = "gone";
  gone.pod_uid = gone_pod.uid;
  gone.source = core::Source::Nri;
  ASSERT_TRUE(store->upsert_container(gone));
  core::Container api_one;
  api_one.id = "from-api";
  api_one.source = core::Source::Api;
  ASSERT_TRUE(store->upsert_container(api_one));
  NriAdapter adapter(*store, nullptr, nullptr, nullptr, AdapterOptions{});

  auto p1 = pod("0a1b2c3d-0000-4000-8000-000000000001");
  auto p2 = pod("0a1b2c3d-0000-4000-8000-000000000002");
  // Page 1: p1 and its container, plus a container of p2, whose pod only
  // comes on page 2. Page 2 (the last): p2 and another of its containers.
  api::SynchronizeRequest page1, page2;
  *page1.add_pods() = p1;
  *page1.add_containers() = container(p1, "a", 64 * kMi, 256, 0);
  *page1.add_containers() = container(p2, "b", 64 * kMi, 256, 0);
  page1.set_more(true);
  *page2.add_pods() = p2;
  *page2.add_containers() = container(p2, "c", 64 * kMi, 256, 0);
  // And one on page 1 whose pod never comes: ignored at the end.
  auto lost = pod("0a1b2c3d-0000-4000-8000-000000000003");
  *page1.add_containers() = container(lost, "lost", 64 * kMi, 256, 0);
  page2.set_more(false);

  const DecodedPage v1(page1), v2(page2);
  PageSync sync(adapter);
  ASSERT_TRUE(sync.page(v1, true));
  // Checked and answered, stored once the answer is out (the stub runs
  // `then` straight after sending it).
  EXPECT_FALSE(store->container("a")) << "stored before the reply";
  ASSERT_TRUE(sync.answer_out());
  // Stored as it came; nothing dropped before the last page.
  EXPECT_TRUE(store->container("a"));
  EXPECT_TRUE(store->container("gone"));
  ASSERT_TRUE(store->container("b")) << "stored as it came";
  EXPECT_EQ(store->container("b")->pod_uid, "") << "its pod has not arrived yet";
  ASSERT_TRUE(sync.page(v2, false));
  EXPECT_TRUE(store->container("gone")) << "dropped before the last page is stored";
  ASSERT_TRUE(sync.answer_out());
  EXPECT_FALSE(store->container("gone"));
  EXPECT_FALSE(store->pod(gone_pod.uid));
  EXPECT_TRUE(store->container("from-api")) << "not the runtime's to drop";
  EXPECT_FALSE(store->container("lost")) << "its pod is not in the sync";
  ASSERT_TRUE(store->container("a"));
  EXPECT_EQ(store->container("a")->pod_uid, p1.uid());
  ASSERT_TRUE(store->container("b"));
  EXPECT_EQ(store->container("b")->pod_uid, p2.uid());
  ASSERT_TRUE(store->container("c"));
  EXPECT_EQ(*store->container("c")->desired.memory_limit_bytes, 64 * kMi);
  EXPECT_EQ(store->pod_count(), 2u);
  EXPECT_EQ(store->container_count(), 4u);

  // A new sync (a reconnection) starts afresh: what only the first had is
  // dropped at its end.
  api::SynchronizeRequest again;
  *again.add_pods() = p1;
  *again.add_containers() = *page1.mutable_containers(0);
  const DecodedPage v3(again);
  ASSERT_TRUE(sync.page(v3, true));
  ASSERT_TRUE(sync.answer_out());
  EXPECT_FALSE(store->container("b"));
  EXPECT_FALSE(store->pod(p2.uid()));
  EXPECT_EQ(store->container_count(), 2u);
}

// podshimd splits a Synchronize page without checking its items
// (decode_synchronize with check_items off) and the adapter decodes each
// once: a bad item fails the page, naming it, and the daemon keeps going.
TEST(NriAdapterSync, ABadItemFailsThePageAndNamesIt) {
  auto store = core::Store::in_memory();
  NriAdapter adapter(*store, nullptr, nullptr, nullptr, AdapterOptions{});
  auto p1 = pod("0a1b2c3d-0000-4000-8000-000000000001");
  api::SynchronizeRequest page;
  *page.add_pods() = p1;
  *page.add_containers() = container(p1, "a", 64 * kMi, 256, 0);
  auto bad = container(p1, "b", 64 * kMi, 256, 0);
  bad.set_name(std::string("\xff\xfe", 2));  // not UTF-8
  *page.add_containers() = bad;
  const std::string b = page.SerializeAsString();
  pb::SynchronizeView checked, split;
  EXPECT_FALSE(pb::decode_synchronize(b, &checked)) << "the checking decoder refuses the page";
  ASSERT_TRUE(pb::decode_synchronize(b, &split, /*check_items=*/false));
  EXPECT_EQ(split.container_count, 2u);
  PageSync sync(adapter);
  auto r = sync.page(split, true);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("SynchronizeRequest.containers[1]"), std::string::npos) << r.error().message;
  EXPECT_FALSE(sync.then) << "a failed page leaves nothing to store";
  EXPECT_FALSE(store->container("a")) << "nothing of a failed page is stored";
  EXPECT_FALSE(store->container("b"));
}

// A page before the last is answered before it is checked (its answer is
// more=true whatever it holds): a bad item on it fails the sync at the last
// page's answer, named with its page, and nothing of its page or of a later
// one is stored. The next sync starts afresh.
TEST(NriAdapterSync, ABadItemOnAnEarlierPageFailsTheLastPageNamingIt) {
  auto store = core::Store::in_memory();
  NriAdapter adapter(*store, nullptr, nullptr, nullptr, AdapterOptions{});
  auto p1 = pod("0a1b2c3d-0000-4000-8000-000000000001");
  api::SynchronizeRequest page1, page2, page3;
  *page1.add_pods() = p1;
  *page1.add_containers() = container(p1, "a", 64 * kMi, 256, 0);
  page1.set_more(true);
  *page2.add_containers() = container(p1, "b", 64 * kMi, 256, 0);
  auto bad = container(p1, "c", 64 * kMi, 256, 0);
  bad.set_name(std::string("\xff\xfe", 2));  // not UTF-8
  *page2.add_containers() = bad;
  page2.set_more(true);
  *page3.add_containers() = container(p1, "d", 64 * kMi, 256, 0);
  page3.set_more(false);
  const DecodedPage v1(page1, /*check_items=*/false), v2(page2, /*check_items=*/false),
      v3(page3, /*check_items=*/false);
  PageSync sync(adapter);

  ASSERT_TRUE(sync.page(v1, true));
  EXPECT_FALSE(store->container("a")) << "neither checked nor stored before its answer";
  ASSERT_TRUE(sync.answer_out());
  EXPECT_TRUE(store->container("a")) << "a good page is stored after its answer";

  ASSERT_TRUE(sync.page(v2, false)) << "answered more=true at once";
  ASSERT_TRUE(sync.answer_out());
  EXPECT_FALSE(store->container("b")) << "nothing of the bad page is stored";
  EXPECT_FALSE(store->container("c"));

  auto r = sync.page(v3, false);
  ASSERT_FALSE(r) << "the sync fails at its last answer";
  EXPECT_NE(r.error().message.find("Synchronize page 2: SynchronizeRequest.containers[1]"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("UTF-8"), std::string::npos) << r.error().message;
  EXPECT_FALSE(sync.then) << "nothing of the last page is stored either";
  EXPECT_FALSE(store->container("d"));

  // The runtime closes the plugin on the failed sync; the reconnection's
  // sync starts afresh and is not failed by the old error.
  sync.then = nullptr;
  api::SynchronizeRequest again;
  *again.add_pods() = p1;
  *again.add_containers() = container(p1, "d", 64 * kMi, 256, 0);
  const DecodedPage v4(again, /*check_items=*/false);
  ASSERT_TRUE(sync.page(v4, true));
  ASSERT_TRUE(sync.answer_out());
  EXPECT_TRUE(store->container("d"));
  EXPECT_FALSE(store->container("a")) << "what only the failed sync had is dropped";
}

// ---------------------------------------------------------------------------

class AdapterE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sd_event_new(&loop_), 0);
    store_ = core::Store::in_memory();
    uid_ = "0a1b2c3d-0000-4000-8000-0000000000aa";
    p_ = pod(uid_);
    c1_ = container(p_, "c1", 256 * kMi, 512, 50000);
    tree_.add("kubepods/burstable/pod" + uid_, "max");
    tree_.add("kubepods/burstable/pod" + uid_ + "/c1", std::to_string(256 * kMi), "50000 100000",
              "20", /*current=*/100 * kMi, /*anon=*/100 * kMi, /*file=*/0);

    cgroup::EngineOptions eo;
    eo.cgroup_root = tree_.cg_root();
    eo.driver = cgroup::DriverKind::Cgroupfs;
    eo.state_dir = tree_.state();
    eo.shrink_timeout = std::chrono::milliseconds(50);
    auto eng = cgroup::Engine::create(eo);
    ASSERT_TRUE(eng) << eng.error().message;
    engine_ = std::move(*eng);

    char tmpl[] = "/tmp/podshim-cdi-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    cdi_dir_ = tmpl;
    std::ofstream(cdi_dir_ + "/k8s.gpu.example.com-gpu_claim1.yaml")
        << "cdiVersion: 0.6.0\nkind: k8s.gpu.example.com/gpu\ndevices:\n"
           "- name: claim1-gpu-0\n  containerEdits:\n    deviceNodes:\n    - path: /dev/null\n"
           "    env: [GPU_DEVICE=0]\n    mounts:\n    - hostPath: /tmp\n      containerPath: /opt/gpu\n"
           "      options: [ro, bind]\n    hooks:\n    - hookName: poststart\n"
           "      path: /usr/bin/gpu-hook\n      args: [gpu-hook, poststart]\n";
    cdi::RegistryOptions ro;
    ro.spec_dirs = {cdi_dir_};
    ro.required_owner = std::nullopt;
    registry_ = std::make_unique<cdi::Registry>(ro);
    registry_->refresh();

    adapter_ = std::make_unique<NriAdapter>(*store_, engine_.get(), registry_.get(), &metrics_,
                                            AdapterOptions{});
    actuator_ = std::make_unique<NriActuator>(*engine_, nullptr, schedule());
    resize_ = std::make_unique<core::ResizeManager>(*store_, *actuator_, core::NodeAllocatable{4000, 8192 * kMi},
                                                    &metrics_);
    adapter_->set_resize(resize_.get(), actuator_.get());
    sim_ = std::make_unique<nri::Simulator>(loop_, nri::SimOptions{});
    sim_->set_state({p_}, {c1_});
    auto fd = sim_->socketpair();
    ASSERT_TRUE(fd);
    nri::PluginOptions po;
    po.socket_fd = fd->release();
    po.index = "10";
    plugin_ = std::make_unique<nri::Plugin>(loop_, *adapter_, po);
    ASSERT_TRUE(plugin_->start());
    actuator_->set_plugin(plugin_.get());
    ASSERT_TRUE(nri::test::run_until(loop_, [&] {
      return sim_->synchronized() && plugin_->state() == nri::PluginState::Ready;
    }));
  }
  // Work on the test's loop after a delay (what podshimd gives the engine).
  core::Scheduler schedule() {
    return [this](std::chrono::milliseconds d, std::function<void()> fn) {
      auto* heap = new std::function<void()>(std::move(fn));
      sd_event_source* src = nullptr;
      ASSERT_GE(sd_event_add_time_relative(
                    loop_, &src, CLOCK_MONOTONIC, static_cast<uint64_t>(d.count()) * 1000, 0,
                    [](sd_event_source* s, uint64_t, void* ud) -> int {
                      std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(ud));
                      sd_event_source_unref(s);
                      (*f)();
                      return 0;
                    },
                    heap),
                0);
    };
  }
  void TearDown() override {
    plugin_.reset();
    resize_.reset();
    actuator_.reset();
    sim_.reset();
    sd_event_unref(loop_);
    std::filesystem::remove_all(cdi_dir_);
  }

  nri::Status update(const api::Container& c, int64_t mem) {
    api::LinuxResources r;
    r.mutable_cpu()->mutable_shares()->set_value(0);  // memory-only, as the kubelet sends it
    r.mutable_memory()->mutable_limit()->set_value(mem);
    std::optional<nri::Status> st;
    sim_->update_container(p_, c, r, [&](nri::Status s, api::UpdateContainerResponse) { st = s; });
    EXPECT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }));
    return st.value_or(nri::Status{-1, "no reply"});
  }

  sd_event* loop_ = nullptr;
  FakeTree tree_;
  std::string uid_, cdi_dir_;
  api::PodSandbox p_;
  api::Container c1_;
  std::unique_ptr<core::Store> store_;
  std::unique_ptr<cgroup::Engine> engine_;
  std::unique_ptr<cdi::Registry> registry_;
  core::Metrics metrics_;
  std::unique_ptr<NriAdapter> adapter_;
  std::unique_ptr<NriActuator> actuator_;
  std::unique_ptr<core::ResizeManager> resize_;
  std::unique_ptr<nri::Simulator> sim_;
  std::unique_ptr<nri::Plugin> plugin_;
};

TEST_F(AdapterE2E, SynchronizeBuildsTheModel) {
  auto c = store_->container("c1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pod_uid, uid_);
  EXPECT_EQ(*c->desired.memory_limit_bytes, 256 * kMi);
  ASSERT_TRUE(store_->pod(uid_));
  EXPECT_EQ(metrics_.nri_connected.value(), 1);
}

TEST_F(AdapterE2E, ShrinkBelowUsageIsRefusedWithTheKubeletMessage) {
  const std::string rel = "kubepods/burstable/pod" + uid_ + "/c1";
  auto st = update(c1_, 50 * kMi);  // usage is 100 MiB, all anon
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("below current usage"), std::string::npos) << st.message;
  EXPECT_EQ(tree_.get(rel, "memory.max"), std::to_string(256 * kMi));  // untouched
  auto c = store_->container("c1");
  ASSERT_TRUE(c && c->conditions.in_progress);
  EXPECT_EQ(c->conditions.in_progress->reason, "Error");
  EXPECT_EQ(metrics_.shrinks_refused.value(), 1);
  // The plugin stays connected: a refusal is not a protocol failure.
  EXPECT_EQ(plugin_->state(), nri::PluginState::Ready);

  // A shrink that stays above usage is admitted at once; the runtime writes
  // it (ReclaimOnly: one writer per value), and the memory.high clamp the
  // engine held for it goes at the runtime's PostUpdateContainer.
  st = update(c1_, 200 * kMi);
  EXPECT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(actuator_->held(), 1u);
  std::optional<nri::Status> post;
  sim_->observe(api::POST_UPDATE_CONTAINER, p_, &c1_, [&](nri::Status s) { post = s; });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return post.has_value(); }));
  EXPECT_EQ(actuator_->held(), 0u);
  EXPECT_EQ(c->last_outcome, "error");
  c = store_->container("c1");
  EXPECT_EQ(c->last_outcome, "applied");
  EXPECT_FALSE(c->conditions.in_progress);
  EXPECT_EQ(*c->allocated.memory_limit_bytes, 200 * kMi);
  EXPECT_EQ(*c->allocated.cpu_limit_milli, 500);  // cpu kept from before
}

TEST_F(AdapterE2E, AnUpdateOfAContainerPodshimDoesNotKnowReadsAndChecksItWhole) {
  // podshimd reads only ids and resources of an UpdateContainer; a container
  // it has not seen (created before a restart, missed) is decoded in full.
  auto c2 = container(p_, "c2", 128 * kMi, 256, 0);
  (*c2.mutable_annotations())["example.com/team"] = "infra";
  auto st = update(c2, 192 * kMi);
  EXPECT_TRUE(st.ok()) << st.message;
  auto known = store_->container("c2");
  ASSERT_TRUE(known);
  EXPECT_EQ(known->name, c2.name());
  EXPECT_EQ(known->annotations.get("example.com/team").value_or(""), "infra");
  EXPECT_EQ(*known->desired.memory_limit_bytes, 192 * kMi);

  // What a full decode refuses (an annotation that is not UTF-8) is refused
  // here too, and nothing of it is stored.
  auto c3 = container(p_, "c3", 128 * kMi, 256, 0);
  (*c3.mutable_annotations())["example.com/bad"] = std::string("\xff\xfe", 2);
  st = update(c3, 192 * kMi);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("annotations"), std::string::npos) << st.message;
  EXPECT_FALSE(store_->container("c3"));
  EXPECT_EQ(plugin_->state(), nri::PluginState::Ready);
}

TEST_F(AdapterE2E, AQuotaTheKernelRefusesIsRefusedBeforeAnythingIsRecorded) {
  // The runtime's write would fail with EINVAL (a quota past the kernel's
  // limit); refuse it first.
  const auto before = *store_->container("c1");
  api::LinuxResources r;
  r.mutable_cpu()->mutable_quota()->set_value(int64_t{1} << 44);  // > max_cfs_runtime
  r.mutable_cpu()->mutable_period()->set_value(100000);
  std::optional<nri::Status> st;
  sim_->update_container(p_, c1_, r, [&](nri::Status s, api::UpdateContainerResponse) { st = s; });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }));
  EXPECT_FALSE(st->ok());
  EXPECT_NE(st->message.find("exceeds the kernel's maximum 17592186044415 us (max_cfs_runtime"), std::string::npos)
      << st->message;
  EXPECT_EQ(*store_->container("c1"), before);
  EXPECT_EQ(tree_.get("kubepods/burstable/pod" + uid_ + "/c1", "cpu.max"), "50000 100000");
  EXPECT_EQ(plugin_->state(), nri::PluginState::Ready);
}

TEST_F(AdapterE2E, ApiResizeGoesToTheRuntimeAndIsAppliedOnlyWhenConfirmed) {
  const std::string rel = "kubepods/burstable/pod" + uid_ + "/c1";
  int asked = 0;
  bool runtime_fails = false;
  sim_->on_update_containers = [&](const api::UpdateContainersRequest& r) {
    api::UpdateContainersResponse resp;
    ++asked;
    for (const auto& u : r.update()) {
      if (runtime_fails) {
        *resp.add_failed() = u;
        continue;
      }
      // What runc does for the runtime: write the limit.
      tree_.set(rel, "memory.max", std::to_string(u.linux().resources().memory().limit().value()));
    }
    return resp;
  };
  core::ContainerResize req;
  req.container_id = "c1";
  req.resources.memory_limit_bytes = 300 * kMi;
  auto r = resize_->resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  // Not applied before the runtime has answered.
  EXPECT_EQ(r->outcome, core::ResizeOutcome::InProgress);
  EXPECT_EQ(store_->container("c1")->last_outcome, "in_progress");
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return store_->container("c1")->last_outcome != "in_progress"; }));
  EXPECT_EQ(asked, 1);
  auto c = store_->container("c1");
  EXPECT_EQ(c->last_outcome, "applied") << c->last_error;
  EXPECT_EQ(tree_.get(rel, "memory.max"), std::to_string(300 * kMi));
  EXPECT_EQ(metrics_.resize_requests.value({{"result", "applied"}}), 1);

  // The runtime says it failed: an error naming the container, never applied.
  runtime_fails = true;
  req.resources.memory_limit_bytes = 320 * kMi;
  r = resize_->resize_container(req);
  ASSERT_TRUE(r);
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return store_->container("c1")->last_outcome != "in_progress"; }));
  c = store_->container("c1");
  EXPECT_EQ(c->last_outcome, "error");
  EXPECT_NE(c->last_error.find("c1"), std::string::npos) << c->last_error;
  ASSERT_TRUE(c->conditions.in_progress);
  EXPECT_EQ(c->conditions.in_progress->reason, "Error");
}

TEST_F(AdapterE2E, AReplyStillPendingNearTheRuntimeDeadlineIsAnsweredInTime) {
  // An actuation that never completes in time: the stub answers with an
  // error before the runtime's 2 s request timeout, so the runtime keeps the
  // plugin (a timeout is fatal: pkg/adaptation plugin.go isFatalError).
  struct Never : core::Actuator {
    std::vector<Done> held;
    void apply(const core::Actuation&, Done done) override { held.push_back(std::move(done)); }
  } never;
  resize_ = std::make_unique<core::ResizeManager>(*store_, never, core::NodeAllocatable{4000, 8192 * kMi}, &metrics_);
  adapter_->set_resize(resize_.get(), nullptr);
  api::LinuxResources r;
  r.mutable_memory()->mutable_limit()->set_value(150 * kMi);
  std::optional<nri::Status> st;
  const auto t0 = std::chrono::steady_clock::now();
  sim_->update_container(p_, c1_, r, [&](nri::Status s, api::UpdateContainerResponse) { st = s; });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }, 10));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(st->ok());
  EXPECT_NE(st->code, nri::code::kDeadlineExceeded) << st->message;
  EXPECT_LT(secs, 2.0);
  EXPECT_EQ(plugin_->state(), nri::PluginState::Ready);
  // The late completion is recorded but its reply dropped.
  ASSERT_EQ(never.held.size(), 1u);
  never.held[0](cgroup::ResizeReport{});
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return true; }, 1));
  EXPECT_EQ(plugin_->state(), nri::PluginState::Ready);
}

// An actuation that takes 1.5 s, completing from the loop (what the engine's
// timer-driven shrink does): a blocking design would stall everything below.
class SlowActuator : public core::Actuator {
 public:
  SlowActuator(sd_event* loop) : loop_(loop) {}
  void apply(const core::Actuation&, Done done) override {
    auto* heap = new Done(std::move(done));
    sd_event_source* src = nullptr;
    sd_event_add_time_relative(
        loop_, &src, CLOCK_MONOTONIC, 1'500'000, 0,
        [](sd_event_source* s, uint64_t, void* ud) -> int {
          std::unique_ptr<Done> d(static_cast<Done*>(ud));
          sd_event_source_unref(s);
          cgroup::ResizeReport r;
          r.bytes_reclaimed = 50 << 20;
          (*d)(r);
          return 0;
        },
        heap);
  }
  sd_event* loop_;
};

TEST_F(AdapterE2E, ASlowShrinkNeverBlocksTheLoop) {
  // Watchdog pings go to our own notify socket (sd_event_set_watchdog reads
  // WATCHDOG_USEC/NOTIFY_SOCKET as under systemd).
  const std::string notify = tree_.state() + "/notify.sock";
  int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(nfd, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", notify.c_str());
  ASSERT_EQ(bind(nfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  setenv("NOTIFY_SOCKET", notify.c_str(), 1);
  setenv("WATCHDOG_USEC", "200000", 1);  // a ping every 100 ms
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  ASSERT_GT(sd_event_set_watchdog(loop_, 1), 0);
  // Read the pings as they come (a unix datagram queue holds only ~10).
  std::atomic<int> pings{0};
  std::atomic<bool> stop{false};
  std::thread notify_reader([&] {
    char buf[256];
    while (!stop) {
      ssize_t n = recv(nfd, buf, sizeof buf, 0);
      if (n > 0 && std::string_view(buf, static_cast<size_t>(n)).find("WATCHDOG=1") != std::string_view::npos) ++pings;
      if (n <= 0) usleep(5'000);
    }
  });

  // The status socket, for /healthz.
  core::Config cfg;  // the default access rules: root may read
  auto opts = status::server_options(cfg);
  ASSERT_TRUE(opts) << opts.error().message;
  status::ServerOptions so = std::move(*opts);
  so.socket_path = tree_.state() + "/status.sock";
  status::ServerDeps deps;
  deps.store = store_.get();
  auto server = status::Server::start(loop_, so, deps);
  ASSERT_TRUE(server) << server.error().message;

  SlowActuator slow(loop_);
  resize_ = std::make_unique<core::ResizeManager>(*store_, slow, core::NodeAllocatable{4000, 8192 * kMi}, &metrics_);
  adapter_->set_resize(resize_.get(), nullptr);

  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  api::LinuxResources r;
  r.mutable_memory()->mutable_limit()->set_value(150 * kMi);
  std::optional<nri::Status> upd;
  double upd_at = 0;
  sim_->update_container(p_, c1_, r, [&](nri::Status s, api::UpdateContainerResponse) {
    upd = s;
    upd_at = since();
  });
  std::optional<nri::Status> created;
  double created_at = 0;
  api::Container c2 = container(p_, "c2", 64 * kMi, 2, 0);
  sim_->create_container(p_, c2, [&](nri::Status s, api::CreateContainerResponse) {
    created = s;
    created_at = since();
  });
  // /healthz from another thread, as a client would ask it.
  std::atomic<double> health_at{-1};
  std::string health;
  std::thread client([&] {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un ca{};
    ca.sun_family = AF_UNIX;
    std::snprintf(ca.sun_path, sizeof ca.sun_path, "%s", so.socket_path.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&ca), sizeof ca) == 0) {
      const std::string q = "GET /healthz HTTP/1.1\r\nHost: podshim\r\nConnection: close\r\n\r\n";
      (void)!write(fd, q.data(), q.size());
      timeval tv{5, 0};  // a hang guard, never a timing assertion
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[512];
      ssize_t n;
      while (health.find("\r\n\r\n") == std::string::npos && (n = read(fd, buf, sizeof buf)) > 0)
        health.append(buf, static_cast<size_t>(n));
    }
    health_at = since();
    close(fd);
  });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return upd.has_value() && health_at >= 0; }, 30));
  client.join();
  // Pings sent while the shrink ran.
  (void)sd_event_set_watchdog(loop_, 0);
  stop = true;
  notify_reader.join();
  close(nfd);
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");

  EXPECT_TRUE(upd->ok()) << upd->message;
  EXPECT_GE(upd_at, 1.4);  // the shrink really took its 1.5 s
  ASSERT_TRUE(created);
  EXPECT_TRUE(created->ok()) << created->message;
  // Generous bounds: answered while the shrink was still running.
  EXPECT_LT(created_at, 1.0) << "CreateContainer waited for the shrink";
  EXPECT_LT(health_at.load(), 1.0) << "/healthz waited for the shrink";
  EXPECT_NE(health.find("200"), std::string::npos) << health;
  EXPECT_GE(pings.load(), 5) << "watchdog pings stalled during the shrink";
  EXPECT_EQ(store_->container("c1")->last_outcome, "applied");
}

TEST_F(AdapterE2E, CreateContainerInjectsRequestedCdiDevice) {
  api::Container c2 = container(p_, "c2", 64 * kMi, 2, 0);
  (*c2.mutable_annotations())["podshim.io/cdi-devices"] = "k8s.gpu.example.com/gpu=claim1-gpu-0";
  std::optional<api::CreateContainerResponse> reply;
  sim_->create_container(p_, c2, [&](nri::Status s, api::CreateContainerResponse r) {
    EXPECT_TRUE(s.ok()) << s.message;
    reply = r;
  });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return reply.has_value(); }));
  const auto& adj = reply->adjust();
  ASSERT_EQ(adj.linux().devices_size(), 1);
  EXPECT_EQ(adj.linux().devices(0).path(), "/dev/null");
  EXPECT_EQ(adj.linux().devices(0).type(), "c");
  EXPECT_EQ(adj.linux().devices(0).major(), 1);
  EXPECT_EQ(adj.linux().devices(0).minor(), 3);
  ASSERT_EQ(adj.env_size(), 1);
  EXPECT_EQ(adj.env(0).key(), "GPU_DEVICE");
  ASSERT_EQ(adj.mounts_size(), 1);
  EXPECT_EQ(adj.mounts(0).destination(), "/opt/gpu");
  auto stored = store_->container("c2");
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->devices.size(), 1u);
  EXPECT_EQ(stored->devices[0].cdi_name, "k8s.gpu.example.com/gpu=claim1-gpu-0");

  // An unresolvable device fails CreateContainer with the device's name.
  api::Container c3 = container(p_, "c3", 64 * kMi, 2, 0);
  (*c3.mutable_annotations())["podshim.io/cdi-devices"] = "k8s.gpu.example.com/gpu=nope";
  std::optional<nri::Status> st;
  sim_->create_container(p_, c3, [&](nri::Status s, api::CreateContainerResponse) { st = s; });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }));
  EXPECT_FALSE(st->ok());
  EXPECT_NE(st->message.find("k8s.gpu.example.com/gpu=nope"), std::string::npos) << st->message;
}

// Each CDI item once in the final spec whoever applied it: requested by the
// CRI field (NRI v0.12's Container.CDI_devices) or by a cdi.k8s.io/
// annotation, with the runtime's own CDI on (the container NRI shows already
// has the edits) or off.
TEST_F(AdapterE2E, CdiItemsExactlyOnceByFieldOrAnnotationRuntimeCdiOnOrOff) {
  int n = 0;
  for (bool by_field : {false, true}) {
    for (bool runtime_cdi : {false, true}) {
      SCOPED_TRACE(fmt::format("by {}, runtime CDI {}", by_field ? "field" : "annotation", runtime_cdi ? "on" : "off"));
      api::Container c = container(p_, fmt::format("cdi{}", n++), 64 * kMi, 2, 0);
      if (by_field)
        c.add_cdi_devices()->set_name("k8s.gpu.example.com/gpu=claim1-gpu-0");
      else
        (*c.mutable_annotations())["cdi.k8s.io/gpu"] = "k8s.gpu.example.com/gpu=claim1-gpu-0";
      std::vector<std::string> runtime_rules;
      if (runtime_cdi) {
        c.add_env("GPU_DEVICE=0");
        auto* d = c.mutable_linux()->add_devices();
        d->set_path("/dev/null");
        d->set_type("c");
        d->set_major(1);
        d->set_minor(3);
        runtime_rules.push_back("allow c 1:3 rwm");
        c.add_mounts()->set_destination("/opt/gpu");
        auto* h = c.mutable_hooks()->add_poststart();
        h->set_path("/usr/bin/gpu-hook");
        h->add_args("gpu-hook");
        h->add_args("poststart");
      }
      std::optional<api::CreateContainerResponse> reply;
      sim_->create_container(p_, c, [&](nri::Status s, api::CreateContainerResponse r) {
        EXPECT_TRUE(s.ok()) << s.message;
        reply = r;
      });
      ASSERT_TRUE(nri::test::run_until(loop_, [&] { return reply.has_value(); }));
      const FinalSpec f = apply(c, runtime_rules, reply->adjust());
      EXPECT_EQ(f.count(f.env, "GPU_DEVICE=0"), 1u);
      EXPECT_EQ(f.count(f.devices, "/dev/null"), 1u);
      ASSERT_EQ(f.rules.size(), 1u);
      EXPECT_EQ(f.rules[0].rfind("allow c 1:3 ", 0), 0u) << f.rules[0];
      EXPECT_EQ(f.count(f.mounts, "/opt/gpu"), 1u);
      ASSERT_TRUE(f.hooks.count("poststart"));
      EXPECT_EQ(f.count(f.hooks.at("poststart"), "/usr/bin/gpu-hook gpu-hook poststart"), 1u);
      EXPECT_EQ(f.hooks.at("poststart").size(), 1u);
      ASSERT_TRUE(f.hooks.count("createRuntime"));
      EXPECT_EQ(f.hooks.at("createRuntime").size(), 1u);  // podshim-hook, once
    }
  }
}

// podshimd subscribes to exactly the events it handles: each one it
// subscribed to reaches its handler (and is counted), each other one,
// even sent regardless, reaches none. StopPodSandbox and
// ValidateContainerAdjustment are the two it leaves out (set_handlers).
TEST_F(AdapterE2E, WhatPodshimdSubscribesToIsWhatItHandles) {
  const uint32_t left_out = nri::event_bit(api::STOP_POD_SANDBOX) |
                            nri::event_bit(api::VALIDATE_CONTAINER_ADJUSTMENT);
  EXPECT_EQ(adapter_->events.mask(), nri::kValidEventsV10 & ~left_out);
  EXPECT_EQ(sim_->plugin().events, adapter_->events.mask()) << "the runtime here accepts every event";
  for (int i = api::RUN_POD_SANDBOX; i <= api::VALIDATE_CONTAINER_ADJUSTMENT; ++i) {
    const auto e = static_cast<api::Event>(i);
    SCOPED_TRACE(nri::event_name(e));
    for (const auto& st : nri::test::send_regardless(loop_, *sim_, e, p_, c1_)) EXPECT_TRUE(st.ok()) << st.message;
    const bool counted = metrics_.nri_events.value({{"event", std::string(nri::event_name(e))}}) > 0;
    EXPECT_EQ(counted, (sim_->plugin().events & nri::event_bit(e)) != 0);
  }
}

TEST_F(AdapterE2E, RemoveEventsClearTheModel) {
  std::optional<nri::Status> st;
  sim_->observe(api::REMOVE_CONTAINER, p_, &c1_, [&](nri::Status s) { st = s; });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }));
  EXPECT_FALSE(store_->container("c1"));
  st.reset();
  sim_->observe(api::REMOVE_POD_SANDBOX, p_, nullptr, [&](nri::Status s) { st = s; });
  ASSERT_TRUE(nri::test::run_until(loop_, [&] { return st.has_value(); }));
  EXPECT_FALSE(store_->pod(uid_));
}

}  // namespace
}  // namespace podshim::adapter
