// podshimctl selinux, through the registry entry podshimctl's main() uses.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "selinux/label.h"
#include "shim/ctl/registry.h"
#include "tests/testutil/ctl_run.h"

namespace podshim::ctl {
namespace {

testutil::CtlRun run(std::vector<std::string> args) { return testutil::run_ctl("selinux", std::move(args)); }

class CmdSelinux : public ::testing::Test {
 protected:
  void SetUp() override { selinux::set_enabled_override_for_testing(true); }
  void TearDown() override { selinux::set_enabled_override_for_testing(std::nullopt); }
};

TEST_F(CmdSelinux, PrivateAndShared) {
  auto p = run({"mount-label", "--process-label", "system_u:system_r:container_t:s0:c124,c675"});
  EXPECT_EQ(p.code, kExitOk) << p.err;
  EXPECT_EQ(p.out, "system_u:object_r:container_file_t:s0:c124,c675\n");
  EXPECT_EQ(p.err, "");
  auto s = run({"mount-label", "--process-label=system_u:system_r:container_t:s0:c124,c675",
                "--shared"});
  EXPECT_EQ(s.code, kExitOk);
  EXPECT_EQ(s.out, "system_u:object_r:container_file_t:s0\n");
  auto t = run({"mount-label", "--process-label", "system_u:system_r:container_t:s0:c1,c2",
                "--file-type", "container_ro_file_t", "--mount-option"});
  EXPECT_EQ(t.code, kExitOk);
  EXPECT_EQ(t.out, "context=\"system_u:object_r:container_ro_file_t:s0:c1,c2\"\n");
}

TEST_F(CmdSelinux, DisabledHostStillPrintsWithANote) {
  selinux::set_enabled_override_for_testing(false);
  auto p = run({"mount-label", "--process-label", "system_u:system_r:container_t:s0:c1,c2"});
  EXPECT_EQ(p.code, kExitOk);
  EXPECT_EQ(p.out, "system_u:object_r:container_file_t:s0:c1,c2\n");
  EXPECT_NE(p.err.find("disabled"), std::string::npos);
}

TEST_F(CmdSelinux, UsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"bogus"}, {"mount-label"}, {"mount-label", "--process-label"},
           {"mount-label", "--process-label", "u:r:t:s0", "--frobnicate"},
           {"mount-label", "--file-type"}}) {
    auto r = run(args);
    EXPECT_EQ(r.code, kExitUsage) << (args.empty() ? "" : args[0]);
    EXPECT_NE(r.err.find("Usage: podshimctl selinux mount-label"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  auto h = run({"--help"});
  EXPECT_EQ(h.code, kExitOk);
  EXPECT_NE(h.out.find("mount-label"), std::string::npos);
}

TEST_F(CmdSelinux, BadLabelsFailNamingTheInput) {
  auto r = run({"mount-label", "--process-label", "container_t"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_NE(r.err.find("container_t"), std::string::npos);
  EXPECT_EQ(r.out, "");
  auto range = run({"mount-label", "--process-label",
                    "unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023"});
  EXPECT_EQ(range.code, kExitFailure);
  EXPECT_NE(range.err.find("s0-s0:c0.c1023"), std::string::npos);
  // --shared does not need a container level.
  EXPECT_EQ(run({"mount-label", "--process-label",
                 "unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023", "--shared"})
                .code,
            kExitOk);
  auto type = run({"mount-label", "--process-label", "u:r:t:s0:c1,c2", "--file-type", "a\"b"});
  EXPECT_EQ(type.code, kExitFailure);
}

}  // namespace
}  // namespace podshim::ctl
