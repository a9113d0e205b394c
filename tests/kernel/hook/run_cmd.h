// Runs a command and captures its combined stdout+stderr (kernel tests of
// podshim-hook drive crun, runc and podman this way).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace podshim::hook::testing {

struct CmdResult {
  int status = -1;  // exit status, or 128+signal
  std::string output;
};

// With `out_file`, output goes to that file instead of a pipe: needed for
// `crun create`, whose container keeps the inherited stdio open after the
// command itself has exited (a pipe would never see EOF).
inline CmdResult run_cmd(const std::vector<std::string>& argv, const std::string& cwd = "",
                         const std::string& out_file = "") {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) < 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    int o = out[1];
    if (!out_file.empty()) o = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(o, 1);
    ::dup2(o, 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) < 0) ::_exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  CmdResult r;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (!out_file.empty()) {
    int fd = ::open(out_file.c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t n;
    while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0) r.output.append(buf, static_cast<size_t>(n));
    if (fd >= 0) ::close(fd);
  }
  return r;
}

inline bool have_program(const std::string& name) {
  return run_cmd({"sh", "-c", "command -v " + name}).status == 0;
}

}  // namespace podshim::hook::testing
