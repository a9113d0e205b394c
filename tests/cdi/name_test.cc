// Qualified-name parsing: every malformed shape is an error naming the input.
#include <gtest/gtest.h>

#include "cdi/name.h"

namespace podshim::cdi {
namespace {

TEST(CdiName, ParsesQualifiedNames) {
  auto q = parse_qualified_name("k8s.gpu.example.com/gpu=0f3c-gpu-0");
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->vendor, "k8s.gpu.example.com");
  EXPECT_EQ(q->cls, "gpu");
  EXPECT_EQ(q->name, "0f3c-gpu-0");
  EXPECT_EQ(q->str(), "k8s.gpu.example.com/gpu=0f3c-gpu-0");
  EXPECT_EQ(q->kind(), "k8s.gpu.example.com/gpu");
  // The first '=' splits; the first '/' splits the qualifier.
  EXPECT_FALSE(parse_qualified_name("a.b/c/d=e"));  // '/' is not allowed in a class
  ASSERT_TRUE(parse_qualified_name("vendor.com/gpu.v2=a:b"));  // dotted class, ':' in name
  ASSERT_TRUE(parse_qualified_name("ve/cl=0"));  // one-character device names are fine
}

struct BadName {
  const char* input;
  const char* why;
};

class CdiBadName : public ::testing::TestWithParam<BadName> {};

TEST_P(CdiBadName, RejectedWithClearError) {
  auto r = parse_qualified_name(GetParam().input);
  ASSERT_FALSE(r) << GetParam().input;
  EXPECT_NE(r.error().message.find(GetParam().why), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(std::string("\"") + GetParam().input + "\""), std::string::npos)
      << "the error must quote the input: " << r.error().message;
  EXPECT_EQ(r.error().code, EINVAL);
}

INSTANTIATE_TEST_SUITE_P(
    All, CdiBadName,
    ::testing::Values(
        BadName{"", "empty"}, BadName{"/dev/nvidia0", "a path"},
        BadName{"vendor.com/gpu", "missing '='"}, BadName{"=dev", "missing vendor"},
        BadName{"/gpu=dev", "a path"}, BadName{"vendor.com=dev", "missing vendor"},
        BadName{"vendor.com/=dev", "missing class"}, BadName{"vendor.com/gpu=", "missing device name"},
        // One-character vendor or class: a panic in every upstream release.
        BadName{"x/gpu=dev", "at least 2 characters"}, BadName{"vendor.com/x=dev", "at least 2 characters"},
        BadName{"1vendor/gpu=dev", "must start with a letter"},
        BadName{"vendor-/gpu=dev", "must end with a letter or digit"},
        BadName{"vendor.com/gpu_=dev", "must end with a letter or digit"},
        BadName{"ven dor/gpu=dev", "invalid character ' '"},
        BadName{"vendor.com/gpu=dev/0", "invalid character '/'"},
        BadName{"vendor.com/gpu=-dev", "must start with a letter or digit"},
        BadName{"vendor.com/gpu=dev.", "must end with a letter or digit"},
        BadName{"vendor.com/g\xffu=dev", "invalid character '\\xff'"},
        BadName{"vendor.com/gpu=d\nv", "invalid character '\\x0a'"}));

TEST(CdiName, KindAndPartValidators) {
  // Each value given to `check`, which accepts it exactly when it is valid.
  auto expect = [](auto check, std::initializer_list<std::pair<const char*, bool>> values) {
    for (auto [value, valid] : values) EXPECT_EQ(static_cast<bool>(check(value)), valid) << value;
  };
  expect(parse_kind, {{"vendor.com/gpu", true}, {"vendor.com", false}, {"vendor.com/", false}, {"/gpu", false},
                      {"v/gpu", false}});
  expect(validate_vendor_name, {{"ab", true}, {"a", false}});
  expect(validate_class_name, {{"", false}});
  expect(validate_device_name, {{"a", true}, {"gpu:0", true}, {"gpu 0", false}});
  expect(is_qualified_name, {{"aa/bb=c", true}, {"aa/b=c", false}});
}

}  // namespace
}  // namespace podshim::cdi
