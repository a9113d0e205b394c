// Golden byte vectors, written by hand from the protocol description (wire
// type, tag = field << 3 | type, varint lengths), so our generated code and
// framing are checked against the spec rather than against themselves.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include <gtest/gtest.h>

#include "shim/nri/simulator.h"
#include "tests/shim/nri/capture.h"
#include "tests/shim/nri/test_support.h"

namespace podshim::nri::test {
namespace {

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

template <typename M>
std::string enc(const M& m) {
  return hex(m.SerializeAsString());
}

TEST(Golden, Messages) {
  api::RegisterPluginRequest reg;
  reg.set_plugin_name("podshim");
  reg.set_plugin_idx("10");
  reg.set_nri_version("v0.12.2");
  // 1:"podshim" 2:"10" 3:"v0.12.2"
  EXPECT_EQ(enc(reg), "0a07706f647368696d" "12023130" "1a0776302e31322e32");

  api::ConfigureResponse cr;
  cr.set_events(648);  // 0x288: bytes seen on the wire from a Go plugin
  EXPECT_EQ(enc(cr), "108805");
  cr.set_events(0x3FFF);
  EXPECT_EQ(enc(cr), "10ff7f");

  api::ConfigureRequest cq;
  cq.set_runtime_name("containerd");
  cq.set_runtime_version("v1.7.13");
  cq.set_registration_timeout(5000);
  cq.set_request_timeout(2000);
  // Exactly the v0.8 runtime's Configure payload in the captures.
  EXPECT_EQ(enc(cq), "120a636f6e7461696e657264" "1a0776312e372e3133" "208827" "28d00f");

  api::SynchronizeResponse sr;
  sr.set_more(true);
  EXPECT_EQ(enc(sr), "1001");

  api::SynchronizeRequest sq;
  sq.set_more(true);
  EXPECT_EQ(enc(sq), "1801");

  api::StateChangeEvent ev;
  ev.set_event(api::START_CONTAINER);
  EXPECT_EQ(enc(ev), "0806");

  // Optional wrappers: "set to 0" is an empty sub-message (tag + length 0).
  api::LinuxMemory mem;
  mem.mutable_limit()->set_value(0);
  EXPECT_EQ(enc(mem), "0a00");
  mem.mutable_limit()->set_value(1 << 20);
  EXPECT_EQ(enc(mem), "0a0408808040");

  api::ContainerUpdate cu;
  cu.set_container_id("c1");
  cu.mutable_linux()->mutable_resources()->mutable_cpu()->mutable_quota()->set_value(50000);
  cu.set_ignore_failure(true);
  // 1:"c1" 2:{resources 1:{cpu 2:{quota 2:{value 1: varint 50000 = d0 86 03}}}} 3:true
  EXPECT_EQ(enc(cu), "0a026331" "120a" "0a08" "1206" "1204" "08d08603" "1801");
  api::ContainerUpdate back;
  ASSERT_TRUE(back.ParseFromString(cu.SerializeAsString()));
  EXPECT_EQ(back.linux().resources().cpu().quota().value(), 50000);

  api::ContainerEviction ce;
  ce.set_container_id("c");
  ce.set_reason("r");
  EXPECT_EQ(enc(ce), "0a0163" "120172");

  api::ValidateContainerAdjustmentResponse vr;
  vr.set_reject(true);
  vr.set_reason("no");
  EXPECT_EQ(enc(vr), "0801" "12026e6f");

  api::CreateContainerResponse ccr;
  (*ccr.mutable_adjust()->mutable_annotations())["a"] = "b";
  // 1:{2:{1:"a" 2:"b"}}  (map entry = message with key 1, value 2)
  EXPECT_EQ(enc(ccr), "0a08" "1206" "0a0161" "120162");

  api::UpdateContainersResponse ucr;
  ucr.add_failed()->set_container_id("x");
  EXPECT_EQ(enc(ucr), "0a03" "0a0178");

  api::Empty empty;
  EXPECT_EQ(enc(empty), "");
}

TEST(Golden, Envelope) {
  ttrpc::Request req;
  req.set_service("s");
  req.set_method("m");
  req.set_payload("p");
  req.set_timeout_nano(2'000'000'000);
  EXPECT_EQ(enc(req), "0a0173" "12016d" "1a0170" "2080a8d6b907"  /* 2e9 as varint */);

  ttrpc::Response ok;  // success: status unset, empty payload → 0 bytes
  EXPECT_EQ(enc(ok), "");
  ttrpc::Response err;
  err.mutable_status()->set_code(12);
  err.mutable_status()->set_message("method X");
  EXPECT_EQ(enc(err), "0a0c" "080c" "12086d6574686f642058");
}

TEST(Golden, Frames) {
  std::string f;
  append_ttrpc_frame(f, 1, MsgType::Response, 0, "");
  EXPECT_EQ(hex(f), "00000000" "00000001" "02" "00");  // the Go server's empty reply
  std::string m;
  append_mux_frames(m, kRuntimeServiceConn, f);
  EXPECT_EQ(hex(m), "00000002" "0000000a" "00000000000000010200");

  // 10000 bytes → 4096 + 4096 + 1808.
  std::string big(10000, 'z'), out;
  append_mux_frames(out, 1, big);
  ASSERT_EQ(out.size(), 10000u + 3 * kMuxHeaderLen);
  EXPECT_EQ(hex(out.substr(0, 8)), "0000000100001000");
  EXPECT_EQ(hex(out.substr(8 + 4096, 8)), "0000000100001000");
  EXPECT_EQ(hex(out.substr(2 * (8 + 4096), 8)), "0000000100000710");
}

TEST(Wire, DecoderNeverAllocatesWhatAHeaderClaims) {
  TtrpcDecoder d(kDefaultMaxRecvMessage);
  std::string hdr;
  put_u32be(hdr, 60u << 20);  // claims 60 MiB, under the cap
  put_u32be(hdr, 1);
  hdr += "\x01";
  hdr += '\0';
  int got = 0;
  ASSERT_TRUE(d.feed(hdr + std::string(100, 'a'), [&](TtrpcMessage&&) -> Result<void> { got++; return {}; }));
  EXPECT_EQ(got, 0);
  EXPECT_LT(d.buffered_capacity(), 4096u) << "buffer grows with bytes received, not the claim";
}

// The transport's handler may close the connection, destroying the decoder
// from inside its own sink (the simulator does on a refused Configure): after
// a failing sink, feed() must touch none of its members. The decoder lives in
// a buffer that the sink destroys and fills with a canary.
TEST(Wire, DecoderTouchesNothingAfterAFailingSinkDestroyedIt) {
  alignas(TtrpcDecoder) unsigned char storage[sizeof(TtrpcDecoder)];
  auto* d = new (storage) TtrpcDecoder();
  std::string frames;
  append_ttrpc_frame(frames, 1, MsgType::Request, 0, std::string(300, 'x'));
  append_ttrpc_frame(frames, 3, MsgType::Request, 0, "second");
  int seen = 0;
  auto r = d->feed(frames, [&](TtrpcMessage&& m) -> Result<void> {
    ++seen;
    EXPECT_EQ(m.body.size(), 300u);
    d->~TtrpcDecoder();
    std::memset(storage, 0xAB, sizeof storage);
    return fail(ECANCELED, "closed");
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ECANCELED);
  EXPECT_EQ(seen, 1) << "the second message must not be read from a destroyed decoder";
  for (size_t i = 0; i < sizeof storage; ++i) ASSERT_EQ(storage[i], 0xAB) << "byte " << i << " written after the sink";
}

TEST(Wire, OversizedMessageIsSkippedAndReported) {
  TtrpcDecoder d(1000);
  std::string s;
  append_ttrpc_frame(s, 7, MsgType::Request, 0, std::string(5000, 'q'));
  append_ttrpc_frame(s, 9, MsgType::Request, 0, "ok");
  std::vector<TtrpcMessage> got;
  // Fed a byte at a time: reassembly must not depend on chunking.
  for (char c : s) {
    ASSERT_TRUE(d.feed(std::string_view(&c, 1), [&](TtrpcMessage&& m) -> Result<void> {
      got.push_back(std::move(m));
      return {};
    }));
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].oversized);
  EXPECT_EQ(got[0].header.length, 5000u);
  EXPECT_EQ(got[0].header.stream_id, 7u);
  EXPECT_FALSE(got[1].oversized);
  EXPECT_EQ(got[1].body, "ok");
}

TEST(Wire, UnknownConnAndTypeAreProtocolErrors) {
  MuxDecoder m;
  std::string s;
  put_u32be(s, 3);
  put_u32be(s, 0);
  auto r = m.feed(s, [](uint32_t, std::string_view) -> Result<void> { return {}; });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("unknown connection id 3"), std::string::npos);
  TtrpcDecoder d;
  std::string t;
  append_ttrpc_frame(t, 1, static_cast<MsgType>(9), 0, "");
  auto r2 = d.feed(t, [](TtrpcMessage&&) -> Result<void> { return {}; });
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message.find("unknown message type 9"), std::string::npos);
}

TEST(Wire, VersionDetection) {
  api::ConfigureRequest c;
  c.set_runtime_name("containerd");
  c.set_runtime_version("v1.7.27");
  EXPECT_EQ(runtime_info(c).valid_events, kValidEventsV02);
  c.set_runtime_version("v2.2.0");
  EXPECT_EQ(runtime_info(c).valid_events, kValidEventsV10);
  c.set_runtime_name("cri-o");
  c.set_runtime_version("1.33.4");
  EXPECT_EQ(runtime_info(c).valid_events, kValidEventsV02);
  c.set_runtime_version("1.34.0");
  EXPECT_EQ(runtime_info(c).valid_events, kValidEventsV10);
  c.set_runtime_version("garbage");
  EXPECT_EQ(runtime_info(c).valid_events, kValidEventsV02);
  c.set_nri_version("0.0.0-unknown");  // dev build of v0.12+: the field itself tells
  EXPECT_EQ(runtime_info(c).valid_events, kValidEventsV10);
  EXPECT_TRUE(runtime_info(c).dedicated_event_rpcs);
}

TEST(Wire, PluginIdentityRules) {
  struct { const char* value; bool valid; } indexes[] = {{"05", true}, {"5", false}, {"123", false}, {"a1", false}},
                                            names[] = {{"podshim", true}, {"", false}, {"pod/shim", false}};
  for (const auto& i : indexes) EXPECT_EQ(static_cast<bool>(check_plugin_index(i.value)), i.valid) << i.value;
  for (const auto& n : names) EXPECT_EQ(static_cast<bool>(check_plugin_name(n.value)), n.valid) << n.value;
  PluginOptions o;
  auto r = apply_preinstalled_environment(&o, [](const char* k) -> const char* {
    return std::string_view(k) == "NRI_PLUGIN_SOCKET" ? "notanumber" : nullptr;
  });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("notanumber"), std::string::npos);
  auto none = apply_preinstalled_environment(&o, [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

// The simulator's messages against the v0.8 and v0.12.2 runtimes' own, field
// by field: Configure byte-identical, events carrying the same pod/container
// decoded equal, the same services/methods and stream-id sequence.
void compare_with_capture(const std::string& file, int minor) {
  SCOPED_TRACE(file);
  auto frames = load_capture(file);
  ASSERT_TRUE(frames);
  auto msgs = reassemble(*frames);
  ASSERT_TRUE(msgs);
  std::vector<ttrpc::Request> theirs;
  std::vector<uint32_t> their_ids;
  for (const auto& m : *msgs) {
    if (!m.from_runtime || m.header.type != 1 || m.conn != 1) continue;
    theirs.emplace_back();
    ASSERT_TRUE(theirs.back().ParseFromString(m.body));
    their_ids.push_back(m.header.stream_id);
  }
  ASSERT_GE(theirs.size(), 3u);
  api::ConfigureRequest their_cfg;
  ASSERT_TRUE(their_cfg.ParseFromString(theirs[0].payload()));
  api::SynchronizeRequest their_sync;
  ASSERT_TRUE(their_sync.ParseFromString(theirs[1].payload()));

  sd_event* loop = nullptr;
  ASSERT_GE(sd_event_new(&loop), 0);
  SimOptions so;
  so.nri_minor = minor;
  so.runtime_name = their_cfg.runtime_name();
  so.runtime_version = their_cfg.runtime_version();
  so.nri_version = their_cfg.nri_version();
  std::vector<ttrpc::Request> ours;
  std::vector<uint32_t> our_ids;
  TtrpcDecoder dec(kDefaultMaxRecvMessage);
  {
    Simulator sim(loop, so);
    sim.set_frame_tap([&](bool outgoing, uint32_t conn, std::string_view piece) {
      if (!outgoing || conn != 1) return;
      EXPECT_TRUE(dec.feed(piece, [&](TtrpcMessage&& m) -> Result<void> {
        ours.emplace_back();
        EXPECT_TRUE(ours.back().ParseFromString(m.body));
        our_ids.push_back(m.header.stream_id);
        return {};
      }));
    });
    sim.set_state({their_sync.pods().begin(), their_sync.pods().end()},
                  {their_sync.containers().begin(), their_sync.containers().end()});
    auto fd = sim.socketpair();
    ASSERT_TRUE(fd);
    RecordingHandlers h;
    PluginOptions po;
    po.socket_fd = fd->release();
    Plugin plugin(loop, h, po);
    ASSERT_TRUE(plugin.start());
    ASSERT_TRUE(run_until(loop, [&] { return sim.synchronized(); }));
    // Replay the capture's CreateContainer through the simulator.
    for (const auto& r : theirs) {
      if (r.method() != "CreateContainer") continue;
      api::CreateContainerRequest cc;
      ASSERT_TRUE(cc.ParseFromString(r.payload()));
      bool got = false;
      sim.create_container(cc.pod(), cc.container(), [&](Status, api::CreateContainerResponse) { got = true; });
      ASSERT_TRUE(run_until(loop, [&] { return got; }));
    }
  }
  sd_event_unref(loop);

  ASSERT_GE(ours.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ours[i].service(), theirs[i].service());
    EXPECT_EQ(our_ids[i], their_ids[i]) << "stream ids 1, 3, 5, ...";
    EXPECT_GT(ours[i].timeout_nano(), 0);
  }
  EXPECT_EQ(ours[0].method(), "Configure");
  EXPECT_EQ(hex(ours[0].payload()), hex(theirs[0].payload())) << "Configure byte-identical";
  EXPECT_EQ(ours[1].method(), "Synchronize");
  api::SynchronizeRequest our_sync;
  ASSERT_TRUE(our_sync.ParseFromString(ours[1].payload()));
  std::string diff;
  EXPECT_TRUE(same_message(our_sync, their_sync, &diff)) << diff;
  EXPECT_EQ(ours[2].method(), "CreateContainer");
  size_t their_cc = 0;
  while (theirs[their_cc].method() != "CreateContainer") their_cc++;
  api::CreateContainerRequest a, b;
  ASSERT_TRUE(a.ParseFromString(ours[2].payload()));
  ASSERT_TRUE(b.ParseFromString(theirs[their_cc].payload()));
  EXPECT_TRUE(same_message(a, b, &diff)) << diff;
}

TEST(SimulatorVsCapture, V08) { compare_with_capture("nri-v0.8.0-lifecycle.jsonl", 8); }
TEST(SimulatorVsCapture, V012) { compare_with_capture("nri-v0.12.2-lifecycle.jsonl", 12); }

}  // namespace
}  // namespace podshim::nri::test
