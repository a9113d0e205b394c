#include "base/result.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/scope_exit.h"
#include "base/unique_fd.h"

namespace podshim {
namespace {

Result<int> half(int v) {
  if (v % 2) return fail(EINVAL, "{} is odd", v);
  return v / 2;
}

Result<void> chain(int v) {
  auto r = half(v);
  if (!r) return wrap(r, "halving");
  PODSHIM_TRY(half(*r));
  return {};
}

TEST(Result, ValueAndError) {
  auto ok = half(4);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 2);
  auto bad = half(3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, EINVAL);
  EXPECT_EQ(bad.error().message, "3 is odd");
}

TEST(Result, WrapKeepsErrnoAndAddsContext) {
  auto r = chain(3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(r.error().message, "halving: 3 is odd");
  auto r2 = chain(6);  // 6 → 3 → odd, through PODSHIM_TRY
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().message, "3 is odd");
  EXPECT_TRUE(chain(8));
}

TEST(Result, FailErrnoCapturesErrno) {
  errno = ENOENT;
  auto e = fail_errno("opening {}", "x");
  EXPECT_EQ(e.value().code, ENOENT);
  EXPECT_EQ(e.value().message, "opening x: No such file or directory");
}

TEST(UniqueFd, ClosesOnceAndMoves) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  int raw = p[0];
  {
    UniqueFd a(p[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    UniqueFd c;
    c = std::move(b);
    EXPECT_EQ(c.get(), raw);
    EXPECT_GE(fcntl(raw, F_GETFD), 0);
  }
  EXPECT_EQ(fcntl(raw, F_GETFD), -1);  // closed by c's destructor
  UniqueFd w(p[1]);
  int released = w.release();
  EXPECT_FALSE(w.valid());
  EXPECT_GE(fcntl(released, F_GETFD), 0);  // release() did not close
  close(released);
}

TEST(ScopeExit, RunsUnlessReleased) {
  int n = 0;
  {
    ScopeExit g([&] { ++n; });
  }
  EXPECT_EQ(n, 1);
  {
    ScopeExit g([&] { ++n; });
    g.release();
  }
  EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace podshim
