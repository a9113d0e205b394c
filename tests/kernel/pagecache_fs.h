// A file system whose page cache is not shmem, for the kernel tests that
// need reclaimable page cache.
#pragma once

#include <errno.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace podshim::kernel_test {

// An ext2 on the brd RAM disk /dev/ram0 mounted at /mnt/pc: page cache that
// is not shmem needs a block-backed file system (tmpfs and the initramfs are
// shmem/ramfs). vm-run ships the guest kernel's own brd.ko; without it the
// claims on page cache would go unchecked, so its absence is a failure, not
// a skip. The file system is made afresh, or with `reuse_mounted` the one
// found mounted there is mounted again.
inline void mount_pagecache_fs(bool reuse_mounted) {
  if (access("/dev/ram0", F_OK) != 0) {
    const char* ko = std::getenv("PODSHIM_BRD_KO");
    ASSERT_TRUE(ko != nullptr) << "no /dev/ram0 and no brd.ko (PODSHIM_BRD_KO unset by vm-run)";
    ASSERT_EQ(system((std::string("insmod ") + ko + " rd_nr=1 rd_size=262144").c_str()), 0);
  }
  mkdir("/mnt", 0755);
  mkdir("/mnt/pc", 0755);
  const bool was_mounted = umount("/mnt/pc") == 0;
  if (!was_mounted || !reuse_mounted) {
    ASSERT_EQ(system("mke2fs -q /dev/ram0 >/dev/null 2>&1 || mke2fs /dev/ram0 >/dev/null"), 0);
  }
  ASSERT_EQ(mount("/dev/ram0", "/mnt/pc", "ext2", 0, nullptr), 0) << strerror(errno);
}

}  // namespace podshim::kernel_test
