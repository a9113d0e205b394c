#include "base/syscall_deadline.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "tests/testutil/files.h"

namespace podshim {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A pipe's read end with nothing to read blocks until a signal ends it.
TEST(SyscallDeadline, EndsABlockingCallAtTheDeadline) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]), w(p[1]);
  char c;
  auto t0 = Clock::now();
  ssize_t n;
  int err;
  bool fired;
  {
    SyscallDeadline d(50ms);
    ASSERT_TRUE(d.armed());
    n = ::read(r.get(), &c, 1);
    err = errno;
    fired = d.fired();
  }
  auto took = Clock::now() - t0;
  EXPECT_EQ(n, -1);
  EXPECT_EQ(err, EINTR);
  EXPECT_TRUE(fired);
  EXPECT_GE(took, 45ms);
  EXPECT_FALSE(syscall_deadline_fired()) << "disarmed when it went out of scope";
}

TEST(SyscallDeadline, ADeadlineNotReachedNeverFires) {
  {
    SyscallDeadline d(10s);
    EXPECT_FALSE(d.fired());
  }
  // Disarmed: nothing arrives later to interrupt an unrelated call.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]), w(p[1]);
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    ASSERT_EQ(::write(w.get(), "x", 1), 1);
  });
  char c;
  EXPECT_EQ(::read(r.get(), &c, 1), 1);
  writer.join();
}

// Each thread has its own timer: a deadline on one thread does not end a
// call on another.
TEST(SyscallDeadline, OnlyTheArmingThreadIsInterrupted) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]), w(p[1]);
  std::thread other([&] {
    char c;
    EXPECT_EQ(::read(r.get(), &c, 1), 1) << "the other thread's read ended early: errno " << errno;
  });
  {
    SyscallDeadline d(30ms);
    std::this_thread::sleep_for(100ms);  // the deadline passes here, on this thread
    EXPECT_TRUE(d.fired());
  }
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  other.join();
}

// fs::write_attr_at retries EINTR from other signals, but not once the
// deadline has fired: a write into a full FIFO ends with an error naming
// the file.
TEST(SyscallDeadline, AWriterStopsRetryingOnceItFired) {
  testutil::TempDir dir;
  std::string fifo = dir.path() + "/attr";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  UniqueFd rd(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK));
  ASSERT_GE(rd.get(), 0);
  UniqueFd fill(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
  ASSERT_GE(fill.get(), 0);
  std::string chunk(4096, 'x');
  while (::write(fill.get(), chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(errno, EAGAIN);
  UniqueFd dirfd(::open(dir.path().c_str(), O_DIRECTORY | O_RDONLY));
  // A writer that kept retrying would block until this reader makes room
  // and then succeed: the test fails instead of hanging.
  std::thread drain([&] {
    std::this_thread::sleep_for(1s);
    char buf[65536];
    while (::read(rd.get(), buf, sizeof buf) > 0) {
    }
  });
  auto t0 = Clock::now();
  Result<void> res;
  {
    SyscallDeadline d(50ms);
    res = fs::write_attr_at(dirfd.get(), "attr", chunk);
  }
  auto took = Clock::now() - t0;
  drain.join();
  EXPECT_LT(took, 1s);
  ASSERT_FALSE(res) << "the write went on after the deadline";
  EXPECT_EQ(res.error().code, EINTR);
  EXPECT_NE(res.error().message.find("'attr' did not finish by its deadline"), std::string::npos) << res.error().message;
}

}  // namespace
}  // namespace podshim
