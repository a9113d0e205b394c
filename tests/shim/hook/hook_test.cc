// Unit tests of podshim-hook's logic on fixtures of OCI state and config.json.
#include "shim/hook/hook.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "cgroup/convert.h"
#include "selinux/label.h"
#include "shim/hook/devices.h"
#include "tests/shim/hook/fixtures.h"

namespace podshim::hook {
namespace {

using nlohmann::json;
using namespace testing;  // the fixtures of tests/shim/hook/fixtures.h

// ---------------------------------------------------------------- state

TEST(ParseState, Valid) {
  auto st = parse_state(make_state("/run/bundle", "creating", {{"a", "b"}}).dump());
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->id, "ctr1");
  EXPECT_EQ(st->status, "creating");
  EXPECT_EQ(st->pid, 4242);
  EXPECT_EQ(st->bundle, "/run/bundle");
  EXPECT_EQ(st->annotations.at("a"), "b");
}

json with(json j, const char* key, json v);

TEST(ParseState, IdAtTheLimit) {
  auto st = parse_state(with(make_state("/b"), "id", std::string(128, 'a')).dump());
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->id.size(), 128u);
}

TEST(ParseState, PidMayBeAbsent) {
  json s = make_state("/b", "stopped");
  s.erase("pid");
  auto st = parse_state(s.dump());
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->pid, 0);
}

struct BadState {
  const char* name;
  std::string json;
  const char* expect;  // a substring of the error
};

class ParseStateBad : public ::testing::TestWithParam<BadState> {};

TEST_P(ParseStateBad, Refused) {
  auto st = parse_state(GetParam().json);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find(GetParam().expect), std::string::npos) << st.error().message;
}

json without(json j, const char* key) {
  j.erase(key);
  return j;
}
json with(json j, const char* key, json v) {
  j[key] = std::move(v);
  return j;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseStateBad,
    ::testing::Values(
        BadState{"empty", "", "empty"}, BadState{"spaces", "  \n", "empty"},
        BadState{"notjson", "{\"id\":", "not valid JSON"},
        BadState{"array", "[1,2]", "not a JSON object"},
        BadState{"noid", without(make_state("/b"), "id").dump(), "no 'id'"},
        BadState{"emptyid", with(make_state("/b"), "id", "").dump(), "'id' is empty"},
        BadState{"idslash", with(make_state("/b"), "id", "a/b").dump(), "outside [A-Za-z0-9_.-]"},
        // podshimd's limits: 128 characters, [A-Za-z0-9_.-], no leading '.'.
        BadState{"id300", with(make_state("/b"), "id", std::string(300, 'a')).dump(), "longer than 128"},
        BadState{"id129", with(make_state("/b"), "id", std::string(129, 'a')).dump(), "longer than 128"},
        BadState{"iddot", with(make_state("/b"), "id", ".hidden").dump(), "must not start with '.'"},
        BadState{"idplus", with(make_state("/b"), "id", "a+b").dump(), "outside [A-Za-z0-9_.-]"},
        BadState{"idfullwidth", with(make_state("/b"), "id", "c\xef\xbc\x91").dump(), "outside [A-Za-z0-9_.-]"},
        BadState{"idcyrillic", with(make_state("/b"), "id", "\xd1\x81tr1").dump(), "outside [A-Za-z0-9_.-]"},
        BadState{"idnum", with(make_state("/b"), "id", 5).dump(), "'id' is not a string"},
        BadState{"nobundle", without(make_state("/b"), "bundle").dump(), "no 'bundle'"},
        BadState{"relbundle", make_state("run/b").dump(), "not an absolute path"},
        BadState{"dotdot", make_state("/run/../etc").dump(), "'..' component"},
        BadState{"nostatus", without(make_state("/b"), "status").dump(), "no 'status'"},
        BadState{"badstatus", make_state("/b", "exploded").dump(), "not a runtime-spec status"},
        BadState{"negpid", with(make_state("/b"), "pid", -1).dump(), "out of range"},
        BadState{"strpid", with(make_state("/b"), "pid", "1").dump(), "not an integer"},
        BadState{"annnum", make_state("/b", "creating", {{"k", 1}}).dump(), "is not a string"},
        BadState{"annarr", with(make_state("/b"), "annotations", json::array()).dump(),
                 "not an object"},
        BadState{"huge", std::string(kMaxStateBytes + 1, ' '), "larger than"}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------- config.json

TEST(ReadBundleConfig, ReadsRegularFile) {
  TempDir d;
  d.write("config.json", make_config().dump());
  auto text = read_bundle_config(d.path());
  ASSERT_TRUE(text) << text.error().message;
  auto cfg = parse_config(*text);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->cgroups_path, "/kubepods/pod-uid-1/ctr1");
  ASSERT_EQ(cfg->mounts.size(), 2u);
  EXPECT_EQ(cfg->mounts[1].source, "/opt/vendor/lib");
  EXPECT_EQ(cfg->mounts[1].options, (std::vector<std::string>{"ro", "rbind"}));
}

TEST(ReadBundleConfig, RefusesSymlink) {
  TempDir d;
  d.write("real.json", make_config().dump());
  ASSERT_EQ(::symlink("real.json", d.sub("config.json").c_str()), 0);
  auto text = read_bundle_config(d.path());
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("symlink"), std::string::npos) << text.error().message;
}

TEST(ReadBundleConfig, RefusesFifoAndDirectory) {
  TempDir d;
  ASSERT_EQ(::mkfifo(d.sub("config.json").c_str(), 0600), 0);
  auto text = read_bundle_config(d.path());  // must not block on the FIFO
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("not a regular file"), std::string::npos);
  TempDir e;
  std::filesystem::create_directory(e.sub("config.json"));
  EXPECT_FALSE(read_bundle_config(e.path()));
}

TEST(ReadBundleConfig, MissingAndRelative) {
  TempDir d;
  auto t = read_bundle_config(d.path());
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ENOENT);
  EXPECT_FALSE(read_bundle_config("relative/bundle"));
  EXPECT_FALSE(read_bundle_config(d.path() + "/../x"));
}

TEST(ParseConfig, RejectsMalformedDevices) {
  for (const json& devs : {json(json::object()),
                           json{{{"path", "dev/x"}, {"type", "c"}, {"major", 1}, {"minor", 3}}},
                           json{{{"path", "/dev/x"}, {"type", "z"}, {"major", 1}, {"minor", 3}}},
                           json{{{"path", "/dev/x"}, {"type", "c"}, {"major", -1}, {"minor", 3}}},
                           json{{{"path", "/dev/x"}, {"type", "c"}, {"major", "1"}}}}) {
    auto cfg = parse_config(make_config(devs).dump());
    EXPECT_FALSE(cfg) << devs.dump();
  }
  EXPECT_FALSE(parse_config("{\"mounts\": {}}"));
  EXPECT_FALSE(parse_config("{\"mounts\": [{\"source\": \"/x\"}]}"));
  EXPECT_FALSE(parse_config("{\"linux\": {\"cgroupsPath\": 7}}"));
  EXPECT_FALSE(parse_config("not json"));
  EXPECT_TRUE(parse_config("{}"));
}

// ---------------------------------------------------------------- devices

struct Root {
  TempDir dir;
  UniqueFd fd;
  Root() : fd(std::move(*fs::open_dir(dir.path()))) {}
};

UniqueFd host_root() { return std::move(*fs::open_dir("/")); }

TEST(InjectedDevices, ParsesBothForms) {
  auto d = parse_injected_devices(R"(["/dev/null", {"path":"/dev/gpu0","hostPath":"/dev/nvidia0"}])");
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].host_path, "/dev/null");
  EXPECT_EQ((*d)[1].path, "/dev/gpu0");
  EXPECT_EQ((*d)[1].host_path, "/dev/nvidia0");
}

TEST(InjectedDevices, RefusesMalformed) {
  for (const char* v : {"", "{}", "[1]", "[\"dev/null\"]", "[\"/dev/../etc/passwd\"]",
                        "[{\"hostPath\":\"/dev/null\"}]", "[{\"path\":\"/dev/x\",\"hostPath\":3}]"}) {
    EXPECT_FALSE(parse_injected_devices(v)) << v;
  }
}

TEST(InjectedDevices, StateAnnotationWins) {
  auto d = injected_devices({{std::string(kInjectedDevicesAnnotation), "[\"/dev/zero\"]"}},
                            {{std::string(kInjectedDevicesAnnotation), "[\"/dev/null\"]"}});
  ASSERT_TRUE(d);
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].path, "/dev/zero");
  auto none = injected_devices({}, {});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(CheckDevices, HostCharDevicesMatch) {
  // /dev/null is 1:3 and /dev/zero 1:5 on every Linux (devices.txt).
  auto root = host_root();
  std::vector<OciDevice> spec = {{"/dev/null", "c", 1, 3}, {"/dev/zero", "c", 1, 5},
                                 {"/dev/other", "c", 9, 9}};
  auto n = check_devices(root.get(), {{"/dev/null", "/dev/null"}, {"/dev/zero", "/dev/zero"}}, spec);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 2u);
  // A device under another container path, backed by a host node.
  spec.push_back({"/dev/gpu0", "c", 1, 3});
  EXPECT_TRUE(check_devices(root.get(), {{"/dev/gpu0", "/dev/null"}}, spec));
  // Not listed, not checked: /dev/other does not exist on the host.
  EXPECT_TRUE(check_devices(root.get(), {}, spec));
}

TEST(CheckDevices, WrongNumbersOrType) {
  auto root = host_root();
  auto minor = check_devices(root.get(), {{"/dev/null", "/dev/null"}}, {{"/dev/null", "c", 1, 4}});
  ASSERT_FALSE(minor);
  EXPECT_NE(minor.error().message.find("is 1:3, but config.json says 1:4"), std::string::npos)
      << minor.error().message;
  auto type = check_devices(root.get(), {{"/dev/null", "/dev/null"}}, {{"/dev/null", "b", 1, 3}});
  ASSERT_FALSE(type);
  EXPECT_NE(type.error().message.find("a character device"), std::string::npos);
  // "u" (unbuffered) is a character device too.
  EXPECT_TRUE(check_devices(root.get(), {{"/dev/null", "/dev/null"}}, {{"/dev/null", "u", 1, 3}}));
}

TEST(CheckDevices, RegularFileIsAnError) {
  Root r;
  r.dir.write("dev/fake", "not a device");
  auto n = check_devices(r.fd.get(), {{"/dev/fake", "/dev/fake"}}, {{"/dev/fake", "c", 1, 3}});
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find("is a regular file, but config.json says type 'c'"),
            std::string::npos)
      << n.error().message;
}

TEST(CheckDevices, FifoAndMissingAndSymlink) {
  Root r;
  std::filesystem::create_directory(r.dir.sub("dev"));
  ASSERT_EQ(::mkfifo(r.dir.sub("dev/pipe").c_str(), 0600), 0);
  // A FIFO has no numbers: 0:0 in the spec is not compared.
  EXPECT_TRUE(check_devices(r.fd.get(), {{"/dev/pipe", "/dev/pipe"}}, {{"/dev/pipe", "p", 0, 0}}));
  auto missing = check_devices(r.fd.get(), {{"/dev/gone", "/dev/gone"}}, {{"/dev/gone", "c", 1, 3}});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ENOENT);
  // A symlink at the last component or in the middle is refused, never followed.
  ASSERT_EQ(::symlink("pipe", r.dir.sub("dev/link").c_str()), 0);
  auto link = check_devices(r.fd.get(), {{"/dev/link", "/dev/link"}}, {{"/dev/link", "p", 0, 0}});
  EXPECT_FALSE(link);
  ASSERT_EQ(::symlink("dev", r.dir.sub("devlink").c_str()), 0);
  auto mid = check_devices(r.fd.get(), {{"/dev/pipe", "/devlink/pipe"}}, {{"/dev/pipe", "p", 0, 0}});
  EXPECT_FALSE(mid);
}

TEST(CheckDevices, ListedButNotInSpec) {
  auto root = host_root();
  auto n = check_devices(root.get(), {{"/dev/null", "/dev/null"}}, {});
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find("has no such entry"), std::string::npos);
}

// ---------------------------------------------------------------- pod uid, args

TEST(KubeIdentity, Sources) {
  EXPECT_EQ(kube_identity({{"io.kubernetes.pod.uid", "u1"}})->pod_uid, "u1");
  EXPECT_EQ(kube_identity({{"io.kubernetes.cri.sandbox-uid", "u2"}})->pod_uid, "u2");
  auto crio = kube_identity({{"io.kubernetes.cri-o.Labels",
                              R"({"io.kubernetes.pod.uid":"u3","io.kubernetes.pod.name":"web",)"
                              R"("io.kubernetes.pod.namespace":"ns","io.kubernetes.container.name":"c"})"}});
  ASSERT_TRUE(crio) << crio.error().message;
  EXPECT_EQ(crio->pod_uid, "u3");
  EXPECT_EQ(crio->pod_name, "web");
  EXPECT_EQ(crio->pod_namespace, "ns");
  EXPECT_EQ(crio->container_name, "c");
  // The kubelet's own key wins over CRI-O's label copy.
  EXPECT_EQ(kube_identity({{"io.kubernetes.pod.uid", "direct"},
                           {"io.kubernetes.cri-o.Labels", R"({"io.kubernetes.pod.uid":"label"})"}})
                ->pod_uid,
            "direct");
  auto none = kube_identity({});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->pod_uid, "");
  // A container without labels: CRI-O writes `null` (Go's json.Marshal of a
  // nil map); seen failing every such container start on CRI-O 1.36.3.
  auto unlabelled = kube_identity({{"io.kubernetes.cri-o.Labels", "null"}});
  ASSERT_TRUE(unlabelled) << unlabelled.error().message;
  EXPECT_EQ(unlabelled->pod_uid, "");
  EXPECT_EQ(kube_identity({{"io.kubernetes.pod.uid", "u4"}, {"io.kubernetes.cri-o.Labels", "null"}})->pod_uid, "u4");
  EXPECT_FALSE(kube_identity({{"io.kubernetes.cri-o.Labels", "nope"}}));
  EXPECT_FALSE(kube_identity({{"io.kubernetes.cri-o.Labels", "[]"}}));
  EXPECT_FALSE(kube_identity({{"io.kubernetes.cri-o.Labels", R"({"io.kubernetes.pod.uid":7})"}}));
  EXPECT_FALSE(kube_identity({{"io.kubernetes.pod.uid", "a/b"}}));
  EXPECT_FALSE(kube_identity({{"io.kubernetes.pod.name", "has space"}}));
}

TEST(ParseArgs, StagesAndFlags) {
  auto o = parse_args({"--strict", "--timeout-ms", "250", "--socket", "/s.sock", "poststop"});
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_TRUE(o->strict);
  EXPECT_EQ(o->timeout.count(), 250);
  EXPECT_EQ(o->socket_path, "/s.sock");
  EXPECT_EQ(o->stage, Stage::Poststop);
  EXPECT_EQ(parse_args({"prestart"})->stage, Stage::CreateRuntime);
  EXPECT_FALSE(parse_args({}));
  EXPECT_FALSE(parse_args({"poststart"}));
  EXPECT_FALSE(parse_args({"createRuntime", "poststop"}));
  EXPECT_FALSE(parse_args({"--timeout-ms", "0", "poststop"}));
  EXPECT_FALSE(parse_args({"--timeout-ms"}));
  EXPECT_FALSE(parse_args({"--socket", "rel", "poststop"}));
  EXPECT_FALSE(parse_args({"--bogus", "poststop"}));
  auto h = parse_args({"--help"});
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_TRUE(h->help);
  EXPECT_NE(usage().find("prestart"), std::string_view::npos);
  auto v = parse_args({"--version"});
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_TRUE(v->version);
  EXPECT_FALSE(v->help);
  EXPECT_NE(usage().find("--version"), std::string_view::npos);
  EXPECT_NE(usage().find("Exit status:"), std::string_view::npos);
}

// ---------------------------------------------------------------- run()

class RecordingLabeler : public MountLabeler {
 public:
  Result<LabelReport> label(std::string_view, const OciConfig&, const std::vector<OciMount>& mounts,
                            const std::vector<InjectedDevice>&) override {
    calls++;
    for (const auto& m : mounts) sources.push_back(m.source);
    LabelReport r;
    r.labelled = mounts.size();
    return r;
  }
  int calls = 0;
  std::vector<std::string> sources;
};

struct Bundle {
  TempDir dir;
  std::string sock = dir.sub("podshim.sock");
  explicit Bundle(const json& config = make_config()) { dir.write("config.json", config.dump()); }
};

TEST(Run, CreateRuntimeRegistersAndPoststopDeregisters) {
  json ann = {{"io.kubernetes.pod.uid", "pod-uid-1"},
              {std::string(kInjectedDevicesAnnotation), "[\"/dev/null\"]"},
              {std::string(kInjectedMountsAnnotation), "[\"/usr/lib/cdi-lib\"]"}};
  Bundle b(make_config({{{"path", "/dev/null"}, {"type", "c"}, {"major", 1}, {"minor", 3}}}, ann));
  FakeServer server(b.sock);
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(5000));
  RecordingLabeler labeler;
  auto root = host_root();
  Options o;
  o.stage = Stage::CreateRuntime;
  auto out = run(o, make_state(b.dir.path(), "creating", ann).dump(), {root.get(), reg.get(), &labeler});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_TRUE(out->registered);
  EXPECT_EQ(out->devices_checked, 1u);
  EXPECT_EQ(labeler.sources, std::vector<std::string>{"/opt/vendor/lib"});
  EXPECT_TRUE(out->warnings.empty());

  o.stage = Stage::Poststop;
  auto stop = run(o, make_state(b.dir.path(), "stopped").dump(), {root.get(), reg.get(), &labeler});
  ASSERT_TRUE(stop) << stop.error().message;
  EXPECT_TRUE(stop->deregistered);

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/v1/containers");
  json body = json::parse(reqs[0].body);
  EXPECT_EQ(body["id"], "ctr1");
  EXPECT_EQ(body["cgroupPath"], "/kubepods/pod-uid-1/ctr1");
  EXPECT_EQ(body["podUid"], "pod-uid-1");
  EXPECT_EQ(body["pid"], 4242);
  EXPECT_EQ(body["source"], "hook");
  EXPECT_EQ(body["annotations"]["io.kubernetes.pod.uid"], "pod-uid-1");
  EXPECT_EQ(reqs[1].method, "DELETE");
  EXPECT_EQ(reqs[1].target, "/v1/containers/ctr1");
  EXPECT_EQ(reqs[1].body, "");
}

// A hooks.d node has no NRI to tell podshimd what the kubelet allocated: the
// hook reads it back from linux.resources, and what it sends is what the
// kubelet's conversions started from (re-applying it writes the same shares
// and quota again).
TEST(KubeResources, InvertTheKubeletsConversions) {
  for (int64_t milli : {1, 10, 100, 250, 333, 500, 999, 1000, 1500, 4000, 64000}) {
    OciResources oci;
    oci.cpu_shares = cgroup::milli_cpu_to_shares(milli);
    oci.cpu_quota = static_cast<int64_t>(cgroup::milli_cpu_to_quota_us(milli));
    oci.cpu_period = cgroup::kQuotaPeriodUs;
    Registration r;
    kube_resources(oci, &r);
    SCOPED_TRACE(milli);
    if (*oci.cpu_shares == cgroup::kMinShares) {
      EXPECT_FALSE(r.cpu_request_milli) << "2 shares is what a container without a CPU request gets";
    } else {
      ASSERT_TRUE(r.cpu_request_milli);
      EXPECT_EQ(cgroup::milli_cpu_to_shares(*r.cpu_request_milli), *oci.cpu_shares);
      EXPECT_LE(*r.cpu_request_milli, milli);
    }
    ASSERT_TRUE(r.cpu_limit_milli);
    EXPECT_EQ(cgroup::milli_cpu_to_quota_us(*r.cpu_limit_milli), static_cast<uint64_t>(*oci.cpu_quota));
  }
  OciResources oci;
  oci.cpu_shares = 512;
  oci.cpu_quota = 50000;
  oci.cpu_period = 50000;  // another period: 1 CPU
  oci.memory_limit = 256 << 20;
  Registration r;
  kube_resources(oci, &r);
  EXPECT_EQ(r.cpu_request_milli, 500);
  EXPECT_EQ(r.cpu_limit_milli, 1000);
  EXPECT_EQ(r.memory_limit_bytes, 256 << 20);
  for (auto none : {OciResources{}, OciResources{std::nullopt, std::nullopt, -1, -1},
                    OciResources{0, 100000, 0, 0}, OciResources{2, std::nullopt, std::nullopt, std::nullopt}}) {
    Registration n;
    kube_resources(none, &n);
    EXPECT_FALSE(n.cpu_request_milli || n.cpu_limit_milli || n.memory_limit_bytes)
        << "unset, -1 and 0 are no request and no limit";
  }
}

TEST(ParseConfig, ReadsTheCpuAndMemoryOfLinuxResources) {
  json c = make_config();
  c["linux"]["resources"] = {{"cpu", {{"shares", 512}, {"quota", 150000}, {"period", 100000}, {"cpus", "0-1"}}},
                             {"memory", {{"limit", 268435456}, {"swap", 268435456}}},
                             {"pids", {{"limit", 100}}}};
  auto cfg = parse_config(c.dump());
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->resources.cpu_shares, 512u);
  EXPECT_EQ(cfg->resources.cpu_quota, 150000);
  EXPECT_EQ(cfg->resources.cpu_period, 100000u);
  EXPECT_EQ(cfg->resources.memory_limit, 268435456);
  c["linux"]["resources"] = {{"cpu", {{"quota", -1}, {"shares", nullptr}}}, {"memory", nullptr}};
  cfg = parse_config(c.dump());
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->resources.cpu_quota, -1);
  EXPECT_FALSE(cfg->resources.cpu_shares);
  EXPECT_FALSE(cfg->resources.memory_limit);
  for (json bad : {json{{"cpu", {{"shares", "512"}}}}, json{{"cpu", {{"shares", -1}}}},
                   json{{"cpu", {{"quota", -2}}}}, json{{"memory", {{"limit", 1.5}}}}, json{{"cpu", 7}},
                   json::array(), json{{"memory", {{"limit", 18446744073709551615ull}}}}}) {
    c["linux"]["resources"] = bad;
    auto r = parse_config(c.dump());
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_NE(r.error().message.find("linux.resources"), std::string::npos) << r.error().message;
  }
}

TEST(Run, CreateRuntimeSendsWhatTheKubeletAllocated) {
  json c = make_config();
  c["linux"]["resources"] = {{"cpu", {{"shares", 256}, {"quota", 50000}, {"period", 100000}}},
                             {"memory", {{"limit", 134217728}}}};
  Bundle b(c);
  FakeServer server(b.sock);
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(5000));
  auto root = host_root();
  Options o;
  auto out = run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr});
  ASSERT_TRUE(out) << out.error().message;
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  json body = json::parse(reqs[0].body);
  EXPECT_EQ(body["resources"], (json{{"requests", {{"cpu", "250m"}}},
                                     {"limits", {{"cpu", "500m"}, {"memory", "134217728"}}}}))
      << body.dump();
}

TEST(Run, TwiceIsHarmless) {
  Bundle b;
  FakeServer server(b.sock);
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(5000));
  auto root = host_root();
  Options o;
  for (int i = 0; i < 2; ++i) {
    auto out = run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr});
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_TRUE(out->registered);
  }
  // Deregistering a container podshimd no longer knows (404) still succeeds.
  server.set_status(404);
  o.stage = Stage::Poststop;
  for (int i = 0; i < 2; ++i) {
    auto out = run(o, make_state(b.dir.path(), "stopped").dump(), {root.get(), reg.get(), nullptr});
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_TRUE(out->deregistered);
    EXPECT_TRUE(out->warnings.empty());
  }
  EXPECT_EQ(server.requests().size(), 4u);
}

TEST(Run, PodshimdAwayIsAWarningUnlessStrict) {
  Bundle b;  // no server listening on b.sock
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(500));
  auto root = host_root();
  Options o;
  auto out = run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_FALSE(out->registered);
  ASSERT_EQ(out->warnings.size(), 1u);
  EXPECT_NE(out->warnings[0].find("registering with podshimd"), std::string::npos);
  o.strict = true;
  auto strict = run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr});
  ASSERT_FALSE(strict);
  EXPECT_EQ(strict.error().code, ENOENT);
}

TEST(Run, SilentServerTimesOut) {
  Bundle b;
  FakeServer server(b.sock, 200, /*silent=*/true);
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(200));
  auto root = host_root();
  Options o;
  o.strict = true;
  auto out = run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr});
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ETIMEDOUT) << out.error().message;
}

TEST(Run, ServerRefusalIsAWarningUnlessStrict) {
  Bundle b;
  FakeServer server(b.sock, 400);
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(5000));
  auto root = host_root();
  Options o;
  auto out = run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr});
  ASSERT_TRUE(out);
  ASSERT_EQ(out->warnings.size(), 1u);
  EXPECT_NE(out->warnings[0].find("HTTP 400"), std::string::npos) << out->warnings[0];
  o.strict = true;
  EXPECT_FALSE(run(o, make_state(b.dir.path()).dump(), {root.get(), reg.get(), nullptr}));
}

TEST(Run, StageMustMatchStatus) {
  Bundle b;
  auto root = host_root();
  Options o;
  auto out = run(o, make_state(b.dir.path(), "stopped").dump(), {root.get(), nullptr, nullptr});
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("expected 'creating'"), std::string::npos);
  // crun 1.8.1 says "created" at createRuntime; runc says "creating".
  EXPECT_TRUE(run(o, make_state(b.dir.path(), "created").dump(), {root.get(), nullptr, nullptr}));
  EXPECT_FALSE(run(o, make_state(b.dir.path(), "running").dump(), {root.get(), nullptr, nullptr}));
  o.stage = Stage::Poststop;
  EXPECT_FALSE(run(o, make_state(b.dir.path(), "creating").dump(), {root.get(), nullptr, nullptr}));
}

// run() on a bundle of `config`, with a fake podshimd and a recording
// labeler: it fails, having labelled nothing and sent nothing.
void expect_refused_before_any_effect(const json& config) {
  Bundle b(config);
  FakeServer server(b.sock);
  auto reg = make_socket_registrar(b.sock, std::chrono::milliseconds(5000));
  RecordingLabeler labeler;
  auto root = host_root();
  auto out = run(Options{}, make_state(b.dir.path()).dump(), {root.get(), reg.get(), &labeler});
  EXPECT_FALSE(out) << config["annotations"].dump();
  EXPECT_EQ(labeler.calls, 0);
  EXPECT_TRUE(server.requests().empty());
}

TEST(Run, NothingHalfDoneOnBadDevice) {
  // The device check fails: no labelling and no registration may happen.
  json ann = {{std::string(kInjectedDevicesAnnotation), "[\"/dev/null\"]"},
              {std::string(kInjectedMountsAnnotation), "[\"/usr/lib/cdi-lib\"]"}};
  expect_refused_before_any_effect(
      make_config({{{"path", "/dev/null"}, {"type", "c"}, {"major", 1}, {"minor", 7}}}, ann));
}

TEST(Run, BadAnnotationsRefusedBeforeAnyEffect) {
  for (const json& ann : {json{{std::string(kInjectedMountsAnnotation), "[\"/not/mounted\"]"}},
                          json{{std::string(kInjectedMountsAnnotation), "nope"}},
                          json{{std::string(kInjectedDevicesAnnotation), "[\"/dev/null\"]"}},
                          json{{"io.kubernetes.cri-o.Labels", "{"}}})
    expect_refused_before_any_effect(make_config(json::array(), ann));
}

TEST(Run, RecordsState) {
  Bundle b;
  auto root = host_root();
  Options o;
  o.record_path = b.dir.sub("record.jsonl");
  ASSERT_TRUE(run(o, make_state(b.dir.path()).dump(), {root.get(), nullptr, nullptr}));
  o.stage = Stage::Poststop;
  ASSERT_TRUE(run(o, make_state(b.dir.path(), "stopped").dump(), {root.get(), nullptr, nullptr}));
  std::ifstream in(o.record_path);
  std::string l1, l2;
  std::getline(in, l1);
  std::getline(in, l2);
  EXPECT_EQ(json::parse(l1)["stage"], "createRuntime");
  EXPECT_EQ(json::parse(l1)["status"], "creating");
  EXPECT_EQ(json::parse(l2)["stage"], "poststop");
  EXPECT_EQ(json::parse(l2)["id"], "ctr1");
}

// ---------------------------------------------------------------- labelling

TEST(Labeler, SelectsOnlyListedMounts) {
  auto cfg = parse_config(make_config().dump());
  ASSERT_TRUE(cfg);
  auto none = injected_mounts(*cfg, {});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto one = injected_mounts(*cfg, {{std::string(kInjectedMountsAnnotation), "[\"/usr/lib/cdi-lib\"]"}});
  ASSERT_TRUE(one) << one.error().message;
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].source, "/opt/vendor/lib");
  // /proc's source "proc" is not a host path: refusing it beats labelling "./proc".
  EXPECT_FALSE(injected_mounts(*cfg, {{std::string(kInjectedMountsAnnotation), "[\"/proc\"]"}}));
}

TEST(Labeler, NoOpWhenSelinuxDisabled) {
  selinux::set_enabled_override_for_testing(false);
  json config = make_config();
  config["linux"]["mountLabel"] = "system_u:object_r:container_file_t:s0:c1,c2";
  auto cfg = parse_config(config.dump());
  ASSERT_TRUE(cfg);
  auto labeler = make_selinux_labeler();
  auto rep = labeler->label(config.dump(), *cfg, {cfg->mounts[1]}, {});
  selinux::set_enabled_override_for_testing(std::nullopt);
  ASSERT_TRUE(rep) << rep.error().message;
  EXPECT_EQ(rep->labelled, 0u);
  EXPECT_TRUE(rep->warnings.empty());
  ASSERT_FALSE(rep->notes.empty());
  EXPECT_NE(rep->notes[0].find("disabled"), std::string::npos) << rep->notes[0];
}

TEST(Labeler, NoMountsNoWork) {
  auto cfg = parse_config(make_config().dump());
  auto rep = make_selinux_labeler()->label("not even parsed", *cfg, {}, {});
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->labelled, 0u);
  EXPECT_TRUE(rep->notes.empty());
}

}  // namespace
}  // namespace podshim::hook
