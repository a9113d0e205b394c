// Helpers shared by the CDI unit tests: a scratch directory tree removed at
// the end, and spec-file writers.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testutil/files.h"

namespace podshim::cdi::testing {

using TempDir = podshim::testutil::TempDir;


inline void write_file(const std::string& path, const std::string& data, mode_t mode = 0644) {
  { std::ofstream(path, std::ios::trunc) << data; }
  ::chmod(path.c_str(), mode);
}

// A minimal valid spec with one device per name, each setting DEV=<name>.
inline std::string simple_spec(const std::string& kind, std::initializer_list<std::string> names,
                               const std::string& spec_env = "") {
  std::string s = "cdiVersion: 0.5.0\nkind: " + kind + "\n";
  if (!spec_env.empty()) s += "containerEdits:\n  env: [" + spec_env + "]\n";
  s += "devices:\n";
  for (const auto& n : names) s += "- name: " + n + "\n  containerEdits:\n    env: [DEV=" + n + "]\n";
  return s;
}

}  // namespace podshim::cdi::testing
