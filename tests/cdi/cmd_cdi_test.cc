// podshimctl cdi, called as a function.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cdi/cdi_test_util.h"

namespace podshim::ctl {
int run_cdi_command(const std::vector<std::string>& argv, std::istream& in, std::ostream& out,
                    std::ostream& err);
}

namespace podshim::cdi {
namespace {

struct CmdResult {
  int code;
  std::string out, err;
};

CmdResult run(std::vector<std::string> args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  int code = ctl::run_cdi_command(args, in, out, err);
  return {code, out.str(), err.str()};
}

TEST(CdiCommand, ListValidateInject) {
  testing::TempDir t;
  std::string d = t.dir("d");
  testing::write_file(d + "/good.yaml", testing::simple_spec("vendor.com/gpu", {"g0", "g1"}));
  const std::string any = "--any-owner";

  CmdResult r = run({"list", "--spec-dir", d, any});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "DEVICE             SPEC\n"
                   "vendor.com/gpu=g0  " + d + "/good.yaml\n"
                   "vendor.com/gpu=g1  " + d + "/good.yaml\n");
  r = run({"list", "--spec-dir", d, any, "-o", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["items"][1],
            nlohmann::json({{"name", "vendor.com/gpu=g1"}, {"spec", d + "/good.yaml"}, {"cdiVersion", "0.5.0"},
                            {"deviceNodes", nlohmann::json::array()}}));
  r = run({"list", "--spec-dir", d, any, "-owide"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("CDI-VERSION"), std::string::npos) << r.out;

  r = run({"validate", "--spec-dir=" + d, any});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "STATUS  SPEC" + std::string(d.size() + 10 - 4 + 2, ' ') + "ERRORS\n"
                   "ok      " + d + "/good.yaml  -\n");

  testing::write_file(d + "/bad.json", R"({"cdiVersion":"9.9.9"})");
  r = run({"validate", "--spec-dir", d, any});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("invalid  " + d + "/bad.json   failed to load CDI spec: invalid cdiVersion \"9.9.9\""),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ok       " + d + "/good.yaml  -"), std::string::npos) << r.out;
  r = run({"validate", "--spec-dir", d, any, "--output=yaml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("valid: false"), std::string::npos) << r.out;
  r = run({"list", "--spec-dir", d, any});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("1 spec file(s) with errors"), std::string::npos);

  testing::write_file(t.path() + "/config.json", R"({"ociVersion":"1.0.2","process":{"env":["PATH=/bin"]}})");
  r = run({"inject", "--spec-dir", d, any, "--config", t.path() + "/config.json", "vendor.com/gpu=g1"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["process"]["env"], nlohmann::json({"PATH=/bin", "DEV=g1"}));

  r = run({"inject", "--spec-dir", d, any, "--config", "-", "vendor.com/gpu=g1"}, R"({"ociVersion":"1.0.2"})");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["process"]["env"], nlohmann::json({"DEV=g1"}));
  r = run({"inject", "--spec-dir", d, any, "--config", "-", "vendor.com/gpu=g1", "-o", "yaml"},
          R"({"ociVersion":"1.0.2"})");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ociVersion: 1.0.2\nprocess:\n  env:\n    - DEV=g1\n");
  r = run({"inject", "--spec-dir", d, any, "--config", "-", "vendor.com/gpu=g1", "-o", "wide"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'wide'"), std::string::npos) << r.err;

  r = run({"inject", "--spec-dir", d, any, "--config", t.path() + "/config.json", "vendor.com/gpu=nope"});
  EXPECT_EQ(r.code, 4);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("unresolvable CDI devices vendor.com/gpu=nope"), std::string::npos) << r.err;

  // Owner check on by default: these files belong to whoever runs the test.
  if (::getuid() != 0) {
    r = run({"list", "--spec-dir", d});
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("No resources found"), std::string::npos) << r.err;
  }
}

TEST(CdiCommand, UsageErrors) {
  EXPECT_EQ(run({}).code, 2);
  EXPECT_EQ(run({"list", "-o", "xml"}).code, 2);
  EXPECT_EQ(run({"--help"}).code, 0);
  EXPECT_EQ(run({"inject", "--help"}).code, 0);
  EXPECT_EQ(run({"frobnicate"}).code, 2);
  EXPECT_EQ(run({"list", "--bogus"}).code, 2);
  EXPECT_EQ(run({"list", "--spec-dir"}).code, 2);
  EXPECT_EQ(run({"list", "vendor.com/gpu=a"}).code, 2);
  EXPECT_EQ(run({"inject", "--spec-dir", "/nonexistent"}).code, 2);                 // no --config
  EXPECT_EQ(run({"inject", "--config", "/nonexistent"}).code, 2);                    // no device
  CmdResult r = run({"inject", "--spec-dir", "/nonexistent", "--config", "-", "a.b/cd=e"}, "[1]");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a JSON object"), std::string::npos);
  r = run({"inject", "--spec-dir", "/nonexistent", "--config", "/nonexistent/config.json", "a.b/cd=e"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/config.json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace podshim::cdi
