// core::append_json against core::to_json(...).dump() on generated objects:
// the status socket and the hooks-only store switched to the direct writer,
// and clients (podshimctl, the golden files) must not see a byte change.
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
    int64_t v = static_cast<int64_t>(rng() >> pick(63));
    return v;
  }
  K8sResources res() { return K8sResources{opt(), opt(), opt(), opt()}; }
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

TEST(JsonWriter, ContainersMatchNlohmann) {
  Gen g;
  for (int i = 0; i < 3000; ++i) {
    Container c = g.container();
    ASSERT_EQ(json_string(c), to_json(c).dump()) << "container #" << i;
  }
}

TEST(JsonWriter, PodsMatchNlohmann) {
  Gen g;
  for (int i = 0; i < 3000; ++i) {
    Pod p = g.pod();
    ASSERT_EQ(json_string(p), to_json(p).dump()) << "pod #" << i;
  }
}

TEST(JsonWriter, PodWithExtraMemberSortsLikeNlohmann) {
  Gen g;
  for (int i = 0; i < 500; ++i) {
    Pod p = g.pod();
    auto j = to_json(p);
    j["containerIds"] = nlohmann::json::array({"a", "b"});
    std::string out;
    append_json(out, p, [](std::string& o) { o += ",\"containerIds\":[\"a\",\"b\"]"; });
    ASSERT_EQ(out, j.dump()) << "pod #" << i;
  }
}

TEST(JsonWriter, EventsMatchNlohmann) {
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
    ASSERT_EQ(json_string(e), to_json(e).dump()) << "event #" << i;
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
