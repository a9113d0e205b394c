// Builds and runs tools/cdi-ref, the driver around Debian's Go CDI library
// (v0.5.2), for the differential test and the benchmark. The binary is cached
// in the build directory and rebuilt when main.go is newer. A missing Go
// toolchain is a failure, not a skip: tools/install-deps.sh installs it.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

// Returns the path of an up-to-date cdi-ref binary, or an error text.
inline std::string build_cdi_ref(std::string* error) {
  const std::string src = PODSHIM_CDI_REF_SRC;  // .../tools/cdi-ref/main.go
  const std::string bin = PODSHIM_CDI_REF_BIN;  // in the build directory
  struct stat s{}, b{};
  if (::stat(src.c_str(), &s) != 0) {
    *error = "missing " + src;
    return "";
  }
  if (::stat(bin.c_str(), &b) == 0 && b.st_mtime >= s.st_mtime) return bin;
  if (run_shell("command -v go >/dev/null 2>&1") != 0) {
    *error = "the Go toolchain is missing (tools/install-deps.sh installs golang-go)";
    return "";
  }
  char gopath[] = "/tmp/podshim-cdi-gopath-XXXXXX";
  if (!::mkdtemp(gopath)) {
    *error = "mkdtemp failed";
    return "";
  }
  std::string dir = src.substr(0, src.rfind('/'));
  std::string tmp = bin + ".tmp." + std::to_string(::getpid());
  std::string log = bin + ".build.log";
  // GOPATH mode against Debian's packaged sources, no network (facts 1f).
  std::string cmd = "cd " + shell_quote(dir) + " && GO111MODULE=off GOFLAGS= GOPROXY=off GOPATH=" +
                    shell_quote(std::string(gopath) + ":/usr/share/gocode") +
                    " GOCACHE=" + shell_quote(bin + "-gocache") + " go build -o " + shell_quote(tmp) +
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
