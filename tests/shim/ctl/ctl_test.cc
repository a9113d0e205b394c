// podshimctl's and podshim-hook's command lines as an operator meets them:
// --version, -o in every spelling for every command that
// prints a table or an object (json and yaml carrying the same data), -o
// wide's extra columns, unknown formats, --help on every command and
// subcommand in the registry, completion scripts, "No resources found", the
// exit code table against a real podshimd (--nri=off, fake cgroup tree in a
// temp dir) and the man pages' EXIT STATUS sections.
//
// The binaries are run as processes (PODSHIM_PODSHIMCTL, PODSHIM_HOOK,
// PODSHIM_PODSHIMD); the command files are linked in too, so the test walks
// the same registry podshimctl parses with.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "cgroup/convert.h"
#include "shim/ctl/cli.h"
#include "shim/ctl/common.h"
#include "shim/ctl/registry.h"
#include "shim/status/client.h"
#include "tests/cgroup/fake_tree.h"
#include "tests/testutil/files.h"

#ifndef PODSHIM_SOURCE_ROOT
#error "PODSHIM_SOURCE_ROOT must name the source tree (tests/shim/ctl/meson.build)"
#endif

namespace podshim::ctl {
namespace {

using nlohmann::json;
namespace fsys = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
std::string ctl() { return env("PODSHIM_PODSHIMCTL"); }

using testutil::read_file;

// The project version from meson.build, independently of the programs.
std::string project_version() {
  std::smatch m;
  std::string text = read_file(std::string(PODSHIM_SOURCE_ROOT) + "/meson.build");
  return std::regex_search(text, m, std::regex(R"(version\s*:\s*'([^']+)')")) ? m[1].str() : "";
}

struct Ran {
  int status = -1;
  std::string out, err;
};

// Runs argv[0] with argv, stdin from /dev/null; collects stdout and stderr.
Ran run_argv(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  Ran r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (open_fds > 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(fds, 2, 1000) <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      } else {
        (k ? r.err : r.out).append(buf, static_cast<size_t>(n));
      }
    }
  }
  if (open_fds > 0) ::kill(pid, SIGKILL);
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

Ran run_ctl(const std::vector<std::string>& args) {
  std::vector<std::string> a = {ctl()};
  a.insert(a.end(), args.begin(), args.end());
  return run_argv(a);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// YAML → JSON with the YAML 1.2 core schema: a quoted scalar (tag "!") is a
// string; a plain one is null, a bool or a number when it reads as one.
json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.Scalar()] = yaml_to_json(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& v : n) j.push_back(yaml_to_json(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;
      if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      json num = json::parse(s, nullptr, false);
      if (!num.is_discarded() && num.is_number()) return num;
      return s;
    }
    default:
      return nullptr;
  }
}

// Drops what changes from one call to the next: read and transition times,
// a resize's duration, and the `varying` keys of a row.
json stable(json j, const std::set<std::string>& varying = {}) {
  if (j.is_object()) {
    json out = json::object();
    for (auto& [k, v] : j.items())
      if (!k.ends_with("UnixMs") && k != "durationMs" && !varying.count(k)) out[k] = stable(v, varying);
    return out;
  }
  if (j.is_array())
    for (auto& v : j) v = stable(v, varying);
  return j;
}

// ---- a real podshimd ----------------------------------------------------------------

class Daemon {
 public:
  explicit Daemon(bool with_container, const std::string& extra_config = "") {
    const std::string exe = env("PODSHIM_PODSHIMD");
    if (exe.empty()) return;
    dir_ = tree_.state() + "/daemon";
    fsys::create_directories(dir_ + "/state");
    sock_ = dir_ + "/s.sock";
    for (const char* d : {"kubepods", "kubepods/burstable", "kubepods/burstable/podp1",
                          "kubepods/burstable/podp1/c1"})
      tree_.add(d);
    const std::string cfg = dir_ + "/config.yaml";
    // GET of /v1/containers/forbidden* is for another uid: HTTP 403.
    std::ofstream(cfg) << "socket:\n  path: " << sock_ << "\n"
                       << "state_dir: " << dir_ << "/state\n"
                       << "cgroup:\n  root: " << tree_.cg_root() << "\n  driver: cgroupfs\n"
                       << "node:\n  allocatable:\n    cpu: \"8\"\n    memory: 16Gi\n"
                       << "access:\n"
                       << "  - path: \"/v1/containers/forbidden*\"\n    methods: [\"GET\"]\n    uids: [4242]\n"
                       << "  - path: \"*\"\n    methods: [\"*\"]\n    uids: [" << ::getuid() << "]\n"
                       << extra_config;
    pid_ = ::fork();
    if (pid_ == 0) {
      const int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) ::dup2(devnull, 2);
      ::execl(exe.c_str(), exe.c_str(), "--nri=off", "--config", cfg.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500 && !request("GET", "/healthz"); i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!with_container) return;
    json reg = {{"id", "c1"},
                {"podUid", "p1"},
                {"name", "app"},
                {"podName", "web"},
                {"podNamespace", "default"},
                {"podCgroupPath", "/kubepods/burstable/podp1"},
                {"cgroupPath", "/kubepods/burstable/podp1/c1"},
                {"resources", {{"requests", {{"cpu", "250m"}}}, {"limits", {{"cpu", "500m"}, {"memory", "256Mi"}}}}}};
    auto r = request("POST", "/v1/containers", reg.dump());
    EXPECT_TRUE(r && r->status < 300) << (r ? r->body : r.error().message);
    // The first read-back fills "actual": wait for it, so that two calls see the same data.
    for (int i = 0; i < 500; i++) {
      auto c = request("GET", "/v1/containers/c1");
      if (c && c->status == 200 && !json::parse(c->body, nullptr, false)["actual"].is_null()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool available() const { return pid_ > 0 && request("GET", "/healthz").has_value(); }
  const std::string& sock() const { return sock_; }
  cgroup::testing::FakeTree& tree() { return tree_; }
  Result<status::HttpResponse> request(std::string_view method, std::string_view target,
                                       std::string_view body = {}) const {
    status::ClientOptions o;
    o.socket_path = sock_;
    return status::http_request(o, method, target, body);
  }

 private:
  cgroup::testing::FakeTree tree_;
  std::string dir_, sock_;
  pid_t pid_ = -1;
};

// CDI specs and an OCI config for the offline commands.
struct CdiFiles {
  CdiFiles() {
    char tmpl[] = "/tmp/podshim-ctl-test.XXXXXX";
    root = ::mkdtemp(tmpl);
    specs = root + "/cdi";
    empty = root + "/empty";
    fsys::create_directories(specs);
    fsys::create_directories(empty);
    std::ofstream(specs + "/gpu.yaml") << "cdiVersion: 0.6.0\nkind: vendor.com/gpu\ndevices:\n"
                                          "- name: g0\n  containerEdits:\n    env: [DEV=g0]\n"
                                          "    deviceNodes:\n    - path: /dev/gpu0\n      type: c\n"
                                          "      major: 195\n      minor: 0\n"
                                          "- name: \"1\"\n  containerEdits:\n    env: [DEV=1]\n";
    config = root + "/config.json";
    std::ofstream(config) << R"({"ociVersion":"1.0.2","process":{"env":["PATH=/bin","N=007"]}})";
  }
  ~CdiFiles() { fsys::remove_all(root); }
  std::string root, specs, empty, config;
};

class Ctl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    full_ = new Daemon(true);
    empty_ = new Daemon(false);
    cdi_ = new CdiFiles();
  }
  static void TearDownTestSuite() {
    delete full_;
    delete empty_;
    delete cdi_;
  }
  void SetUp() override {
    if (ctl().empty()) GTEST_SKIP() << "PODSHIM_PODSHIMCTL is not set; run through meson test";
  }
  static Daemon* full_;
  static Daemon* empty_;
  static CdiFiles* cdi_;
};
Daemon* Ctl::full_ = nullptr;
Daemon* Ctl::empty_ = nullptr;
CdiFiles* Ctl::cdi_ = nullptr;

// ---- --version ------------------------------------------------------------------------

TEST_F(Ctl, VersionForBothPrograms) {
  const std::string v = project_version();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(version(), v);
  struct Row {
    std::vector<std::string> argv;
    std::string program;
  };
  const std::vector<Row> rows = {
      {{ctl(), "--version"}, "podshimctl"},
      {{ctl(), "version"}, "podshimctl"},
      {{ctl(), "--socket", "/nonexistent", "--version"}, "podshimctl"},
      {{env("PODSHIM_HOOK"), "--version"}, "podshim-hook"},
  };
  for (const auto& row : rows) {
    if (row.argv[0].empty()) {
      ADD_FAILURE() << "PODSHIM_HOOK is not set";
      continue;
    }
    Ran r = run_argv(row.argv);
    EXPECT_EQ(r.status, kExitOk) << joined(row.argv) << ": " << r.err;
    // "podshimctl 0.1.0" or "podshimctl 0.1.0 (commit d67543784e32-dirty)".
    EXPECT_TRUE(std::regex_match(r.out, std::regex(row.program + " " + std::regex_replace(v, std::regex("\\."), "\\.") +
                                                   "( \\(commit [^)]+\\))?\n")))
        << joined(row.argv) << ": " << r.out;
    EXPECT_EQ(r.err, "") << joined(row.argv);
  }
  Ran j = run_ctl({"version", "-o", "json"});
  ASSERT_EQ(j.status, kExitOk) << j.err;
  json jv = json::parse(j.out);
  EXPECT_EQ(jv["program"], "podshimctl");
  EXPECT_EQ(jv["version"], v);
  EXPECT_TRUE(jv["commit"].is_string()) << j.out;
}

// ---- -o in every spelling -------------------------------------------------------------

struct Listing {
  std::string name;                 // for messages
  std::vector<std::string> args;    // without -o
  std::vector<Format> formats;      // what -o takes
  std::string wide_marker;          // in -o wide's output and not in the table's ("" : none)
  bool daemon = false;              // needs the full podshimd (--socket is added)
  std::set<std::string> varying = {};  // keys that change with every call
};

std::vector<Listing> listings(const CdiFiles& cdi) {
  const std::vector<Format> all = {Format::Table, Format::Wide, Format::Json, Format::Yaml};
  const std::vector<Format> doc = {Format::Json, Format::Yaml};
  const std::string label = "system_u:system_r:container_t:s0:c1,c2";
  return {
      {"get containers", {"get", "containers"}, all, "CGROUP", true},
      {"get pods", {"get", "pods"}, all, "CGROUP", true},
      {"get containers ID", {"get", "containers", "c1"}, all, "", true},
      {"get pods ID", {"get", "pods", "p1"}, all, "LAST-OUTCOME", true},
      {"status", {"status"}, all, "podshimctl version:", true},
      {"watch", {"watch", "--count", "1"}, all, "", true},
      // The values c1 has: "unchanged" every time; each call still counts a generation.
      {"resize", {"resize", "c1", "--cpu", "250m", "--cpu-limit=500m"}, all, "report:", true,
       {"generation", "observedGeneration", "generations"}},
      {"cgroup-values", {"cgroup-values", "--cpu-request", "250m", "--cpu-limit", "500m", "--memory-limit", "128Mi"},
       all, "WEIGHT-FORMULA", false},
      {"cdi list", {"cdi", "list", "--spec-dir", cdi.specs, "--any-owner"}, all, "CDI-VERSION", false},
      {"cdi validate", {"cdi", "validate", "--spec-dir", cdi.specs, "--any-owner"}, all, "DEVICES", false},
      {"cdi inject", {"cdi", "inject", "--spec-dir", cdi.specs, "--any-owner", "--config", cdi.config,
                      "vendor.com/gpu=g0"}, doc, "", false},
      {"selinux mount-label", {"selinux", "mount-label", "--process-label", label}, doc, "", false},
      {"version", {"version"}, doc, "", false},
  };
}

std::vector<std::string> with_socket(const Listing& l, const Daemon& d, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = l.args;
  if (l.daemon) a.insert(a.end(), {"--socket", d.sock()});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Every command (or subcommand) that takes -o has a row, so a new one is covered.
TEST_F(Ctl, EveryCommandWithOutputIsInTheTable) {
  std::set<std::string> rows;
  for (const auto& l : listings(*cdi_)) {
    auto it = registry().find(l.args[0]);
    ASSERT_NE(it, registry().end()) << l.name;
    const bool has_sub = !it->second.subcommands.empty() && l.args.size() > 1;
    rows.insert(l.args[0] + (has_sub ? " " + find_subcommand(it->second, l.args[1])->name : ""));
  }
  for (const auto& [name, c] : registry()) {
    if (c.subcommands.empty()) {
      if (!c.formats.empty()) {
        EXPECT_TRUE(rows.count(name)) << name << " takes -o but has no row";
      }
      continue;
    }
    for (const auto& s : c.subcommands) {
      if (c.formats.empty() && s.formats.empty()) continue;
      EXPECT_TRUE(rows.count(name + " " + s.name)) << name << " " << s.name << " takes -o but has no row";
    }
  }
}

TEST_F(Ctl, EveryOutputSpellingOfEveryListing) {
  ASSERT_TRUE(full_->available()) << "podshimd did not start";
  const std::vector<std::vector<std::string>> spellings = {
      {"-o", "F"}, {"-oF"}, {"-o=F"}, {"--output", "F"}, {"--output=F"}};
  for (const auto& l : listings(*cdi_)) {
    std::map<std::string, json> canonical;  // format → parsed document
    for (Format f : {Format::Json, Format::Yaml}) {
      if (std::find(l.formats.begin(), l.formats.end(), f) == l.formats.end()) continue;
      const std::string fs(to_string(f));
      std::vector<std::vector<std::string>> lines;
      for (const auto& sp : spellings) {
        std::vector<std::string> extra;
        for (const auto& part : sp) extra.push_back(std::regex_replace(part, std::regex("F"), fs));
        lines.push_back(with_socket(l, *full_, extra));
        // The same before the command (global).
        std::vector<std::string> global = extra;
        auto rest = with_socket(l, *full_);
        global.insert(global.end(), rest.begin(), rest.end());
        lines.push_back(global);
      }
      for (const auto& args : lines) {
        Ran r = run_ctl(args);
        ASSERT_EQ(r.status, kExitOk) << joined(args) << ": " << r.err;
        json doc;
        if (f == Format::Json) {
          doc = json::parse(r.out, nullptr, false);
          ASSERT_FALSE(doc.is_discarded()) << joined(args) << " is not JSON:\n" << r.out;
        } else {
          YAML::Node n;
          try {
            n = YAML::Load(r.out);
          } catch (const YAML::Exception& e) {
            FAIL() << joined(args) << " is not YAML (" << e.what() << "):\n" << r.out;
          }
          ASSERT_TRUE(n.IsMap()) << joined(args) << ":\n" << r.out;
          doc = yaml_to_json(n);
        }
        doc = stable(doc, l.varying);
        if (!canonical.count(fs)) canonical[fs] = doc;
        EXPECT_EQ(doc, canonical[fs]) << joined(args) << " differs from " << joined(lines.front());
      }
    }
    // json and yaml carry the same data.
    if (canonical.count("json") && canonical.count("yaml")) {
      EXPECT_EQ(canonical["yaml"], canonical["json"]) << l.name << ": -o yaml and -o json differ";
    } else {
      ADD_FAILURE() << l.name << ": no json/yaml pair";
    }
  }
}

TEST_F(Ctl, YamlKeepsStringsThatLookTyped) {
  // The CDI device "1", the env "N=007" and cgroup-values' "35" are strings in JSON.
  Ran r = run_ctl({"cgroup-values", "--cpu-request", "250m", "-o", "yaml"});
  ASSERT_EQ(r.status, kExitOk) << r.err;
  EXPECT_NE(r.out.find("cpu.weight: \"35\""), std::string::npos) << r.out;
  r = run_ctl({"cdi", "list", "--spec-dir", cdi_->specs, "--any-owner", "-o", "yaml"});
  ASSERT_EQ(r.status, kExitOk) << r.err;
  json j = yaml_to_json(YAML::Load(r.out));
  EXPECT_EQ(j["items"][0]["name"], "vendor.com/gpu=1") << r.out;
  // And the same conversion in-process, for the values YAML resolves.
  json tricky = {{"a", "true"}, {"b", "1.5"}, {"c", ""}, {"d", "null"}, {"e", "0x1F"}, {"f", "yes"},
                 {"g", "2024-01-01"}, {"h", "-"}, {"i", "a: b"}, {"j", "line\nbreak"}, {"k", 1.5},
                 {"l", nullptr}, {"m", false}, {"n", json::array()}, {"o", json::object()}, {"p", -3},
                 {"q", "~"}, {"r", "1e3"}, {"s", ".inf"}, {"t", "12:30"}};
  EXPECT_EQ(yaml_to_json(YAML::Load(to_yaml(tricky))), tricky) << to_yaml(tricky);
}

TEST_F(Ctl, WideAddsColumns) {
  ASSERT_TRUE(full_->available()) << "podshimd did not start";
  for (const auto& l : listings(*cdi_)) {
    const bool has_wide = std::find(l.formats.begin(), l.formats.end(), Format::Wide) != l.formats.end();
    if (!has_wide) continue;
    Ran table = run_ctl(with_socket(l, *full_));
    Ran wide = run_ctl(with_socket(l, *full_, {"-o", "wide"}));
    Ran explicit_table = run_ctl(with_socket(l, *full_, {"-o", "table"}));
    EXPECT_EQ(wide.status, kExitOk) << l.name << ": " << wide.err;
    if (l.wide_marker.empty()) continue;
    EXPECT_NE(wide.out.find(l.wide_marker), std::string::npos) << l.name << " -o wide:\n" << wide.out;
    EXPECT_EQ(explicit_table.out.find(l.wide_marker), std::string::npos) << l.name << " -o table:\n"
                                                                          << explicit_table.out;
    if (l.name != "cgroup-values" && l.varying.empty()) {  // cgroup-values' default is json
      EXPECT_EQ(table.out, explicit_table.out) << l.name << ": the default is the table";
    }
  }
}

TEST_F(Ctl, UnknownOrUnofferedFormatIsAUsageError) {
  for (const auto& l : listings(*cdi_)) {
    for (const std::string& bad : {std::string("xml"), std::string("jsonpath")}) {
      for (const auto& args : {with_socket(l, *full_, {"-o", bad}), with_socket(l, *full_, {"--output=" + bad})}) {
        Ran r = run_ctl(args);
        EXPECT_EQ(r.status, kExitUsage) << joined(args);
        EXPECT_NE(r.err.find("'" + bad + "'"), std::string::npos) << joined(args) << ": " << r.err;
        for (Format f : l.formats)
          EXPECT_NE(r.err.find(std::string(to_string(f))), std::string::npos)
              << joined(args) << " must list " << to_string(f) << ": " << r.err;
        EXPECT_EQ(r.out, "") << joined(args);
      }
    }
    // A format the command does not offer.
    for (Format f : {Format::Table, Format::Wide}) {
      if (std::find(l.formats.begin(), l.formats.end(), f) != l.formats.end()) continue;
      Ran r = run_ctl(with_socket(l, *full_, {"-o", std::string(to_string(f))}));
      EXPECT_EQ(r.status, kExitUsage) << l.name << " -o " << to_string(f);
      EXPECT_NE(r.err.find("'" + std::string(to_string(f)) + "'"), std::string::npos) << r.err;
    }
  }
  Ran r = run_ctl({"-o", "xml", "status", "--socket", "/nonexistent"});
  EXPECT_EQ(r.status, kExitUsage) << r.err;  // refused before any request
  r = run_ctl({"get", "pods", "-o"});
  EXPECT_EQ(r.status, kExitUsage) << r.err;
  r = run_ctl({"completion", "bash", "-o", "json"});
  EXPECT_EQ(r.status, kExitUsage) << r.err;
}

// ---- --help ---------------------------------------------------------------------------

TEST_F(Ctl, HelpOnEveryCommandAndSubcommand) {
  Ran top = run_ctl({"--help"});
  ASSERT_EQ(top.status, kExitOk);
  for (const auto& [name, c] : registry()) {
    EXPECT_TRUE(std::regex_search(top.out, std::regex("\n  " + name + " +[a-z]"))) << name << " not in --help";
    std::vector<std::pair<std::vector<std::string>, const Subcommand*>> lines = {{{name, "--help"}, nullptr},
                                                                                 {{name, "-h"}, nullptr}};
    for (const auto& s : c.subcommands) {
      lines.push_back({{name, s.name, "--help"}, &s});
      lines.push_back({{name, s.name, "-h"}, &s});
      for (const auto& alias : s.aliases) lines.push_back({{name, alias, "--help"}, &s});
    }
    for (const auto& [args, sub] : lines) {
      Ran r = run_ctl(args);
      EXPECT_EQ(r.status, kExitOk) << joined(args) << ": " << r.err;
      EXPECT_EQ(r.err, "") << joined(args);
      EXPECT_TRUE(r.out.starts_with("Usage: podshimctl " + name + (sub ? " " + sub->name : "")))
          << joined(args) << ":\n" << r.out;
      std::vector<Flag> flags = c.flags;
      if (sub) flags.insert(flags.end(), sub->flags.begin(), sub->flags.end());
      for (const auto& f : flags) EXPECT_NE(r.out.find(f.name), std::string::npos) << joined(args) << " lacks " << f.name;
      const auto& formats = sub && !sub->formats.empty() ? sub->formats : c.formats;
      if (!formats.empty()) {
        EXPECT_NE(r.out.find("--output FORMAT"), std::string::npos) << joined(args);
      }
      if (!sub) {
        for (const auto& s : c.subcommands) {
          EXPECT_NE(r.out.find("  " + s.name + " "), std::string::npos) << joined(args);
        }
      }
    }
    // Help wins over a command line that would fail.
    Ran r = run_ctl({name, "--bogus", "--help"});
    EXPECT_EQ(r.status, kExitOk) << name;
  }
}

// ---- completion -----------------------------------------------------------------------

TEST_F(Ctl, CompletionScriptsCoverTheRegistry) {
  for (const std::string shell : {"bash", "zsh"}) {
    Ran r = run_ctl({"completion", shell});
    ASSERT_EQ(r.status, kExitOk) << shell << ": " << r.err;
    ASSERT_FALSE(r.out.empty());
    for (const auto& [name, c] : registry()) {
      EXPECT_NE(r.out.find(name), std::string::npos) << shell << " lacks " << name;
      for (const auto& s : c.subcommands) EXPECT_NE(r.out.find(s.name), std::string::npos) << shell << " lacks " << s.name;
      for (const auto& f : c.flags) EXPECT_NE(r.out.find(f.name), std::string::npos) << shell << " lacks " << f.name;
      for (const auto& s : c.subcommands)
        for (const auto& f : s.flags) EXPECT_NE(r.out.find(f.name), std::string::npos) << shell << " lacks " << f.name;
    }
    for (const auto& f : global_flags()) EXPECT_NE(r.out.find(f.name), std::string::npos) << shell << " lacks " << f.name;
    const std::string path = cdi_->root + "/completion." + shell;
    std::ofstream(path) << r.out;
    const std::string sh = "/bin/" + shell;
    if (::access(sh.c_str(), X_OK) == 0) {
      Ran n = run_argv({sh, "-n", path});
      EXPECT_EQ(n.status, 0) << shell << " -n: " << n.err;
    } else {
      std::printf("note: %s is not installed; %s -n not run\n", sh.c_str(), shell.c_str());
    }
  }
  EXPECT_EQ(run_ctl({"completion"}).status, kExitUsage);
  EXPECT_EQ(run_ctl({"completion", "fish"}).status, kExitUsage);
}

TEST_F(Ctl, BashCompletionCompletes) {
  if (::access("/bin/bash", X_OK) != 0) GTEST_SKIP() << "no bash";
  const std::string path = cdi_->root + "/completion.bash";
  std::ofstream(path) << run_ctl({"completion", "bash"}).out;
  // COMP_WORDS as bash splits them ('=' is a word of its own).
  struct Row {
    std::vector<std::string> words;
    std::string want;
  };
  const std::vector<Row> rows = {
      {{"podshimctl", "g"}, "get"},
      {{"podshimctl", "get", ""}, "pods containers"},
      {{"podshimctl", "--socket", "/x", "get", "c"}, "containers"},
      {{"podshimctl", "get", "containers", "-o", ""}, "table wide json yaml"},
      {{"podshimctl", "get", "pods", "--output", "=", "y"}, "yaml"},
      {{"podshimctl", "cdi", "inject", "-o", ""}, "json yaml"},
      {{"podshimctl", "cdi", ""}, "list validate inject"},
      {{"podshimctl", "completion", ""}, "bash zsh"},
      {{"podshimctl", "cgroup-values", "--weight-formula", ""}, "linear quadratic"},
      {{"podshimctl", "watch", "--c"}, "--count"},
  };
  for (const auto& row : rows) {
    std::string words;
    for (const auto& w : row.words) words += " '" + w + "'";
    std::string script = "source '" + path + "'; COMP_WORDS=(" + words + "); COMP_CWORD=" +
                         std::to_string(row.words.size() - 1) + "; _podshimctl; echo \"${COMPREPLY[*]}\"";
    Ran r = run_argv({"/bin/bash", "-c", script});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, row.want + "\n") << words;
  }
}

// ---- empty lists ----------------------------------------------------------------------

TEST_F(Ctl, EmptyListSaysNoResourcesFound) {
  ASSERT_TRUE(empty_->available()) << "podshimd did not start";
  struct Row {
    std::vector<std::string> args;
  };
  const std::vector<Row> rows = {
      {{"get", "containers", "--socket", empty_->sock()}},
      {{"get", "pods", "--socket", empty_->sock()}},
      {{"--socket", empty_->sock(), "get", "po", "-o", "wide"}},
      {{"cdi", "list", "--spec-dir", cdi_->empty, "--any-owner"}},
      {{"cdi", "validate", "--spec-dir", cdi_->empty, "--any-owner"}},
  };
  for (const auto& row : rows) {
    Ran r = run_ctl(row.args);
    EXPECT_EQ(r.status, kExitOk) << joined(row.args) << ": " << r.err;
    EXPECT_EQ(r.out, "") << joined(row.args);
    EXPECT_EQ(r.err, "No resources found\n") << joined(row.args);
    auto j = row.args;
    j.insert(j.end(), {"-o", "json"});
    Ran rj = run_ctl(j);
    EXPECT_EQ(rj.status, kExitOk) << joined(j);
    EXPECT_EQ(json::parse(rj.out, nullptr, false), json({{"items", json::array()}})) << joined(j) << rj.out;
    EXPECT_EQ(rj.err, "") << joined(j);
    auto y = row.args;
    y.insert(y.end(), {"-o", "yaml"});
    Ran ry = run_ctl(y);
    EXPECT_EQ(ry.status, kExitOk) << joined(y);
    EXPECT_EQ(yaml_to_json(YAML::Load(ry.out)), json({{"items", json::array()}})) << joined(y) << ry.out;
  }
}

// ---- exit codes -----------------------------------------------------------------------

TEST(CtlExitCodes, HttpStatusMapping) {
  const std::vector<std::pair<int, int>> rows = {
      {200, kExitOk}, {400, kExitFailure}, {403, kExitNoAccess}, {404, kExitNotFound},
      {405, kExitFailure}, {409, kExitNotAdmitted}, {500, kExitFailure}, {503, kExitFailure}};
  for (auto [http, code] : rows) EXPECT_EQ(exit_for_http_status(http), code) << http;
  std::set<int> codes;
  for (const auto& e : kExitCodes) EXPECT_TRUE(codes.insert(e.code).second) << "duplicate " << e.code;
  EXPECT_EQ(codes, (std::set<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST_F(Ctl, ExitCodesAgainstARealPodshimd) {
  ASSERT_TRUE(full_->available()) << "podshimd did not start";
  const std::string s = full_->sock();
  struct Row {
    std::vector<std::string> args;
    int code;
    std::string says;  // in stderr or stdout
  };
  const std::vector<Row> rows = {
      {{"--socket", s, "get", "containers", "c1"}, kExitOk, "Container:"},
      {{"--socket", s, "get", "containers", "nosuch"}, kExitNotFound, "HTTP 404"},
      {{"--socket", s, "get", "pods", "nosuch"}, kExitNotFound, "HTTP 404"},
      {{"--socket", s, "resize", "nosuch", "--cpu", "100m"}, kExitNotFound, "HTTP 404"},
      {{"--socket", s, "get", "containers", "forbidden1"}, kExitNoAccess, "HTTP 403"},
      {{"--socket", s, "get", "containers", "forbidden1", "-o", "yaml"}, kExitNoAccess, "HTTP 403"},
      // More cpu than the node has (8): PodResizePending/Infeasible, nothing changed.
      {{"--socket", s, "resize", "c1", "--cpu", "9", "--cpu-limit", "10"}, kExitNotAdmitted, "infeasible"},
      {{"--socket", s, "resize", "c1", "--cpu", "9", "--cpu-limit", "10", "-o", "json"}, kExitNotAdmitted,
       "\"infeasible\""},
      {{"--socket", s, "resize", "c1", "--cpu=300m"}, kExitOk, "applied"},
      {{"--socket", s, "resize", "c1", "--cpu", "300m"}, kExitOk, "unchanged"},
      {{"--socket", s, "status"}, kExitOk, "ready:"},
      {{"--socket", "/nonexistent/podshim.sock", "status"}, kExitNoAccess, "unreachable"},
      {{"--socket", "/nonexistent/podshim.sock", "get", "pods"}, kExitNoAccess, "unreachable"},
      {{"--socket", "/nonexistent/podshim.sock", "watch"}, kExitNoAccess, "unreachable"},
      {{"frobnicate"}, kExitUsage, "unknown command"},
      {{"--frobnicate"}, kExitUsage, "unknown option"},
      {{"get"}, kExitUsage, "Usage"},
      {{"get", "nodes"}, kExitUsage, "nodes"},
      {{"--socket", s, "resize", "c1", "--memory", "100"}, kExitUsage, "page"},
      {{"cdi", "inject", "--spec-dir", cdi_->specs, "--any-owner", "--config", cdi_->config, "vendor.com/gpu=nope"},
       kExitNotFound, "nope"},
  };
  for (const auto& row : rows) {
    Ran r = run_ctl(row.args);
    EXPECT_EQ(r.status, row.code) << joined(row.args) << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE((r.err + r.out).find(row.says), std::string::npos)
        << joined(row.args) << " must say '" << row.says << "': " << r.err << r.out;
  }
}

// ---- resize state and drift ------------------------------------------------------------

// A container as GET /v1/containers gives it, with the given conditions and drift.
json container_json(std::string id, json conditions, json drift = json::array(), bool restart = false) {
  return json{{"id", id}, {"conditions", std::move(conditions)}, {"drift", std::move(drift)},
              {"restartRequired", restart}};
}
json cond(std::string type, std::string reason) { return json{{"type", type}, {"reason", reason}}; }

TEST(CtlResizeState, DriftIsCountedApartFromResizes) {
  const json drift = json::array({json{{"resource", "memory_limit"}, {"file", "memory.max"}}});
  json items = json::array({
      // Drifting only: its PodshimDrift condition is not a resize state.
      container_json("drifting", json::array({cond("PodshimDrift", "KernelValueDiffers")}), drift),
      // A refused shrink: InProgress/Error, and not drift.
      container_json("refused", json::array({cond("PodResizeInProgress", "Error")})),
      // An actuation running.
      container_json("running", json::array({cond("PodResizeInProgress", "")})),
      // Deferred.
      container_json("deferred", json::array({cond("PodResizePending", "Deferred")})),
      container_json("restart", json::array(), json::array(), true),
      container_json("idle", json::array()),
  });
  // Read as podshimctl reads podshimd's answer: with the model's reader.
  auto read = read_containers(items);
  ASSERT_TRUE(read) << read.error().message;
  const std::vector<core::Container>& cs = *read;
  const ContainerStateCounts n = count_container_states(cs);
  EXPECT_EQ(n.drifting, 1u);
  EXPECT_EQ(n.resize_in_progress, 1u);  // "running" only
  EXPECT_EQ(n.resize_error, 1u);
  EXPECT_EQ(n.resize_pending, 1u);
  EXPECT_EQ(n.restart_required, 1u);

  EXPECT_EQ(fmt_conditions(cs[0]), "-");
  EXPECT_EQ(fmt_drift(cs[0]), "memory.max");
  EXPECT_EQ(fmt_conditions(cs[1]), "InProgress/Error");
  EXPECT_EQ(fmt_drift(cs[1]), "-");
  EXPECT_EQ(fmt_conditions(cs[2]), "InProgress");
  EXPECT_EQ(fmt_conditions(cs[3]), "Pending/Deferred");
  EXPECT_EQ(fmt_conditions(cs[4]), "RestartRequired");
}

// An answer item the model's reader refuses is an error naming the item
// and the field, not a row of blanks.
TEST(CtlResizeState, AnUnreadableItemIsNamed) {
  json items = json::array({container_json("fine", json::array()), json{{"podUid", "p"}}});
  auto read = read_containers(items);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("container 1"), std::string::npos) << read.error().message;
  EXPECT_NE(read.error().message.find("missing field 'id'"), std::string::npos) << read.error().message;
}

// The counts of `podshimctl status -o json` as numbers.
json status_json(const std::string& sock) {
  Ran r = run_ctl({"--socket", sock, "status", "-o", "json"});
  EXPECT_EQ(r.status, kExitOk) << r.err;
  return json::parse(r.out, nullptr, false);
}

// The row of container `id` in `podshimctl get containers` (its words).
std::vector<std::string> row_of(const std::string& sock, const std::string& id, std::vector<std::string>* header) {
  Ran r = run_ctl({"--socket", sock, "get", "containers"});
  EXPECT_EQ(r.status, kExitOk) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::vector<std::string> row;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::vector<std::string> words;
    for (std::string x; w >> x;) words.push_back(x);
    if (words.empty()) continue;
    if (words[0] == "CONTAINER") *header = words;
    if (words[0] == id) row = words;
  }
  return row;
}

std::string column(const std::vector<std::string>& header, const std::vector<std::string>& row, const std::string& name) {
  for (size_t i = 0; i < header.size() && i < row.size(); ++i)
    if (header[i] == name) return row[i];
  return "<no " + name + ">";
}

// Against a real podshimd (hooks-only, fake cgroup tree): a refused shrink is
// a resize error, counted neither as in progress nor as drift; a hand edit of
// memory.max is drift, in its own column, count and metric; a deferred resize
// counts as pending.
TEST_F(Ctl, RefusedShrinkDriftAndDeferredAgainstARealPodshimd) {
  Daemon d(true, "readback:\n  interval_ms: 100\n");
  ASSERT_TRUE(d.available()) << "podshimd did not start";
  const std::string s = d.sock();
  const std::string rel = "kubepods/burstable/podp1/c1";
  // The cgroup as the runtime would leave it for the registration
  // (250m/500m, 256Mi), and 200 MiB of anonymous memory in it.
  d.tree().set(rel, "memory.max", std::to_string(256 << 20) + "\n");
  d.tree().set(rel, "cpu.max", "50000 100000\n");
  d.tree().set(rel, "cpu.weight", std::to_string(cgroup::milli_cpu_to_weight(250, cgroup::WeightFormula::Quadratic)) + "\n");
  d.tree().set(rel, "memory.current", std::to_string(200 << 20) + "\n");
  d.tree().set_stat(rel, 200 << 20, 0, 0);
  auto wait_for = [&](auto pred, int ms) {
    for (int i = 0; i < ms / 50; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
  };
  ASSERT_TRUE(wait_for([&] { return status_json(s).value("drifting", -1) == 0; }, 5000)) << status_json(s).dump();

  // A shrink below the anonymous memory: refused.
  Ran r = run_ctl({"--socket", s, "resize", "c1", "--memory-limit", "128Mi"});
  EXPECT_EQ(r.status, kExitFailure) << r.out << r.err;
  // Past the read-back's settle time (2 s) and many passes.
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  json st = status_json(s);
  EXPECT_EQ(st.value("resizeInProgress", -1), 0) << st.dump();
  EXPECT_EQ(st.value("resizeError", -1), 1) << st.dump();
  EXPECT_EQ(st.value("drifting", -1), 0) << "a refused shrink counted as drift: " << st.dump();
  EXPECT_EQ(st.value("resizePending", -1), 0) << st.dump();
  std::vector<std::string> header;
  auto row = row_of(s, "c1", &header);
  EXPECT_EQ(column(header, row, "RESIZE"), "InProgress/Error");
  EXPECT_EQ(column(header, row, "DRIFT"), "-");

  // Someone writes memory.max by hand: drift, apart from the resize state.
  d.tree().set(rel, "memory.max", std::to_string(512 << 20) + "\n");
  ASSERT_TRUE(wait_for([&] { return status_json(s).value("drifting", -1) == 1; }, 5000)) << status_json(s).dump();
  st = status_json(s);
  EXPECT_EQ(st.value("resizeInProgress", -1), 0) << st.dump();
  EXPECT_EQ(st.value("resizeError", -1), 1) << st.dump();
  row = row_of(s, "c1", &header);
  EXPECT_EQ(column(header, row, "RESIZE"), "InProgress/Error");
  EXPECT_EQ(column(header, row, "DRIFT"), "memory.max");
  Ran human = run_ctl({"--socket", s, "status"});
  EXPECT_NE(human.out.find("drifting:           1"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("resize in progress: 0"), std::string::npos) << human.out;
  auto m = d.request("GET", "/metrics");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_NE(m->body.find("podshim_drift{namespace=\"default\",pod=\"web\",uid=\"p1\",container=\"app\","
                         "resource=\"memory_limit\"} 1"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("type=\"PodResizeInProgress\",reason=\"Error\"} 1"), std::string::npos) << m->body;
  EXPECT_EQ(m->body.find("type=\"PodResizeInProgress\",reason=\"\"}"), std::string::npos) << m->body;

  // A second container holds most of the node's 8 CPUs: c1's increase waits.
  d.tree().add("kubepods/burstable/podp2/c2");
  json reg = {{"id", "c2"}, {"podUid", "p2"}, {"name", "big"}, {"podName", "batch"}, {"podNamespace", "default"},
              {"podCgroupPath", "/kubepods/burstable/podp2"}, {"cgroupPath", "/kubepods/burstable/podp2/c2"},
              {"resources", {{"requests", {{"cpu", "7"}}}, {"limits", {{"cpu", "7"}}}}}};
  auto rr = d.request("POST", "/v1/containers", reg.dump());
  ASSERT_TRUE(rr && rr->status < 300) << (rr ? rr->body : rr.error().message);
  r = run_ctl({"--socket", s, "resize", "c1", "--cpu", "2", "--cpu-limit", "2"});
  EXPECT_EQ(r.status, kExitNotAdmitted) << r.out << r.err;
  st = status_json(s);
  EXPECT_EQ(st.value("resizePending", -1), 1) << st.dump();
  EXPECT_EQ(st.value("resizeInProgress", -1), 0) << st.dump();
}

// ---- man pages ------------------------------------------------------------------------

// The codes of a man page's EXIT STATUS section (".TP" / ".B N" items).
std::set<int> man_exit_codes(const std::string& page) {
  std::string text = read_file(std::string(PODSHIM_SOURCE_ROOT) + "/packaging/man/" + page);
  size_t at = text.find(".SH EXIT STATUS");
  EXPECT_NE(at, std::string::npos) << page << " has no EXIT STATUS section";
  if (at == std::string::npos) return {};
  size_t end = text.find("\n.SH ", at + 1);
  std::string section = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::set<int> codes;
  std::regex item(R"(\.TP\n\.B (\d+)\n)");
  for (std::sregex_iterator it(section.begin(), section.end(), item), e; it != e; ++it)
    codes.insert(std::stoi((*it)[1]));
  return codes;
}

// The codes of a --help text's "Exit status:" list ("  N  meaning" lines).
std::set<int> help_exit_codes(const std::string& help) {
  std::set<int> codes;
  size_t at = help.find("Exit status:\n");
  EXPECT_NE(at, std::string::npos) << help;
  if (at == std::string::npos) return codes;
  std::istringstream in(help.substr(at + 13));
  std::string line;
  std::regex item(R"(^  (\d+)  \S.*)");
  std::smatch m;
  while (std::getline(in, line) && std::regex_match(line, m, item)) codes.insert(std::stoi(m[1]));
  return codes;
}

TEST_F(Ctl, ManPagesDocumentTheExitCodes) {
  std::set<int> defined;
  for (const auto& e : kExitCodes) defined.insert(e.code);
  EXPECT_EQ(man_exit_codes("podshimctl.8"), defined) << "podshimctl.8 EXIT STATUS vs registry.h kExitCodes";
  Ran help = run_ctl({"--help"});
  EXPECT_EQ(help_exit_codes(help.out), defined) << "podshimctl --help vs registry.h kExitCodes";

  const std::string hook = env("PODSHIM_HOOK");
  ASSERT_FALSE(hook.empty()) << "PODSHIM_HOOK is not set";
  Ran hook_help = run_argv({hook, "--help"});
  ASSERT_EQ(hook_help.status, 0);
  std::set<int> hook_codes = help_exit_codes(hook_help.out);
  EXPECT_EQ(hook_codes, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(man_exit_codes("podshim-hook.8"), hook_codes) << "podshim-hook.8 EXIT STATUS vs podshim-hook --help";
  // The hook's usage error is the documented 2.
  EXPECT_EQ(run_argv({hook, "--bogus"}).status, 2);

  // Both pages document --version; podshimctl's the output formats and completion.
  for (const char* page : {"podshimctl.8", "podshim-hook.8"})
    EXPECT_NE(read_file(std::string(PODSHIM_SOURCE_ROOT) + "/packaging/man/" + page).find("\\-\\-version"),
              std::string::npos)
        << page;
  std::string man = read_file(std::string(PODSHIM_SOURCE_ROOT) + "/packaging/man/podshimctl.8");
  for (const char* s : {"yaml", "wide", "completion", "No resources found"})
    EXPECT_NE(man.find(s), std::string::npos) << "podshimctl.8 lacks " << s;
}

}  // namespace
}  // namespace podshim::ctl
