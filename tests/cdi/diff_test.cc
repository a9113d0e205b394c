// Differential test against the reference Go implementation as Debian ships
// it (container-device-interface v0.5.2, in Debian's
// golang-github-container-orchestrated-devices-container-device-interface-dev):
// the same spec directories through both, the same verdicts and the same OCI edits. Where
// v0.5.2 differs from v1.x (which podshim follows) or where podshim is
// deliberately stricter, the difference is asserted per case, never skipped.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "cdi/edits.h"
#include "cdi/registry.h"
#include "tests/cdi/cdi_ref.h"
#include "tests/cdi/cdi_test_util.h"

namespace podshim::cdi {
namespace {

using json = nlohmann::json;
using testing::TempDir;
using testing::write_file;

const std::string kCorpus = PODSHIM_CDI_CORPUS;

class CdiDiff : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::skip_unless_cdi_ref("cdi-diff");  // exit 77 without Go or the Go CDI package
    bin_ = testing::build_cdi_ref(&build_error_);
  }
  void SetUp() override { ASSERT_FALSE(bin_.empty()) << build_error_; }
  static std::string bin_, build_error_;
};
std::string CdiDiff::bin_, CdiDiff::build_error_;

RegistryOptions options_for(std::vector<std::string> dirs) {
  RegistryOptions o;
  o.spec_dirs = std::move(dirs);
  o.required_owner = ::getuid();
  return o;
}

// ---------------------------------------------------------------------------
// Verdicts over the corpus, one file per directory (a Go panic takes the
// whole process down, so files are isolated).

enum class Go { Same, Accepts, Rejects, Panics };
struct Difference {
  Go go;
  const char* why;
};

// Every corpus file where v0.5.2's verdict differs from ours, and why.
const std::map<std::string, Difference>& verdict_differences() {
  static const std::map<std::string, Difference> m = {
      // v0.5.2 knows cdiVersions up to 0.5.0 only, without the 'v' prefix.
      {"valid/v-prefix.json", {Go::Rejects, "v0.5.2: no 'v' prefix, no 1.0.0"}},
      {"valid/v080-no-new-fields.json", {Go::Rejects, "v0.5.2: versions above 0.5.0 unknown"}},
      {"valid/v060-annotations-dotted-class.json", {Go::Rejects, "v0.5.2: versions above 0.5.0 unknown"}},
      {"valid/v070-intelrdt-gids.yaml", {Go::Rejects, "v0.5.2: versions above 0.5.0 unknown"}},
      {"valid/v110-netdevices-schemata.yaml", {Go::Rejects, "v0.5.2: versions above 0.5.0 unknown"}},
      // v0.5.2 has no minimum-version rule and accepts 0.1.0/0.2.0.
      {"invalid/version-too-old.json", {Go::Accepts, "v0.5.2 whitelists 0.2.0"}},
      {"invalid/version-min-mount-type.json", {Go::Accepts, "v0.5.2: no minimum-version check"}},
      {"invalid/version-min-hostpath.json", {Go::Accepts, "v0.5.2: no minimum-version check"}},
      {"invalid/version-min-digit-name.json", {Go::Accepts, "v0.5.2: no minimum-version check"}},
      // v0.5.2 accepts an empty device list; HEAD does not.
      {"invalid/no-devices.json", {Go::Accepts, "v0.5.2 accepts an empty device list"}},
      // Negative device numbers: rejected on HEAD, not checked in v0.5.2.
      {"invalid/devnode-negative-major.json", {Go::Accepts, "v0.5.2 has no negative-number check"}},
      // podshim is stricter than every upstream version here.
      {"invalid/devnode-relative-path.json", {Go::Accepts, "podshim: container paths must be absolute"}},
      {"invalid/mount-relative-container.json", {Go::Accepts, "podshim: container paths must be absolute"}},
      {"invalid/mount-dotdot-container.json", {Go::Accepts, "podshim: no '..' in container paths"}},
      {"invalid/json-number-for-string.json", {Go::Accepts, "upstream parses JSON as YAML and stringifies 7"}},
      {"invalid/multi-doc.yaml", {Go::Accepts, "upstream reads the first YAML document only"}},
      // Upstream panics (slice bounds out of range [1:0]) on one-character
      // vendors and classes; podshim rejects them with an error.
      {"invalid/kind-one-char-vendor.json", {Go::Panics, "upstream panics on a 1-character vendor"}},
      {"invalid/kind-one-char-class.json", {Go::Panics, "upstream panics on a 1-character class"}},
  };
  return m;
}

TEST_F(CdiDiff, CorpusVerdicts) {
  const std::vector<std::string> files = testing::corpus_files(kCorpus);
  ASSERT_GT(files.size(), 50u);
  size_t differences_seen = 0;
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    TempDir t;
    std::string d = t.dir("specs");
    std::string base = f.substr(f.find('/') + 1);
    std::filesystem::copy_file(kCorpus + "/" + f, d + "/" + base);
    ::chmod((d + "/" + base).c_str(), 0644);

    Registry reg(options_for({d}));
    reg.refresh();
    ASSERT_EQ(reg.verdicts().size(), 1u);
    bool ours_valid = reg.verdicts()[0].errors.empty();
    EXPECT_EQ(ours_valid, f.rfind("valid/", 0) == 0) << "our verdict disagrees with the corpus";

    auto go = testing::run_cdi_ref(bin_, {"-dir", d}, t.path());
    Go want = Go::Same;
    if (auto it = verdict_differences().find(f); it != verdict_differences().end()) want = it->second.go;
    if (want == Go::Panics) {
      differences_seen++;
      EXPECT_NE(go.exit_code, 0);
      EXPECT_NE(go.err.find("panic"), std::string::npos) << go.err;
      EXPECT_FALSE(ours_valid);
      continue;
    }
    ASSERT_EQ(go.exit_code, 0) << go.err;
    ASSERT_TRUE(go.json.is_object()) << go.out;
    bool go_valid = !go.json["errors"].contains(d + "/" + base);
    switch (want) {
      case Go::Same:
        EXPECT_EQ(go_valid, ours_valid) << "go: " << go.json["errors"].dump() << "\nours: "
                                        << (ours_valid ? "" : reg.verdicts()[0].errors[0]);
        break;
      case Go::Accepts:
        differences_seen++;
        EXPECT_TRUE(go_valid) << "known difference no longer holds: " << verdict_differences().at(f).why;
        EXPECT_FALSE(ours_valid);
        break;
      case Go::Rejects:
        differences_seen++;
        EXPECT_FALSE(go_valid) << "known difference no longer holds: " << verdict_differences().at(f).why;
        EXPECT_TRUE(ours_valid);
        break;
      case Go::Panics:
        break;
    }
    // Valid on both sides: the same devices.
    if (go_valid && ours_valid) {
      std::vector<std::string> go_devices = go.json["devices"];
      EXPECT_EQ(go_devices, reg.devices());
    }
  }
  EXPECT_EQ(differences_seen, verdict_differences().size());
}

// ---------------------------------------------------------------------------
// Injection: the same requests into the same config.

// Known v0.5.2 differences a case exhibits (each is asserted, then
// normalised away before the exact comparison).
enum Diff : unsigned {
  kNone = 0,
  // v0.5.2 sorts mounts by depth, then by destination, unstably; v1.x sorts
  // stably by depth only (7d4fb44).
  kMountOrder = 1,
  // runtime-tools keys its env cache by "K=V" (runtime-tools#798): a
  // pre-existing K is not replaced, K=new is appended. podshim replaces it
  // (HEAD); after runc's last-wins de-duplication both give the same env.
  kEnvAppend = 2,
  // v1.1.0 fills fileMode from the host (457489d) for the nodes it looks up;
  // v0.5.2 does not.
  kFileModeFill = 4,
  // v0.5.2's error lists every requested device; HEAD only the unresolved.
  kUnresolvedWording = 8,
};

struct InjectCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> etc, run;  // file name → content
  const char* config;
  std::vector<std::string> devices;
  bool ok;
  unsigned diffs;
};

size_t depth(const std::string& d) {
  std::string c = clean_path(d);
  return static_cast<size_t>(std::count(c.begin(), c.end(), '/'));
}

// The parts of an OCI config that CDI edits.
json extract(const json& c) {
  json out = json::object();
  auto at = [&](std::initializer_list<const char*> path) -> json {
    const json* p = &c;
    for (const char* k : path) {
      if (!p->is_object() || !p->contains(k)) return nullptr;
      p = &(*p)[k];
    }
    return *p;
  };
  out["env"] = at({"process", "env"});
  out["gids"] = at({"process", "user", "additionalGids"});
  out["devices"] = at({"linux", "devices"});
  out["rules"] = at({"linux", "resources", "devices"});
  out["mounts"] = at({"mounts"});
  out["hooks"] = at({"hooks"});
  for (auto& [k, v] : out.items())
    if ((v.is_array() || v.is_object()) && v.empty()) v = nullptr;
  return out;
}

std::map<std::string, std::string> runc_env(const json& env) {
  std::map<std::string, std::string> m;  // runc prepareEnv: the last value wins
  if (!env.is_array()) return m;
  for (const auto& e : env) {
    std::string s = e;
    m[s.substr(0, s.find('='))] = s.substr(s.find('=') + 1);
  }
  return m;
}

const char* kConfig = R"({
  "ociVersion": "1.0.2",
  "process": {"user": {"uid": 0, "gid": 0}, "cwd": "/", "args": ["sh"], "env": ["PATH=/usr/bin:/bin"]},
  "root": {"path": "rootfs"},
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
             {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]},
             {"destination": "/sys", "type": "sysfs", "source": "sysfs"},
             {"destination": "/dev/pts", "type": "devpts", "source": "devpts"}],
  "linux": {"devices": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3, "fileMode": 438, "gid": 5}],
            "resources": {"devices": [{"allow": false, "access": "rwm"}]}}
})";

const char* kNvidia = R"(cdiVersion: 0.5.0
kind: k8s.gpu.nvidia.com/claim
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
devices:
- name: uid1-gpu-0
  containerEdits:
    deviceNodes:
    - {path: /dev/nvidia0, type: c, major: 195, minor: 0}
    - {path: /dev/nvidia-caps/nvidia-cap21, type: c, major: 237, minor: 21, permissions: r}
    mounts:
    - {hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1, options: [ro, nosuid, nodev, bind]}
    - {hostPath: /run/nvidia, containerPath: /aaa, options: [bind]}
)";

const char* kHostFilled = R"(cdiVersion: 0.5.0
kind: vendor.com/host
devices:
- name: nul
  containerEdits:
    deviceNodes:
    - {path: /dev/vendor-null, hostPath: /dev/null, permissions: rw}
    - {path: /dev/zero}
- name: mismatch
  containerEdits:
    deviceNodes:
    - {path: /dev/vendor-null, hostPath: /dev/null, type: b}
- name: missing
  containerEdits:
    deviceNodes:
    - {path: /dev/podshim-no-such-device}
- name: replace
  containerEdits:
    deviceNodes:
    - {path: /dev/null, type: c, major: 1, minor: 3, uid: 0}
    mounts:
    - {hostPath: /srv/new, containerPath: /dev/pts, options: [bind]}
)";

const char* kEnv = R"(cdiVersion: 0.3.0
kind: vendor.com/env
containerEdits:
  env: [SPEC=1]
devices:
- name: e
  containerEdits:
    env: [SHARED=new, A=1, A=2]
)";

const char* kHooks = R"(cdiVersion: 0.3.0
kind: vendor.com/hooks
devices:
- name: all
  containerEdits:
    hooks:
    - {hookName: prestart, path: /bin/p, args: [p, "1"], env: [X=1], timeout: 5}
    - {hookName: createRuntime, path: /bin/cr}
    - {hookName: createContainer, path: /bin/cc}
    - {hookName: startContainer, path: /bin/sc}
    - {hookName: poststart, path: /bin/ps}
    - {hookName: poststop, path: /bin/pst}
    - {hookName: createContainer, path: /bin/cc2}
)";

std::string simple(const std::string& kind, const std::string& spec_env,
                   std::initializer_list<std::string> names) {
  return testing::simple_spec(kind, names, spec_env);
}

std::vector<InjectCase> cases() {
  std::string octal;
  {
    std::ifstream f(kCorpus + "/valid/yaml-octal-filemode.yaml");
    std::stringstream ss;
    ss << f.rdbuf();
    octal = ss.str();
  }
  return {
      {"nvidia", {}, {{"k8s.gpu.nvidia.com-claim_uid1.yaml", kNvidia}}, kConfig,
       {"k8s.gpu.nvidia.com/claim=uid1-gpu-0"}, true, kMountOrder},
      {"host-filled", {}, {{"host.yaml", kHostFilled}},
       R"({"ociVersion":"1.0.2","process":{"user":{"uid":1000,"gid":1000},"cwd":"/"}})",
       {"vendor.com/host=nul"}, true, kFileModeFill},
      // Fully specified: taken as given, no fileMode from the host (v1.0.x
      // fillMissingInfo), so the device entry is v0.5.2's exactly.
      {"replace-existing", {}, {{"host.yaml", kHostFilled}}, kConfig, {"vendor.com/host=replace"}, true,
       kMountOrder},
      {"type-mismatch", {}, {{"host.yaml", kHostFilled}}, kConfig, {"vendor.com/host=mismatch"}, false, kNone},
      {"missing-host-device", {}, {{"host.yaml", kHostFilled}}, kConfig, {"vendor.com/host=missing"}, false,
       kNone},
      {"env", {}, {{"env.yaml", kEnv}},
       R"({"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"cwd":"/","env":["PATH=/bin","SHARED=orig"]}})",
       {"vendor.com/env=e"}, true, kEnvAppend},
      {"octal-file-mode", {}, {{"octal.yaml", octal}}, kConfig, {"vendor.com/gpu=dev0"}, true, kNone},
      {"hooks", {}, {{"hooks.yaml", kHooks}}, kConfig, {"vendor.com/hooks=all"}, true, kNone},
      {"request-order-spec-edits-once",
       {},
       {{"a.yaml", simple("vendor.com/aa", "AA=1", {"a1", "a2"})},
        {"b.yaml", simple("vendor.com/bb", "BB=1", {"b1"})}},
       kConfig,
       {"vendor.com/bb=b1", "vendor.com/aa=a2", "vendor.com/aa=a1"},
       true,
       kNone},
      {"priority-later-dir-wins",
       {{"x.yaml", simple("vendor.com/gpu", "ETC=1", {"over", "only-etc"})}},
       {{"y.yaml", simple("vendor.com/gpu", "RUN=1", {"over", "dup"})},
        {"z.yaml", simple("vendor.com/gpu", "", {"dup"})}},
       kConfig,
       {"vendor.com/gpu=over", "vendor.com/gpu=only-etc"},
       true,
       kNone},
      {"equal-priority-conflict",
       {},
       {{"y.yaml", simple("vendor.com/gpu", "", {"dup", "ok"})}, {"z.yaml", simple("vendor.com/gpu", "", {"dup"})}},
       kConfig,
       {"vendor.com/gpu=ok", "vendor.com/gpu=dup"},
       false,
       kUnresolvedWording},
      {"malformed-request",
       {},
       {{"a.yaml", simple("vendor.com/aa", "", {"a1"})}},
       kConfig,
       {"vendor.com/aa=a1", "x/gpu=d"},
       false,
       kUnresolvedWording},
  };
}

TEST_F(CdiDiff, Injection) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    TempDir t;
    std::string etc = t.dir("etc"), run = t.dir("run");
    for (const auto& [n, data] : c.etc) write_file(etc + "/" + n, data);
    for (const auto& [n, data] : c.run) write_file(run + "/" + n, data);
    write_file(t.path() + "/config.json", c.config);

    Registry reg(options_for({etc, run}));
    reg.refresh();
    json ours = json::parse(c.config);
    auto r = inject_oci(reg, ours, c.devices);
    // The text back end (podshimctl's) writes what the tree back end
    // builds, byte for byte, and fails the same way.
    for (int indent : {-1, 2}) {
      auto text = inject_oci_text(reg, json::parse(c.config), c.devices, indent);
      ASSERT_EQ(text.has_value(), r.has_value()) << (text ? "" : text.error().message);
      if (text) EXPECT_EQ(*text, ours.dump(indent));
      else EXPECT_EQ(text.error().message, r.error().message);
    }

    std::string joined;
    for (const auto& d : c.devices) joined += (joined.empty() ? "" : ",") + d;
    auto go = testing::run_cdi_ref(bin_, {"-dir", etc, "-dir", run, "-config", t.path() + "/config.json",
                                          "-devices", joined},
                                   t.path());
    ASSERT_EQ(go.exit_code, 0) << go.err;
    ASSERT_TRUE(go.json.is_object()) << go.out;

    // Same registry view: devices and which files have errors.
    std::vector<std::string> go_devices = go.json["devices"];
    EXPECT_EQ(go_devices, reg.devices());
    std::set<std::string> go_bad, our_bad;
    for (const auto& [p, _] : go.json["errors"].items()) go_bad.insert(p);
    for (const auto& [p, _] : reg.errors()) our_bad.insert(p);
    EXPECT_EQ(go_bad, our_bad);

    const json& gi = go.json["inject"];
    ASSERT_EQ(gi["ok"].get<bool>(), c.ok) << gi.dump();
    ASSERT_EQ(r.has_value(), c.ok) << (r ? "" : r.error().message);
    if (!c.ok) {
      std::string go_err = gi["error"];
      if (c.diffs & kUnresolvedWording) {
        // v0.5.2 names every requested device; we name only the missing.
        EXPECT_NE(go_err.find("unresolvable CDI devices " + c.devices[0]), std::string::npos) << go_err;
        EXPECT_EQ(r.error().message.find(c.devices[0] + ","), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find(c.devices.back()), std::string::npos) << r.error().message;
      }
      continue;
    }

    json a = extract(ours), b = extract(gi["config"]);
    if (c.diffs & kMountOrder) {
      // Go's order is ours re-sorted by (depth, destination); ours is the
      // stable depth order, so /proc stays ahead of /dev.
      std::vector<json> resorted(a["mounts"].begin(), a["mounts"].end());
      std::stable_sort(resorted.begin(), resorted.end(), [](const json& x, const json& y) {
        std::string dx = x["destination"], dy = y["destination"];
        return std::make_pair(depth(dx), dx) < std::make_pair(depth(dy), dy);
      });
      EXPECT_NE(a["mounts"], b["mounts"]) << "expected v0.5.2's lexical tie-break to reorder mounts";
      EXPECT_EQ(json(resorted), b["mounts"]);
      b["mounts"] = a["mounts"];
    }
    if (c.diffs & kEnvAppend) {
      EXPECT_NE(a["env"], b["env"]) << "expected v0.5.2 to append the duplicate key";
      EXPECT_GT(b["env"].size(), a["env"].size());
      EXPECT_EQ(runc_env(a["env"]), runc_env(b["env"]));
      b["env"] = a["env"];
    }
    if (c.diffs & kFileModeFill) {
      bool filled = false;
      for (size_t i = 0; i < a["devices"].size(); i++) {
        json& ad = a["devices"][i];
        const json& bd = b["devices"][i];
        if (ad.contains("fileMode") && !bd.contains("fileMode")) {
          // Our value is the host node's permission bits.
          struct stat st{};
          std::string host = ad["path"] == "/dev/vendor-null" ? "/dev/null" : ad["path"].get<std::string>();
          ASSERT_EQ(::lstat(host.c_str(), &st), 0);
          EXPECT_EQ(ad["fileMode"].get<uint32_t>(), st.st_mode & 0777);
          ad.erase("fileMode");
          filled = true;
        }
      }
      EXPECT_TRUE(filled) << "expected a fileMode filled from the host";
    }
    EXPECT_EQ(a, b) << "ours: " << a.dump(1) << "\ngo:   " << b.dump(1);
  }
}

}  // namespace
}  // namespace podshim::cdi
