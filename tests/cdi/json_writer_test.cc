// The JSON text writer and the OCI text back end against nlohmann's dump():
// byte for byte on varied documents and edits, escaping of odd strings,
// and refusal of what dump() would throw on.
#include <gtest/gtest.h>

#include <map>
#include <span>

#include "base/str.h"
#include "cdi/edits.h"
#include "cdi/json_writer.h"
#include "tests/cdi/cdi_test_util.h"

namespace podshim::cdi {
namespace {

using json = nlohmann::json;

std::string written(const json& j, int indent) {
  JsonWriter w(indent, 1);  // a tiny first buffer, so growth is exercised too
  w.value(j);
  EXPECT_TRUE(w.ok());
  return w.take();
}

// Every byte below 0x80, quotes and backslashes, multi-byte UTF-8 of each
// length, and U+007F (not escaped by nlohmann without ensure_ascii).
std::vector<std::string> odd_strings() {
  std::vector<std::string> v = {"", "plain", "quote\"d", "back\\slash", "tab\there", "nl\nand\rcr",
                                "\b\f", "\x7f", "caf\xc3\xa9", "\xe2\x82\xac euro", "\xf0\x9f\x98\x80 smile",
                                "end\\", "\"", "/slash/", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf"};
  std::string all;
  for (int c = 0; c < 0x80; c++) all += static_cast<char>(c);
  v.push_back(all);
  v.push_back(std::string("nul\0inside", 10));
  return v;
}

TEST(CdiJsonWriter, MatchesDumpOnVariedDocuments) {
  json doc = json::parse(R"({"b": [1, -2, 3000000000, 18446744073709551615, -9223372036854775808],
    "a": {"nested": {"deeper": [[], {}, [[]], {"x": null}]}, "f": 1.5, "g": -0.0, "h": 1e300, "i": 0.1},
    "empty_obj": {}, "empty_arr": [], "t": true, "n": null, "s": "x"})");
  json strings = json::array();
  for (const auto& s : odd_strings()) strings.push_back(s);
  doc["strings"] = strings;
  json keyed = json::object();
  for (const auto& s : odd_strings()) keyed[s] = s;
  doc["keyed"] = keyed;
  for (int indent : {-1, 0, 1, 2, 4}) {
    SCOPED_TRACE(indent);
    EXPECT_EQ(written(doc, indent), doc.dump(indent));
    for (const auto& s : odd_strings()) EXPECT_EQ(written(json(s), indent), json(s).dump(indent));
    EXPECT_EQ(written(json::array(), indent), "[]");
    EXPECT_EQ(written(json::object(), indent), "{}");
  }
}

TEST(CdiJsonWriter, RefusesWhatDumpThrowsOn) {
  // Lone continuation, truncated sequences, overlong forms, surrogates,
  // above U+10FFFF, bytes never valid.
  for (std::string bad : {"\x80", "\xc3", "a\xe2\x82", "\xf0\x9f\x98", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80",
                          "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "ok\xfe"}) {
    SCOPED_TRACE(json(bad).dump(-1, ' ', false, json::error_handler_t::replace));
    EXPECT_FALSE(str::valid_utf8(bad));  // the one check, refusing what dump() throws on
    EXPECT_THROW(json(bad).dump(), json::type_error);
    JsonWriter w(-1);
    w.begin_array();
    w.element();
    w.string("fine");
    w.element();
    w.string(bad);
    w.end_array();
    EXPECT_FALSE(w.ok());
    EXPECT_EQ(w.bad_string(), bad);
  }
  for (const auto& s : odd_strings()) {
    EXPECT_TRUE(str::valid_utf8(s)) << json(s).dump();
    EXPECT_NO_THROW(json(s).dump());
  }
}

// string() copies eight plain bytes at a time: a byte that needs care at
// any offset of a longer string (inside a word, across a word boundary, in
// the tail) must still be escaped, checked or refused as dump() does.
TEST(CdiJsonWriter, EveryOffsetOfAByteThatNeedsCare) {
  const std::string plain = "/var/lib/gpu/0123456789abcdef-x";
  std::vector<std::string> specials = {"\"", "\\", "\x01", "\x1f", "\n", " ", "\x7f", "\xc3\xa9",
                                       "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
  specials.push_back(std::string(1, '\0'));
  for (const auto& sp : specials) {
    for (size_t at = 0; at <= plain.size(); at++) {
      std::string s = plain.substr(0, at) + sp + plain.substr(at);
      SCOPED_TRACE(json(s).dump() + " at " + std::to_string(at));
      for (int indent : {-1, 2}) EXPECT_EQ(written(json(s), indent), json(s).dump(indent));
    }
  }
  for (const std::string bad : {"\x80", "\xc3", "\xff", "\xe2\x82"}) {
    for (size_t at = 0; at <= plain.size(); at++) {
      std::string s = plain.substr(0, at) + bad + plain.substr(at);
      JsonWriter w(-1);
      w.string(s);
      EXPECT_FALSE(w.ok()) << at;
      EXPECT_EQ(w.bad_string(), s);
    }
  }
}

TEST(CdiJsonWriter, OwnFieldsAndOverride) {
  for (int indent : {-1, 2}) {
    json doc = {{"list", json::array({1, 2})}, {"other", json::array({3})}};
    JsonWriter w(indent);
    const json* list = &doc["list"];
    w.set_override([list](const json& j, JsonWriter& jw) {
      if (&j != list) return false;
      jw.begin_array();
      jw.element();
      jw.begin_object();
      jw.plain_key("k");
      jw.integer(-5);
      jw.key("q\"");  // keys in the order a std::map holds them
      jw.boolean(false);
      jw.plain_key("u");
      jw.unsigned_integer(7);
      jw.end_object();
      jw.end_array();
      return true;
    });
    w.value(doc);
    json expect = {{"list", json::array({{{"k", -5}, {"u", 7}, {"q\"", false}}})}, {"other", json::array({3})}};
    EXPECT_EQ(w.take(), expect.dump(indent));
  }
}

// --- The OCI text back end against the tree back end + dump().

using testing::node;

Result<HostDevice> host(const std::string& p) {
  static const std::map<std::string, HostDevice> devs = {
      {"/dev/null", {"c", 1, 3, 0666}}, {"/dev/sda", {"b", 8, 0, 0640}}, {"/dev/fifo", {"p", 0, 0, 0600}}};
  auto it = devs.find(p);
  if (it == devs.end()) return fail(ENOENT, "stat of host device \"{}\": No such file or directory", p);
  return it->second;
}

// Both back ends on the same input: the same success or the same error, and
// the same bytes at every indentation.
void expect_same(std::vector<ContainerEdits> parts, const std::string& config_text) {
  std::vector<const ContainerEdits*> ptrs;
  for (const auto& p : parts) ptrs.push_back(&p);
  for (int indent : {-1, 2, 4}) {
    SCOPED_TRACE(indent);
    json tree = json::parse(config_text);
    auto r = inject_edits_oci(ptrs, tree, host);
    auto text = inject_edits_oci_text(ptrs, json::parse(config_text), indent, host);
    ASSERT_EQ(r.has_value(), text.has_value()) << (r ? text.error().message : r.error().message);
    if (r) EXPECT_EQ(*text, tree.dump(indent));
    else EXPECT_EQ(r.error().message, text.error().message);
  }
}

ContainerEdits varied_edits(const std::string& odd) {
  ContainerEdits e;
  e.env = {"A=1", "B=" + odd, "PATH=/cdi", "A=2", "EMPTY=", "NOEQUALS", "Q\"=\\"};
  e.device_nodes.push_back(node("/dev/null"));  // from the host
  e.device_nodes.push_back(node("/dev/sda", "b"));
  e.device_nodes.push_back(node("/dev/fifo"));
  DeviceNode full = node("/dev/gpu" + odd, "c", 195, 7);
  full.file_mode = 0600;
  full.uid = 0;
  full.gid = 44;
  full.permissions = "rw";
  e.device_nodes.push_back(full);
  DeviceNode none = node("/dev/renamed", "", 0, 0);
  none.host_path = "/dev/null";
  none.permissions = "none";
  e.device_nodes.push_back(none);
  e.device_nodes.push_back(node("/dev/null", "c", 1, 3));  // replaces the first, later position
  e.mounts.push_back(Mount{"/host/a", "/usr/lib/a" + odd, {"ro", "bind", odd}, ""});
  e.mounts.push_back(Mount{"", "/", {}, "tmpfs"});
  e.mounts.push_back(Mount{"/host/proc", "/proc", {"rbind"}, "bind"});  // replaces the config's /proc
  e.mounts.push_back(Mount{"/x", "/a/../b/./c//", {}, ""});
  e.mounts.push_back(Mount{"/host/a2", "/usr/lib/a" + odd, {}, ""});  // same destination: later wins
  Hook h{"createContainer", "/bin/hook", {"hook", odd}, {"E=" + odd}, 5};
  e.hooks.push_back(h);
  e.hooks.push_back(Hook{"prestart", "/bin/pre", {}, {}, std::nullopt});
  e.hooks.push_back(Hook{"poststop", "/bin/" + odd, {"x"}, {}, -1});
  e.hooks.push_back(Hook{"startContainer", "/bin/s", {}, {"K=V"}, 0});
  e.net_devices.push_back(NetDevice{"eth" + odd, "net0"});
  e.additional_gids = {0, 44, 1000, 44};
  return e;
}

TEST(CdiOciText, MatchesTheTreeBackEnd) {
  const std::vector<std::string> configs = {
      "{}",
      R"({"process": {"user": {"uid": 1000, "gid": 1000, "additionalGids": [44]}, "env": ["A=0", "A=00", 5, "B"]}})",
      R"({"ociVersion": "1.0.2", "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
          {"destination": "/dev", "type": "tmpfs"}, {"destination": "/proc"}, 7, {"destination": 3}, {"x": 1}],
          "linux": {"devices": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3}, {"path": "/dev/keep"},
          "junk", {"path": "/dev/null"}], "resources": {"devices": [{"allow": false, "access": "rwm"}]},
          "netDevices": {"eth0": {"name": "x"}}, "intelRdt": {"closID": "old"}},
          "hooks": {"prestart": [{"path": "/old"}], "poststart": [{"path": "/p"}]},
          "annotations": {"k": "v\n\u0001"}, "f": 2.5})",
      R"({"process": null, "linux": null, "mounts": null, "hooks": {"createContainer": null}})",
  };
  for (const std::string odd : {"plain", "q\"uote", "back\\slash", "nl\n\x01\x1f", "caf\xc3\xa9 \xf0\x9f\x98\x80"}) {
    for (const auto& config : configs) {
      SCOPED_TRACE(config);
      SCOPED_TRACE(json(odd).dump());
      ContainerEdits spec_level;
      spec_level.env = {"SPEC=1", "A=spec"};
      spec_level.hooks.push_back(Hook{"createContainer", "/bin/spec-hook", {"a"}, {}, std::nullopt});
      spec_level.intel_rdt = IntelRdt{"clos" + odd, "L3:0=f", "", std::vector<std::string>{"MB:0=50"}, true};
      expect_same({spec_level, varied_edits(odd)}, config);
      expect_same({varied_edits(odd)}, config);
      expect_same({ContainerEdits{}}, config);
      ContainerEdits rules_only;  // rules but every node a FIFO: devices only
      rules_only.device_nodes.push_back(node("/dev/fifo"));
      expect_same({rules_only}, config);
    }
  }
}

TEST(CdiOciText, SameErrorsAsTheTreeBackEnd) {
  ContainerEdits e = varied_edits("x");
  for (const std::string config :
       {"[]", "5", R"({"process": 5})", R"({"process": {"env": {}}})", R"({"linux": []})",
        R"({"linux": {"devices": {}}})", R"({"linux": {"resources": {"devices": 1}}})", R"({"mounts": {}})",
        R"({"hooks": []})", R"({"hooks": {"poststop": {}}})", R"({"linux": {"netDevices": []}})",
        R"({"process": {"user": {"additionalGids": {}}}})"}) {
    SCOPED_TRACE(config);
    expect_same({e}, config);
  }
  ContainerEdits missing;
  missing.device_nodes.push_back(node("/dev/not-there"));
  expect_same({missing}, "{}");
  ContainerEdits bad_hook;
  bad_hook.hooks.push_back(Hook{"nonsense", "/bin/x", {}, {}, std::nullopt});
  expect_same({bad_hook}, "{}");
}

TEST(CdiOciText, RefusesInvalidUtf8) {
  ContainerEdits e;
  e.env = {"BAD=\xc3("};
  const ContainerEdits* p = &e;
  auto text = inject_edits_oci_text(std::span(&p, 1), json::object(), -1, host);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().code, EINVAL);
  EXPECT_NE(text.error().message.find("not valid UTF-8"), std::string::npos) << text.error().message;
}

}  // namespace
}  // namespace podshim::cdi
