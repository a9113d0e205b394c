// Helpers shared by the CDI unit tests: a scratch directory tree removed at
// the end, spec-file writers, the corpus's file list, a seeded generator and
// a device-node builder.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cdi/spec.h"
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

// The spec files of the corpus at `corpus` (tests/cdi/corpus), as
// "valid/<name>" and "invalid/<name>", sorted.
inline std::vector<std::string> corpus_files(const std::string& corpus) {
  std::vector<std::string> files;
  for (const char* sub : {"valid", "invalid"})
    for (const auto& e : std::filesystem::directory_iterator(corpus + "/" + sub))
      files.push_back(std::string(sub) + "/" + e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

// A small deterministic random generator (linear congruential): rnd(n) is
// in [0, n), the same sequence from the same seed on every run.
struct Lcg {
  uint32_t seed;
  uint32_t operator()(uint32_t n) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) % n;
  }
};

// A device node with the fields given; the rest are left for completion
// from the host.
inline DeviceNode node(std::string path, std::string type = "", int64_t major = 0, int64_t minor = 0) {
  DeviceNode n;
  n.path = std::move(path);
  n.type = std::move(type);
  n.major = major;
  n.minor = minor;
  return n;
}

}  // namespace podshim::cdi::testing
