#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "shim/core/json.h"
#include "shim/core/json_writer.h"
#include "shim/core/state.h"
#include "tests/testutil/files.h"

namespace podshim::core {
namespace {

namespace stdfs = std::filesystem;
using testutil::TempDir;


Container sample(std::string id) {
  Container c;
  c.id = std::move(id);
  c.pod_uid = "pod-1";
  c.name = "app";
  c.cgroup_path = "/kubepods/burstable/podpod-1/" + c.id;
  c.allocated.cpu_request_milli = 250;
  c.allocated.memory_limit_bytes = 128 << 20;
  c.desired = c.allocated;
  c.generation = 3;
  c.conditions.in_progress = Condition{"Error", "memory limit (1) below current usage (2)", 3, 42};
  c.devices.push_back({"vendor.com/gpu=0", {"/dev/gpu0"}});
  c.annotations.set("a", "b");
  c.source = Source::Hook;
  return c;
}

// The store in d, opened, with sample(id) upserted for each of `ids`; null
// (and the test failed) when that does not work.
std::unique_ptr<Store> open_with(const TempDir& d, std::initializer_list<const char*> ids) {
  auto s = Store::open(d.path());
  EXPECT_TRUE(s) << s.error().message;
  if (!s) return nullptr;
  for (const char* id : ids) {
    if (!(*s)->upsert_container(sample(id))) {
      ADD_FAILURE() << "upsert of " << id << " failed";
      return nullptr;
    }
  }
  return std::move(*s);
}

// The store in d opened again, having loaded without a warning; null (and
// the test failed) otherwise.
std::unique_ptr<Store> reopen_clean(const TempDir& d) {
  auto s = open_with(d, {});
  if (s) {
    EXPECT_TRUE(s->load_warnings().empty());
  }
  return s;
}

// The generation of container `id` in s, none when s has no such container.
std::optional<int64_t> generation_of(const Store& s, const std::string& id) {
  auto c = s.container(id);
  if (!c) return std::nullopt;
  return c->generation;
}

TEST(Store, PersistsAcrossReopen) {
  TempDir d;
  {
    auto s = open_with(d, {"c1", "c2"});
    ASSERT_TRUE(s);
    Pod p;
    p.uid = "pod-1";
    p.qos = QosClass::Burstable;
    p.labels.set("app", "x");
    ASSERT_TRUE(s->upsert_pod(p));
    auto removed = s->remove_container("c2");
    ASSERT_TRUE(removed);
    EXPECT_TRUE(*removed);
  }
  auto s = Store::open(d.path());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE((*s)->load_warnings().empty());
  auto c = (*s)->container("c1");
  ASSERT_TRUE(c);
  EXPECT_TRUE(*c == sample("c1"));
  EXPECT_FALSE((*s)->container("c2"));
  auto p = (*s)->pod("pod-1");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->qos, QosClass::Burstable);
  EXPECT_EQ(p->labels.get("app"), std::optional<std::string_view>("x"));
}

// The snapshot's text: what a compaction last wrote.
std::string snapshot_of(const TempDir& d) {
  std::ifstream in(d.path() + "/snapshot");
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// An earlier version kept one file per object: a corrupt one is moved aside
// and the others load.
TEST(Store, CorruptFileIsMovedAsideAndOthersLoad) {
  TempDir d;
  ASSERT_TRUE(open_with(d, {"good"}));
  stdfs::create_directories(d.path() + "/containers");
  std::ofstream(d.path() + "/containers/bad.json") << "{not json";
  std::ofstream(d.path() + "/containers/other.json") << R"({"id":"mismatch"})";
  auto s = Store::open(d.path());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->load_warnings().size(), 2u);
  EXPECT_TRUE((*s)->container("good"));
  EXPECT_FALSE((*s)->container("bad"));
  EXPECT_TRUE(stdfs::exists(d.path() + "/containers/bad.json.corrupt"));
  EXPECT_FALSE(stdfs::exists(d.path() + "/containers/bad.json"));
}

// The object files of an earlier version are read at open, written into
// the snapshot, and removed; the next open finds them there.
TEST(Store, ObjectFilesOfAnEarlierVersionMoveIntoTheSnapshot) {
  TempDir d;
  stdfs::create_directories(d.path() + "/containers");
  stdfs::create_directories(d.path() + "/pods");
  std::ofstream(d.path() + "/containers/old.json") << json_string(sample("old"));
  Pod p;
  p.uid = "pod-1";
  std::ofstream(d.path() + "/pods/pod-1.json") << json_string(p);
  std::ofstream(d.path() + "/.snapshot.tmp.1") << "left by a crash";
  {
    auto s = Store::open(d.path());
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_TRUE((*s)->load_warnings().empty());
    EXPECT_TRUE((*s)->container("old"));
    EXPECT_TRUE((*s)->pod("pod-1"));
  }
  EXPECT_FALSE(stdfs::exists(d.path() + "/containers"));
  EXPECT_FALSE(stdfs::exists(d.path() + "/pods"));
  EXPECT_FALSE(stdfs::exists(d.path() + "/.snapshot.tmp.1"));
  EXPECT_NE(snapshot_of(d).find("C {"), std::string::npos);
  auto s = Store::open(d.path());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE((*s)->load_warnings().empty());
  EXPECT_TRUE(*(*s)->container("old") == sample("old"));
  EXPECT_TRUE((*s)->pod("pod-1"));
}

TEST(Store, RejectsHostileIds) {
  auto s = Store::in_memory();
  for (const std::string& id : std::vector<std::string>{"", "../x", "a/b", ".hidden", std::string(200, 'a'),
                                                       std::string("a\0b", 3)}) {
    Container c;
    c.id = id;
    auto r = s->upsert_container(c);
    ASSERT_FALSE(r) << id;
    EXPECT_EQ(r.error().code, EINVAL);
  }
  EXPECT_EQ(s->container_count(), 0u);
}

TEST(Store, EventsAreNumberedAndOrdered) {
  auto s = Store::in_memory();
  std::vector<std::pair<uint64_t, EventType>> seen;
  auto h = s->subscribe([&](const Event& e) { seen.emplace_back(e.seq, e.type); });
  ASSERT_TRUE(s->upsert_container(sample("a")));
  ASSERT_TRUE(s->update_container("a", [](Container& c) { c.state = "running"; }));
  auto r = s->remove_container("a");
  ASSERT_TRUE(r && *r);
  auto again = s->remove_container("a");
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);  // idempotent, no event
  s->unsubscribe(h);
  ASSERT_TRUE(s->upsert_container(sample("b")));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(uint64_t{1}, EventType::ContainerUpserted));
  EXPECT_EQ(seen[1], std::make_pair(uint64_t{2}, EventType::ContainerUpserted));
  EXPECT_EQ(seen[2], std::make_pair(uint64_t{3}, EventType::ContainerRemoved));
  EXPECT_EQ(s->last_seq(), 4u);
}

TEST(Store, PerPodIndexFollowsMovesAndRemovals) {
  auto s = Store::in_memory();
  auto ids = [&](std::string_view pod) {
    std::vector<std::string> out;
    for (const auto& c : s->containers_of(pod)) out.push_back(c.id);
    return out;
  };
  for (auto [id, pod] : {std::pair{"c2", "p1"}, {"c1", "p1"}, {"c3", "p2"}}) {
    Container c = sample(id);
    c.pod_uid = pod;
    ASSERT_TRUE(s->upsert_container(c));
  }
  EXPECT_EQ(ids("p1"), (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(ids("p2"), (std::vector<std::string>{"c3"}));
  ASSERT_TRUE(s->update_container("c2", [](Container& c) { c.pod_uid = "p2"; }));
  EXPECT_EQ(ids("p1"), (std::vector<std::string>{"c1"}));
  EXPECT_EQ(ids("p2"), (std::vector<std::string>{"c2", "c3"}));
  ASSERT_TRUE(s->remove_container("c3"));
  ASSERT_TRUE(s->remove_container("c1"));
  EXPECT_TRUE(ids("p1").empty());
  EXPECT_EQ(ids("p2"), (std::vector<std::string>{"c2"}));
  EXPECT_TRUE(s->with_container("c2", [](const Container& c) { EXPECT_EQ(c.pod_uid, "p2"); }));
  EXPECT_FALSE(s->with_container("c1", [](const Container&) { ADD_FAILURE(); }));
}

// Runs `fn` on an in-memory store and on one opened on `d` (closed after).
template <typename F>
void on_both_kinds(const TempDir& d, F&& fn) {
  auto mem = Store::in_memory();
  auto opened = Store::open(d.path());
  ASSERT_TRUE(opened) << opened.error().message;
  for (Store* s : {mem.get(), opened->get()}) fn(*s);
}

// append_container_json is the container's JSON as it is now, whether the
// store answers from what the journal was given (a store with a state dir)
// or serializes (in memory): after changes, a move to another pod, a
// removal, and a reopen that replays the journal.
TEST(Store, ContainerJsonFollowsEveryChange) {
  TempDir d;
  auto check = [](const Store& s, const std::string& id) {
    std::string got = "x";
    const bool found = s.append_container_json(id, got);
    auto c = s.container(id);
    EXPECT_EQ(found, c.has_value()) << id;
    EXPECT_EQ(got, c ? "x" + json_string(*c) : "x") << id;
  };
  on_both_kinds(d, [&](Store& st) {
    Store* s = &st;
    ASSERT_TRUE(s->upsert_container(sample("a")));
    ASSERT_TRUE(s->upsert_container(sample("b")));
    check(*s, "a");
    ASSERT_TRUE(s->update_container("a", [](Container& c) {
      c.generation = 9;
      c.pod_uid = "pod-2";
      c.conditions.in_progress.reset();
    }));
    check(*s, "a");
    EXPECT_EQ(s->containers_of("pod-2").size(), 1u);
    // Storing an unchanged container writes nothing and keeps the answer.
    ASSERT_TRUE(s->upsert_container(*s->container("a")));
    check(*s, "a");
    ASSERT_TRUE(s->remove_container("b"));
    check(*s, "b");
    ASSERT_TRUE(s->upsert_container(sample("b")));
    check(*s, "b");
  });
  auto again = Store::open(d.path());
  ASSERT_TRUE(again) << again.error().message;
  check(**again, "a");
  check(**again, "b");
  EXPECT_EQ((*again)->container("a")->generation, 9);
  ASSERT_TRUE((*again)->update_container("b", [](Container& c) { c.state = "running"; }));
  check(**again, "b");
}

TEST(Store, SubscribersSeeTheObjectAndRemovalsWithoutIt) {
  auto s = Store::in_memory();
  std::vector<std::string> seen;
  s->subscribe([&](const Event& e) {
    ASSERT_NE(e.container, nullptr);
    // A removal is seen with the object gone from the store already.
    seen.push_back(fmt::format("{}:{}:{}:{}", to_string(e.type), e.container->id, e.container->state,
                               s->container(e.container->id).has_value()));
  });
  ASSERT_TRUE(s->upsert_container(sample("a")));
  ASSERT_TRUE(s->update_container("a", [](Container& c) { c.state = "running"; }));
  ASSERT_TRUE(s->remove_container("a"));
  EXPECT_EQ(seen, (std::vector<std::string>{"ContainerUpserted:a:" + sample("a").state + ":true",
                                            "ContainerUpserted:a:running:true", "ContainerRemoved:a:running:false"}));
}

std::string json_string_for_test(const Container& c) { return json_string(c); }

TEST(Store, JournalReplaysChangesNotYetInTheFiles) {
  TempDir d;
  {
    auto s = open_with(d, {"a", "b"});
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->update_container("a", [](Container& c) { c.generation = 7; }));
    ASSERT_TRUE(s->remove_container("b"));
    // Nothing compacted yet: the changes are only in the journal.
    EXPECT_FALSE(stdfs::exists(d.path() + "/snapshot"));
    EXPECT_GT(stdfs::file_size(d.path() + "/journal"), 0u);
  }  // no clean shutdown step: as after kill -9
  auto s = reopen_clean(d);
  ASSERT_TRUE(s);
  EXPECT_EQ(generation_of(*s, "a"), std::optional<int64_t>(7));
  EXPECT_FALSE(s->container("b"));
  EXPECT_EQ(s->containers_of("pod-1").size(), 1u);
  // Opening compacted: the snapshot agrees and the journal is empty.
  EXPECT_EQ(stdfs::file_size(d.path() + "/journal"), 0u);
  EXPECT_NE(snapshot_of(d).find("\"id\":\"a\""), std::string::npos);
  EXPECT_EQ(snapshot_of(d).find("\"id\":\"b\""), std::string::npos);
}

TEST(Store, JournalIgnoresATornLastRecordAndBadLines) {
  TempDir d;
  ASSERT_TRUE(open_with(d, {"a"}));
  {
    std::ofstream j(d.path() + "/journal", std::ios::app);
    j << "C {not json\n" << "x y\n" << "c ../etc\n";
    std::string torn = json_string_for_test(sample("z"));
    j << "C " << torn.substr(0, torn.size() / 2);  // cut mid-record, no newline
  }
  auto s = Store::open(d.path());
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE((*s)->container("a"));
  EXPECT_FALSE((*s)->container("z"));
  ASSERT_EQ((*s)->load_warnings().size(), 4u);
  EXPECT_NE((*s)->load_warnings()[3].find("incomplete last record"), std::string::npos);
}

TEST(Store, JournalIsCompactedPastItsBound) {
  TempDir d;
  int64_t g = 0;
  {
    auto s = open_with(d, {"a", "b"});
    ASSERT_TRUE(s);
    while (stdfs::exists(d.path() + "/snapshot") == false) {
      ASSERT_TRUE(s->update_container("a", [&](Container& c) { c.generation = ++g; }));
      ASSERT_LT(g, 100000) << "never compacted";
    }
    // The compaction runs beside the changes that follow it.
    ASSERT_TRUE(s->update_container("a", [&](Container& c) { c.generation = ++g; }));
    ASSERT_TRUE(s->remove_container("b"));
    s->drain();
    EXPECT_FALSE(stdfs::exists(d.path() + "/journal.old"));
    EXPECT_LT(stdfs::file_size(d.path() + "/journal"), Store::kJournalCompactBytes);
    const std::string text = snapshot_of(d);
    EXPECT_NE(text.find("\"generation\":"), std::string::npos);
    EXPECT_EQ(text.find(fmt::format("\"generation\":{}", g)), std::string::npos)
        << "the file holds the value at the rotation, the journal what came after";
  }
  auto s = reopen_clean(d);
  ASSERT_TRUE(s);
  EXPECT_EQ(generation_of(*s, "a"), std::optional<int64_t>(g));
  EXPECT_FALSE(s->container("b"));
}

// A crash during a compaction leaves journal.old beside journal and files
// that may lag both: opening replays both, in that order.
TEST(Store, ACompactionCutShortLosesNothing) {
  TempDir d;
  {
    auto s = open_with(d, {"a", "b"});
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->update_container("a", [](Container& c) { c.generation = 3; }));
    ASSERT_TRUE(s->upsert_container(sample("c")));  // only in journal.old
  }
  // What the rotation leaves: the old records in journal.old, newer ones in
  // a new journal, no file written yet.
  stdfs::rename(d.path() + "/journal", d.path() + "/journal.old");
  {
    std::ofstream j(d.path() + "/journal");
    Container a = sample("a");
    a.generation = 9;
    j << "C " << json_string_for_test(a) << "\n" << "c b\n";
  }
  auto s = reopen_clean(d);
  ASSERT_TRUE(s);
  EXPECT_EQ(generation_of(*s, "a"), std::optional<int64_t>(9));
  EXPECT_FALSE(s->container("b"));
  EXPECT_TRUE(s->container("c"));
  // Opening compacted both away.
  EXPECT_FALSE(stdfs::exists(d.path() + "/journal.old"));
  EXPECT_EQ(stdfs::file_size(d.path() + "/journal"), 0u);
  EXPECT_NE(snapshot_of(d).find("\"generation\":9"), std::string::npos);
  EXPECT_EQ(snapshot_of(d).find("\"id\":\"b\""), std::string::npos);
}

// The summed allocated requests equal a scan of every container after each
// kind of change, and after a reopen (snapshot and journal replayed).
TEST(Store, AllocatedRequestsFollowEveryChange) {
  using Pair = std::pair<int64_t, int64_t>;
  TempDir d;
  auto scan = [](const Store& s) {
    Store::Requests r;
    s.for_each_container([&](const Container& c) {
      r.cpu_milli += cgroup::effective_cpu_request(c.allocated);
      r.memory_bytes += cgroup::effective_memory_request(c.allocated);
    });
    return std::pair(r.cpu_milli, r.memory_bytes);
  };
  auto kept = [](const Store& s) {
    auto r = s.allocated_requests();
    return std::pair(r.cpu_milli, r.memory_bytes);
  };
  on_both_kinds(d, [&](Store& st) {
    Store* s = &st;
    ASSERT_TRUE(s->upsert_container(sample("a")));
    ASSERT_TRUE(s->upsert_container(sample("b")));
    EXPECT_EQ(kept(*s), Pair(500, 256 << 20));
    ASSERT_TRUE(s->update_container("a", [](Container& c) {
      c.allocated.cpu_request_milli.reset();
      c.allocated.cpu_limit_milli = 700;  // the limit counts where no request is set
      c.allocated.memory_request_bytes = 64 << 20;
    }));
    EXPECT_EQ(kept(*s), Pair(950, (64 + 128) << 20));
    ASSERT_TRUE(s->remove_container("b"));
    ASSERT_TRUE(s->upsert_container(sample("c")));
    EXPECT_EQ(kept(*s), scan(*s));
    EXPECT_EQ(kept(*s), Pair(950, (64 + 128) << 20));
  });
  // Replayed from the journal, then from the snapshot.
  for (int i = 0; i < 2; i++) {
    auto again = Store::open(d.path());
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(kept(**again), Pair(950, (64 + 128) << 20));
  }
}

TEST(Store, UpdateOfMissingContainerIsENOENT) {
  auto s = Store::in_memory();
  auto r = s->update_container("nope", [](Container&) {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ENOENT);
}

TEST(Qos, FollowsKubernetesRules) {
  K8sResources none;
  K8sResources g{500, 500, 1 << 20, 1 << 20};
  K8sResources only_limits{std::nullopt, 500, std::nullopt, 1 << 20};
  K8sResources b{100, std::nullopt, std::nullopt, std::nullopt};
  EXPECT_EQ(compute_qos({none}), QosClass::BestEffort);
  EXPECT_EQ(compute_qos({g}), QosClass::Guaranteed);
  EXPECT_EQ(compute_qos({only_limits}), QosClass::Guaranteed);
  EXPECT_EQ(compute_qos({g, b}), QosClass::Burstable);
  EXPECT_EQ(compute_qos({g, none}), QosClass::Burstable);
}

}  // namespace
}  // namespace podshim::core
