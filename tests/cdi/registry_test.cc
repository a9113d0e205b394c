// Registry scan rules, conflicts, safety refusals, resolution and live refresh.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <filesystem>

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
  std::string d = t.sub("etc");
  write_file(d + "/a.yaml", simple_spec("vendor.com/gpu", {"a"}));
  write_file(d + "/b.json", R"({"cdiVersion":"0.3.0","kind":"vendor.com/gpu","devices":[{"name":"b","containerEdits":{"env":["B=1"]}}]})");
  write_file(d + "/c.yml", simple_spec("vendor.com/gpu", {"c"}));   // not a spec extension
  write_file(d + "/d.yaml.bak", simple_spec("vendor.com/gpu", {"d"}));
  std::string sub = t.sub("etc/nested.yaml");                         // directories are skipped
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
  EXPECT_EQ(r.specs().size(), 2u);
}

TEST(CdiRegistry, LaterDirectoryWinsEqualPriorityConflicts) {
  TempDir t;
  std::string etc = t.sub("etc"), run = t.sub("run");
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
  std::string d = t.sub("d");
  write_file(d + "/a.yaml", simple_spec("vendor.com/gpu", {"x", "x"}));
  Registry r(opts({d}));
  r.refresh();
  EXPECT_TRUE(r.devices().empty());
  EXPECT_TRUE(has_error(r, d + "/a.yaml", "multiple devices named \"x\""));
}

TEST(CdiRegistry, UnsafeFilesAreIgnoredWithAnError) {
  TempDir t;
  std::string d = t.sub("d");
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
  std::string d = t.sub("d");
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
  std::string etc = t.sub("etc");
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

}  // namespace
}  // namespace podshim::cdi
