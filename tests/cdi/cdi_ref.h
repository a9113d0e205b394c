// Builds and runs tools/cdi-ref, the driver around Debian's Go CDI library
// (v0.5.2), for the differential test and the benchmark. The binary is cached
// in the build directory and rebuilt when main.go is newer.
//
// The reference is optional for the unit suite: when the Go toolchain
// (golang-go, or $PODSHIM_GO) or Debian's Go CDI package is absent, the
// tests that need it skip with exit 77 and say why (skip_unless_cdi_ref).
// Both are checked on every run, so a binary cached by an earlier run
// cannot hide a machine that lacks them. tools/install-deps.sh installs both.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace podshim::cdi::testing {

struct RefRun {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out, err;
  nlohmann::json json;  // parsed stdout (null when not JSON)
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline int run_shell(const std::string& cmd) {
  int st = std::system(cmd.c_str());
  if (st == -1) return -1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// Debian's golang-github-container-orchestrated-devices-container-device-interface-dev.
inline constexpr const char* kCdiGoPackage =
    "/usr/share/gocode/src/github.com/container-orchestrated-devices/container-device-interface/pkg/cdi";

// The Go toolchain to build with: $PODSHIM_GO, else `go` from PATH; "" when
// there is none.
inline std::string go_tool() {
  if (const char* g = std::getenv("PODSHIM_GO"); g && *g) return ::access(g, X_OK) == 0 ? g : "";
  if (run_shell("command -v go >/dev/null 2>&1") != 0) return "";
  return "go";
}

// Why the reference cannot be had on this machine, or "" when it can.
inline std::string cdi_ref_missing() {
  if (go_tool().empty()) {
    const char* g = std::getenv("PODSHIM_GO");
    return g && *g ? std::string("PODSHIM_GO=") + g + " is not an executable Go toolchain"
                   : "the Go toolchain (go) is not on PATH; tools/install-deps.sh installs golang-go";
  }
  struct stat st {};
  if (::stat(kCdiGoPackage, &st) != 0 || !S_ISDIR(st.st_mode))
    return std::string("Debian's Go CDI package is not installed (no ") + kCdiGoPackage +
           "); tools/install-deps.sh installs golang-github-container-orchestrated-devices-"
           "container-device-interface-dev";
  return "";
}

// Ends the process with 77 (skip) and the reason when the reference is
// unavailable; called before any test that needs it.
inline void skip_unless_cdi_ref(const char* who) {
  std::string why = cdi_ref_missing();
  if (why.empty()) return;
  std::fprintf(stderr, "%s: SKIP: %s\n", who, why.c_str());
  std::fprintf(stdout, "%s: SKIP: %s\n", who, why.c_str());
  std::fflush(nullptr);
  std::_Exit(77);
}

// Returns the path of an up-to-date cdi-ref binary, or an error text.
inline std::string build_cdi_ref(std::string* error) {
  const std::string src = PODSHIM_CDI_REF_SRC;  // .../tools/cdi-ref/main.go
  const std::string bin = PODSHIM_CDI_REF_BIN;  // in the build directory
  struct stat s{}, b{};
  if (::stat(src.c_str(), &s) != 0) {
    *error = "missing " + src;
    return "";
  }
  if (std::string why = cdi_ref_missing(); !why.empty()) {
    *error = why;
    return "";
  }
  if (::stat(bin.c_str(), &b) == 0 && b.st_mtime >= s.st_mtime) return bin;
  const std::string go = go_tool();
  char gopath[] = "/tmp/podshim-cdi-gopath-XXXXXX";
  if (!::mkdtemp(gopath)) {
    *error = "mkdtemp failed";
    return "";
  }
  std::string dir = src.substr(0, src.rfind('/'));
  std::string tmp = bin + ".tmp." + std::to_string(::getpid());
  std::string log = bin + ".build.log";
  // GOPATH mode against Debian's packaged sources (/usr/share/gocode), no network.
  std::string cmd = "cd " + shell_quote(dir) + " && GO111MODULE=off GOFLAGS= GOPROXY=off GOPATH=" +
                    shell_quote(std::string(gopath) + ":/usr/share/gocode") +
                    " GOCACHE=" + shell_quote(bin + "-gocache") + " " + shell_quote(go) + " build -o " + shell_quote(tmp) +
                    " main.go >" + shell_quote(log) + " 2>&1";
  int rc = run_shell(cmd);
  run_shell("rm -rf " + shell_quote(gopath));
  if (rc != 0) {
    *error = "go build of cdi-ref failed (is golang-github-container-orchestrated-devices-"
             "container-device-interface-dev installed?):\n" + slurp(log);
    return "";
  }
  if (::rename(tmp.c_str(), bin.c_str()) != 0) {
    *error = "rename failed";
    return "";
  }
  return bin;
}

inline RefRun run_cdi_ref(const std::string& bin, const std::vector<std::string>& args,
                          const std::string& scratch) {
  std::string cmd = shell_quote(bin);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  std::string out = scratch + "/ref.out", err = scratch + "/ref.err";
  RefRun r;
  r.exit_code = run_shell(cmd + " >" + shell_quote(out) + " 2>" + shell_quote(err));
  r.out = slurp(out);
  r.err = slurp(err);
  r.json = nlohmann::json::parse(r.out, nullptr, false);
  if (r.json.is_discarded()) r.json = nullptr;
  return r;
}

}  // namespace podshim::cdi::testing
