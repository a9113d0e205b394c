#include "cgroup/plan.h"

#include <gtest/gtest.h>

namespace podshim::cgroup {
namespace {

PlanTarget T(std::string id, bool pod, std::string cur_mem, std::string want_mem,
             std::string cur_max = "max 100000", std::string want_max = "max 100000",
             std::string cur_w = "100", std::optional<std::string> want_w = std::nullopt) {
  PlanTarget t;
  t.id = std::move(id);
  t.is_pod = pod;
  // In table order, as the engine lists them.
  if (want_w) t.attrs.push_back({controller_for("cpu.weight"), std::move(cur_w), std::move(*want_w)});
  t.attrs.push_back({controller_for("cpu.max"), std::move(cur_max), std::move(want_max)});
  t.attrs.push_back({controller_for("memory.max"), std::move(cur_mem), std::move(want_mem)});
  return t;
}
void set_want(PlanTarget& t, std::string_view file, std::string v) {
  for (auto& a : t.attrs)
    if (a.row->file == file) a.want = std::move(v);
}

std::vector<std::string> order(const std::vector<PlanTarget>& ts, const std::vector<PlanStep>& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan)
    for (const auto& c : s.changes) out.push_back(ts[s.target].id + ":" + c.file);
  return out;
}

// A pod and its containers a and b, memory.max only: the pod's goes from
// `pod_cur` to `pod_want`, each container's from `ctr_cur` to `ctr_want`.
std::vector<PlanTarget> pod_and_two(const std::string& pod_cur, const std::string& pod_want,
                                    const std::string& ctr_cur, const std::string& ctr_want) {
  return {T("pod", true, pod_cur, pod_want), T("a", false, ctr_cur, ctr_want), T("b", false, ctr_cur, ctr_want)};
}

TEST(Plan, IncreaseGoesPodFirst) {
  auto ts = pod_and_two("200000000", "400000000", "100000000", "200000000");
  auto p = plan_resize(ts);
  EXPECT_EQ(order(ts, p),
            (std::vector<std::string>{"pod:memory.max", "a:memory.max", "b:memory.max"}));
  for (const auto& s : p) EXPECT_TRUE(s.increase);
}

TEST(Plan, DecreaseGoesContainersFirst) {
  auto ts = pod_and_two("400000000", "200000000", "200000000", "100000000");
  auto p = plan_resize(ts);
  EXPECT_EQ(order(ts, p),
            (std::vector<std::string>{"a:memory.max", "b:memory.max", "pod:memory.max"}));
}

TEST(Plan, MixedPodMemoryThenCpu) {
  // a shrinks, b grows; the pod grows in memory and shrinks in cpu.
  std::vector<PlanTarget> ts{
      T("pod", true, "300000000", "400000000", "200000 100000", "150000 100000", "79", "59"),
      T("a", false, "200000000", "100000000", "100000 100000", "50000 100000", "100", "59"),
      T("b", false, "100000000", "300000000", "100000 100000", "100000 100000", "100", "100"),
      T("c", false, "max", "max", "50000 100000", "max 100000", "59", "59")};
  auto p = plan_resize(ts);
  EXPECT_EQ(order(ts, p), (std::vector<std::string>{
                              // memory: pod increase, container decrease, (no pod decrease), container increase
                              "pod:memory.max", "a:memory.max", "b:memory.max",
                              // cpu: no pod increase; a decreases; pod decreases; c increases
                              "a:cpu.weight", "a:cpu.max", "pod:cpu.max", "pod:cpu.weight",
                              "c:cpu.max"}));
}

TEST(Plan, UnchangedValuesMakeNoSteps) {
  std::vector<PlanTarget> ts{T("a", false, "134217728", "134217728", "50000 100000", "50000 100000",
                               "59", "59")};
  EXPECT_TRUE(plan_resize(ts).empty());
  // memory.max reads back page-rounded: writing 134217729 is the same value.
  set_want(ts[0], "memory.max", "134217729");
  EXPECT_TRUE(plan_resize(ts).empty());
  set_want(ts[0], "memory.max", "134225920");
  EXPECT_EQ(plan_resize(ts).size(), 1u);
}

TEST(Plan, CpuRequestOnlyOrdersByWeight) {
  std::vector<PlanTarget> ts{T("a", false, "max", "max", "max 100000", "max 100000", "100", "200"),
                             T("b", false, "max", "max", "max 100000", "max 100000", "100", "50")};
  auto p = plan_resize(ts);
  EXPECT_EQ(order(ts, p), (std::vector<std::string>{"b:cpu.weight", "a:cpu.weight"}));
  EXPECT_FALSE(p[0].increase);
  EXPECT_TRUE(p[1].increase);
}

// The planner walks the attributes the engine lists, by their rows: a
// second memory limit joins the container's memory step, in listed order.
TEST(Plan, ListedRowsShareTheirResourceStep) {
  PlanTarget t;
  t.id = "a";
  t.attrs.push_back({controller_for("memory.high"), "max", "4096"});
  t.attrs.push_back({controller_for("memory.max"), "max", "8192"});
  auto p = plan_resize({t});
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(p[0].changes.size(), 2u);
  EXPECT_EQ(p[0].changes[0].file, "memory.high");
  EXPECT_EQ(p[0].changes[1].file, "memory.max");
}

TEST(Controllers, TableRows) {
  for (const char* f : {"cpu.weight", "cpu.max", "memory.max"}) {
    const Controller* c = controller_for(f);
    ASSERT_NE(c, nullptr) << f;
    EXPECT_NE(c->want, nullptr) << f;
    EXPECT_NE(c->read_back, nullptr) << f;
    EXPECT_NE(c->properties, nullptr) << f;
  }
  EXPECT_EQ(controller_for("memory.max")->lowering, Lowering::Shrink);
  EXPECT_EQ(controller_for("cpu.max")->lowering, Lowering::Write);
  EXPECT_EQ(controller_for("cpu.max")->controller, "cpu");
  EXPECT_EQ(controller_for("nonexistent.file"), nullptr);
  auto p = properties_for_attr("memory.reclaim", "4096");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->empty());
}

TEST(Plan, AttrDiffers) {
  EXPECT_FALSE(attr_differs("cpu.max", "max 100000", "max"));
  EXPECT_TRUE(attr_differs("cpu.max", "max 100000", "50000 100000"));
  EXPECT_FALSE(attr_differs("memory.max", "max\n", "max"));
  EXPECT_TRUE(attr_differs("memory.max", "max", "4096"));
  EXPECT_TRUE(attr_differs("cpu.weight", "100", "39"));
}

}  // namespace
}  // namespace podshim::cgroup
