// What /proc says about a process, for the benchmarks that report memory.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>

namespace podshim::testutil {

// The field `field` (VmRSS, VmHWM, ...) of /proc/<pid>/status in KiB; -1
// when the process or the field is not there.
inline long proc_status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

}  // namespace podshim::testutil
