// Pod-level resources (KEP-2837): the pod cgroup target, the apiserver's
// validation, and the issue-17 sequence through the ResizeManager.
#include "shim/core/admission.h"

#include <gtest/gtest.h>

#include "cgroup/engine.h"
#include "shim/core/resize.h"

namespace podshim::core {
namespace {

constexpr int64_t Mi = 1 << 20;
using std::nullopt;

Pod pod_with(K8sResources r) {
  Pod p;
  p.uid = "p1";
  p.resources = r;
  return p;
}

// The strings written to the pod cgroup (the kubelet converts pod weights
// with the linear formula, cgroup_manager_linux.go getCPUWeight).
cgroup::AttrValues pod_values(const K8sResources& r) { return cgroup::attr_values(r, cgroup::WeightFormula::Linear); }

// c1 and c2 of the pod: limits 500m+200m cpu, 128Mi+224Mi = 352Mi memory.
const K8sResources kC1{250, 500, 64 * Mi, 128 * Mi};
const K8sResources kC2{100, 200, 32 * Mi, 224 * Mi};

TEST(PodCgroupTarget, WithoutPodLevelItIsTheContainersAggregate) {
  auto t = pod_cgroup_target(pod_with({}).resources, {kC1, kC2});
  EXPECT_EQ(t, (K8sResources{350, 700, 96 * Mi, 352 * Mi}));
  EXPECT_EQ(pod_values(t).cpu_max, "70000 100000");
  EXPECT_EQ(pod_values(t).memory_max, "369098752");
}

TEST(PodCgroupTarget, ALimitOnlyWhenEveryContainerDeclaresOne) {
  // ResourceConfigForPod: cpuLimitsDeclared / memoryLimitsDeclared per resource.
  auto t = pod_cgroup_target(pod_with({}).resources, {kC1, K8sResources{100, nullopt, 32 * Mi, 224 * Mi}});
  EXPECT_EQ(t.cpu_limit_milli, nullopt);
  EXPECT_EQ(t.memory_limit_bytes, 352 * Mi);
  EXPECT_EQ(pod_values(t).cpu_max, "max 100000");
  // A container request defaults to its limit (apiserver defaulting).
  t = pod_cgroup_target(pod_with({}).resources, {K8sResources{nullopt, 300, nullopt, 64 * Mi}, kC2});
  EXPECT_EQ(t.cpu_request_milli, 400);
  EXPECT_EQ(t.memory_request_bytes, 96 * Mi);
}

TEST(PodCgroupTarget, BestEffortGetsMinShares) {
  auto t = pod_cgroup_target(pod_with({}).resources, {K8sResources{}, K8sResources{}});
  EXPECT_EQ(t, (K8sResources{0, nullopt, nullopt, nullopt}));
  EXPECT_EQ(pod_values(t).cpu_weight, "1");  // MilliCPUToShares(0) = 2 → weight 1
  EXPECT_EQ(pod_values(t).cpu_max, "max 100000");
  EXPECT_EQ(pod_values(t).memory_max, "max");
}

TEST(PodCgroupTarget, PodLevelLimitsAreExactlyWhatThePodCgroupHolds) {
  // Pod-level limits; requests default to the containers' aggregate because
  // the containers request both (defaultPodRequests, KEP-2837 row 7).
  auto t = pod_cgroup_target(pod_with({nullopt, 1000, nullopt, 300 * Mi}).resources, {kC1, kC2});
  EXPECT_EQ(t, (K8sResources{350, 1000, 96 * Mi, 300 * Mi}));
  EXPECT_EQ(pod_values(t).cpu_max, "100000 100000");
  EXPECT_EQ(pod_values(t).memory_max, "314572800");
}

TEST(PodCgroupTarget, PodLevelRequestDefaultsToTheLimitWhenNoContainerRequests) {
  // KEP-2837 row 5: containers declare nothing, the pod request is its limit.
  auto t = pod_cgroup_target(pod_with({nullopt, 1000, nullopt, 300 * Mi}).resources, {K8sResources{}, K8sResources{}});
  EXPECT_EQ(t, (K8sResources{1000, 1000, 300 * Mi, 300 * Mi}));
  EXPECT_EQ(pod_values(t).cpu_weight, "39");  // 1 CPU, linear
}

TEST(PodCgroupTarget, EachResourceIsDecidedOnItsOwn) {
  // Pod-level cpu limit only: memory still comes from the containers.
  auto t = pod_cgroup_target(pod_with({nullopt, 1000, nullopt, nullopt}).resources, {kC1, kC2});
  EXPECT_EQ(t, (K8sResources{350, 1000, 96 * Mi, 352 * Mi}));
  // A pod-level limit counts even when a container has none of its own.
  t = pod_cgroup_target(pod_with({nullopt, 1000, nullopt, nullopt}).resources, {kC1, K8sResources{100, nullopt, nullopt, nullopt}});
  EXPECT_EQ(t.cpu_limit_milli, 1000);
  EXPECT_EQ(t.memory_limit_bytes, nullopt);
  // Pod-level requests only: explicit requests, limits from the containers.
  t = pod_cgroup_target(pod_with({2000, nullopt, 512 * Mi, nullopt}).resources, {kC1, kC2});
  EXPECT_EQ(t, (K8sResources{2000, 700, 512 * Mi, 352 * Mi}));
}

TEST(PodCgroupTarget, AContainerResizeKeepsThePodLevelValues) {
  // The sequence as pure values: pod-level cpu 1 / 300Mi, then c1's
  // cpu limit 500m → 700m. The pod cgroup keeps cpu.max 100000,
  // memory.max 314572800 and its cpu.weight.
  const Pod p = pod_with({nullopt, 1000, nullopt, 300 * Mi});
  auto before = pod_values(pod_cgroup_target(p.resources, {kC1, kC2}));
  K8sResources c1 = kC1;
  c1.cpu_limit_milli = 700;
  auto after = pod_values(pod_cgroup_target(p.resources, {c1, kC2}));
  EXPECT_EQ(after.cpu_max, "100000 100000");
  EXPECT_EQ(after.memory_max, "314572800");
  EXPECT_EQ(after.cpu_weight, before.cpu_weight);
  EXPECT_EQ(after.cpu_max, before.cpu_max);
  EXPECT_EQ(after.memory_max, before.memory_max);
}

TEST(ValidatePodLevel, NothingToCheckWithoutPodLevel) {
  EXPECT_TRUE(validate_pod_level({}, {{"c1", K8sResources{9000, 9000, Mi, Mi}}}));
}

TEST(ValidatePodLevel, AContainerLimitAboveThePodLimitNamesBoth) {
  K8sResources c1 = kC1;
  c1.cpu_limit_milli = 3000;
  auto r = validate_pod_level({nullopt, 1000, nullopt, 300 * Mi}, {{"c1", c1}, {"c2", kC2}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message,
            "container 'c1': resources.limits[cpu]: Invalid value: \"3\": must be less than or equal to pod limits of 1");
}

TEST(ValidatePodLevel, APodLimitBelowAContainersLimit) {
  auto r = validate_pod_level({nullopt, 400, nullopt, 200 * Mi}, {{"c1", kC1}, {"c2", kC2}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("container 'c1': resources.limits[cpu]: Invalid value: \"500m\": must be less "
                                   "than or equal to pod limits of 400m"),
            std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("container 'c2': resources.limits[memory]: Invalid value: \"224Mi\": must be "
                                   "less than or equal to pod limits of 200Mi"),
            std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("container 'c1': resources.limits[memory]"), std::string::npos);
}

TEST(ValidatePodLevel, ContainerRequestsAddingUpToMoreThanThePodRequest) {
  auto r = validate_pod_level({300, nullopt, 90 * Mi, nullopt}, {{"c1", kC1}, {"c2", kC2}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "spec.resources.requests[cpu]: Invalid value: \"300m\": must be greater than or equal to aggregate "
            "container requests of 350m; spec.resources.requests[memory]: Invalid value: \"90Mi\": must be greater "
            "than or equal to aggregate container requests of 96Mi");
  EXPECT_TRUE(validate_pod_level({350, nullopt, 96 * Mi, nullopt}, {{"c1", kC1}, {"c2", kC2}}));
}

TEST(ValidatePodLevel, DefaultedRequestAboveThePodLimit) {
  // KEP-2837 tricky case 2: the pod request defaults to the containers'
  // aggregate (1200m), which exceeds the pod limit.
  auto r = validate_pod_level({nullopt, 1000, nullopt, nullopt},
                              {{"a", K8sResources{600, 800, nullopt, nullopt}}, {"b", K8sResources{600, 800, nullopt, nullopt}}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "spec.resources.requests[cpu]: Invalid value: \"1200m\": must be less than or equal to cpu limit of 1");
}

TEST(ValidatePodLevel, ContainerLimitsMayAddUpToMoreThanThePodLimit) {
  // "The aggregate container-level limits can exceed pod-level limits" (KEP-2837).
  EXPECT_TRUE(validate_pod_level({nullopt, 1000, nullopt, 300 * Mi},
                                 {{"a", K8sResources{100, 800, 32 * Mi, 200 * Mi}},
                                  {"b", K8sResources{100, 800, 32 * Mi, 200 * Mi}}}));
}

// ---- The issue-17 sequence through the ResizeManager.

class RecordingActuator : public Actuator {
 public:
  void apply(const Actuation& a, Done done) override {
    const auto& req = a.plan;
    calls.push_back(req);
    for (const auto& c : req.containers) last[c.cgroup_path] = c.desired;
    if (req.pod) last[req.pod->cgroup_path] = req.pod->desired;
    done(cgroup::ResizeReport{});
  }
  std::vector<cgroup::PodResizeRequest> calls;
  std::map<std::string, K8sResources> last;
};

class PodLevelResize : public ::testing::Test {
 protected:
  static constexpr const char* kPodPath = "/kubepods/burstable/podp1";
  void SetUp() override {
    store = Store::in_memory();
    Pod p;
    p.uid = "p1";
    p.cgroup_path = kPodPath;
    p.qos = QosClass::Burstable;
    ASSERT_TRUE(store->upsert_pod(p));
    add("c1", kC1);
    add("c2", kC2);
    mgr = std::make_unique<ResizeManager>(*store, act, NodeAllocatable{4000, 1024 * Mi});
  }
  void add(const std::string& id, K8sResources r) {
    Container c;
    c.id = id;
    c.name = id;
    c.pod_uid = "p1";
    c.cgroup_path = std::string(kPodPath) + "/" + id;
    c.desired = c.allocated = r;
    ASSERT_TRUE(store->upsert_container(c));
  }
  Result<ResizeResult> resize_pod(K8sResources r) {
    PodResize pr;
    pr.pod_uid = "p1";
    pr.pod_resources = r;
    return mgr->resize_pod(pr);
  }
  Result<ResizeResult> resize_c1(K8sResources r) {
    ContainerResize cr;
    cr.container_id = "c1";
    cr.resources = r;
    return mgr->resize_container(cr);
  }
  cgroup::AttrValues pod_cgroup() { return pod_values(act.last.at(kPodPath)); }

  std::unique_ptr<Store> store;
  RecordingActuator act;
  std::unique_ptr<ResizeManager> mgr;
};

TEST_F(PodLevelResize, AContainerResizeKeepsThePodLevelLimits) {
  // resize p1 --pod --cpu-limit 1 --memory 300Mi
  auto r = resize_pod({nullopt, 1000, nullopt, 300 * Mi});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcome, ResizeOutcome::Applied) << r->message;
  EXPECT_EQ(pod_cgroup().cpu_max, "100000 100000");
  EXPECT_EQ(pod_cgroup().memory_max, "314572800");
  const auto weight = pod_cgroup().cpu_weight;

  // resize c1 --cpu-limit 700m: applied, and the pod cgroup keeps exactly the
  // pod-level values (before the fix: the container sum, cpu.max 90000 and
  // memory.max 369098752).
  r = resize_c1({nullopt, 700, nullopt, nullopt});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->outcome, ResizeOutcome::Applied) << r->message;
  ASSERT_EQ(act.calls.size(), 2u);
  ASSERT_TRUE(act.calls[1].pod);
  EXPECT_EQ(act.last.at(std::string(kPodPath) + "/c1").cpu_limit_milli, 700);
  EXPECT_EQ(pod_cgroup().cpu_max, "100000 100000");
  EXPECT_EQ(pod_cgroup().memory_max, "314572800");
  EXPECT_EQ(pod_cgroup().cpu_weight, weight);
  EXPECT_EQ(store->pod("p1")->resources, (K8sResources{nullopt, 1000, nullopt, 300 * Mi}));

  // A second pod-level resize that names only memory keeps the cpu limit.
  r = resize_pod({nullopt, nullopt, nullopt, 400 * Mi});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(pod_cgroup().cpu_max, "100000 100000");
  EXPECT_EQ(pod_cgroup().memory_max, std::to_string(400 * Mi));
}

TEST_F(PodLevelResize, AContainerLimitAboveThePodsIsRefusedAndNothingRecorded) {
  ASSERT_TRUE(resize_pod({nullopt, 1000, nullopt, 300 * Mi}));
  const Container before = *store->container("c1");
  // resize c1 --cpu-limit 3 (the step, above the pod's 1 CPU)
  auto r = resize_c1({nullopt, 3000, nullopt, nullopt});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message,
            "container 'c1': resources.limits[cpu]: Invalid value: \"3\": must be less than or equal to pod limits of 1");
  EXPECT_EQ(*store->container("c1"), before);  // no generation, no desired, no condition
  EXPECT_EQ(act.calls.size(), 1u);
  EXPECT_EQ(pod_cgroup().cpu_max, "100000 100000");
}

TEST_F(PodLevelResize, APodLimitBelowAContainersIsRefused) {
  auto r = resize_pod({nullopt, 400, nullopt, nullopt});  // c1's limit is 500m
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message,
            "container 'c1': resources.limits[cpu]: Invalid value: \"500m\": must be less than or equal to pod "
            "limits of 400m");
  EXPECT_EQ(store->pod("p1")->resources, K8sResources{});
  EXPECT_TRUE(act.calls.empty());
}

TEST_F(PodLevelResize, ContainerRequestsAboveThePodRequestAreRefused) {
  ASSERT_TRUE(resize_pod({400, 1000, nullopt, nullopt}));
  auto r = resize_c1({300, nullopt, nullopt, nullopt});  // 300m + 100m = 400m: fits
  ASSERT_TRUE(r) << r.error().message;
  r = resize_c1({350, nullopt, nullopt, nullopt});  // 450m > 400m
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "spec.resources.requests[cpu]: Invalid value: \"400m\": must be greater than or equal to aggregate "
            "container requests of 450m");
  EXPECT_EQ(store->container("c1")->desired.cpu_request_milli, 300);
}

TEST_F(PodLevelResize, WithoutPodLevelThePodCgroupFollowsTheContainers) {
  auto r = resize_c1({nullopt, 700, nullopt, nullopt});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(pod_cgroup().cpu_max, "90000 100000");  // 700m + 200m
  EXPECT_EQ(pod_cgroup().memory_max, "369098752");  // 128Mi + 224Mi
}

TEST_F(PodLevelResize, KernelLimitsAreRefusedBeforeAnythingIsRecorded) {
  // A cpu limit of 10^13 cores was once recorded as allocated.
  const Container before = *store->container("c1");
  auto r = resize_c1({nullopt, 10'000'000'000'000'000, nullopt, nullopt});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_NE(r.error().message.find("container 'c1': cpu limit 10000000000000: cpu.max quota"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("max_cfs_runtime"), std::string::npos);
  EXPECT_EQ(*store->container("c1"), before);
  EXPECT_TRUE(act.calls.empty());
  // The same for pod-level values, and for a container sum the kernel cannot
  // take though each container alone fits.
  EXPECT_FALSE(resize_pod({nullopt, 10'000'000'000'000'000, nullopt, nullopt}));
  const int64_t max = cgroup::kernel_max_cpu_limit_milli();
  ASSERT_TRUE(store->update_container("c2", [&](Container& c) { c.desired.cpu_limit_milli = c.allocated.cpu_limit_milli = max; }));
  r = resize_c1({nullopt, max, nullopt, nullopt});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("pod 'p1' cgroup: cpu limit"), std::string::npos) << r.error().message;
  EXPECT_TRUE(act.calls.empty());
}

TEST_F(PodLevelResize, NriSandboxTotalsAreNotValidatedAsAPodLevelSpec) {
  // Over NRI the pod's resources are the runtime's sandbox totals (CRI
  // LinuxPodSandboxConfig.resources): raising one container above that old
  // total is no pod-level violation.
  ASSERT_TRUE(store->update_pod("p1", [](Pod& p) {
    p.source = Source::Nri;
    p.resources = K8sResources{350, 700, 96 * Mi, 352 * Mi};
  }));
  auto r = resize_c1({nullopt, 900, nullopt, nullopt});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied) << r->message;
}

}  // namespace
}  // namespace podshim::core
