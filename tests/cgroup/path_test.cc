#include "cgroup/path.h"

#include <gtest/gtest.h>

namespace podshim::cgroup {
namespace {

TEST(Path, Cgroupfs) {
  auto l = resolve_cgroup_path("/kubepods/burstable/pod1234-ab/0123abcd", DriverKind::Auto);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->driver, DriverKind::Cgroupfs);
  EXPECT_EQ(l->relpath, "kubepods/burstable/pod1234-ab/0123abcd");
  EXPECT_EQ(l->unit, "");
  l = resolve_cgroup_path("/kubepods/pod1234", DriverKind::Cgroupfs);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->relpath, "kubepods/pod1234");
}

TEST(Path, SystemdContainerd) {
  auto l = resolve_cgroup_path("kubepods-burstable-pod12_34.slice:cri-containerd:abc123", DriverKind::Auto);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->driver, DriverKind::Systemd);
  EXPECT_EQ(l->relpath,
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice/"
            "cri-containerd-abc123.scope");
  EXPECT_EQ(l->unit, "cri-containerd-abc123.scope");
}

TEST(Path, SystemdCrio) {
  auto l = resolve_cgroup_path("kubepods-pod99.slice:crio:ffee", DriverKind::Systemd);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->relpath, "kubepods.slice/kubepods-pod99.slice/crio-ffee.scope");
  EXPECT_EQ(l->unit, "crio-ffee.scope");
}

TEST(Path, SystemdPodSlice) {
  auto l = resolve_cgroup_path("kubepods-besteffort-podx.slice", DriverKind::Auto);
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->relpath, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podx.slice");
  EXPECT_EQ(l->unit, "kubepods-besteffort-podx.slice");
  // runc: an empty slice means system.slice; a name that is a slice is the unit.
  l = resolve_cgroup_path(":cri-containerd:abc", DriverKind::Systemd);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->relpath, "system.slice/cri-containerd-abc.scope");
  l = resolve_cgroup_path("kubepods.slice:x:kubepods-y.slice", DriverKind::Systemd);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->relpath, "kubepods.slice/kubepods-y.slice");
  EXPECT_EQ(*expand_slice("-.slice"), "");
  EXPECT_EQ(*expand_slice("a-b-c.slice"), "a.slice/a-b.slice/a-b-c.slice");
}

TEST(Path, HostilePathsRefused) {
  for (const char* p : {"/kubepods/../../etc", "/kubepods/./x", "/..", "/", "//kubepods",
                        "/kubepods//x", "/kubepods/x/", "/kube pods", "/kubepods/x\n",
                        "/kubepods/a:b", "/kubepods/\x01"}) {
    auto l = resolve_cgroup_path(p, DriverKind::Auto);
    EXPECT_FALSE(l) << "accepted '" << p << "' as " << l->relpath;
  }
  for (const char* p : {"kubepods/x", "x", ""}) {
    EXPECT_FALSE(resolve_cgroup_path(p, DriverKind::Cgroupfs)) << p;
    EXPECT_FALSE(resolve_cgroup_path(p, DriverKind::Auto)) << p;
  }
  for (const char* p : {"../x.slice:cri:id", "kubepods.slice:cri:../../x", "kubepods.slice:cri:a/b",
                        "kubepods.slice:cri", "a:b:c:d", "kubepods:cri:id", "kube--pods.slice:cri:id",
                        "-kubepods.slice:cri:id", "kubepods.slice::id", "kubepods.slice:c/r:id",
                        "kubepods.slice:cri:..", ".slice", "-.slice", "a/b.slice",
                        "/kubepods.slice:cri:id"}) {
    auto l = resolve_cgroup_path(p, DriverKind::Systemd);
    EXPECT_FALSE(l) << "accepted '" << p << "' as " << l->relpath;
  }
  std::string with_nul("/kubepods\0/x", 12);
  EXPECT_FALSE(resolve_cgroup_path(with_nul, DriverKind::Auto));
  auto e = resolve_cgroup_path("/kubepods/../../etc", DriverKind::Auto);
  EXPECT_NE(e.error().message.find("/kubepods/../../etc"), std::string::npos);
}

}  // namespace
}  // namespace podshim::cgroup
