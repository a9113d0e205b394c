// SELinux labels on a real kernel with a real policy: Debian's kernel booted
// with security=selinux (tests/vm/vm-run --append), Debian's reference policy
// (selinux-policy-default) loaded here, permissive so nothing else in the
// guest is denied. Labels are validated by the kernel once a policy is
// loaded, so these checks are the kernel's own verdicts. See README.md.
#include <fcntl.h>
#include <selinux/selinux.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "selinux/apply.h"
#include "selinux/label.h"

namespace podshim::selinux {
namespace {

// Debian 12's refpolicy has no container module (container_file_t,
// container_t come from container-selinux, which Debian does not ship), so
// the test uses the svirt types of its virt module and the configurable file
// type. The MCS mechanics are the same.
constexpr char kProcessLabel[] = "system_u:system_r:svirt_t:s0:c1,c2";
constexpr char kFileType[] = "svirt_image_t";
constexpr char kPrivate[] = "system_u:object_r:svirt_image_t:s0:c1,c2";
constexpr char kShared[] = "system_u:object_r:svirt_image_t:s0";
constexpr char kBase[] = "/run/podshim-selinux-test";

std::string label_of(const std::string& p) {
  char* c = nullptr;
  if (lgetfilecon_raw(p.c_str(), &c) < 0) return std::string("<error: ") + strerror(errno) + ">";
  std::string s(c);
  freecon(c);
  return s;
}

void show(const std::string& p) { std::printf("ls -Z: %s %s\n", label_of(p).c_str(), p.c_str()); }

class SelinuxKernel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::getenv("PODSHIM_IN_VM") == nullptr) return;
    // The guest init does not mount selinuxfs; the kernel registers it only
    // when SELinux is the active LSM (security=selinux).
    mkdir("/sys/fs/selinux", 0755);
    if (mount("selinuxfs", "/sys/fs/selinux", "selinuxfs", 0, nullptr) < 0 && errno != EBUSY)
      std::printf("mount selinuxfs: %s\n", strerror(errno));
    // libselinux looks for selinuxfs once, in its constructor, before the
    // mount above: tell it where it is now.
    set_selinuxmnt("/sys/fs/selinux");
    // selinux_mkload_policy reads /etc/selinux/config and loads
    // /etc/selinux/<type>/policy/policy.<ver>, like load_policy(8).
    if (selinux_mkload_policy(0) < 0)
      std::printf("selinux_mkload_policy: %s\n", strerror(errno));
    else if (security_setenforce(0) < 0)
      std::printf("setenforce 0: %s\n", strerror(errno));
  }

  void SetUp() override {
    if (std::getenv("PODSHIM_IN_VM") == nullptr) GTEST_SKIP() << "kernel test: runs in tests/vm";
    ASSERT_EQ(is_selinux_enabled(), 1)
        << "SELinux is not active: boot with security=selinux and load a policy (README.md)";
    char* con = nullptr;
    ASSERT_EQ(getcon_raw(&con), 0);
    std::string self(con);
    freecon(con);
    // "kernel" is the only context before a policy is loaded.
    ASSERT_NE(self, "kernel") << "no SELinux policy is loaded";
    std::printf("process context %s, enforce=%d, policy version %d\n", self.c_str(),
                security_getenforce(), security_policyvers());
    ASSERT_TRUE(fs::mkdir_p(kBase, 0755));
    ASSERT_EQ(mount("tmpfs", kBase, "tmpfs", 0, "size=8m"), 0) << strerror(errno);
    src_ = std::string(kBase) + "/src";
    ASSERT_EQ(mkdir(src_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((src_ + "/sub").c_str(), 0755), 0);
    std::ofstream(src_ + "/sub/file") << "data";
    ASSERT_EQ(symlink("sub/file", (src_ + "/link").c_str()), 0);
  }

  void TearDown() override {
    if (std::getenv("PODSHIM_IN_VM") == nullptr) return;
    umount2((std::string(kBase) + "/dst").c_str(), MNT_DETACH);
    umount2((std::string(kBase) + "/fresh").c_str(), MNT_DETACH);
    umount2(kBase, MNT_DETACH);
  }

  ApplyConfig config() {
    ApplyConfig c;
    c.file.file_type = kFileType;
    return c;
  }

  nlohmann::json oci(const char* process_label) {
    return nlohmann::json{{"process", {{"selinuxLabel", process_label}}}};
  }

  std::string src_;
};

TEST_F(SelinuxKernel, LabelledBindMountSource) {
  std::printf("before:\n");
  show(src_ + "/sub/file");
  std::vector<InjectedMount> mounts{{src_, "/data", "bind", {"rbind", "ro"}}};
  auto r = apply_labels(oci(kProcessLabel), mounts, {}, config());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->selinux_enabled);
  ASSERT_EQ(r->labelled.size(), 1u);
  EXPECT_EQ(r->labelled[0].label, kPrivate);
  EXPECT_EQ(r->labelled[0].stats.relabelled, 4u);

  // The bind mount shows the source's labels: context= is ignored for
  // MS_BIND, which is why sources are relabelled on disk.
  std::string dst = std::string(kBase) + "/dst";
  ASSERT_EQ(mkdir(dst.c_str(), 0755), 0);
  ASSERT_EQ(mount(src_.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr), 0)
      << strerror(errno);
  std::printf("after apply_labels and the bind mount:\n");
  for (const char* p : {"", "/sub", "/sub/file", "/link"}) {
    show(dst + p);
    EXPECT_EQ(label_of(dst + p), kPrivate) << p;
  }
  // The link itself was labelled, its target through its own entry.
  EXPECT_EQ(label_of(src_ + "/link"), kPrivate);

  // A second run writes nothing.
  auto again = apply_labels(oci(kProcessLabel), mounts, {}, config());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->labelled[0].stats.relabelled, 0u);

  // Another pod's container (other level) makes the source shared (s0).
  SharedSourceTracker tracker;
  ApplyConfig a = config(), b = config();
  a.tracker = b.tracker = &tracker;
  a.pod_uid = "pod-a";
  b.pod_uid = "pod-b";
  ASSERT_TRUE(apply_labels(oci(kProcessLabel), mounts, {}, a));
  auto rb = apply_labels(oci("system_u:system_r:svirt_t:s0:c7,c9"), mounts, {}, b);
  ASSERT_TRUE(rb) << rb.error().message;
  EXPECT_EQ(rb->labelled[0].sharing, Sharing::Shared);
  show(dst + "/sub/file");
  EXPECT_EQ(label_of(dst + "/sub/file"), kShared);
}

TEST_F(SelinuxKernel, ContextTmpfsCarriesTheLabel) {
  std::vector<InjectedMount> mounts{{"tmpfs", "/scratch", "tmpfs", {"size=1m", "mode=0755"}}};
  auto r = apply_labels(oci(kProcessLabel), mounts, {}, config());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->mount_edits.size(), 1u);
  const auto& opts = r->mount_edits[0].options;
  std::string data;
  for (const auto& o : opts) data += (data.empty() ? "" : ",") + o;
  std::printf("mount -t tmpfs -o '%s'\n", data.c_str());

  // What runc does with the edited options: mount(2) with them as data.
  std::string fresh = std::string(kBase) + "/fresh";
  ASSERT_EQ(mkdir(fresh.c_str(), 0755), 0);
  ASSERT_EQ(mount("tmpfs", fresh.c_str(), "tmpfs", 0, data.c_str()), 0) << strerror(errno);
  std::ofstream(fresh + "/new-file") << "x";
  show(fresh);
  show(fresh + "/new-file");
  EXPECT_EQ(label_of(fresh), kPrivate);
  EXPECT_EQ(label_of(fresh + "/new-file"), kPrivate);

  // The kernel reports the option back (selinux_sb_show_options).
  auto mounts_txt = fs::read_file("/proc/self/mounts");
  ASSERT_TRUE(mounts_txt);
  std::string needle = std::string("context=\"") + kPrivate + "\"";
  EXPECT_NE(mounts_txt->find(needle), std::string::npos) << *mounts_txt;
}

TEST_F(SelinuxKernel, KernelRejectsATypeThePolicyLacks) {
  // Why the file type is configurable: container_file_t is not in Debian's
  // refpolicy, and the kernel refuses context= with a type it does not know.
  std::string fresh = std::string(kBase) + "/fresh";
  ASSERT_EQ(mkdir(fresh.c_str(), 0755), 0);
  int rc = mount("tmpfs", fresh.c_str(), "tmpfs", 0,
                 "context=\"system_u:object_r:container_file_t:s0:c1,c2\"");
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace podshim::selinux
