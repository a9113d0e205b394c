// Registry scan rules, conflicts, safety refusals, resolution and live refresh.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "cdi/registry.h"
#include "tests/cdi/cdi_test_util.h"

namespace podshim::cdi {
namespace {

using testing::simple_spec;
using testing::TempDir;
using testing::write_file;

RegistryOptions opts(std::vector<std::string> dirs) {
  RegistryOptions o;
  o.spec_dirs = std::move(dirs);
  o.required_owner = ::getuid();  // works as root and unprivileged
  return o;
}

bool has_error(const Registry& r, const std::string& path, const std::string& needle) {
  auto errs = r.errors();
  auto it = errs.find(path);
  if (it == errs.end()) return false;
  for (const auto& e : it->second)
    if (e.find(needle) != std::string::npos) return true;
  return false;
}

TEST(CdiRegistry, ScanRules) {
  TempDir t;
  std::string d = t.dir("etc");
  write_file(d + "/a.yaml", simple_spec("vendor.com/gpu", {"a"}));
  write_file(d + "/b.json", R"({"cdiVersion":"0.3.0","kind":"vendor.com/gpu","devices":[{"name":"b","containerEdits":{"env":["B=1"]}}]})");
  write_file(d + "/c.yml", simple_spec("vendor.com/gpu", {"c"}));   // not a spec extension
  write_file(d + "/d.yaml.bak", simple_spec("vendor.com/gpu", {"d"}));
  std::string sub = t.dir("etc/nested.yaml");                         // directories are skipped
  write_file(sub + "/e.yaml", simple_spec("vendor.com/gpu", {"e"}));
  write_file(d + "/0-broken.yaml", "kind: [\n");                     // errors don't stop the scan
  Registry r(opts({d, t.path() + "/missing"}));
  r.refresh();
  EXPECT_EQ(r.devices(), (std::vector<std::string>{"vendor.com/gpu=a", "vendor.com/gpu=b"}));
  ASSERT_EQ(r.verdicts().size(), 3u);
  EXPECT_EQ(r.verdicts()[0].path, d + "/0-broken.yaml");  // lexical order
  EXPECT_FALSE(r.verdicts()[0].loaded);
  EXPECT_TRUE(has_error(r, d + "/0-broken.yaml", "failed to load CDI spec"));
  EXPECT_TRUE(r.verdicts()[1].loaded);
  EXPECT_EQ(r.errors().size(), 1u);
  ASSERT_EQ(r.specs().size(), 2u);
  EXPECT_EQ(r.specs()[0]->vendor(), "vendor.com");
  EXPECT_EQ(r.specs()[0]->cls(), "gpu");
}

TEST(CdiRegistry, LaterDirectoryWinsEqualPriorityConflicts) {
  TempDir t;
  std::string etc = t.dir("etc"), run = t.dir("run");
  write_file(etc + "/x.yaml", simple_spec("vendor.com/gpu", {"over", "only-etc"}));
  write_file(run + "/y.yaml", simple_spec("vendor.com/gpu", {"over", "dup"}));
  write_file(run + "/z.yaml", simple_spec("vendor.com/gpu", {"dup", "fine"}));
  Registry r(opts({etc, run}));
  r.refresh();
  EXPECT_EQ(r.devices(), (std::vector<std::string>{"vendor.com/gpu=fine", "vendor.com/gpu=only-etc",
                                                   "vendor.com/gpu=over"}));
  // The override came from the later directory.
  auto e = r.resolve({"vendor.com/gpu=over"});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->env, std::vector<std::string>{"DEV=over"});
  const std::string msg = "conflicting device \"vendor.com/gpu=dup\"";
  EXPECT_TRUE(has_error(r, run + "/y.yaml", msg));
  EXPECT_TRUE(has_error(r, run + "/z.yaml", msg));
  EXPECT_FALSE(has_error(r, etc + "/x.yaml", msg));
  auto u = r.resolve({"vendor.com/gpu=dup"});
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().code, ENOENT);
}

TEST(CdiRegistry, DuplicateInsideOneSpecInvalidatesIt) {
  TempDir t;
  std::string d = t.dir("d");
  write_file(d + "/a.yaml", simple_spec("vendor.com/gpu", {"x", "x"}));
  Registry r(opts({d}));
  r.refresh();
  EXPECT_TRUE(r.devices().empty());
  EXPECT_TRUE(has_error(r, d + "/a.yaml", "multiple devices named \"x\""));
}

TEST(CdiRegistry, UnsafeFilesAreIgnoredWithAnError) {
  TempDir t;
  std::string d = t.dir("d");
  write_file(d + "/good.yaml", simple_spec("vendor.com/gpu", {"good"}));
  write_file(d + "/world.yaml", simple_spec("vendor.com/gpu", {"world"}), 0666);
  write_file(d + "/group.yaml", simple_spec("vendor.com/gpu", {"group"}), 0664);
  write_file(t.path() + "/target.yaml", simple_spec("vendor.com/gpu", {"link"}));
  std::filesystem::create_symlink(t.path() + "/target.yaml", d + "/link.yaml");
  std::filesystem::create_symlink(t.path() + "/nowhere.yaml", d + "/dangling.yaml");
  ASSERT_EQ(::mkfifo((d + "/fifo.yaml").c_str(), 0600), 0);  // must not block the scan
  Registry r(opts({d}));
  r.refresh();
  EXPECT_EQ(r.devices(), std::vector<std::string>{"vendor.com/gpu=good"});
  EXPECT_TRUE(has_error(r, d + "/world.yaml", "world-writable"));
  EXPECT_TRUE(has_error(r, d + "/group.yaml", "group- or world-writable (mode 0664)"));
  EXPECT_TRUE(has_error(r, d + "/link.yaml", "symlink"));
  EXPECT_TRUE(has_error(r, d + "/dangling.yaml", "symlink"));
  EXPECT_TRUE(has_error(r, d + "/fifo.yaml", "not a regular file"));

  // Owner check: the same files, with an owner nobody here has.
  RegistryOptions o = opts({d});
  o.required_owner = ::getuid() + 1;
  Registry strict(o);
  strict.refresh();
  EXPECT_TRUE(strict.devices().empty());
  EXPECT_TRUE(has_error(strict, d + "/good.yaml", "owned by uid"));
  // And no owner requirement at all.
  o.required_owner = std::nullopt;
  Registry lax(o);
  lax.refresh();
  EXPECT_EQ(lax.devices(), std::vector<std::string>{"vendor.com/gpu=good"});
}

TEST(CdiRegistry, ResolveMergesSpecEditsOnceInRequestOrder) {
  TempDir t;
  std::string d = t.dir("d");
  write_file(d + "/a.yaml", simple_spec("vendor.com/gpu", {"g0", "g1"}, "GPU_COMMON=1"));
  write_file(d + "/b.yaml", simple_spec("vendor.com/nic", {"n0"}, "NIC_COMMON=1"));
  Registry r(opts({d}));
  r.refresh();
  auto e = r.resolve({"vendor.com/nic=n0", "vendor.com/gpu=g1", "vendor.com/gpu=g0", "vendor.com/gpu=g1"});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->env, (std::vector<std::string>{"NIC_COMMON=1", "DEV=n0", "GPU_COMMON=1", "DEV=g1", "DEV=g0"}));

  auto bad = r.resolve({"vendor.com/gpu=g0", "vendor.com/gpu=nope", "x/y=z"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ENOENT);
  // Only the unresolved names (HEAD; v0.5.2 listed every request), and the
  // malformed one says why.
  EXPECT_NE(bad.error().message.find("unresolvable CDI devices vendor.com/gpu=nope, x/y=z ("), std::string::npos)
      << bad.error().message;
  EXPECT_EQ(bad.error().message.find("=g0"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("at least 2 characters"), std::string::npos);
}

TEST(CdiRegistry, LiveRefreshThroughInotify) {
  TempDir t;
  std::string etc = t.dir("etc");
  std::string run = t.path() + "/run/cdi";  // does not exist yet
  Registry r(opts({etc, run}));
  int registered_fd = -1;
  std::function<void()> on_readable;
  auto w = r.watch([&](int fd, std::function<void()> cb) -> Result<void> {
    registered_fd = fd;
    on_readable = std::move(cb);
    return {};
  });
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_EQ(registered_fd, r.watch_fd());
  EXPECT_TRUE(r.devices().empty());

  // Waits (bounded, for liveness only) until the fd is readable, then runs
  // the callback the event loop would run.
  auto pump = [&] {
    struct pollfd p{registered_fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) == 1) on_readable();
  };
  auto gen = r.generation();
  write_file(etc + "/a.yaml", simple_spec("vendor.com/gpu", {"a"}));
  pump();
  EXPECT_GT(r.generation(), gen);
  EXPECT_EQ(r.devices(), std::vector<std::string>{"vendor.com/gpu=a"});

  // A transient spec in a directory that appears later (a DRA driver's first claim).
  std::filesystem::create_directories(run);
  pump();
  write_file(t.path() + "/staged", simple_spec("vendor.com/gpu", {"claim1"}));
  std::filesystem::rename(t.path() + "/staged", run + "/vendor.com-gpu_claim1.yaml");
  pump();
  for (int i = 0; i < 3 && r.devices().size() < 2; i++) pump();
  EXPECT_EQ(r.devices(), (std::vector<std::string>{"vendor.com/gpu=a", "vendor.com/gpu=claim1"}));

  std::filesystem::remove(run + "/vendor.com-gpu_claim1.yaml");
  pump();
  EXPECT_EQ(r.devices(), std::vector<std::string>{"vendor.com/gpu=a"});

  // Unrelated files do not trigger a rescan.
  gen = r.generation();
  write_file(etc + "/notes.txt", "x");
  struct pollfd p{registered_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_FALSE(r.process_watch_events());
  EXPECT_EQ(r.generation(), gen);
}

// Runs the loop's callback while the fd is readable; returns how many jobs
// ran. inotify queues an event within the syscall that causes it, so what
// the test just did is already readable: no waiting.
size_t settle(Registry& r) {
  size_t jobs = 0;
  for (int i = 0; i < 10000; i++) {
    struct pollfd p{r.watch_fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) break;
    if (r.process_watch_events()) jobs++;
  }
  return jobs;
}

void expect_same_as_full_scan(const Registry& live, const RegistryOptions& o) {
  Registry full(o);
  full.refresh();
  EXPECT_EQ(live.devices(), full.devices());
  ASSERT_EQ(live.verdicts().size(), full.verdicts().size());
  for (size_t i = 0; i < full.verdicts().size(); i++) {
    EXPECT_EQ(live.verdicts()[i].path, full.verdicts()[i].path);
    EXPECT_EQ(live.verdicts()[i].loaded, full.verdicts()[i].loaded) << full.verdicts()[i].path;
    EXPECT_EQ(live.verdicts()[i].errors, full.verdicts()[i].errors) << full.verdicts()[i].path;
  }
  ASSERT_EQ(live.specs().size(), full.specs().size());
  for (const auto& d : full.devices()) {
    auto a = live.resolve({d}), b = full.resolve({d});
    ASSERT_TRUE(a && b) << d;
    EXPECT_EQ(a->env, b->env) << d;
  }
}

TEST(CdiRegistry, LiveRefreshReReadsOnlyTheChangedFile) {
  TempDir t;
  std::string d = t.dir("etc");
  for (int i = 0; i < 40; i++)
    write_file(fmt::format("{}/s{:02}.yaml", d, i), simple_spec("vendor.com/gpu", {fmt::format("d{}", i)}));
  auto o = opts({d});
  Registry r(o);
  ASSERT_TRUE(r.watch(nullptr));
  ASSERT_EQ(r.specs().size(), 40u);
  std::vector<std::shared_ptr<const SpecFile>> before = r.specs();

  write_file(d + "/s07.yaml", simple_spec("vendor.com/gpu", {"d7", "d7b"}));
  size_t jobs = settle(r);
  EXPECT_EQ(jobs, 1u) << "one changed file, one job";
  EXPECT_EQ(r.pending_jobs(), 0u);
  ASSERT_EQ(r.specs().size(), 40u);
  for (size_t i = 0; i < 40; i++) {
    // Same objects for untouched files: they were not read again.
    if (i == 7) EXPECT_NE(r.specs()[i], before[i]);
    else EXPECT_EQ(r.specs()[i], before[i]) << i;
  }
  auto devs = r.devices();
  EXPECT_NE(std::find(devs.begin(), devs.end(), "vendor.com/gpu=d7b"), devs.end());
  expect_same_as_full_scan(r, o);
}

// A registry r made with options o, watching one spec directory d, empty at
// the start.
class CdiRegistryWatchingOneDir : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(r.watch(nullptr)); }

  TempDir t;
  const std::string d = t.dir("etc");
  const RegistryOptions o = opts({d});
  Registry r{o};
};

TEST_F(CdiRegistryWatchingOneDir, BurstOfChangesRunsOneFilePerCallback) {
  for (int i = 0; i < 12; i++)
    write_file(fmt::format("{}/b{:02}.yaml", d, i), simple_spec("vendor.com/gpu", {fmt::format("b{}", i)}));
  // The first callback drains every event but parses one file only; the
  // fd stays readable while jobs remain.
  struct pollfd p{r.watch_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1);
  ASSERT_TRUE(r.process_watch_events());
  EXPECT_EQ(r.specs().size(), 1u);
  EXPECT_EQ(r.pending_jobs(), 11u);
  for (size_t left = 11; left > 0; left--) {
    struct pollfd q{r.watch_fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&q, 1, 0), 1) << "the loop must be called back while " << left << " jobs remain";
    ASSERT_TRUE(r.process_watch_events());
    EXPECT_EQ(r.pending_jobs(), left - 1);
  }
  struct pollfd q{r.watch_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&q, 1, 0), 0) << "no work left: the fd must not stay readable";
  EXPECT_EQ(r.specs().size(), 12u);
  expect_same_as_full_scan(r, o);
}

// Random creates, rewrites (valid, invalid, conflicting), removals and a
// directory removed and recreated, across two directories: after the jobs
// settle, the live registry is what a full scan finds, conflict messages
// and their order included.
TEST(CdiRegistry, LiveRefreshEqualsAFullScan) {
  TempDir t;
  std::string etc = t.dir("etc"), run = t.dir("run");
  auto o = opts({etc, run});
  Registry r(o);
  ASSERT_TRUE(r.watch(nullptr));
  testing::Lcg rnd{20};
  const std::vector<std::string> dev_names = {"a", "b", "c", "d", "e"};
  for (int step = 0; step < 60; step++) {
    SCOPED_TRACE(step);
    std::string dir = rnd(2) ? etc : run;
    std::string file = fmt::format("{}/f{}.{}", dir, rnd(6), rnd(4) ? "yaml" : "json");
    switch (rnd(6)) {
      case 0:
        std::filesystem::remove(file);
        break;
      case 1:
        write_file(file, "kind: [\n");  // invalid
        break;
      case 2:
        if (step % 15 == 0) {  // the whole directory goes and comes back
          std::filesystem::remove_all(run);
          settle(r);
          std::filesystem::create_directories(run);
          write_file(run + "/back.yaml", simple_spec("vendor.com/gpu", {"a", "z"}));
        }
        break;
      default: {
        bool json = file.ends_with(".json");
        std::string a = dev_names[rnd(5)], b = dev_names[rnd(5)];
        if (a == b) b = "x" + b;
        if (json)
          write_file(file, fmt::format(R"({{"cdiVersion":"0.3.0","kind":"vendor.com/gpu","devices":[{{"name":"{}","containerEdits":{{"env":["F={}"]}}}}]}})",
                                       a, file));
        else
          write_file(file, simple_spec("vendor.com/gpu", {a, b}, "SPEC=" + std::to_string(step)));
      }
    }
    if (rnd(3) == 0) {
      settle(r);
      expect_same_as_full_scan(r, o);
    }
  }
  settle(r);
  expect_same_as_full_scan(r, o);
}

// The name lookup is an open-addressing index kept next to the names: names
// that come and go in numbers (hundreds of names, files removed and written
// again through live refresh, the index growing and deleting in clusters)
// must resolve exactly as in a registry scanned afresh, one at a time and
// all in one request, and removed names must not resolve.
TEST_F(CdiRegistryWatchingOneDir, ManyNamesComeAndGoThroughLiveRefresh) {
  testing::Lcg rnd{7};
  auto spec = [](int f, int gen) {
    std::string s = "cdiVersion: 0.5.0\nkind: vendor.com/gpu\ndevices:\n";
    for (int k = 0; k < 8; k++)
      s += fmt::format("- name: f{}-g{}-d{}\n  containerEdits:\n    env: [DEV=f{}-{}]\n", f, gen % 3, k, f, k);
    return s;
  };
  std::set<std::string> ever;
  for (int f = 0; f < 40; f++) write_file(fmt::format("{}/f{:02}.yaml", d, f), spec(f, 0));
  for (int round = 0; round < 8; round++) {
    SCOPED_TRACE(round);
    for (int k = 0; k < 12; k++) {
      int f = static_cast<int>(rnd(40));
      std::string file = fmt::format("{}/f{:02}.yaml", d, f);
      if (rnd(3) == 0) std::filesystem::remove(file);
      else write_file(file, spec(f, static_cast<int>(rnd(3))));
    }
    settle(r);
    Registry full(o);
    full.refresh();
    auto names = full.devices();
    EXPECT_EQ(r.devices(), names);
    ever.insert(names.begin(), names.end());
    for (const auto& n : ever) EXPECT_EQ(static_cast<bool>(r.resolve({n})), static_cast<bool>(full.resolve({n}))) << n;
    auto a = r.resolve(names), b = full.resolve(names);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->env, b->env);
  }
}

// Counts parses through RegistryOptions::on_parse: a live refresh parses
// exactly the files that changed, one per callback, never the whole set.
TEST(CdiRegistry, LiveRefreshParsesOnlyWhatChanged) {
  TempDir t;
  std::string d = t.dir("run");
  constexpr int kFiles = 30;
  for (int i = 0; i < kFiles; i++)
    write_file(fmt::format("{}/p{:02}.yaml", d, i), simple_spec("vendor.com/gpu", {fmt::format("p{}", i)}));
  auto o = opts({d});
  std::vector<std::string> parsed;
  o.on_parse = [&](const std::string& path) { parsed.push_back(path); };
  Registry r(o);
  ASSERT_TRUE(r.watch(nullptr));
  EXPECT_EQ(parsed.size(), static_cast<size_t>(kFiles)) << "the initial scan parses every file once";
  auto run = [&] {  // settles the queue, checking each callback parses at most one file
    parsed.clear();
    struct pollfd p{r.watch_fd(), POLLIN, 0};
    if (::poll(&p, 1, 2000) != 1) return;
    for (int calls = 0; calls < 10 * kFiles; calls++) {
      size_t before = parsed.size();
      bool ran = r.process_watch_events();
      EXPECT_LE(parsed.size() - before, 1u) << "one callback parsed more than one file";
      struct pollfd q{r.watch_fd(), POLLIN, 0};
      if (!ran && ::poll(&q, 1, 50) == 0) break;
    }
  };

  // A DRA driver's write: a temporary name, then a rename into place.
  write_file(d + "/p07.yaml.tmp", simple_spec("vendor.com/gpu", {"p7", "p7b"}));
  std::filesystem::rename(d + "/p07.yaml.tmp", d + "/p07.yaml");
  run();
  EXPECT_EQ(parsed, std::vector<std::string>{d + "/p07.yaml"});
  // A rewrite in place, a new file, a removal.
  write_file(d + "/p11.yaml", simple_spec("vendor.com/gpu", {"p11x"}));
  run();
  EXPECT_EQ(parsed, std::vector<std::string>{d + "/p11.yaml"});
  write_file(d + "/new.yaml", simple_spec("vendor.com/gpu", {"n"}));
  run();
  EXPECT_EQ(parsed, std::vector<std::string>{d + "/new.yaml"});
  std::filesystem::remove(d + "/p03.yaml");
  run();
  EXPECT_TRUE(parsed.empty()) << parsed.size() << " parses for a removal";
  auto devs = r.devices();
  EXPECT_NE(std::find(devs.begin(), devs.end(), "vendor.com/gpu=p7b"), devs.end());
  EXPECT_EQ(std::find(devs.begin(), devs.end(), "vendor.com/gpu=p3"), devs.end());

  // A directory event (chmod) lists the directory again, but files that
  // are the ones read before are not parsed again; one changed file is.
  ASSERT_EQ(::chmod(d.c_str(), 0751), 0);
  run();
  EXPECT_TRUE(parsed.empty()) << parsed.size() << " parses after a chmod of the directory";
  ASSERT_EQ(::chmod((d + "/p20.yaml").c_str(), 0600), 0);  // the file's own ctime changes
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  run();
  EXPECT_EQ(parsed, std::vector<std::string>{d + "/p20.yaml"});
  expect_same_as_full_scan(r, o);

  // refresh() is the explicit full scan: every file, once.
  parsed.clear();
  r.refresh();
  EXPECT_EQ(parsed.size(), static_cast<size_t>(kFiles));
}

}  // namespace
}  // namespace podshim::cdi
