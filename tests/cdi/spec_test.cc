// Strict parsing and validation over our corpus (tests/cdi/corpus): every
// file has an expected verdict here, and every expectation names a file.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "base/fs.h"
#include "cdi/spec.h"
#include "tests/cdi/cdi_test_util.h"

namespace podshim::cdi {
namespace {

const std::string kCorpus = PODSHIM_CDI_CORPUS;

// A fuzzer find: 135 bytes on which YAML::LoadAll spins.
constexpr char kLoadAllHang[] =
    " \x22""0.3.0\x22"",\x0a"" \x22""2.2.0\x22"",\x0a""\xff""\xff""\xff""\xff""\xff""\xff""  \x22""kind\x22"": \x22""vend\x01""{\x0a""  \x22""cdiVersion\x22"": \x22""0.3.0\x22"",\x0a"" \x22""2.2.0\x22"",\x0a""\xff""\xff""\xff""\xff""\xff""\xff""  \x22""kind\x22"": \x22""vendoevices\x22"": [\x0a""    {\x0a""   }\x0a""    }\x0a""  ]\x0a""}\x0a""";

// file → substring of the expected error ("" = valid).
const std::map<std::string, std::string>& expectations() {
  static const std::map<std::string, std::string> m = {
      {"valid/v030-minimal.json", ""},
      {"valid/v-prefix.json", ""},
      {"valid/v080-no-new-fields.json", ""},
      {"valid/v040-mount-type.yaml", ""},
      {"valid/v050-hostpath-digit-name.yaml", ""},
      {"valid/v060-annotations-dotted-class.json", ""},
      {"valid/v070-intelrdt-gids.yaml", ""},
      {"valid/v110-netdevices-schemata.yaml", ""},
      {"valid/yaml-octal-filemode.yaml", ""},
      {"valid/nvidia-claim.yaml", ""},
      {"valid/dra-example-common.yaml", ""},
      {"invalid/unknown-top-field.json", "unknown field \"bogus\""},
      {"invalid/unknown-nested-field.yaml", "devices[0].containerEdits.deviceNodes[0]: unknown field \"colour\""},
      {"invalid/unknown-intelrdt-enablecmt.yaml", "unknown field \"enableCMT\""},
      {"invalid/duplicate-key.json", "duplicate key \"kind\""},
      {"invalid/duplicate-key.yaml", "duplicate key \"name\""},
      {"invalid/json-number-for-string.json", "devices[0].name: expected a string"},
      {"invalid/yaml-quoted-filemode.yaml", "fileMode: expected an integer, got string"},
      {"invalid/filemode-negative.json", "out of range"},
      {"invalid/uid-out-of-range.json", "out of range"},
      {"invalid/major-fraction.json", "major: expected an integer, got a fraction"},
      {"invalid/malformed.json", "malformed JSON"},
      {"invalid/malformed.yaml", "malformed YAML"},
      {"invalid/multi-doc.yaml", "more than one YAML document"},
      {"invalid/not-object.json", "expected an object"},
      {"invalid/empty.yaml", "no spec data"},
      {"invalid/devices-not-array.yaml", "devices: expected an array"},
      {"invalid/version-unknown.json", "invalid cdiVersion \"1.2.0\""},
      {"invalid/version-too-old.json", "must be at least v0.3.0"},
      {"invalid/version-garbage.json", "invalid cdiVersion \"latest\""},
      {"invalid/version-min-mount-type.json", "must be at least v0.4.0"},
      {"invalid/version-min-hostpath.json", "must be at least v0.5.0"},
      {"invalid/version-min-digit-name.json", "must be at least v0.5.0"},
      {"invalid/version-min-annotations.json", "must be at least v0.6.0"},
      {"invalid/version-min-dotted-class.json", "must be at least v0.6.0"},
      {"invalid/version-min-additional-gids.json", "must be at least v0.7.0"},
      {"invalid/version-min-netdevices.json", "must be at least v1.1.0"},
      {"invalid/version-min-schemata.json", "must be at least v1.1.0"},
      {"invalid/kind-one-char-vendor.json", "invalid vendor name \"x\": must be at least 2 characters"},
      {"invalid/kind-one-char-class.json", "invalid class name \"x\": must be at least 2 characters"},
      {"invalid/kind-missing-slash.json", "expected \"vendor/class\""},
      {"invalid/kind-bad-char.json", "invalid character '*'"},
      {"invalid/device-name-bad-char.json", "invalid character '/'"},
      {"invalid/device-name-trailing-dash.json", "must end with a letter or digit"},
      {"invalid/device-empty-edits.json", "empty device edits"},
      {"invalid/duplicate-device.json", "multiple devices named \"dev0\""},
      {"invalid/no-devices.json", "no devices"},
      {"invalid/env-no-equals.json", "invalid environment variable \"NOEQ\""},
      {"invalid/env-leading-equals.json", "invalid environment variable \"=x\""},
      {"invalid/devnode-empty-path.json", "empty path"},
      {"invalid/devnode-bad-type.json", "invalid type \"x\""},
      {"invalid/devnode-bad-permissions.json", "invalid permissions \"rwx\""},
      {"invalid/devnode-negative-major.json", "negative"},
      {"invalid/devnode-relative-path.json", "must be absolute"},
      {"invalid/hook-bad-name.json", "invalid hook name \"preStart\""},
      {"invalid/hook-empty-path.json", "empty path"},
      {"invalid/hook-bad-env.json", "invalid environment variable \"X\""},
      {"invalid/mount-empty-host.json", "empty host path"},
      {"invalid/mount-empty-container.json", "empty container path"},
      {"invalid/mount-relative-container.json", "must be absolute"},
      {"invalid/mount-dotdot-container.json", "must not contain \"..\""},
      {"invalid/intelrdt-bad-closid.json", "invalid intelRdt closID \"a/b\""},
      {"invalid/netdev-duplicate-host.json", "duplicate hostInterfaceName \"eth1\""},
      {"invalid/netdev-empty-name.json", "empty name"},
  };
  return m;
}

TEST(CdiCorpus, EveryFileHasAnExpectation) {
  const std::vector<std::string> listed = testing::corpus_files(kCorpus);
  const std::set<std::string> files(listed.begin(), listed.end());
  for (const auto& f : files) EXPECT_TRUE(expectations().count(f)) << "no expectation for " << f;
  for (const auto& [f, _] : expectations()) EXPECT_TRUE(files.count(f)) << "missing corpus file " << f;
}

TEST(CdiCorpus, Verdicts) {
  for (const auto& [file, want] : expectations()) {
    SCOPED_TRACE(file);
    auto data = fs::read_file(kCorpus + "/" + file);
    ASSERT_TRUE(data) << data.error().message;
    auto fmt = format_for_path(file);
    ASSERT_TRUE(fmt);
    auto spec = load_spec(*data, *fmt);
    if (want.empty()) {
      EXPECT_TRUE(spec) << spec.error().message;
    } else {
      ASSERT_FALSE(spec) << "accepted an invalid spec";
      EXPECT_NE(spec.error().message.find(want), std::string::npos)
          << "want \"" << want << "\", got: " << spec.error().message;
    }
  }
}

TEST(CdiParse, YamlOctalFileModeAndModel) {
  auto data = fs::read_file(kCorpus + "/valid/yaml-octal-filemode.yaml");
  ASSERT_TRUE(data);
  auto s = load_spec(*data, Format::Yaml);
  ASSERT_TRUE(s) << s.error().message;
  const DeviceNode& n = s->devices.at(0).edits.device_nodes.at(0);
  EXPECT_EQ(n.file_mode, 438u);  // 0666
  EXPECT_EQ(n.type, "c");
  EXPECT_EQ(n.major, 195);
  EXPECT_EQ(n.permissions, "rw");
  EXPECT_EQ(n.uid, 0u);  // explicit 0 is kept, distinct from unset
  EXPECT_EQ(n.gid, 44u);
}

TEST(CdiParse, YamlScalarResolution) {
  auto parse_mode = [](const std::string& mode) -> Result<uint32_t> {
    auto s = parse_spec("cdiVersion: 0.3.0\nkind: aa/bb\ndevices:\n- name: d\n  containerEdits:\n"
                        "    deviceNodes: [{path: /dev/x, fileMode: " + mode + "}]\n",
                        Format::Yaml);
    if (!s) return Unexpected(s.error());
    return *s->devices[0].edits.device_nodes[0].file_mode;
  };
  EXPECT_EQ(parse_mode("0666").value(), 0666u);
  EXPECT_EQ(parse_mode("0o640").value(), 0640u);
  EXPECT_EQ(parse_mode("0x1ff").value(), 0777u);
  EXPECT_EQ(parse_mode("420").value(), 420u);
  EXPECT_EQ(parse_mode("4_2_0").value(), 420u);  // go-yaml v2 drops underscores
  EXPECT_EQ(parse_mode("!!int 0600").value(), 0600u);
  EXPECT_FALSE(parse_mode("'0666'"));
  EXPECT_FALSE(parse_mode("6.5"));
  EXPECT_FALSE(parse_mode("0999"));  // not octal: a float in YAML 1.1
  EXPECT_FALSE(parse_mode("yes"));
  EXPECT_FALSE(parse_mode("-1"));
  EXPECT_FALSE(parse_mode("99999999999999999999999"));
  EXPECT_FALSE(parse_mode("!!binary AAAA"));
  // Plain ints become strings in string fields, as sigs.k8s.io/yaml does.
  auto s = parse_spec("cdiVersion: 0.5.0\nkind: aa/bb\ndevices:\n- name: 0\n  containerEdits: {env: [A=1]}\n",
                      Format::Yaml);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->devices[0].name, "0");
  EXPECT_EQ(s->version, "0.5.0");
}

TEST(CdiParse, NullMeansAbsent) {
  auto s = load_spec(R"({"cdiVersion":"0.3.0","kind":"aa/bb","containerEdits":null,"annotations":null,
    "devices":[{"name":"d","containerEdits":{"env":["A=1"],"mounts":null,"intelRdt":null}}]})",
                     Format::Json);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->devices[0].edits.intel_rdt);
}

// Annotations are kept only when present (Annotations is boxed): an empty
// or null map is no annotation for the version rule, and the checks still
// see every key of a present one, at spec and at device level.
TEST(CdiParse, AnnotationsPresentAbsentAndChecked) {
  auto spec = [](const std::string& version, const std::string& spec_ann, const std::string& dev_ann) {
    return fmt::format(R"({{"cdiVersion":"{}","kind":"aa/bb","annotations":{},
      "devices":[{{"name":"d","annotations":{},"containerEdits":{{"env":["A=1"]}}}}]}})",
                       version, spec_ann, dev_ann);
  };
  auto ok = load_spec(spec("0.3.0", "{}", "null"), Format::Json);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_FALSE(ok->annotations);
  EXPECT_FALSE(ok->devices[0].annotations);
  auto with = load_spec(spec("0.6.0", R"({"a":"1"})", R"({"b":"2","c":"3"})"), Format::Json);
  ASSERT_TRUE(with) << with.error().message;
  ASSERT_TRUE(with->devices[0].annotations);
  EXPECT_EQ(with->devices[0].annotations->at("c"), "3");
  EXPECT_EQ(with->annotations->size(), 1u);
  auto too_old = load_spec(spec("0.5.0", "{}", R"({"b":"2"})"), Format::Json);
  ASSERT_FALSE(too_old);
  EXPECT_NE(too_old.error().message.find("at least v0.6.0"), std::string::npos) << too_old.error().message;
  for (auto [s_ann, d_ann, want] : {std::tuple{R"({"":"x"})", "{}", "spec: empty annotation key"},
                                    std::tuple{"{}", R"({"":"x"})", "device \"d\": empty annotation key"}}) {
    auto bad = load_spec(spec("0.6.0", s_ann, d_ann), Format::Json);
    ASSERT_FALSE(bad) << s_ann << d_ann;
    EXPECT_NE(bad.error().message.find(want), std::string::npos) << bad.error().message;
  }
  std::string big(300 * 1024, 'v');
  auto large = load_spec(spec("0.6.0", "{}", R"({"k":")" + big + R"("})"), Format::Json);
  ASSERT_FALSE(large);
  EXPECT_NE(large.error().message.find("larger than 256 KiB"), std::string::npos) << large.error().message;
}

TEST(CdiParse, HostileInputIsAnErrorNotACrash) {
  std::string deep_json(10000, '[');
  EXPECT_FALSE(parse_spec(deep_json, Format::Json));
  std::string deep_yaml(5000, '[');
  EXPECT_FALSE(parse_spec(deep_yaml, Format::Yaml));
  // Billion laughs: aliases expanding beyond the node budget.
  std::string laughs;
  laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; c++) {
    std::string p(1, static_cast<char>(c - 1));
    laughs += std::string(1, c) + ": &" + std::string(1, c) + " [";
    for (int i = 0; i < 10; i++) laughs += (i ? ", *" : "*") + p;
    laughs += "]\n";
  }
  auto r = parse_spec(laughs, Format::Yaml);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("too large"), std::string::npos) << r.error().message;
  EXPECT_FALSE(parse_spec(std::string("\0\xff\xfe", 3), Format::Json));
  EXPECT_FALSE(parse_spec(std::string("\0\xff\xfe", 3), Format::Yaml));
  EXPECT_FALSE(parse_spec("{\"cdiVersion\": \"\\ud800\"}", Format::Json));
  // yaml-cpp 0.7's LoadAll, used before libyaml, never returned on this input
  // (found by cdi_fuzz); kept as a regression input.
  auto hang = parse_spec(std::string_view(kLoadAllHang, sizeof kLoadAllHang - 1), Format::Yaml);
  EXPECT_FALSE(hang);
}

TEST(CdiVersion, KnownVersionsAndMinimum) {
  for (const char* v : {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0", "v1.1.0"})
    EXPECT_TRUE(parse_version(v)) << v;
  for (const char* v : {"", "1.2.0", "1.0", "vv1.0.0", "1.0.0 ", "V1.0.0"}) EXPECT_FALSE(parse_version(v)) << v;
  EXPECT_EQ(parse_version("0.1.0").value(), (Version{0, 1, 0}));  // known, but below the minimum
  Spec s;
  s.kind = "aa/bb";
  s.devices.push_back(Device{"a", {}, {}});
  EXPECT_EQ(minimum_required_version(s), kEarliestVersion);
  s.devices[0].edits.mounts.push_back(Mount{"/a", "/b", {}, "bind"});
  EXPECT_EQ(minimum_required_version(s), (Version{0, 4, 0}));
  s.devices[0].name = "9";
  EXPECT_EQ(minimum_required_version(s), (Version{0, 5, 0}));
  s.kind = "aa/b.b";
  EXPECT_EQ(minimum_required_version(s), (Version{0, 6, 0}));
  s.edits.additional_gids.push_back(1);
  EXPECT_EQ(minimum_required_version(s), (Version{0, 7, 0}));
  s.devices[0].edits.intel_rdt = IntelRdt{};
  EXPECT_EQ(minimum_required_version(s), (Version{0, 7, 0}));
  s.devices[0].edits.intel_rdt->enable_monitoring = true;
  EXPECT_EQ(minimum_required_version(s), (Version{1, 1, 0}));
}

TEST(CdiEdits, ThinVecCopiesDeepAndIsEmptyWithoutStorage) {
  ThinVec<uint32_t> a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.begin(), a.end());
  a.push_back(1);
  ThinVec<uint32_t> b = a;
  b.push_back(2);
  EXPECT_EQ(a, std::vector<uint32_t>{1});
  EXPECT_EQ(b, (std::vector<uint32_t>{1, 2}));
  a.append(b);
  EXPECT_EQ(a, (std::vector<uint32_t>{1, 1, 2}));
  a = std::vector<uint32_t>{};
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b[1], 2u);
  // A list of the rare fields costs a pointer, not a std::vector.
  static_assert(sizeof(ThinVec<NetDevice>) == sizeof(void*));
}

TEST(CdiEdits, AppendConcatenatesAndLaterIntelRdtWins) {
  ContainerEdits a, b;
  a.env = {"A=1"};
  a.intel_rdt = IntelRdt{"one", "", "", std::nullopt, false};
  b.env = {"B=2"};
  b.intel_rdt = IntelRdt{"two", "", "", std::nullopt, false};
  b.additional_gids = {5};
  a.append(b);
  EXPECT_EQ(a.env, (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_EQ(a.intel_rdt->clos_id, "two");
  EXPECT_EQ(a.additional_gids, std::vector<uint32_t>{5});
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(ContainerEdits{}.empty());
}

}  // namespace
}  // namespace podshim::cdi

namespace podshim::cdi {
namespace {

TEST(CdiParse, DocumentMarkers) {
  const char* body = "cdiVersion: 0.3.0\nkind: aa/bb\ndevices: [{name: d, containerEdits: {env: [A=1]}}]\n";
  EXPECT_TRUE(load_spec(std::string("---\n") + body, Format::Yaml));
  EXPECT_TRUE(load_spec(std::string("# comment\n%YAML 1.1\n---\n") + body + "...\n", Format::Yaml));
  EXPECT_TRUE(load_spec("--- {cdiVersion: 0.3.0, kind: aa/bb, devices: [{name: d, containerEdits: {env: [A=1]}}]}\n",
                        Format::Yaml));
  EXPECT_FALSE(load_spec(std::string(body) + "---\n", Format::Yaml));
  EXPECT_FALSE(load_spec(std::string("--- {a: 1}\n---\n") + body, Format::Yaml));
  // "---" inside a value is not a marker.
  auto s = load_spec("cdiVersion: 0.3.0\nkind: aa/bb\ndevices:\n- name: d\n  containerEdits:\n    env: [\"A=---\"]\n",
                     Format::Yaml);
  EXPECT_TRUE(s) << s.error().message;
}

}  // namespace
}  // namespace podshim::cdi
