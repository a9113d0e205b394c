#include <gtest/gtest.h>

#include "cdi/requests.h"

namespace podshim::cdi {
namespace {

TEST(CdiRequests, FromAnnotations) {
  std::map<std::string, std::string> a = {
      {"cdi.k8s.io/gpu.example.com_claim1", "k8s.gpu.example.com/gpu=c1-gpu-0,k8s.gpu.example.com/gpu=common"},
      {"cdi.k8s.io/other", "vendor.com/nic=n0, k8s.gpu.example.com/gpu=common"},
      {"podshim.io/cdi-devices", "vendor.com/fpga=f0"},
      {"io.kubernetes.cri-o.Devices", "vendor.com/x=ignored"},
      {"cdi.k8s.io", "not-a-prefix-match=1"},
  };
  auto r = devices_from_annotations(a);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"k8s.gpu.example.com/gpu=c1-gpu-0", "k8s.gpu.example.com/gpu=common",
                                          "vendor.com/nic=n0", "vendor.com/fpga=f0"}));
}

TEST(CdiRequests, UnqualifiedNameIsAnError) {
  auto r = devices_from_annotations({{"cdi.k8s.io/x", "vendor.com/gpu=a,gpu0"}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("annotation \"cdi.k8s.io/x\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("\"gpu0\""), std::string::npos);
  EXPECT_FALSE(devices_from_annotations({{"podshim.io/cdi-devices", "vendor.com/gpu=a,"}}));
  EXPECT_FALSE(devices_from_annotations({{"podshim.io/cdi-devices", "v/gpu=a"}}));
}

TEST(CdiRequests, NriNamesFirstThenAnnotations) {
  auto r = requested_devices({"vendor.com/gpu=b", "vendor.com/gpu=a"},
                             {{"podshim.io/cdi-devices", "vendor.com/gpu=a,vendor.com/gpu=c"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"vendor.com/gpu=b", "vendor.com/gpu=a", "vendor.com/gpu=c"}));
  EXPECT_FALSE(requested_devices({"/dev/nvidia0"}, {}));
  auto none = requested_devices({}, {});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace podshim::cdi
