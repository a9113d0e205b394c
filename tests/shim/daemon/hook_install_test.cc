// --install-hook (the DaemonSet's init container) and the hook check of NRI
// mode, on their own (shim/daemon/nri_glue.cc).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "shim/daemon/nri_glue.h"
#include "tests/testutil/files.h"

namespace podshim::daemon {
namespace {

using testutil::read_file;
using testutil::TempDir;

TEST(HookInstall, CopiesTheHookExecutableAndReplacesAnOldOne) {
  TempDir t;
  const std::string src = t.path() + "/image-hook", dest_dir = t.path() + "/host-bin";
  std::filesystem::create_directories(dest_dir);
  std::ofstream(src) << "new hook\n";
  chmod(src.c_str(), 0755);
  // An older version from the previous rollout, read-only.
  std::ofstream(dest_dir + "/podshim-hook") << "old hook\n";
  chmod((dest_dir + "/podshim-hook").c_str(), 0500);
  auto dest = install_hook(src, dest_dir);
  ASSERT_TRUE(dest) << dest.error().message;
  EXPECT_EQ(*dest, dest_dir + "/podshim-hook");
  EXPECT_EQ(read_file(*dest), "new hook\n");
  struct stat st;
  ASSERT_EQ(stat(dest->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_TRUE(executable_file(*dest));
  // Nothing left beside it (the temporary file was renamed).
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dest_dir)) n += e.is_regular_file();
  EXPECT_EQ(n, 1u);
}

TEST(HookInstall, RefusesRelativeOrMissingPaths) {
  TempDir t;
  std::ofstream(t.path() + "/hook") << "x";
  EXPECT_FALSE(install_hook(t.path() + "/hook", "relative/dir"));
  EXPECT_FALSE(install_hook(t.path() + "/hook", t.path() + "/no-such-dir"));
  auto r = install_hook(t.path() + "/missing", t.path());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find(t.path() + "/missing"), std::string::npos) << r.error().message;
}

TEST(HookInstall, ExecutableFileMeansAnExecutableRegularFile) {
  TempDir t;
  EXPECT_FALSE(executable_file(t.path()));  // a directory passes access(X_OK)
  EXPECT_FALSE(executable_file(t.path() + "/none"));
  std::ofstream(t.path() + "/f") << "x";
  chmod((t.path() + "/f").c_str(), 0644);
  EXPECT_FALSE(executable_file(t.path() + "/f"));
  chmod((t.path() + "/f").c_str(), 0755);
  EXPECT_TRUE(executable_file(t.path() + "/f"));
}

}  // namespace
}  // namespace podshim::daemon
