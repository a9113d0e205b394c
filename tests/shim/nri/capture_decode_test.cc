// Decodes every message of the real captures (NRI's own runtime code v0.4,
// v0.8, v0.12.2 against Go plugins) with our own .proto files: every method
// must exist in our service definitions, every payload must parse into the
// method's message type with no unknown field and no lost byte.
#include <map>
#include <memory>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include "shim/nri/nri_api.pb.h"
#include "shim/nri/ttrpc.pb.h"
#include "tests/shim/nri/capture.h"

namespace podshim::nri::test {
namespace {

namespace api = ::nri::pkg::api::v1alpha1;
using google::protobuf::DescriptorPool;
using google::protobuf::Message;
using google::protobuf::MessageFactory;

std::unique_ptr<Message> new_message(const google::protobuf::Descriptor* d) {
  return std::unique_ptr<Message>(MessageFactory::generated_factory()->GetPrototype(d)->New());
}

struct Decoded {
  std::map<std::string, int> methods;  // method -> count
  std::vector<api::ConfigureRequest> configures;
  std::vector<api::ConfigureResponse> configure_replies;
  std::vector<api::SynchronizeRequest> syncs;
  std::vector<api::CreateContainerRequest> creates;
  std::vector<api::UpdateContainerRequest> updates;
  std::vector<api::RegisterPluginRequest> registers;
};

void decode_all_into(const std::string& file, Decoded& out) {
  auto frames = load_capture(file);
  EXPECT_TRUE(frames) << frames.error().message;
  if (!frames) return;
  auto msgs = reassemble(*frames);
  EXPECT_TRUE(msgs) << msgs.error().message;
  if (!msgs) return;

  // (conn, stream) → the method whose reply we expect.
  // The capture's two directions were recorded independently, so a reply can
  // be logged before its request: match requests first, then replies.
  std::map<std::pair<uint32_t, uint32_t>, const google::protobuf::MethodDescriptor*> open;
  std::vector<const CaptureMessage*> ordered;
  for (const auto& m : *msgs) if (m.header.type == 1) ordered.push_back(&m);
  for (const auto& m : *msgs) if (m.header.type != 1) ordered.push_back(&m);
  for (const auto* mp : ordered) {
    const auto& m = *mp;
    SCOPED_TRACE(file + " stream " + std::to_string(m.header.stream_id));
    const bool request = m.header.type == 1;
    ASSERT_TRUE(request || m.header.type == 2);
    ASSERT_EQ(m.header.stream_id % 2, 1u) << "client streams are odd";
    ASSERT_EQ(m.header.flags, 0) << "NRI calls are unary";
    if (request) {
      // conn 1: runtime calls the Plugin service; conn 2: plugin calls Runtime.
      ASSERT_EQ(m.from_runtime, m.conn == kPluginServiceConn);
      ttrpc::Request req;
      ASSERT_TRUE(req.ParseFromString(m.body));
      ASSERT_EQ(req.service(), m.conn == 1 ? "nri.pkg.api.v1alpha1.Plugin"
                                           : "nri.pkg.api.v1alpha1.Runtime");
      // The Go client sets the deadline from the 2 s request timeout (5 s for
      // registration in some versions): a positive value up to 5e9.
      EXPECT_GT(req.timeout_nano(), 0);
      EXPECT_LE(req.timeout_nano(), 5'000'000'000);
      // Through the reflection copy of our nri_api.proto (capture.h).
      const auto* svc =
          DescriptorPool::generated_pool()->FindServiceByName(std::string(kReflectPackagePrefix) + req.service());
      ASSERT_NE(svc, nullptr);
      const auto* method = svc->FindMethodByName(req.method());
      ASSERT_NE(method, nullptr) << "our proto lacks method " << req.method();
      auto payload = new_message(method->input_type());
      ASSERT_TRUE(payload->ParseFromString(req.payload())) << req.method();
      std::string where;
      EXPECT_TRUE(fully_known(*payload, &where)) << req.method() << ": unknown field in " << where;
      EXPECT_EQ(payload->ByteSizeLong(), req.payload().size()) << req.method();
      out.methods[req.method()]++;
      open[{m.conn, m.header.stream_id}] = method;
      if (req.method() == "Configure") {
        ASSERT_TRUE(out.configures.emplace_back().ParseFromString(req.payload()));
      } else if (req.method() == "Synchronize") {
        ASSERT_TRUE(out.syncs.emplace_back().ParseFromString(req.payload()));
      } else if (req.method() == "CreateContainer") {
        ASSERT_TRUE(out.creates.emplace_back().ParseFromString(req.payload()));
      } else if (req.method() == "UpdateContainer") {
        ASSERT_TRUE(out.updates.emplace_back().ParseFromString(req.payload()));
      } else if (req.method() == "RegisterPlugin") {
        ASSERT_TRUE(out.registers.emplace_back().ParseFromString(req.payload()));
      }
    } else {
      auto it = open.find({m.conn, m.header.stream_id});
      ASSERT_NE(it, open.end()) << "response to no request";
      ttrpc::Response resp;
      ASSERT_TRUE(resp.ParseFromString(m.body));
      // Success is encoded with the status left unset.
      EXPECT_FALSE(resp.has_status());
      auto reply = new_message(it->second->output_type());
      ASSERT_TRUE(reply->ParseFromString(resp.payload()));
      std::string where;
      EXPECT_TRUE(fully_known(*reply, &where)) << where;
      if (it->second->name() == "Configure") {
        ASSERT_TRUE(out.configure_replies.emplace_back().ParseFromString(resp.payload()));
      }
      open.erase(it);
    }
  }
  EXPECT_TRUE(open.empty()) << "unanswered requests";
}

Decoded decode_all(const std::string& file) {
  Decoded out;
  decode_all_into(file, out);
  return out;
}

TEST(CaptureDecode, V04Lifecycle) {
  auto d = decode_all("nri-v0.4.0-lifecycle.jsonl");
  ASSERT_EQ(d.configures.size(), 1u);
  EXPECT_EQ(d.configures[0].runtime_name(), "containerd");
  EXPECT_EQ(d.configures[0].registration_timeout(), 0) << "timeouts arrived in v0.7";
  EXPECT_TRUE(d.configures[0].nri_version().empty());
  ASSERT_EQ(d.configure_replies.size(), 1u);
  EXPECT_EQ(d.configure_replies[0].events(), 0x288);  // Create|Update|Stop container
  ASSERT_EQ(d.registers.size(), 1u);
  EXPECT_EQ(d.registers[0].plugin_idx().size(), 2u);
  ASSERT_EQ(d.creates.size(), 1u);
  const auto& c = d.creates[0];
  EXPECT_EQ(c.container().pod_sandbox_id(), c.pod().id());
  EXPECT_FALSE(c.pod().linux().cgroup_parent().empty());
  EXPECT_TRUE(c.container().linux().resources().has_memory());
  ASSERT_EQ(d.updates.size(), 1u);
  EXPECT_TRUE(d.updates[0].has_linux_resources());
  EXPECT_EQ(d.methods["StopContainer"], 1);
}

TEST(CaptureDecode, V04AllEventsUseStateChange) {
  auto d = decode_all("nri-v0.4.0-allevents.jsonl");
  EXPECT_GT(d.methods["StateChange"], 0);
  EXPECT_EQ(d.methods["RunPodSandbox"], 0);
  ASSERT_EQ(d.configure_replies.size(), 1u);
  EXPECT_EQ(d.configure_replies[0].events() & ~0x7FF, 0) << "v0.4 knows only 0x7FF";
}

TEST(CaptureDecode, V08HasTimeoutsAndRlimits) {
  auto d = decode_all("nri-v0.8.0-lifecycle.jsonl");
  ASSERT_EQ(d.configures.size(), 1u);
  EXPECT_EQ(d.configures[0].registration_timeout(), 5000);
  EXPECT_EQ(d.configures[0].request_timeout(), 2000);
  EXPECT_TRUE(d.configures[0].nri_version().empty());
  decode_all("nri-v0.8.0-allevents.jsonl");
}

TEST(CaptureDecode, V012UsesDedicatedRpcs) {
  auto d = decode_all("nri-v0.12.2-allevents.jsonl");
  ASSERT_EQ(d.configures.size(), 1u);
  EXPECT_FALSE(d.configures[0].nri_version().empty());
  ASSERT_EQ(d.registers.size(), 1u);
  EXPECT_FALSE(d.registers[0].nri_version().empty());
  for (const char* m : {"RunPodSandbox", "UpdatePodSandbox", "ValidateContainerAdjustment",
                        "PostCreateContainer", "StartContainer", "PostStartContainer",
                        "PostUpdateContainer", "RemoveContainer", "StopPodSandbox",
                        "RemovePodSandbox"}) {
    EXPECT_EQ(d.methods[m], 1) << m;
  }
  EXPECT_EQ(d.methods["StateChange"], 0);
  ASSERT_EQ(d.configure_replies.size(), 1u);
  EXPECT_EQ(d.configure_replies[0].events(), 0x3FFF);
  decode_all("nri-v0.12.2-lifecycle.jsonl");
}

TEST(CaptureDecode, V08Sync3000IsMultiFrame) {
  auto frames = load_capture("nri-v0.8.0-sync3000.jsonl.gz");
  ASSERT_TRUE(frames) << frames.error().message;
  size_t biggest = 0;
  for (const auto& f : *frames) biggest = std::max(biggest, f.payload.size());
  EXPECT_GT(biggest, kMaxMuxPayloadOut) << "the runtime sends frames far above 4096";
  auto d = decode_all("nri-v0.8.0-sync3000.jsonl.gz");
  ASSERT_FALSE(d.syncs.empty());
  size_t pods = 0, ctrs = 0;
  for (const auto& s : d.syncs) {
    pods += static_cast<size_t>(s.pods_size());
    ctrs += static_cast<size_t>(s.containers_size());
  }
  EXPECT_EQ(d.syncs.back().more(), false);
  std::cout << "sync3000: " << d.syncs.size() << " page(s), " << pods << " pods, " << ctrs
            << " containers\n";
  EXPECT_GT(ctrs, 0u);
}

}  // namespace
}  // namespace podshim::nri::test
