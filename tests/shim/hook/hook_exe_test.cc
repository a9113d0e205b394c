// The podshim-hook executable's contract, as a runtime sees it: state on
// stdin, exit status, and exactly one clear stderr line on failure (runc puts
// hook stderr into its own error message).
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shim/hook/oci.h"
#include "tests/shim/hook/fixtures.h"

namespace podshim::hook {
namespace {

using nlohmann::json;
using namespace testing;  // the fixtures of tests/shim/hook/fixtures.h

struct Ran {
  int status = -1;
  std::string err;
  std::vector<std::string> err_lines() const {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < err.size()) {
      size_t j = err.find('\n', i);
      if (j == std::string::npos) j = err.size();
      out.push_back(err.substr(i, j - i));
      i = j + 1;
    }
    return out;
  }
};

std::string hook_path() {
  const char* p = std::getenv("PODSHIM_HOOK");
  return p ? p : "";
}

// Runs the hook with `input` on stdin (written from a thread-free loop with
// poll, so a hook that stops reading early cannot deadlock the test).
Ran run_hook(const std::vector<std::string>& args, const std::string& input) {
  // A hook that exits before reading all of stdin (it refuses a huge state
  // early) must surface as EPIPE on our write, not kill the test: under load
  // the exit can come before the last write.
  ::signal(SIGPIPE, SIG_IGN);
  int in[2], err[2];
  if (::pipe2(in, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(err[1], 2);
    std::vector<char*> argv;
    std::string exe = hook_path();
    argv.push_back(exe.data());
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(err[1]);
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  Ran r;
  size_t off = 0;
  bool in_open = true;
  if (input.empty()) {
    ::close(in[1]);
    in_open = false;
  }
  for (;;) {
    pollfd p[2] = {{err[0], POLLIN, 0}, {in_open ? in[1] : -1, POLLOUT, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents & (POLLOUT | POLLERR | POLLHUP)) {
      ssize_t n = ::write(in[1], input.data() + off, input.size() - off);
      if (n > 0) off += static_cast<size_t>(n);
      if (n < 0 || off == input.size()) {
        ::close(in[1]);
        in_open = false;
      }
    }
    if (p[0].revents & (POLLIN | POLLHUP)) {
      char buf[4096];
      ssize_t n = ::read(err[0], buf, sizeof buf);
      if (n <= 0) break;
      r.err.append(buf, static_cast<size_t>(n));
    }
  }
  if (in_open) ::close(in[1]);
  ::close(err[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

class HookExe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (hook_path().empty()) GTEST_SKIP() << "PODSHIM_HOOK not set";
    dir_.write("config.json", make_config().dump());
  }
  std::string bundle() const { return dir_.path(); }
  std::string sock() const { return dir_.sub("podshim.sock"); }
  TempDir dir_;
};

// Each malformed input: non-zero exit, exactly one "<3>podshim-hook" line
// that names the problem.
TEST_F(HookExe, MalformedInputIsOneLine) {
  json no_id = make_state(bundle());
  no_id.erase("id");
  json no_bundle = make_state(bundle());
  no_bundle.erase("bundle");
  struct Case {
    std::string input;
    std::string expect;
  } cases[] = {
      {"", "OCI state on stdin is empty"},
      {"{not json", "not valid JSON"},
      {no_id.dump(), "no 'id'"},
      {no_bundle.dump(), "no 'bundle'"},
      {make_state("relative/bundle").dump(), "not an absolute path"},
      {std::string(kMaxStateBytes + 10, 'x'), "larger than"},
      {make_state(bundle() + "/missing").dump(), "No such file or directory"},
      {make_state(bundle(), "running").dump(), "status is 'running'"},
  };
  for (const Case& c : cases) {
    Ran r = run_hook({"--socket", sock(), "createRuntime"}, c.input);
    EXPECT_EQ(r.status, 1) << c.expect << ": " << r.err;
    auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_EQ(lines[0].rfind("<3>podshim-hook createRuntime: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(c.expect), std::string::npos) << lines[0];
  }
}

TEST_F(HookExe, BadConfigIsOneLine) {
  dir_.write("config.json", "{\"linux\": {\"devices\": [{\"path\": \"/dev/x\", \"type\": \"q\"}]}}");
  Ran r = run_hook({"--socket", sock(), "createRuntime"}, make_state(bundle()).dump());
  EXPECT_EQ(r.status, 1);
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("config.json linux.devices[0]"), std::string::npos) << r.err;
}

TEST_F(HookExe, DeviceThatIsARegularFileFails) {
  // The injected "device" is a regular file on the host: the runtime would
  // bind or mknod something that is not what the CDI spec promised.
  std::string fake = dir_.sub("fake-dev");
  dir_.write("fake-dev", "x");
  json ann = {{"podshim.io/injected-devices", json::array({fake}).dump()}};
  dir_.write("config.json",
             make_config({{{"path", fake}, {"type", "c"}, {"major", 1}, {"minor", 3}}}, ann).dump());
  Ran r = run_hook({"--socket", sock(), "createRuntime"}, make_state(bundle(), "creating", ann).dump());
  EXPECT_EQ(r.status, 1);
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("is a regular file"), std::string::npos) << r.err;
}

TEST_F(HookExe, UsageErrorsExitTwo) {
  Ran r = run_hook({"bogus-stage"}, make_state(bundle()).dump());
  EXPECT_EQ(r.status, 2);
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("unknown hook stage 'bogus-stage'"), std::string::npos);
}

TEST_F(HookExe, HelpPrintsUsageAndExitsZero) {
  Ran r = run_hook({"--help"}, "");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(HookExe, VersionExitsZero) {
  Ran r = run_hook({"--version"}, "");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(HookExe, OverlongIdIsRefusedBeforeRegistering) {
  auto st = make_state(bundle());
  st["id"] = std::string(300, 'a');
  Ran r = run_hook({"--socket", sock(), "createRuntime"}, st.dump());
  EXPECT_EQ(r.status, 1);
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("longer than 128"), std::string::npos) << r.err;
}

TEST_F(HookExe, NoServerSkipsAndExitsZero) {
  Ran r = run_hook({"--socket", sock(), "--timeout-ms", "300", "createRuntime"},
                   make_state(bundle()).dump());
  EXPECT_EQ(r.status, 0) << r.err;
  auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("<4>", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("ignoring"), std::string::npos) << lines[0];

  Ran strict = run_hook({"--strict", "--socket", sock(), "--timeout-ms", "300", "createRuntime"},
                        make_state(bundle()).dump());
  EXPECT_EQ(strict.status, 1) << strict.err;
  ASSERT_EQ(strict.err_lines().size(), 1u) << strict.err;
  EXPECT_EQ(strict.err.rfind("<3>", 0), 0u);

  // Poststop with podshimd away: a warning, never a failure.
  Ran stop = run_hook({"--socket", sock(), "poststop"}, make_state(bundle(), "stopped").dump());
  EXPECT_EQ(stop.status, 0) << stop.err;
}

TEST_F(HookExe, RegistersWithServer) {
  FakeServer server(sock());
  Ran r = run_hook({"--socket", sock(), "createRuntime"}, make_state(bundle()).dump());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");  // success is silent
  Ran s = run_hook({"--socket", sock(), "poststop"}, make_state(bundle(), "stopped").dump());
  EXPECT_EQ(s.status, 0) << s.err;
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(json::parse(reqs[0].body)["cgroupPath"], "/kubepods/pod-uid-1/ctr1");
  EXPECT_EQ(reqs[1].method, "DELETE");
  EXPECT_EQ(reqs[1].target, "/v1/containers/ctr1");
}

}  // namespace
}  // namespace podshim::hook
