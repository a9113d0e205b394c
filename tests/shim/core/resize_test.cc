#include <gtest/gtest.h>

#include "shim/core/metrics.h"
#include "shim/core/resize.h"

namespace podshim::core {
namespace {

constexpr int64_t Mi = 1 << 20;

class FakeActuator : public Actuator {
 public:
  void apply(const Actuation& a, Done done) override {
    sources.push_back(a.source);
    if (hold) {
      held.emplace_back(a, std::move(done));
      return;
    }
    done(apply_now(a.plan));
  }
  Result<cgroup::ResizeReport> apply_now(const cgroup::PodResizeRequest& req) {
    calls.push_back(req);
    if (refusal) return Unexpected(cgroup::shrink_refused(*refusal));
    if (!fail_with.empty()) return Unexpected(Error{EBUSY, fail_with, fail_kind, {}});
    cgroup::ResizeReport r;
    r.bytes_reclaimed = 4096;
    r.psi_some_avg10 = psi_some;
    for (const auto& c : req.containers) {
      last[c.cgroup_path] = c.desired;
      if (kill) {
        r.events[c.id].oom_kill = 1;
        ++oom_kill[c.cgroup_path];  // the kernel's counter, which read_actual sees
      }
    }
    if (req.pod) last[req.pod->cgroup_path] = req.pod->desired;
    return r;
  }
  // Completes the held actuations (hold = true), in order.
  void complete() {
    auto h = std::move(held);
    held.clear();
    for (auto& [a, done] : h) done(apply_now(a.plan));
  }
  bool hold = false, kill = false;
  std::optional<cgroup::ShrinkRefusal> refusal;
  double psi_some = 0;
  std::vector<std::pair<Actuation, Done>> held;
  std::vector<IntentSource> sources;
  Result<cgroup::Actual> read_actual(const std::string& path) override {
    cgroup::Actual a;
    auto it = last.find(path);
    if (it == last.end()) return fail(ENOENT, "no {}", path);
    a.cpu_request_milli = it->second.cpu_request_milli;
    a.cpu_limit_milli = it->second.cpu_limit_milli;
    a.memory_limit_bytes = it->second.memory_limit_bytes;
    a.memory_current = 7;
    a.oom_kill = oom_kill[path];
    return a;
  }
  std::vector<cgroup::PodResizeRequest> calls;
  std::map<std::string, K8sResources> last;
  std::map<std::string, uint64_t> oom_kill;
  std::string fail_with;
  ErrorKind fail_kind = ErrorKind::ShrinkRefused;
};

class ResizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store = Store::in_memory();
    Pod p;
    p.uid = "p1";
    p.cgroup_path = "/kubepods/burstable/podp1";
    p.qos = QosClass::Burstable;
    ASSERT_TRUE(store->upsert_pod(p));
    add("c1", "p1", {250, 500, 64 * Mi, 128 * Mi});
    add("other", "p2", {1000, std::nullopt, 512 * Mi, std::nullopt});
    mgr = std::make_unique<ResizeManager>(*store, act, NodeAllocatable{4000, 1024 * Mi}, &metrics);
  }
  void add(std::string id, std::string pod, K8sResources r) {
    Container c;
    c.id = id;
    c.pod_uid = pod;
    c.cgroup_path = "/kubepods/burstable/pod" + pod + "/" + id;
    c.desired = c.allocated = r;
    ASSERT_TRUE(store->upsert_container(c));
  }
  Result<ResizeResult> resize(K8sResources r, std::optional<ResizePolicy> mem_policy = {}) {
    ContainerResize req;
    req.container_id = "c1";
    req.resources = r;
    req.memory_policy = mem_policy;
    return mgr->resize_container(req);
  }
  // A resize of c1's memory limit alone.
  Result<ResizeResult> resize_memory_limit(int64_t bytes, std::optional<ResizePolicy> mem_policy = {}) {
    return resize({std::nullopt, std::nullopt, std::nullopt, bytes}, mem_policy);
  }
  // The same while the actuator holds: the resize is still running (InProgress).
  Result<ResizeResult> held_memory_limit_resize(int64_t bytes) {
    act.hold = true;
    auto r = resize_memory_limit(bytes);
    if (r) {
      EXPECT_EQ(r->outcome, ResizeOutcome::InProgress);
    }
    return r;
  }
  Container c1() { return *store->container("c1"); }

  std::unique_ptr<Store> store;
  FakeActuator act;
  Metrics metrics;
  std::unique_ptr<ResizeManager> mgr;
};

TEST_F(ResizeTest, AppliedClearsConditionsAndReadsBack) {
  auto r = resize({std::nullopt, 800, std::nullopt, 256 * Mi});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
  EXPECT_EQ(r->generations.at("c1"), 1);
  ASSERT_EQ(act.calls.size(), 1u);
  ASSERT_EQ(act.calls[0].containers.size(), 1u);
  EXPECT_EQ(act.calls[0].containers[0].desired.cpu_limit_milli, 800);
  EXPECT_EQ(act.calls[0].containers[0].desired.cpu_request_milli, 250);  // kept
  ASSERT_TRUE(act.calls[0].pod);  // pod cgroup follows the container sums
  EXPECT_EQ(act.calls[0].pod->desired.memory_limit_bytes, 256 * Mi);
  auto c = c1();
  EXPECT_EQ(c.allocated.memory_limit_bytes, 256 * Mi);
  ASSERT_TRUE(c.actual);
  EXPECT_EQ(c.actual->resources.cpu_limit_milli, 800);
  EXPECT_TRUE(c.conditions.empty());
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied"}}), 1);
  EXPECT_EQ(metrics.bytes_reclaimed.value(), 4096);
  EXPECT_EQ(metrics.resize_latency.count(), 1u);
}

TEST_F(ResizeTest, AContainerResizeNeverMakesThePodSumPodLevelResources) {
  ASSERT_TRUE(resize({std::nullopt, 800, std::nullopt, 256 * Mi}));
  ASSERT_TRUE(resize({std::nullopt, 900, std::nullopt, 256 * Mi}));
  // The pod cgroup followed the sums; the pod has no pod-level resources.
  EXPECT_EQ(store->pod("p1")->resources, K8sResources{});
  ASSERT_EQ(act.calls.size(), 2u);
  ASSERT_TRUE(act.calls[1].pod);
  EXPECT_EQ(act.calls[1].pod->desired.cpu_limit_milli, 900);
}

TEST_F(ResizeTest, InfeasibleBeyondNodeCapacity) {
  auto r = resize({std::nullopt, std::nullopt, 2048 * Mi, 2048 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Infeasible);
  EXPECT_NE(r->message.find("Node didn't have enough capacity: memory"), std::string::npos) << r->message;
  auto c = c1();
  ASSERT_TRUE(c.conditions.pending);
  EXPECT_EQ(c.conditions.pending->reason, "Infeasible");
  EXPECT_EQ(c.conditions.pending->observed_generation, 1);
  EXPECT_EQ(c.allocated.memory_limit_bytes, 128 * Mi);  // not allocated
  EXPECT_EQ(c.desired.memory_limit_bytes, 2048 * Mi);   // but desired
  EXPECT_TRUE(act.calls.empty());
}

TEST_F(ResizeTest, InfeasibleWhenQosWouldChange) {
  // Burstable → Guaranteed (requests == limits for cpu and memory).
  auto r = resize({500, 500, 128 * Mi, 128 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Infeasible);
  EXPECT_NE(r->message.find("QOS"), std::string::npos);
}

TEST_F(ResizeTest, InfeasibleWhenRemovingLimit) {
  ContainerResize req;
  req.container_id = "c1";
  req.remove.memory_limit = true;
  auto r = mgr->resize_container(req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Infeasible);
  EXPECT_NE(r->message.find("cannot be removed"), std::string::npos);
}

TEST_F(ResizeTest, DeferredWhenOthersHoldTheRoomThenRetried) {
  // Node 1024Mi; "other" holds 512Mi; asking 600Mi does not fit now.
  auto r = resize({std::nullopt, std::nullopt, 600 * Mi, 700 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Deferred);
  EXPECT_EQ(c1().conditions.pending->reason, "Deferred");
  // Pending, and nothing else: not in progress, nothing actuated.
  EXPECT_FALSE(c1().conditions.in_progress);
  EXPECT_FALSE(c1().actuated);
  EXPECT_EQ(c1().allocated.memory_request_bytes, 64 * Mi);
  // The other container goes away: the deferred resize now fits.
  ASSERT_TRUE(store->remove_container("other"));
  mgr->retry_deferred();
  auto c = c1();
  EXPECT_TRUE(c.conditions.empty());
  EXPECT_EQ(c.allocated.memory_request_bytes, 600 * Mi);
  EXPECT_EQ(c.generation, 1);  // a retry is not a new generation
}

// What the pod's own containers hold is not "used by others": c1 (64Mi) to
// 460Mi fits next to other's 512Mi on a 1024Mi node, also while c1's own
// earlier increase is still running.
TEST_F(ResizeTest, ThePodsOwnContainersDoNotCountAgainstItsIncrease) {
  act.hold = true;
  auto up = resize({std::nullopt, std::nullopt, 300 * Mi, 512 * Mi});  // running
  ASSERT_TRUE(up) << up.error().message;
  EXPECT_EQ(up->outcome, ResizeOutcome::InProgress);
  auto r = resize({std::nullopt, std::nullopt, 460 * Mi, 512 * Mi});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(r->outcome, ResizeOutcome::Deferred) << r->message;
  act.hold = false;
  act.complete();
  EXPECT_EQ(c1().allocated.memory_request_bytes, 460 * Mi);
}

// While c1's increase runs, its target is what it holds: another pod's
// increase that would fit next to c1's allocation before, but not next to
// its target, waits. Without the running target in place of c1's allocated
// values (ResizeManager::others_requests), it would be admitted.
TEST_F(ResizeTest, ARunningIncreaseCountsAgainstAnotherPodsIncrease) {
  // Node 1024Mi: c1 64Mi, other 512Mi, small 16Mi.
  add("small", "p3", {100, std::nullopt, 16 * Mi, std::nullopt});
  act.hold = true;
  auto up = resize({std::nullopt, std::nullopt, 400 * Mi, 400 * Mi});  // c1 to 400Mi, running
  ASSERT_TRUE(up);
  EXPECT_EQ(up->outcome, ResizeOutcome::InProgress);
  EXPECT_EQ(c1().allocated.memory_request_bytes, 64 * Mi);  // stored as before while it runs
  // small to 200Mi: 592Mi + 200Mi fits next to c1's 64Mi; next to its 400Mi,
  // 912Mi + 200Mi does not.
  ContainerResize req;
  req.container_id = "small";
  req.resources = {100, std::nullopt, 200 * Mi, std::nullopt};
  auto r = mgr->resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outcome, ResizeOutcome::Deferred) << r->message;
  act.hold = false;
  act.complete();
  // Done: an increase that fits next to c1's 400Mi is admitted.
  req.resources = {100, std::nullopt, 96 * Mi, std::nullopt};
  r = mgr->resize_container(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied) << r->message;
}

TEST_F(ResizeTest, DecreaseAdmittedEvenWhenNodeIsFull) {
  add("hog", "p3", {std::nullopt, std::nullopt, 900 * Mi, std::nullopt});
  auto r = resize({std::nullopt, std::nullopt, 32 * Mi, std::nullopt});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
}

TEST_F(ResizeTest, RestartContainerIsReportedNotActuated) {
  auto r = resize_memory_limit(256 * Mi, ResizePolicy::RestartContainer);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::RestartRequired);
  EXPECT_TRUE(act.calls.empty());
  auto c = c1();
  EXPECT_TRUE(c.restart_required);
  EXPECT_EQ(c.allocated.memory_limit_bytes, 256 * Mi);
  // Nothing runs in podshim for it (podshim never restarts a container): it
  // is restartRequired, not PodResizeInProgress for ever, and the kernel
  // keeps the values before until the restart.
  EXPECT_FALSE(c.conditions.in_progress);
  ASSERT_TRUE(c.actuated);
  EXPECT_EQ(c.actuated->memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(c.kernel_target().memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(c.memory_policy, ResizePolicy::RestartContainer);
}

TEST_F(ResizeTest, ActuationErrorThenClearedOnSuccess) {
  act.fail_with = "memory limit (33554432) below current usage (90000000)";
  auto r = resize({std::nullopt, std::nullopt, 16 * Mi, 32 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Error);
  auto c = c1();
  ASSERT_TRUE(c.conditions.in_progress);
  EXPECT_EQ(c.conditions.in_progress->reason, "Error");
  EXPECT_EQ(c.conditions.in_progress->message, act.fail_with);
  EXPECT_EQ(c.last_error, act.fail_with);
  EXPECT_FALSE(c.conditions.pending);  // the e2e test asserts no PodResizePending
  EXPECT_EQ(metrics.shrinks_refused.value(), 1);
  EXPECT_EQ(metrics.resize_requests.value({{"result", "error"}}), 1);
  // Revert to something that works: conditions gone, generation 2.
  act.fail_with.clear();
  r = resize({std::nullopt, std::nullopt, 64 * Mi, 128 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
  c = c1();
  EXPECT_TRUE(c.conditions.empty());
  EXPECT_TRUE(c.last_error.empty());
  EXPECT_EQ(c.generation, 2);
}

TEST_F(ResizeTest, ARefusalIsRecognisedByItsKindNotItsText) {
  // The same words from any other failure are not a shrink refusal.
  act.fail_with = "memory limit (1) below current usage (2)";
  act.fail_kind = ErrorKind::Other;
  auto r = resize({std::nullopt, std::nullopt, 16 * Mi, 32 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Error);
  EXPECT_EQ(metrics.shrinks_refused.value(), 0);
}

TEST_F(ResizeTest, InvalidRequestsAreErrors) {
  auto r = resize({900, std::nullopt, std::nullopt, std::nullopt});  // request > limit 500
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  ContainerResize req;
  req.container_id = "ghost";
  auto g = mgr->resize_container(req);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, ENOENT);
  EXPECT_EQ(metrics.resize_requests.value({{"result", "invalid"}}), 2);
}

TEST_F(ResizeTest, PodLevelResize) {
  PodResize pr;
  pr.pod_uid = "p1";
  pr.pod_resources = K8sResources{500, 1000, 128 * Mi, 256 * Mi};
  auto r = mgr->resize_pod(pr);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
  ASSERT_EQ(act.calls.size(), 1u);
  ASSERT_TRUE(act.calls[0].pod);
  EXPECT_EQ(act.calls[0].pod->desired.memory_limit_bytes, 256 * Mi);
  EXPECT_EQ(store->pod("p1")->resources.cpu_limit_milli, 1000);
}

TEST_F(ResizeTest, AnOomKillDuringTheResizeIsNeverPlainlyApplied) {
  // c1 was read before (oom_kill 0: the baseline the kill is counted from).
  ASSERT_TRUE(store->update_container("c1", [](Container& c) { c.actual.emplace(); }));
  act.kill = true;  // memory.events oom_kill +1 in c1 over the operation
  auto r = resize_memory_limit(96 * Mi);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::AppliedWithOomKill);
  EXPECT_EQ(to_string(r->outcome), "applied_with_oom_kill");
  EXPECT_NE(r->message.find("oom_kill: 1 in c1"), std::string::npos) << r->message;
  auto c = c1();
  ASSERT_TRUE(c.conditions.in_progress);
  EXPECT_EQ(c.conditions.in_progress->reason, "Error");
  EXPECT_EQ(c.last_outcome, "applied_with_oom_kill");
  EXPECT_EQ(c.allocated.memory_limit_bytes, 96 * Mi);  // the values did land
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied_with_oom_kill"}}), 1);
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied"}}), 0);
  EXPECT_EQ(metrics.oom_kills.value(), 1);  // counted from the read-back, not also from the events
  EXPECT_EQ(c.actual->oom_kill, 1u);
}

TEST_F(ResizeTest, RefusalsAreCountedByWhyAndPressureSeenIsObserved) {
  // The pressure a staged shrink saw is in the result and a metric;
  // a refusal is counted by its reason.
  act.psi_some = 7.5;
  auto r = resize_memory_limit(96 * Mi);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
  EXPECT_DOUBLE_EQ(r->report.psi_some_avg10, 7.5);
  EXPECT_NE(metrics.render().find("podshim_memory_shrink_pressure_ratio_count{kind=\"some\"} 1"), std::string::npos)
      << metrics.render();
  // PSI avg10 7.5 (%) is observed as the ratio 0.075.
  EXPECT_NE(metrics.render().find("podshim_memory_shrink_pressure_ratio_sum{kind=\"some\"} 0.075\n"), std::string::npos)
      << metrics.render();
  cgroup::ShrinkRefusal g;
  g.id = "c1";
  g.target = 64 * Mi;
  g.usage = 60 * Mi;
  g.why = cgroup::ShrinkWhy::Growth;
  g.growth_bytes_per_sec = 50 * Mi;
  act.refusal = g;
  r = resize_memory_limit(64 * Mi);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Error);
  EXPECT_EQ(metrics.shrink_refusals.value({{"why", "growth"}}), 1);
  EXPECT_EQ(metrics.shrink_refusals.value({{"why", "usage"}}), 0);
  EXPECT_EQ(metrics.shrinks_refused.value({}), 1);
}

// The runtime's UpdateContainer of c1 (pod p1) with `r`.
ResizeIntent runtime_update_of_c1(const K8sResources& r) {
  ResizeIntent in;
  in.source = IntentSource::NriUpdateContainer;
  in.pod_uid = "p1";
  ContainerResize cr;
  cr.container_id = "c1";
  cr.resources = r;
  in.containers = {cr};
  return in;
}

TEST_F(ResizeTest, RuntimeIntentsAreOnlyValidatedThenGoTheSameWay) {
  // The kubelet admitted it: no Infeasible for "more than the node has".
  ResizeIntent in = runtime_update_of_c1({250, 500, 2048 * Mi, 2048 * Mi});
  std::optional<Result<ResizeResult>> got;
  mgr->submit(in, [&](Result<ResizeResult> r) { got = std::move(r); });
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->outcome, ResizeOutcome::Applied);
  ASSERT_EQ(act.sources.size(), 1u);
  EXPECT_EQ(act.sources[0], IntentSource::NriUpdateContainer);
  ASSERT_EQ(act.calls[0].containers.size(), 1u);
  EXPECT_FALSE(act.calls[0].pod);  // the runtime sends the pod's own update
  auto c = c1();
  EXPECT_EQ(c.allocated.memory_limit_bytes, 2048 * Mi);
  EXPECT_EQ(c.generation, 1);
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied"}}), 1);
  // But an invalid one is refused before anything is recorded.
  in = runtime_update_of_c1({900, 500, std::nullopt, std::nullopt});
  got.reset();
  mgr->submit(in, [&](Result<ResizeResult> r) { got = std::move(r); });
  ASSERT_TRUE(got);
  ASSERT_FALSE(*got);
  EXPECT_EQ(got->error().code, EINVAL);
  EXPECT_EQ(act.calls.size(), 1u);
}

// The runtime waits on its answer to write the values: it gets the verdict
// before podshim records the resize, once; the store and the metrics have it
// by the time submit() returns. An API client is answered after the record,
// so that what it is told is what a read finds.
TEST_F(ResizeTest, TheRuntimeIsAnsweredBeforeTheRecordAndTheApiAfterIt) {
  const int64_t before = *c1().allocated.memory_limit_bytes;
  ResizeIntent in = runtime_update_of_c1({250, 500, 2048 * Mi, 2048 * Mi});
  int answers = 0;
  std::optional<int64_t> seen;
  double counted = -1;
  mgr->submit(in, [&](Result<ResizeResult> r) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
    answers++;
    seen = c1().allocated.memory_limit_bytes;
    counted = metrics.resize_requests.value({{"result", "applied"}});
  });
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(seen, before);
  EXPECT_EQ(counted, 0);
  EXPECT_EQ(c1().allocated.memory_limit_bytes, 2048 * Mi);
  EXPECT_EQ(c1().last_outcome, "applied");
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied"}}), 1);

  in.source = IntentSource::Api;
  in.containers[0].resources = {250, 500, 1024 * Mi, 1024 * Mi};
  answers = 0;
  mgr->submit(in, [&](Result<ResizeResult> r) {
    ASSERT_TRUE(r);
    answers++;
    seen = c1().allocated.memory_limit_bytes;
    counted = metrics.resize_requests.value({{"result", "applied"}});
  });
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(seen, 1024 * Mi);
  EXPECT_EQ(counted, 2);
}

TEST_F(ResizeTest, ActuationThatCompletesLaterIsInProgressThenRecordedOnce) {
  auto r = held_memory_limit_resize(256 * Mi);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->generations.at("c1"), 1);
  EXPECT_EQ(c1().last_outcome, "in_progress");
  // While it runs, and only then: PodResizeInProgress without a reason.
  ASSERT_TRUE(c1().conditions.in_progress);
  EXPECT_EQ(c1().conditions.in_progress->reason, "");
  EXPECT_EQ(c1().conditions.in_progress->observed_generation, 1);
  EXPECT_FALSE(c1().conditions.pending);
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied"}}), 0);
  act.complete();
  auto c = c1();
  EXPECT_EQ(c.last_outcome, "applied");
  EXPECT_TRUE(c.conditions.empty());
  EXPECT_FALSE(c.actuated);
  EXPECT_EQ(metrics.resize_requests.value({{"result", "applied"}}), 1);
  EXPECT_EQ(metrics.resize_latency.count(), 1u);
}

// A request back to the values allocated before, while a change to other
// values is still actuating: the running one would leave its values, so the
// request is not "unchanged". It joins the running one (InProgress) and the
// container ends with what was asked last.
TEST_F(ResizeTest, RequestBackToTheOldValuesWhileAChangeRunsEndsWithTheLastRequest) {
  auto shrink = held_memory_limit_resize(96 * Mi);
  ASSERT_TRUE(shrink);
  auto back = resize_memory_limit(128 * Mi);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->outcome, ResizeOutcome::InProgress);
  EXPECT_EQ(back->generations.at("c1"), 2);
  // Compared with the running shrink's target, 128 Mi is a change: a
  // second actuation, queued behind the first.
  ASSERT_EQ(act.held.size(), 2u);
  act.complete();
  auto c = c1();
  EXPECT_EQ(c.allocated.memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(c.desired.memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(act.last.at("/kubepods/burstable/podp1/c1").memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(c.last_outcome, "applied");

  // The same values as the running change: nothing more to actuate, and
  // the answer is the running one's, not "unchanged".
  auto again = resize_memory_limit(96 * Mi);
  ASSERT_TRUE(again);
  auto same = resize_memory_limit(96 * Mi);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->outcome, ResizeOutcome::InProgress);
  EXPECT_EQ(act.held.size(), 1u);
  EXPECT_EQ(c1().last_outcome, "in_progress");
  act.complete();
  EXPECT_EQ(c1().allocated.memory_limit_bytes, 96 * Mi);
  EXPECT_EQ(c1().last_outcome, "applied");
  // Nothing running: the same values again are unchanged.
  auto idle = resize_memory_limit(96 * Mi);
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->outcome, ResizeOutcome::Unchanged);
}

// A refused shrink ends the actuation: PodResizeInProgress/Error with the
// refusal, never PodResizeInProgress without a reason; the kernel keeps the
// values before (actuated), which is what drift is judged against.
TEST_F(ResizeTest, ARefusedShrinkIsAnErrorNotInProgressAndTheKernelKeepsTheOldValues) {
  act.hold = true;
  act.refusal = cgroup::ShrinkRefusal{};
  act.refusal->id = "c1";
  act.refusal->target = 32 * Mi;
  act.refusal->usage = 90 * Mi;
  auto r = resize({std::nullopt, std::nullopt, 16 * Mi, 32 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::InProgress);
  ASSERT_TRUE(c1().conditions.in_progress);
  EXPECT_EQ(c1().conditions.in_progress->reason, "");  // being applied
  EXPECT_EQ(c1().allocated.memory_limit_bytes, 128 * Mi);
  act.complete();
  auto c = c1();
  ASSERT_TRUE(c.conditions.in_progress);
  EXPECT_EQ(c.conditions.in_progress->reason, "Error");
  EXPECT_FALSE(c.conditions.in_progress->message.empty());
  EXPECT_FALSE(c.conditions.pending);
  EXPECT_EQ(c.last_outcome, "error");
  EXPECT_EQ(c.allocated.memory_limit_bytes, 32 * Mi);  // allocated, as the kubelet does
  ASSERT_TRUE(c.actuated);
  EXPECT_EQ(c.actuated->memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(c.actuated->memory_request_bytes, 64 * Mi);
  EXPECT_EQ(c.kernel_target().memory_limit_bytes, 128 * Mi);
  EXPECT_EQ(metrics.shrinks_refused.value(), 1);

  // A second refusal keeps the values the kernel really has, not the
  // refused ones of the first.
  act.hold = false;
  r = resize({std::nullopt, std::nullopt, 8 * Mi, 16 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Error);
  EXPECT_EQ(c1().actuated->memory_limit_bytes, 128 * Mi);

  // The refused values asked for again are actuated again (the kubelet
  // retries while allocated and actuated differ), not "unchanged"; once
  // they land, nothing is left to report.
  act.refusal.reset();
  const size_t calls = act.calls.size();
  r = resize({std::nullopt, std::nullopt, 8 * Mi, 16 * Mi});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->outcome, ResizeOutcome::Applied);
  EXPECT_EQ(act.calls.size(), calls + 1);
  c = c1();
  EXPECT_TRUE(c.conditions.empty());
  EXPECT_FALSE(c.actuated);
  EXPECT_EQ(c.kernel_target().memory_limit_bytes, 16 * Mi);
}

// The runtime's own update (NRI) refused: the same error state, and the
// runtime's values before it are what the kernel keeps. The runtime has its
// answer once, before the error state is recorded.
TEST_F(ResizeTest, ARefusedRuntimeShrinkIsAnError) {
  act.refusal = cgroup::ShrinkRefusal{};
  ResizeIntent in = runtime_update_of_c1({250, 500, 16 * Mi, 32 * Mi});
  std::optional<Result<ResizeResult>> got;
  int answers = 0;
  std::string outcome_at_answer;
  mgr->submit(in, [&](Result<ResizeResult> r) {
    got = std::move(r);
    answers++;
    outcome_at_answer = c1().last_outcome;
  });
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->outcome, ResizeOutcome::Error);
  EXPECT_EQ(answers, 1);
  EXPECT_NE(outcome_at_answer, "error");
  EXPECT_EQ(metrics.resize_requests.value({{"result", "error"}}), 1);
  auto c = c1();
  EXPECT_EQ(c.last_outcome, "error");
  ASSERT_TRUE(c.conditions.in_progress);
  EXPECT_EQ(c.conditions.in_progress->reason, "Error");
  ASSERT_TRUE(c.actuated);
  EXPECT_EQ(c.actuated->memory_limit_bytes, 128 * Mi);
}

TEST(MachineAllocatable, ReadsMemTotal) {
  auto a = machine_allocatable();
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_GT(a->cpu_milli, 0);
  EXPECT_GT(a->memory_bytes, 0);
}

}  // namespace
}  // namespace podshim::core
