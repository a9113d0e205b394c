// core::append_json, the one writer of the model's JSON, on generated
// objects: its output is nlohmann's canonical form (parsing and dumping it
// again changes no byte, so clients and golden files see what a tree's
// dump() gave), and the reader (json.h) gives back the object written.
#include "shim/core/json_writer.h"

#include <gtest/gtest.h>

#include <random>

#include "shim/core/json.h"

namespace podshim::core {
namespace {

struct Gen {
  std::mt19937_64 rng{12345};
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
  std::string str() {
    static const std::vector<std::string> parts = {
        "a", "Z", "0", "-", " ", "\"", "\\", "/", "\n", "\r", "\t", "\b", "\f", std::string(1, '\x01'),
        std::string(1, '\x1f'), "\x7f", "é", "€", "𝄞", "日本", "{", "}", ":", ",", "labels", "\"labels\":"};
    std::string s;
    int n = pick(8);
    for (int i = 0; i < n; ++i) s += parts[static_cast<size_t>(pick(static_cast<int>(parts.size())))];
    return s;
  }
  std::optional<int64_t> opt() {
    if (pick(3) == 0) return std::nullopt;
    int64_t v = static_cast<int64_t>(rng() >> (1 + pick(62)));  // the reader refuses negative quantities
    return v;
  }
  K8sResources res() {
    K8sResources r{opt(), opt(), opt(), opt()};
    // Registered resources, by any name (the writer escapes it, the reader
    // keeps names it does not know).
    int n = pick(3);
    for (int i = 0; i < n; ++i)
      if (auto v = opt()) r.extra[str()] = *v;
    return r;
  }
  std::optional<ActualResources> actual() {
    if (pick(2)) return std::nullopt;
    return ActualResources{res(), rng(), rng() >> 20, static_cast<int64_t>(rng() >> 1)};
  }
  StringMap map() {
    std::map<std::string, std::string> m;
    int n = pick(4);
    for (int i = 0; i < n; ++i) m[str()] = str();
    return {m.begin(), m.end()};
  }
  std::optional<Condition> cond() {
    if (pick(2)) return std::nullopt;
    return Condition{str(), str(), static_cast<int64_t>(rng() >> 2), static_cast<int64_t>(rng() >> 1)};
  }
  Container container() {
    Container c;
    c.id = str();
    c.pod_uid = str();
    c.name = str();
    c.cgroup_path = str();
    c.state = str();
    c.pid = static_cast<pid_t>(rng() >> 33);
    c.cpu_policy = pick(2) ? ResizePolicy::NotRequired : ResizePolicy::RestartContainer;
    c.memory_policy = pick(2) ? ResizePolicy::NotRequired : ResizePolicy::RestartContainer;
    c.desired = res();
    c.allocated = res();
    c.actual = actual();
    c.conditions.pending = cond();
    c.conditions.in_progress = cond();
    c.restart_required = pick(2);
    c.generation = static_cast<int64_t>(rng() >> 3);
    int nd = pick(3);
    for (int i = 0; i < nd; ++i) {
      InjectedDevice d{str(), {}};
      int nn = pick(3);
      for (int k = 0; k < nn; ++k) d.node_paths.push_back(str());
      c.devices.push_back(d);
    }
    int ndrift = pick(3);
    for (int i = 0; i < ndrift; ++i)
      c.drift.push_back(Drift{str(), str(), str(), str(), static_cast<int64_t>(rng() >> 3)});
    c.selinux_mount_label = str();
    c.last_error = str();
    c.last_outcome = str();
    c.annotations = map();
    c.source = static_cast<Source>(pick(3));
    return c;
  }
  Pod pod() {
    Pod p;
    p.uid = str();
    p.sandbox_id = str();
    p.name = str();
    p.namespace_ = str();
    p.cgroup_path = str();
    p.qos = static_cast<QosClass>(pick(3));
    p.resources = res();
    p.actual = actual();
    p.annotations = map();
    p.labels = map();
    p.source = static_cast<Source>(pick(3));
    return p;
  }
};

// 3000 objects from `make` (`what` names them in failures): each one's JSON
// is canonical, `read` gives back an equal object, and `also(object, json)`
// passes. Stops at the first fatal failure.
template <class Make, class Read, class Also>
void canonical_and_read_back(const char* what, Make make, Read read, Also also) {
  for (int i = 0; i < 3000; ++i) {
    const auto v = make();
    const std::string out = json_string(v);
    const auto j = nlohmann::json::parse(out);
    ASSERT_EQ(j.dump(), out) << what << " #" << i;
    auto back = read(j);
    ASSERT_TRUE(back) << what << " #" << i << ": " << back.error().message;
    ASSERT_TRUE(*back == v) << what << " #" << i << ": " << out;
    also(v, j);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(JsonWriter, ContainersAreCanonicalAndReadBack) {
  Gen g;
  canonical_and_read_back(
      "container", [&] { return g.container(); }, container_from_json,
      [](const Container& c, const nlohmann::json& j) {
        if (!c.drift.empty()) {
          // The drift list and the one PodshimDrift condition that stands for it.
          ASSERT_EQ(j["drift"].size(), c.drift.size());
          ASSERT_EQ(j["drift"][0]["file"], c.drift[0].file);
          ASSERT_EQ(j["conditions"].back()["type"], std::string(kPodshimDrift));
          ASSERT_EQ(j["conditions"].back()["message"], drift_condition(c).message);
        }
      });
}

TEST(JsonWriter, PodsAreCanonicalAndReadBack) {
  Gen g;
  canonical_and_read_back("pod", [&] { return g.pod(); }, pod_from_json, [](const Pod&, const nlohmann::json&) {});
}

TEST(JsonWriter, PodWithExtraMemberSortsWhereItsKeyDoes) {
  Gen g;
  for (int i = 0; i < 500; ++i) {
    Pod p = g.pod();
    std::string out;
    append_json(out, p, [](std::string& o) { o += ",\"containerIds\":[\"a\",\"b\"]"; });
    auto j = nlohmann::json::parse(out);
    ASSERT_EQ(j.dump(), out) << "pod #" << i;
    ASSERT_EQ(j["containerIds"], nlohmann::json::array({"a", "b"}));
    j.erase("containerIds");
    ASSERT_EQ(j.dump(), json_string(p)) << "pod #" << i;
  }
}

TEST(JsonWriter, EventsAreCanonicalAndCarryTheirObjects) {
  Gen g;
  for (int i = 0; i < 500; ++i) {
    Container c = g.container();
    Pod p = g.pod();
    Event e;
    e.seq = g.rng();
    e.time_unix_ms = static_cast<int64_t>(g.rng() >> 1);
    e.type = static_cast<EventType>(g.pick(4));
    if (g.pick(2)) e.container = &c;
    if (g.pick(2)) e.pod = &p;
    const std::string out = json_string(e);
    const auto j = nlohmann::json::parse(out);
    ASSERT_EQ(j.dump(), out) << "event #" << i;
    ASSERT_EQ(j["seq"].get<uint64_t>(), e.seq);
    ASSERT_EQ(j["type"], std::string(to_string(e.type)));
    ASSERT_EQ(j["timeUnixMs"].get<int64_t>(), e.time_unix_ms);
    ASSERT_EQ(j.contains("container"), e.container != nullptr);
    ASSERT_EQ(j.contains("pod"), e.pod != nullptr);
    if (e.container) {
      ASSERT_EQ(j["container"].dump(), json_string(c));
    }
    if (e.pod) {
      ASSERT_EQ(j["pod"].dump(), json_string(p));
    }
  }
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacter) {
  // dump() would throw (type_error 316); the writer must not.
  std::string out;
  append_json_string(out, std::string("a\xff" "b\xc3", 4));
  EXPECT_EQ(out, "\"a\xEF\xBF\xBD" "b\xEF\xBF\xBD\"");
  out.clear();
  append_json_string(out, "\xed\xa0\x80");  // a UTF-16 surrogate encoded: not UTF-8
  EXPECT_EQ(out, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

}  // namespace
}  // namespace podshim::core
