#include "selinux/container_label.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/fs.h"

namespace podshim::selinux {
namespace {

using nlohmann::json;

TEST(LabelsFromOci, ReadsBothFields) {
  json cfg = json::parse(R"({
    "process": {"selinuxLabel": "system_u:system_r:container_t:s0:c124,c675"},
    "linux": {"mountLabel": "system_u:object_r:container_file_t:s0:c124,c675"}
  })");
  auto r = labels_from_oci(cfg);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->process);
  ASSERT_TRUE(r->mount);
  EXPECT_EQ(r->process->type(), "container_t");
  EXPECT_EQ(r->mount->type(), "container_file_t");
  EXPECT_EQ(r->level_source(), &*r->mount);
}

TEST(LabelsFromOci, AbsentFieldsAreNoLabel) {
  for (const char* s : {R"({})", R"({"process": {}, "linux": {}})",
                        R"({"process": {"selinuxLabel": ""}, "linux": {"mountLabel": null}})"}) {
    auto r = labels_from_oci(json::parse(s));
    ASSERT_TRUE(r) << s << ": " << r.error().message;
    EXPECT_FALSE(r->process) << s;
    EXPECT_FALSE(r->mount) << s;
    EXPECT_EQ(r->level_source(), nullptr);
  }
  auto p = labels_from_oci(json::parse(R"({"process": {"selinuxLabel": "u:r:t:s0:c1,c2"}})"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->level_source(), &*p->process);
}

TEST(LabelsFromOci, BadInputNamesTheField) {
  struct Case {
    const char* cfg;
    const char* needle;
  } cases[] = {
      {R"({"process": {"selinuxLabel": 5}})", "process.selinuxLabel"},
      {R"({"linux": {"mountLabel": "nonsense"}})", "linux.mountLabel"},
      {R"({"process": {"selinuxLabel": "u:r:t:s0\",x"}})", "process.selinuxLabel"},
      {R"({"process": []})", "process"},
      {R"({"linux": "x"})", "linux"},
      {R"([])", "object"},
  };
  for (const auto& c : cases) {
    auto r = labels_from_oci(json::parse(c.cfg));
    ASSERT_FALSE(r) << c.cfg;
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos) << r.error().message;
  }
}

class ProcLabel : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/podshim-selinux-proc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto d = fs::open_dir(root_);
    ASSERT_TRUE(d);
    dir_ = std::move(*d);
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0); }
  void fake(int pid, const std::string& content) {
    std::string d = root_ + "/" + std::to_string(pid) + "/attr";
    ASSERT_TRUE(fs::mkdir_p(d, 0755));
    std::ofstream(d + "/current", std::ios::binary) << content;
  }
  std::string root_;
  UniqueFd dir_;
};

TEST_F(ProcLabel, ReadsAndStripsTheKernelNul) {
  fake(42, std::string("system_u:system_r:container_t:s0:c1,c2\0", 39));
  auto l = process_label_from_proc(dir_.get(), 42);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->str(), "system_u:system_r:container_t:s0:c1,c2");
  fake(43, "system_u:system_r:container_t:s0:c3,c4\n");
  EXPECT_EQ(process_label_from_proc(dir_.get(), 43)->level(), "s0:c3,c4");
}

TEST_F(ProcLabel, RefusesBadPidsAndContent) {
  for (pid_t bad : {0, -1, 4194305}) {
    auto r = process_label_from_proc(dir_.get(), bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find(std::to_string(bad)), std::string::npos);
  }
  EXPECT_FALSE(process_label_from_proc(dir_.get(), 7));  // missing
  fake(8, "unconfined\n");  // what AppArmor puts there
  auto r = process_label_from_proc(dir_.get(), 8);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unconfined"), std::string::npos) << r.error().message;
  fake(9, std::string("\0", 1));
  EXPECT_FALSE(process_label_from_proc(dir_.get(), 9));
}

TEST_F(ProcLabel, RefusesSymlinkedPidDirectory) {
  fake(10, "system_u:system_r:container_t:s0:c1,c2");
  ASSERT_EQ(symlink("10", (root_ + "/11").c_str()), 0);
  EXPECT_FALSE(process_label_from_proc(dir_.get(), 11));
}

}  // namespace
}  // namespace podshim::selinux
