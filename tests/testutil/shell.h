// A command run by the shell with its standard output captured. One copy for
// the tests that each had their own popen loop.
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <string>

namespace podshim::testutil {

// The standard output of `cmd` run by /bin/sh (popen(3)); "" when it cannot
// be started. `*exit_code`, when given, gets its exit status, -1 when it
// did not exit (killed by a signal) or could not be started.
inline std::string run_shell(const std::string& cmd, int* exit_code = nullptr) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) {
    if (exit_code) *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = ::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int st = ::pclose(f);
  if (exit_code) *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace podshim::testutil
