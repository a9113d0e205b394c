// Replays the runtime->plugin frames of the real captures into our plugin,
// byte for byte, and checks every reply: right conn, right stream id, status
// unset, a payload that decodes as the method's reply type, the event mask
// the runtime's version allows, and no frame above 4096 bytes.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include "tests/shim/nri/capture.h"
#include "tests/shim/nri/test_support.h"

namespace podshim::nri::test {
namespace {

struct Replayed {
  std::vector<CaptureMessage> requests;   // runtime → plugin, conn 1
  std::vector<CaptureMessage> replies;    // plugin → runtime
  size_t max_frame = 0;
  size_t frames = 0;
};

void replay(const std::string& file, RecordingHandlers& h, Replayed& out) {
  auto frames = load_capture(file);
  ASSERT_TRUE(frames) << frames.error().message;
  sd_event* loop = nullptr;
  ASSERT_GE(sd_event_new(&loop), 0);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd runtime_end(sv[0]);
  ASSERT_EQ(fcntl(runtime_end.get(), F_SETFL, O_NONBLOCK), 0);
  {
    PluginOptions po;
    po.socket_fd = sv[1];
    Plugin plugin(loop, h, po);
    ASSERT_TRUE(plugin.start());

    std::string outbound;
    for (const auto& f : *frames) {
      if (!f.from_runtime) continue;
      put_u32be(outbound, f.conn);
      put_u32be(outbound, static_cast<uint32_t>(f.payload.size()));
      outbound += f.payload;
    }
    MuxDecoder mux;
    mux.set_frame_tap([&](uint32_t, uint32_t len) {
      out.frames++;
      out.max_frame = std::max<size_t>(out.max_frame, len);
    });
    std::map<uint32_t, TtrpcDecoder> decoders;
    size_t off = 0;
    auto pump = [&] {
      if (off < outbound.size()) {
        const ssize_t n = ::write(runtime_end.get(), outbound.data() + off, outbound.size() - off);
        if (n > 0) off += static_cast<size_t>(n);
      }
      char buf[65536];
      ssize_t n;
      while ((n = ::read(runtime_end.get(), buf, sizeof buf)) > 0) {
        auto r = mux.feed(std::string_view(buf, static_cast<size_t>(n)),
                          [&](uint32_t conn, std::string_view piece) -> Result<void> {
                            return decoders[conn].feed(piece, [&](TtrpcMessage&& m) -> Result<void> {
                              out.replies.push_back({false, conn, m.header, std::move(m.body)});
                              return {};
                            });
                          });
        EXPECT_TRUE(r) << r.error().message;
      }
    };
    size_t want = 0;
    auto msgs = reassemble(*frames);
    ASSERT_TRUE(msgs);
    for (auto& m : *msgs) {
      if (m.from_runtime && m.header.type == 1) {
        out.requests.push_back(m);
        want++;
      }
    }
    // Our plugin sends RegisterPlugin too: one more message than requests.
    ASSERT_TRUE(run_until(loop, [&] {
      pump();
      return off == outbound.size() && out.replies.size() >= want + 1;
    })) << "got " << out.replies.size() << " of " << want + 1;
    EXPECT_NE(plugin.state(), PluginState::Stopped);
  }
  sd_event_unref(loop);
}

void check_replay(const std::string& file, uint32_t valid) {
  SCOPED_TRACE(file);
  RecordingHandlers h;
  Replayed r;
  replay(file, h, r);
  EXPECT_LE(r.max_frame, kMaxMuxPayloadOut);
  std::map<uint32_t, const CaptureMessage*> replies;  // conn-1 replies by stream
  int registers = 0;
  for (const auto& m : r.replies) {
    if (m.conn == kRuntimeServiceConn) {
      ASSERT_EQ(m.header.type, 1);
      ttrpc::Request req;
      ASSERT_TRUE(req.ParseFromString(m.body));
      EXPECT_EQ(req.method(), "RegisterPlugin");
      EXPECT_EQ(m.header.stream_id, 1u) << "the first client stream is 1";
      registers++;
      continue;
    }
    ASSERT_EQ(m.header.type, 2);
    EXPECT_TRUE(replies.emplace(m.header.stream_id, &m).second) << "duplicate reply";
  }
  EXPECT_EQ(registers, 1);
  ASSERT_EQ(replies.size(), r.requests.size());
  for (const auto& q : r.requests) {
    ttrpc::Request req;
    ASSERT_TRUE(req.ParseFromString(q.body));
    SCOPED_TRACE(req.method());
    auto it = replies.find(q.header.stream_id);
    ASSERT_NE(it, replies.end()) << "no reply for stream " << q.header.stream_id;
    ttrpc::Response resp;
    ASSERT_TRUE(resp.ParseFromString(it->second->body));
    EXPECT_FALSE(resp.has_status()) << resp.status().message();
    const auto* method = google::protobuf::DescriptorPool::generated_pool()
                             ->FindServiceByName(std::string(kReflectPackagePrefix) + req.service())
                             ->FindMethodByName(req.method());
    ASSERT_NE(method, nullptr);
    std::unique_ptr<google::protobuf::Message> reply(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->output_type())->New());
    ASSERT_TRUE(reply->ParseFromString(resp.payload()));
    if (req.method() == "Configure") {
      api::ConfigureResponse cr;
      ASSERT_TRUE(cr.ParseFromString(resp.payload()));
      EXPECT_EQ(cr.events(), static_cast<int32_t>(valid));
    }
  }
}

TEST(Replay, V04Lifecycle) { check_replay("nri-v0.4.0-lifecycle.jsonl", kValidEventsV02); }
TEST(Replay, V04AllEvents) { check_replay("nri-v0.4.0-allevents.jsonl", kValidEventsV02); }
TEST(Replay, V08Lifecycle) { check_replay("nri-v0.8.0-lifecycle.jsonl", kValidEventsV02); }
TEST(Replay, V08AllEvents) { check_replay("nri-v0.8.0-allevents.jsonl", kValidEventsV02); }
TEST(Replay, V012Lifecycle) { check_replay("nri-v0.12.2-lifecycle.jsonl", kValidEventsV10); }
TEST(Replay, V012AllEvents) { check_replay("nri-v0.12.2-allevents.jsonl", kValidEventsV10); }
TEST(Replay, V08Sync3000) { check_replay("nri-v0.8.0-sync3000.jsonl.gz", kValidEventsV02); }

TEST(Replay, HandlersSeeCaptureEvents) {
  RecordingHandlers h;
  Replayed r;
  replay("nri-v0.4.0-allevents.jsonl", h, r);
  // StateChange on v0.4 reaches the same handlers as v0.12's RPCs.
  EXPECT_NE(std::find(h.calls.begin(), h.calls.end(), "RunPodSandbox"), h.calls.end());
  EXPECT_NE(std::find(h.calls.begin(), h.calls.end(), "RemovePodSandbox"), h.calls.end());
  EXPECT_NE(std::find(h.calls.begin(), h.calls.end(), "CreateContainer"), h.calls.end());
}

}  // namespace
}  // namespace podshim::nri::test
