// Device completion from the host and the two back ends (neutral edits, OCI).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <span>

#include "cdi/edits.h"
#include "cdi/registry.h"
#include "tests/cdi/cdi_test_util.h"

namespace podshim::cdi {
namespace {

using json = nlohmann::json;

// A fake host: path → device; anything else is missing.
HostLookup fake_host(std::map<std::string, HostDevice> devs, int* calls = nullptr) {
  return [devs = std::move(devs), calls](const std::string& p) -> Result<HostDevice> {
    if (calls) ++*calls;
    auto it = devs.find(p);
    if (it == devs.end()) return fail(ENOENT, "stat of host device \"{}\": No such file or directory", p);
    return it->second;
  };
}

using testing::node;

TEST(CdiEdits, DeviceNodesCompletedFromHost) {
  auto host = fake_host({{"/dev/gpu0", {"c", 195, 0, 0660}},
                         {"/dev/sda", {"b", 8, 0, 0640}},
                         {"/dev/fifo", {"p", 0, 0, 0600}},
                         {"/host/renamed", {"c", 10, 7, 0600}}});
  ContainerEdits e;
  e.device_nodes.push_back(node("/dev/gpu0"));                        // everything from the host
  e.device_nodes.push_back(node("/dev/sda", "b"));                    // type given, numbers from host
  e.device_nodes.push_back(node("/dev/fifo"));                        // FIFO: 0:0, no cgroup rule
  DeviceNode r = node("/dev/inside");
  r.host_path = "/host/renamed";
  r.permissions = "none";
  e.device_nodes.push_back(r);
  DeviceNode keep = node("/dev/gpu0", "c", 195, 0);                   // fully specified, replaces #1
  keep.file_mode = 0600;
  keep.uid = 0;
  keep.permissions = "rw";
  e.device_nodes.push_back(keep);
  auto out = resolve_edits(e, ProcessIds{1000, 1000}, host);
  ASSERT_TRUE(out) << out.error().message;
  ASSERT_EQ(out->devices.size(), 4u);
  const LinuxDevice& sda = out->devices[0];
  EXPECT_EQ(sda.path, "/dev/sda");
  EXPECT_EQ(sda.type, "b");
  EXPECT_EQ(sda.major, 8);
  EXPECT_EQ(sda.file_mode, 0640u);
  EXPECT_EQ(sda.uid, 1000u);  // process ids as defaults
  EXPECT_EQ(out->devices[1].type, "p");
  EXPECT_EQ(out->devices[1].major, 0);
  EXPECT_EQ(out->devices[2].path, "/dev/inside");
  EXPECT_EQ(out->devices[2].major, 10);
  EXPECT_EQ(out->devices[2].minor, 7);
  const LinuxDevice& gpu = out->devices[3];  // the later definition, at its position
  EXPECT_EQ(gpu.file_mode, 0600u);
  EXPECT_EQ(gpu.uid, 0u);  // explicit 0 kept
  EXPECT_EQ(gpu.gid, 1000u);
  // One allow rule per b/c node, in CDI order, duplicates kept.
  ASSERT_EQ(out->device_rules.size(), 4u);
  EXPECT_EQ(out->device_rules[0].access, "rwm");
  EXPECT_EQ(out->device_rules[0].major, 195);
  EXPECT_EQ(out->device_rules[1].type, "b");
  EXPECT_EQ(out->device_rules[2].access, "");   // "none"
  EXPECT_EQ(out->device_rules[3].access, "rw");
}

TEST(CdiEdits, DeviceNodeErrors) {
  auto host = fake_host({{"/dev/gpu0", {"c", 195, 0, 0660}}});
  ContainerEdits missing;
  missing.device_nodes.push_back(node("/dev/absent"));
  auto r = resolve_edits(missing, {}, host);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/dev/absent"), std::string::npos);
  ContainerEdits mismatch;
  mismatch.device_nodes.push_back(node("/dev/gpu0", "b"));
  r = resolve_edits(mismatch, {}, host);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("host type mismatch (declared b, host c)"), std::string::npos)
      << r.error().message;
  // Fully specified nodes may be absent on the host (NVIDIA MIG caps): they
  // are taken as given, never looked up (fillMissingInfo, v1.0.x).
  ContainerEdits caps;
  caps.device_nodes.push_back(node("/dev/nvidia-caps/nvidia-cap21", "c", 237, 21));
  caps.device_nodes.push_back(node("/dev/fifo", "p"));
  int calls = 0;
  r = resolve_edits(caps, {}, fake_host({}, &calls));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->devices[0].file_mode);
  EXPECT_FALSE(r->devices[0].on_host);
  EXPECT_EQ(calls, 0);
  // Even when the host has them: nothing is filled in, nothing checked.
  calls = 0;
  r = resolve_edits(caps, {}, fake_host({{"/dev/nvidia-caps/nvidia-cap21", {"c", 9, 9, 0600}}}, &calls));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->devices[0].major, 237);
  EXPECT_FALSE(r->devices[0].file_mode);
  EXPECT_FALSE(r->devices[0].on_host);
  EXPECT_EQ(calls, 0);
}

TEST(CdiEdits, EachHostPathLookedUpOnce) {
  // Nodes of several specs naming the same host node (hostPath /dev/null,
  // as per-claim specs do for shared nodes) cost one lookup in all; a
  // partly specified node is looked up, a fully specified one is not.
  ContainerEdits a, b;
  for (int i = 0; i < 5; i++) {
    DeviceNode n = node(fmt::format("/dev/gpu{}-null", i));
    n.host_path = "/dev/null";
    (i % 2 ? a : b).device_nodes.push_back(n);
    a.device_nodes.push_back(node(fmt::format("/dev/gpu{}", i), "c", 195, i));
  }
  b.device_nodes.push_back(node("/dev/null", "c"));  // type only: looked up (same path)
  b.device_nodes.push_back(node("/dev/zero"));
  int calls = 0;
  auto host = fake_host({{"/dev/null", {"c", 1, 3, 0666}}, {"/dev/zero", {"c", 1, 5, 0666}}}, &calls);
  const ContainerEdits* parts[] = {&a, &b};
  auto r = resolve_edits(std::span<const ContainerEdits* const>(parts, 2), {}, host);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(calls, 2);
  ASSERT_EQ(r->devices.size(), 12u);
  for (const auto& d : r->devices) {
    if (d.host_path == "/dev/null") {
      EXPECT_EQ(d.minor, 3) << d.path;
      EXPECT_EQ(d.file_mode, 0666u) << d.path;
      EXPECT_TRUE(d.on_host) << d.path;
    }
  }
  // The OCI path makes the same lookups.
  calls = 0;
  json config = json::object();
  ASSERT_TRUE(inject_edits_oci(std::span<const ContainerEdits* const>(parts, 2), config, host));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(config["linux"]["devices"].size(), 12u);
}

TEST(CdiEdits, RealHostLookup) {
  auto null = lstat_host_device("/dev/null");
  ASSERT_TRUE(null) << null.error().message;
  EXPECT_EQ(null->type, "c");
  EXPECT_EQ(null->major, 1);
  EXPECT_EQ(null->minor, 3);
  testing::TempDir t;
  ASSERT_EQ(::mkfifo((t.path() + "/f").c_str(), 0640), 0);
  auto f = lstat_host_device(t.path() + "/f");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type, "p");
  EXPECT_EQ(f->mode, 0640u);
  testing::write_file(t.path() + "/regular", "x");
  auto reg = lstat_host_device(t.path() + "/regular");
  ASSERT_FALSE(reg);
  EXPECT_NE(reg.error().message.find("not a device node"), std::string::npos);
  ::symlink("/dev/null", (t.path() + "/link").c_str());
  EXPECT_FALSE(lstat_host_device(t.path() + "/link"));  // lstat: a symlink is not a node
}

TEST(CdiEdits, NeutralListsAreNormalised) {
  ContainerEdits e;
  e.env = {"A=1", "B=2", "A=3"};
  e.mounts = {Mount{"/h/x", "/usr/lib/x", {"ro"}, ""}, Mount{"/h/y", "/opt", {}, ""},
              Mount{"/h/z", "/usr/lib/x", {"rw"}, "bind"}, Mount{"/h/w", "/a/b", {}, ""}};
  e.hooks = {Hook{"createContainer", "/bin/h1", {"h1"}, {}, 5}, Hook{"prestart", "/bin/h0", {}, {}, {}}};
  e.additional_gids = {0, 44, 44, 45};
  auto r = resolve_edits(e, {}, fake_host({}));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->env, (std::vector<std::string>{"A=3", "B=2"}));
  ASSERT_EQ(r->mounts.size(), 3u);
  EXPECT_EQ(r->mounts[0].destination, "/opt");
  EXPECT_EQ(r->mounts[1].destination, "/a/b");
  EXPECT_EQ(r->mounts[2].destination, "/usr/lib/x");
  EXPECT_EQ(r->mounts[2].source, "/h/z");
  EXPECT_EQ(r->hooks.create_container.size(), 1u);
  EXPECT_EQ(r->hooks.prestart.size(), 1u);  // prestart is not converted (upstream)
  EXPECT_EQ(r->additional_gids, (std::vector<uint32_t>{44, 45}));
  EXPECT_EQ(clean_path("/a//b/./c/../d/"), "/a/b/d");
  EXPECT_EQ(clean_path("/../x"), "/x");
  EXPECT_EQ(clean_path(""), ".");
}

TEST(CdiEdits, ApplyToOci) {
  json config = json::parse(R"({
    "ociVersion": "1.0.2",
    "process": {"user": {"uid": 0, "gid": 0, "additionalGids": [45]}, "env": ["PATH=/bin", "SHARED=orig", "SHARED=again"]},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
               {"destination": "/dev/pts", "type": "devpts", "source": "devpts"},
               {"destination": "/data", "type": "bind", "source": "/old"}],
    "linux": {"devices": [{"path": "/dev/gpu0", "type": "c", "major": 1, "minor": 1}],
              "resources": {"devices": [{"allow": false, "access": "rwm"}]},
              "namespaces": [{"type": "mount"}]}
  })");
  ResolvedEdits e;
  e.env = {"SHARED=new", "CDI=1"};
  e.devices = {LinuxDevice{"/dev/gpu0", "c", 195, 0, 0666u, std::nullopt, 44u, "/dev/gpu0", true}};
  e.device_rules = {DeviceCgroupRule{"c", 195, 0, "rwm"}, DeviceCgroupRule{"b", 8, 0, ""}};
  e.net_devices = {NetDevice{"eth1", "net0"}};
  e.mounts = {OciMount{"/data", "/new", "", {"ro", "bind"}}, OciMount{"/usr/lib/x", "/h", "bind", {}}};
  e.hooks.create_container = {OciHook{"/bin/h", {"h", "x"}, {"K=V"}, 10}};
  e.hooks.poststop = {OciHook{"/bin/s", {}, {}, std::nullopt}};
  e.intel_rdt = IntelRdt{"clos1", "L3:0=f", "", std::vector<std::string>{"MB:0=50"}, true};
  e.additional_gids = {44, 45};
  ASSERT_TRUE(apply_to_oci(e, config));
  EXPECT_EQ(config["process"]["env"],
            json({"PATH=/bin", "SHARED=orig", "SHARED=new", "CDI=1"}));  // the last SHARED replaced
  EXPECT_EQ(config["linux"]["devices"],
            json::parse(R"([{"path":"/dev/gpu0","type":"c","major":195,"minor":0,"fileMode":438,"gid":44}])"));
  EXPECT_EQ(config["linux"]["resources"]["devices"], json::parse(R"([{"allow":false,"access":"rwm"},
      {"allow":true,"type":"c","major":195,"minor":0,"access":"rwm"},{"allow":true,"type":"b","major":8,"minor":0}])"));
  EXPECT_EQ(config["linux"]["netDevices"], json::parse(R"({"eth1":{"name":"net0"}})"));
  std::vector<std::string> dests;
  for (const auto& m : config["mounts"]) dests.push_back(m["destination"]);
  // Stable by depth: /proc stays before /dev (v0.5.2 would sort /dev first).
  EXPECT_EQ(dests, (std::vector<std::string>{"/proc", "/dev", "/data", "/dev/pts", "/usr/lib/x"}));
  EXPECT_EQ(config["mounts"][2], json::parse(R"({"destination":"/data","source":"/new","options":["ro","bind"]})"));
  EXPECT_EQ(config["hooks"]["createContainer"],
            json::parse(R"([{"path":"/bin/h","args":["h","x"],"env":["K=V"],"timeout":10}])"));
  EXPECT_EQ(config["hooks"]["poststop"], json::parse(R"([{"path":"/bin/s"}])"));
  EXPECT_EQ(config["linux"]["intelRdt"],
            json::parse(R"({"closID":"clos1","l3CacheSchema":"L3:0=f","schemata":["MB:0=50"],"enableMonitoring":true})"));
  EXPECT_EQ(config["process"]["user"]["additionalGids"], json({45, 44}));
}

TEST(CdiEdits, ApplyToOciCreatesSectionsAndRefusesMalformedConfigs) {
  ResolvedEdits e;
  e.env = {"A=1"};
  e.mounts = {OciMount{"/x", "/y", "", {}}};
  e.devices = {LinuxDevice{"/dev/x", "c", 1, 3, std::nullopt, std::nullopt, std::nullopt, "/dev/x", true}};
  e.device_rules = {DeviceCgroupRule{"c", 1, 3, "rwm"}};
  e.hooks.poststop = {OciHook{"/bin/s", {}, {}, std::nullopt}};
  json empty = json::object();
  ASSERT_TRUE(apply_to_oci(e, empty));
  EXPECT_EQ(empty["process"]["env"], json({"A=1"}));
  EXPECT_EQ(empty["linux"]["resources"]["devices"].size(), 1u);
  EXPECT_EQ(empty["hooks"]["poststop"].size(), 1u);
  json bad = json::parse(R"({"process": {"env": "A=1"}})");
  auto r = apply_to_oci(e, bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("process.env"), std::string::npos) << r.error().message;
  // Each level of a path is checked and named as the spec spells it.
  for (const auto& [config, named] : {std::pair{R"({"process": "x"})", R"("process" has type string)"},
                                      std::pair{R"({"linux": {"resources": []}})", R"("linux.resources" has type array)"},
                                      std::pair{R"({"linux": {"devices": {}}})", R"("linux.devices" has type object)"},
                                      std::pair{R"({"mounts": {}})", R"("mounts" has type object)"},
                                      std::pair{R"({"hooks": []})", R"("hooks" has type array)"},
                                      std::pair{R"({"hooks": {"poststop": "x"}})", R"("hooks.poststop" has type string)"}}) {
    json c = json::parse(config);
    r = apply_to_oci(e, c);
    ASSERT_FALSE(r) << config;
    EXPECT_NE(r.error().message.find(named), std::string::npos) << config << ": " << r.error().message;
  }
  json notobj = json::array();
  EXPECT_FALSE(apply_to_oci(e, notobj));
}

TEST(CdiEdits, InjectOciEndToEndLeavesConfigAloneOnError) {
  testing::TempDir t;
  std::string d = t.dir("d");
  testing::write_file(d + "/gpu.yaml", R"(cdiVersion: 0.5.0
kind: vendor.com/gpu
containerEdits:
  env: [COMMON=1]
devices:
- name: g0
  containerEdits:
    deviceNodes:
    - path: /dev/vendor-null
      hostPath: /dev/null
- name: broken
  containerEdits:
    deviceNodes:
    - path: /dev/vendor-absent
)");
  RegistryOptions o;
  o.spec_dirs = {d};
  o.required_owner = ::getuid();
  Registry reg(o);
  reg.refresh();
  json config = json::parse(R"({"process": {"user": {"uid": 1000, "gid": 1000}}})");
  ASSERT_TRUE(inject_oci(reg, config, {"vendor.com/gpu=g0"}));
  EXPECT_EQ(config["process"]["env"], json({"COMMON=1"}));
  const json& dev = config["linux"]["devices"][0];
  EXPECT_EQ(dev["path"], "/dev/vendor-null");
  EXPECT_EQ(dev["major"], 1);
  EXPECT_EQ(dev["minor"], 3);
  EXPECT_EQ(dev["uid"], 1000);
  EXPECT_EQ(dev["gid"], 1000);
  json before = config;
  auto r = inject_oci(reg, config, {"vendor.com/gpu=broken"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/dev/vendor-absent"), std::string::npos) << r.error().message;
  EXPECT_EQ(config, before);
  auto n = resolve_devices(reg, {"vendor.com/gpu=g0", "vendor.com/gpu=g0"}, {}, lstat_host_device);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->cdi_devices, std::vector<std::string>{"vendor.com/gpu=g0"});
}

// The one-pass de-duplication (hash index) against the plain quadratic
// reading of the same rules, on random lists with many repeated keys, both
// in the edits and in the config they are applied to.
TEST(CdiEdits, DeDuplicationMatchesTheQuadraticRules) {
  testing::Lcg rnd{7};
  for (int round = 0; round < 200; round++) {
    SCOPED_TRACE(round);
    ContainerEdits a, b;
    for (int i = 0; i < 12; i++) {
      ContainerEdits& e = rnd(2) ? a : b;
      e.env.push_back(fmt::format("K{}=v{}", rnd(5), i));
      DeviceNode n = node(fmt::format("/dev/n{}", rnd(5)), "c", 1, i);
      n.file_mode = 0600;
      e.device_nodes.push_back(n);
      e.mounts.push_back(Mount{"/h" + std::to_string(i), fmt::format("/m{}{}", rnd(4), rnd(2) ? "/x" : ""), {}, ""});
      e.additional_gids.push_back(rnd(4));
    }
    // Reference: the rules read literally, on the merged lists.
    ContainerEdits merged = a;
    merged.append(b);
    std::vector<std::string> want_env;
    for (const auto& e : merged.env) {
      auto key = e.substr(0, e.find('='));
      auto it = std::find_if(want_env.begin(), want_env.end(), [&](const std::string& x) { return x.substr(0, x.find('=')) == key; });
      if (it != want_env.end()) *it = e;
      else want_env.push_back(e);
    }
    std::vector<std::string> want_dev;
    for (const auto& n : merged.device_nodes) {
      std::erase(want_dev, n.path);
      want_dev.push_back(n.path);
    }
    std::vector<std::string> want_mounts;
    for (const auto& m : merged.mounts) {
      std::erase(want_mounts, m.container_path);
      want_mounts.push_back(m.container_path);
    }
    std::stable_sort(want_mounts.begin(), want_mounts.end(), [](const std::string& x, const std::string& y) {
      return std::count(x.begin(), x.end(), '/') < std::count(y.begin(), y.end(), '/');
    });
    const ContainerEdits* parts[] = {&a, &b};
    auto r = resolve_edits(std::span<const ContainerEdits* const>(parts, 2), {}, fake_host({}));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->env, want_env);
    std::vector<std::string> got_dev, got_mounts;
    for (const auto& d : r->devices) got_dev.push_back(d.path);
    for (const auto& m : r->mounts) got_mounts.push_back(m.destination);
    EXPECT_EQ(got_dev, want_dev);
    EXPECT_EQ(got_mounts, want_mounts);
    EXPECT_EQ(r->device_rules.size(), merged.device_nodes.size());  // duplicates kept

    // The OCI back end on a config that already has repeated keys: each
    // added entry removes the first existing one with its key.
    json config = json::parse(R"({"process":{"env":["K1=old","K1=old2","Z=1"]},
      "linux":{"devices":[{"path":"/dev/n1","type":"c","major":9,"minor":9},{"path":"/dev/n1","type":"c","major":9,"minor":8},{"path":7}]},
      "mounts":[{"destination":"/m1"},{"destination":"/m1"},{"destination":"/proc"}]})");
    json want = config;
    for (const auto& v : r->env) {
      json& arr = want["process"]["env"];
      std::optional<size_t> found;
      for (size_t i = 0; i < arr.size(); i++)
        if (arr[i].get<std::string>().substr(0, arr[i].get<std::string>().find('=')) == v.substr(0, v.find('='))) found = i;
      if (found) arr[*found] = v;
      else arr.push_back(v);
    }
    for (const auto& d : r->devices) {
      json& arr = want["linux"]["devices"];
      for (size_t i = 0; i < arr.size(); i++)
        if (arr[i]["path"].is_string() && arr[i]["path"] == d.path) {
          arr.erase(arr.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      arr.push_back(json{{"path", d.path}, {"type", d.type}, {"major", d.major}, {"minor", d.minor}, {"fileMode", 0600}});
    }
    // The one-pass OCI path (no ResolvedEdits) gives the same config.
    json one_pass = config;
    ASSERT_TRUE(inject_edits_oci(std::span<const ContainerEdits* const>(parts, 2), one_pass, fake_host({})));
    ASSERT_TRUE(apply_to_oci(*r, config));
    EXPECT_EQ(one_pass, config);
    EXPECT_EQ(config["process"]["env"], want["process"]["env"]);
    EXPECT_EQ(config["linux"]["devices"], want["linux"]["devices"]);
    std::vector<std::string> mounts;
    for (const auto& m : config["mounts"]) mounts.push_back(m["destination"]);
    std::vector<std::string> want_all = {"/m1", "/m1", "/proc"};
    for (const auto& m : r->mounts) {
      if (auto it = std::find(want_all.begin(), want_all.end(), m.destination); it != want_all.end()) want_all.erase(it);
      want_all.push_back(m.destination);
    }
    std::stable_sort(want_all.begin(), want_all.end(), [](const std::string& x, const std::string& y) {
      return std::count(x.begin(), x.end(), '/') < std::count(y.begin(), y.end(), '/');
    });
    EXPECT_EQ(mounts, want_all);
  }
}

TEST(CdiEdits, MountDepthIsTheCleanedPathsDepth) {
  // Mounts sort by the depth of the cleaned destination; the depth is
  // counted without cleaning, which must agree with clean_path.
  std::vector<std::string> dests = {"/",        "",         ".",       "a",        "a/b",     "/a",
                                    "/a/b/",    "//a//b",   "/a/./b",  "/a/../b",  "/../a",   "/..",
                                    "../a",     "../../a/b", "a/../..", "./a/./b", "/a/b/..", "a/..",
                                    "/x/y/z/../../w"};
  for (size_t i = 0; i < dests.size(); i++) {
    SCOPED_TRACE(dests[i]);
    // References at depths 0..6, already in the config, ahead of it.
    json config = json::parse(R"({"mounts":[{"destination":"r0"},{"destination":"/1"},{"destination":"/1/2"},
      {"destination":"/1/2/3"},{"destination":"/1/2/3/4"},{"destination":"/1/2/3/4/5"},{"destination":"/1/2/3/4/5/6"}]})");
    ContainerEdits e;
    e.mounts = {Mount{"/h", dests[i], {}, ""}};
    const ContainerEdits* part = &e;
    ASSERT_TRUE(inject_edits_oci(std::span<const ContainerEdits* const>(&part, 1), config, fake_host({})));
    std::string c = clean_path(dests[i]);
    size_t want = static_cast<size_t>(std::count(c.begin(), c.end(), '/'));
    ASSERT_LE(want, 6u);
    // The stable sort puts it right after the reference of its depth.
    ASSERT_EQ(config["mounts"].size(), 8u);
    EXPECT_EQ(config["mounts"][want + 1]["destination"], dests[i]) << "clean_path depth " << want;
  }
}

}  // namespace
}  // namespace podshim::cdi
