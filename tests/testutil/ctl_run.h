// A podshimctl subcommand called through its registry entry, as podshimctl's
// main() calls it, with what it prints captured. One copy for the subcommand
// tests that each had their own.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shim/ctl/registry.h"

namespace podshim::testutil {

struct CtlRun {
  int code;
  std::string out, err;
};

// Runs `podshimctl <name> <args...>`; a failed expectation and code -1 when
// no subcommand has that name.
inline CtlRun run_ctl(const std::string& name, std::vector<std::string> args) {
  args.insert(args.begin(), name);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto it = ctl::registry().find(name);
  EXPECT_NE(it, ctl::registry().end()) << name;
  if (it == ctl::registry().end()) return {-1, "", ""};
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int code = it->second.run(static_cast<int>(args.size()), argv.data());
  std::string out = ::testing::internal::GetCapturedStdout();
  std::string err = ::testing::internal::GetCapturedStderr();
  return {code, out, err};
}

}  // namespace podshim::testutil
