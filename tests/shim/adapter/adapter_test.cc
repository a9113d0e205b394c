// The NRI adapter: mappings on their own, then the whole path — our runtime
// simulator ↔ NRI plugin stub ↔ adapter ↔ store, cgroup engine (fake tree)
// and CDI registry — over a socketpair, as containerd would drive podshimd.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "shim/adapter/nri_adapter.h"
#include "shim/nri/simulator.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/shim/nri/test_support.h"

namespace podshim::adapter {
namespace {

using cgroup::testing::FakeTree;

constexpr int64_t kMi = 1 << 20;

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
  auto mp = pod_from_nri(p);
  ASSERT_TRUE(mp) << mp.error().message;
  EXPECT_EQ(mp->qos, core::QosClass::Burstable);
  EXPECT_EQ(mp->cgroup_path, p.linux().cgroup_parent());
  auto c = container(p, "c1", 256 * kMi, 512, 50000);
  auto mc = container_from_nri(p, c);
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
  EXPECT_FALSE(pod_from_nri(bad));
}

TEST(NriMap, MemoryOnlyUpdateKeepsCpu) {
  // facts §9: a memory-only CRI update arrives with cpu fields present but 0.
  cgroup::K8sResources cur;
  cur.cpu_request_milli = 250;
  cur.cpu_limit_milli = 500;
  cur.memory_limit_bytes = 128 * kMi;
  api::LinuxResources r;
  r.mutable_cpu()->mutable_shares()->set_value(0);
  r.mutable_cpu()->mutable_quota()->set_value(0);
  r.mutable_memory()->mutable_limit()->set_value(64 * kMi);
  auto next = resources_from_nri(r, cur);
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
  auto back = resources_from_nri(n);
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
  auto added = edits_to_adjustment(e, c, opts, &adj);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0], "/dev/gpu0");
  ASSERT_EQ(adj.env_size(), 1);
  EXPECT_EQ(adj.env(0).key(), "GPU");
  ASSERT_EQ(adj.linux().devices_size(), 2);
  EXPECT_EQ(adj.linux().devices(0).major(), 195);
  // Rules only for the added nodes (the cap node has no rule in this input).
  ASSERT_EQ(adj.linux().resources().devices_size(), 1);
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
  edits_to_adjustment(e, c, opts, &adj2);
  EXPECT_FALSE(adj2.has_hooks());
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
           "      options: [ro, bind]\n";
    cdi::RegistryOptions ro;
    ro.spec_dirs = {cdi_dir_};
    ro.required_owner = std::nullopt;
    registry_ = std::make_unique<cdi::Registry>(ro);
    registry_->refresh();

    adapter_ = std::make_unique<NriAdapter>(*store_, engine_.get(), registry_.get(), &metrics_,
                                            AdapterOptions{});
    sim_ = std::make_unique<nri::Simulator>(loop_, nri::SimOptions{});
    sim_->set_state({p_}, {c1_});
    auto fd = sim_->socketpair();
    ASSERT_TRUE(fd);
    nri::PluginOptions po;
    po.socket_fd = fd->release();
    po.index = "10";
    plugin_ = std::make_unique<nri::Plugin>(loop_, *adapter_, po);
    ASSERT_TRUE(plugin_->start());
    ASSERT_TRUE(nri::test::run_until(loop_, [&] {
      return sim_->synchronized() && plugin_->state() == nri::PluginState::Ready;
    }));
  }
  void TearDown() override {
    plugin_.reset();
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

  // A shrink that stays above usage is applied by podshim itself, at once.
  st = update(c1_, 200 * kMi);
  EXPECT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(tree_.get(rel, "memory.max"), std::to_string(200 * kMi));
  c = store_->container("c1");
  EXPECT_FALSE(c->conditions.in_progress);
  EXPECT_EQ(*c->allocated.memory_limit_bytes, 200 * kMi);
  EXPECT_EQ(*c->allocated.cpu_limit_milli, 500);  // cpu kept from before
}

TEST_F(AdapterE2E, AQuotaTheKernelRefusesIsRefusedBeforeAnythingIsRecorded) {
  // Issue 17.5: the runtime's write would fail with EINVAL; refuse it first.
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
