// cgroup::check_kernel_limits against the real kernel (tests/vm/vm-run): for
// each cpu.max and memory.max value at and around the kernel's bounds, the
// check refuses exactly what the kernel refuses (EINVAL) or silently changes
// (memory.max read back as "0" or "max"). Skips outside the VM: the host's
// /sys/fs/cgroup is never written.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <linux/magic.h>

#include "cgroup/convert.h"
#include "tests/kernel/kernel_env.h"

namespace podshim::cgroup {
namespace {

using podshim::kernel_test::slurp;

const std::string kCg = "/sys/fs/cgroup/podshim-kernel-limits";

// One write(2) of `v`; 0 or the errno.
int write_attr(const std::string& file, const std::string& v) {
  int fd = open((kCg + "/" + file).c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size()) ? 0 : errno;
  close(fd);
  return err;
}

class KernelLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    PODSHIM_KERNEL_TEST_NEEDS();
    rmdir(kCg.c_str());
    ASSERT_EQ(mkdir(kCg.c_str(), 0755), 0) << strerror(errno);
    ASSERT_EQ(access((kCg + "/cpu.max").c_str(), W_OK), 0) << "no cpu controller";
    ASSERT_EQ(access((kCg + "/memory.max").c_str(), W_OK), 0) << "no memory controller";
  }
  void TearDown() override { rmdir(kCg.c_str()); }
};

TEST_F(KernelLimits, CpuMaxVerdictsAreTheKernels) {
  const uint64_t max = kKernelMaxCfsQuotaUs;
  struct Case {
    uint64_t quota, period;
  } cases[] = {
      {max, 100000},     {max + 1, 100000}, {max - 1, 100000}, {uint64_t{1} << 60, 100000},
      {1000, 100000},    {999, 100000},     {1000, 1000},      {1000, 999},
      {50000, 1000000},  {50000, 1000001},  {100000, 100000},  {2000000, 1000000},
  };
  for (const auto& c : cases) {
    LinuxResourceValues v;
    v.cpu_quota = static_cast<int64_t>(c.quota);
    v.cpu_period = c.period;
    const bool ours = static_cast<bool>(check_kernel_limits(v));
    const std::string s = std::to_string(c.quota) + " " + std::to_string(c.period);
    const int err = write_attr("cpu.max", s);
    EXPECT_EQ(ours, err == 0) << "cpu.max '" << s << "': kernel " << (err ? strerror(err) : "accepted")
                              << ", check_kernel_limits " << (ours ? "accepts" : "refuses");
    if (err) {
      EXPECT_EQ(err, EINVAL) << s;
    } else {
      EXPECT_EQ(slurp(kCg + "/cpu.max"), s);
    }
  }
  // The largest Kubernetes cpu limit, as podshim writes it, and one more milliCPU.
  const int64_t m = kernel_max_cpu_limit_milli();
  EXPECT_EQ(write_attr("cpu.max", cpu_max_value(m)), 0) << cpu_max_value(m);
  EXPECT_EQ(write_attr("cpu.max", cpu_max_value(m + 1)), EINVAL) << cpu_max_value(m + 1);
  EXPECT_FALSE(check_kernel_limits(K8sResources{std::nullopt, m + 1, std::nullopt, std::nullopt}));
  // The 10^13 cores.
  EXPECT_EQ(write_attr("cpu.max", cpu_max_value(10'000'000'000'000'000)), EINVAL);
}

TEST_F(KernelLimits, MemoryMaxVerdictsAreTheKernels) {
  const uint64_t ps = page_size();
  const uint64_t max = kernel_max_memory_bytes(ps);
  // Only values an int64 limit can hold (Kubernetes quantities are int64).
  const uint64_t cases[] = {1, ps - 1, ps, ps + 1, uint64_t{300} << 20, max - ps, max, max + 1,
                            static_cast<uint64_t>(INT64_MAX)};
  for (uint64_t b : cases) {
    ASSERT_EQ(write_attr("memory.max", std::to_string(b)), 0) << b;  // the kernel never refuses a number
    const std::string back = slurp(kCg + "/memory.max");
    const bool changed = back == "0" || back == "max";
    const bool ours = static_cast<bool>(
        check_kernel_limits(K8sResources{std::nullopt, std::nullopt, std::nullopt, static_cast<int64_t>(b)}));
    EXPECT_EQ(ours, !changed) << "memory.max " << b << " read back '" << back << "', check_kernel_limits "
                              << (ours ? "accepts" : "refuses");
    if (!changed) {
      EXPECT_EQ(back, std::to_string(page_round_down(b))) << b;
    }
  }
  ASSERT_EQ(write_attr("memory.max", "max"), 0);
}

TEST_F(KernelLimits, CpuWeightRangeIsTheKernels) {
  // Every weight a Kubernetes request can produce lies in [1, 10000]; the
  // kernel answers ERANGE just outside (cpu_weight_write_u64).
  EXPECT_EQ(write_attr("cpu.weight", "0"), ERANGE);
  EXPECT_EQ(write_attr("cpu.weight", "10001"), ERANGE);
  for (auto f : {WeightFormula::Linear, WeightFormula::Quadratic}) {
    for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{256000}, int64_t{10'000'000'000'000'000}}) {
      EXPECT_EQ(write_attr("cpu.weight", std::to_string(milli_cpu_to_weight(m, f))), 0) << m;
    }
  }
}

}  // namespace
}  // namespace podshim::cgroup
