// The zero-copy reader (shim/nri/pbview.h) against libprotobuf: every
// request of the real captures and of simulator-made and randomized
// messages decodes to the same values both ways; malformed input gives an
// error naming where, never a crash; and the frame buffer is sized from the
// header, reused, and released after a large message.
#include <dirent.h>

#include <random>
#include <set>

#include <gtest/gtest.h>

#include "shim/nri/pbview.h"
#include "shim/nri/simulator.h"
#include "tests/shim/nri/capture.h"
#include "tests/shim/nri/pbview_compare.h"

namespace podshim::nri::test {
namespace {

namespace api = ::nri::pkg::api::v1alpha1;

std::vector<std::string> capture_files() {
  std::vector<std::string> out;
  DIR* d = opendir(capture_dir().c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.find(".jsonl") != std::string::npos) out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Decodes `payload` of `method` both ways; "" when all exposed fields agree.
std::string differential(std::string_view method, const std::string& payload) {
  // libprotobuf parses the payload into `m`, the reader decodes it into `v`
  // with `decode`; then `check(v, m)`.
  auto both = [&](auto m, auto v, auto decode, auto check) -> std::string {
    if (!m.ParseFromString(payload)) return "libprotobuf rejects it";
    if (auto r = decode(payload, &v); !r) return "reader: " + r.error().message;
    return check(v, m);
  };
  auto compare_pc = [](const pb::PodContainerRequestView& v, const auto& m) { return compare_pod_container(v, m); };
  auto pc = [&](auto msg, const char* what) {
    return both(std::move(msg), pb::PodContainerRequestView(),
                [what](std::string_view p, pb::PodContainerRequestView* v) {
                  return pb::decode_pod_container_request(p, v, what);
                },
                compare_pc);
  };
  if (method == "CreateContainer") return pc(api::CreateContainerRequest(), "CreateContainerRequest");
  if (method == "UpdateContainer") {
    if (auto d = pc(api::UpdateContainerRequest(), "UpdateContainerRequest"); !d.empty()) return d;
    // What podshimd's dispatch reads: the same ids and resources.
    api::UpdateContainerRequest m;
    m.ParseFromString(payload);
    pb::PodContainerRequestView v;
    if (auto r = pb::decode_update_container(payload, &v); !r) return "update reader: " + r.error().message;
    if (!v.pod.partial || !v.container.partial) return "update reader: views not marked partial";
    if (v.pod.uid != m.pod().uid() || v.pod.id != m.pod().id() || v.container.id != m.container().id() ||
        v.container.pod_sandbox_id != m.container().pod_sandbox_id() ||
        v.container.state != static_cast<int32_t>(m.container().state()))
      return "update reader: ids differ";
    if (v.has_linux_resources != m.has_linux_resources()) return "update reader: linux_resources presence differs";
    return compare(v.linux_resources, m.linux_resources(), "linux_resources.");
  }
  if (method == "StopContainer") return pc(api::StopContainerRequest(), "StopContainerRequest");
  if (method == "PostCreateContainer" || method == "StartContainer" || method == "PostStartContainer" ||
      method == "PostUpdateContainer" || method == "RemoveContainer")
    return pc(api::PostCreateContainerRequest(), "request");
  if (method == "RunPodSandbox" || method == "StopPodSandbox" || method == "RemovePodSandbox" ||
      method == "PostUpdatePodSandbox")
    return pc(api::RunPodSandboxRequest(), "request");
  if (method == "UpdatePodSandbox")
    return both(api::UpdatePodSandboxRequest(), pb::PodContainerRequestView(),
                [](std::string_view p, pb::PodContainerRequestView* v) { return pb::decode_pod_sandbox_update(p, v); },
                compare_pc);
  if (method == "StateChange")
    return both(api::StateChangeEvent(), pb::StateChangeView(),
                [](std::string_view p, pb::StateChangeView* v) { return pb::decode_state_change(p, v); },
                [](const pb::StateChangeView& v, const api::StateChangeEvent& m) -> std::string {
                  if (v.event != static_cast<int32_t>(m.event())) return "event differs";
                  if (auto d = compare(v.pod, m.pod(), "pod."); !d.empty()) return d;
                  return compare(v.container, m.container(), "container.");
                });
  if (method == "Synchronize")
    return both(api::SynchronizeRequest(), pb::SynchronizeView(),
                [](std::string_view p, pb::SynchronizeView* v) { return pb::decode_synchronize(p, v); },
                [](const pb::SynchronizeView& v, const api::SynchronizeRequest& m) { return compare(v, m); });
  return "not a method the reader decodes";
}

TEST(PbView, EveryCapturedRequestDecodesAsLibprotobufDoes) {
  const auto files = capture_files();
  ASSERT_GE(files.size(), 7u) << "captures in " << capture_dir();
  std::map<std::string, int> checked;
  for (const auto& file : files) {
    SCOPED_TRACE(file);
    auto frames = load_capture(file);
    ASSERT_TRUE(frames) << frames.error().message;
    auto msgs = reassemble(*frames);
    ASSERT_TRUE(msgs) << msgs.error().message;
    for (const auto& m : *msgs) {
      if (m.header.type != 1) continue;
      ::ttrpc::Request lib;
      ASSERT_TRUE(lib.ParseFromString(m.body));
      pb::RequestView req;
      auto r = pb::decode_request(m.body, &req);
      ASSERT_TRUE(r) << r.error().message;
      ASSERT_EQ(compare(req, lib), "");
      // Requests the plugin serves (conn 1) are the ones the reader covers.
      if (m.conn != kPluginServiceConn || req.method == "Configure" || req.method == "Shutdown" ||
          req.method == "ValidateContainerAdjustment")
        continue;
      SCOPED_TRACE(std::string(req.method) + " stream " + std::to_string(m.header.stream_id));
      EXPECT_EQ(differential(req.method, lib.payload()), "");
      checked[std::string(req.method)]++;
    }
  }
  for (const char* must : {"Synchronize", "CreateContainer", "UpdateContainer", "StopContainer",
                           "StateChange", "RunPodSandbox", "RemoveContainer", "PostStartContainer"})
    EXPECT_GT(checked[must], 0) << must << " never seen in the captures";
}

TEST(PbView, SimulatorMessagesDecodeAsLibprotobufDoes) {
  api::SynchronizeRequest sync;
  for (int i = 0; i < 20; ++i) {
    auto pod = make_pod(i);
    *sync.add_pods() = pod;
    for (int j = 0; j < 3; ++j) {
      auto c = make_container(pod, i * 3 + j);
      *sync.add_containers() = c;
      api::UpdateContainerRequest u;
      *u.mutable_pod() = pod;
      *u.mutable_container() = c;
      *u.mutable_linux_resources() = c.linux().resources();
      EXPECT_EQ(differential("UpdateContainer", u.SerializeAsString()), "");
      api::CreateContainerRequest cr;
      *cr.mutable_pod() = pod;
      *cr.mutable_container() = c;
      EXPECT_EQ(differential("CreateContainer", cr.SerializeAsString()), "");
    }
  }
  sync.set_more(true);
  EXPECT_EQ(differential("Synchronize", sync.SerializeAsString()), "");
}

// Every field the views expose, randomly present, with random contents.
struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  bool coin() { return rng() & 1; }
  std::string s() {
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789-./=_ ";
    std::string out(rng() % 24, 'x');
    for (auto& c : out) c = kChars[rng() % (sizeof kChars - 1)];
    if (rng() % 8 == 0) out += "\xc3\xa9\xe2\x82\xac";  // é€: multi-byte UTF-8
    return out;
  }
  uint64_t big() { return coin() ? rng() : rng() % 300; }
  void resources(api::LinuxResources* r) {
    if (coin()) {
      auto* m = r->mutable_memory();
      if (coin()) m->mutable_limit()->set_value(static_cast<int64_t>(big()));
      if (coin()) m->mutable_swap()->set_value(static_cast<int64_t>(big()));
    }
    if (coin()) {
      auto* c = r->mutable_cpu();
      if (coin()) c->mutable_shares()->set_value(big());
      if (coin()) c->mutable_quota()->set_value(coin() ? -1 : static_cast<int64_t>(big()));
      if (coin()) c->mutable_period()->set_value(big());
      if (coin()) c->set_cpus(s());
      if (coin()) c->set_mems(s());
    }
    for (int i = rng() % 3; i > 0; --i) (*r->mutable_unified())[s()] = s();
    if (coin()) r->mutable_pids()->set_limit(static_cast<int64_t>(big()));
  }
  api::PodSandbox pod() {
    api::PodSandbox p;
    p.set_id(s());
    p.set_name(s());
    p.set_uid(s());
    p.set_namespace_(s());
    p.set_runtime_handler(s());
    p.set_pid(static_cast<uint32_t>(rng()));
    for (int i = rng() % 4; i > 0; --i) (*p.mutable_labels())[s()] = s();
    for (int i = rng() % 4; i > 0; --i) (*p.mutable_annotations())[s()] = s();
    if (coin()) {
      auto* l = p.mutable_linux();
      l->set_cgroup_parent(s());
      l->set_cgroups_path(s());
      if (coin()) resources(l->mutable_pod_resources());
      if (coin()) resources(l->mutable_pod_overhead());
      if (coin()) resources(l->mutable_resources());
      if (coin()) l->add_namespaces()->set_type(s());
    }
    for (int i = rng() % 3; i > 0; --i) p.add_ips(s());
    return p;
  }
  api::Container container() {
    api::Container c;
    c.set_id(s());
    c.set_pod_sandbox_id(s());
    c.set_name(s());
    c.set_state(static_cast<api::ContainerState>(rng() % 5));
    c.set_pid(static_cast<uint32_t>(rng()));
    for (int i = rng() % 4; i > 0; --i) (*c.mutable_labels())[s()] = s();
    for (int i = rng() % 4; i > 0; --i) (*c.mutable_annotations())[s()] = s();
    for (int i = rng() % 4; i > 0; --i) c.add_args(s());
    for (int i = rng() % 4; i > 0; --i) c.add_env(s());
    for (int i = rng() % 3; i > 0; --i) {
      auto* m = c.add_mounts();
      m->set_destination(s());
      m->set_source(s());
      m->add_options(s());
    }
    for (int i = rng() % 3; i > 0; --i) c.add_cdi_devices()->set_name(s());
    if (coin()) {
      c.mutable_user()->set_uid(static_cast<uint32_t>(rng()));
      c.mutable_user()->set_gid(static_cast<uint32_t>(rng()));
      c.mutable_user()->add_additional_gids(7);
    }
    if (coin()) {
      auto* l = c.mutable_linux();
      l->set_cgroups_path(s());
      for (int i = rng() % 3; i > 0; --i) {
        auto* d = l->add_devices();
        d->set_path(s());
        d->set_major(static_cast<int64_t>(big()));
      }
      if (coin()) resources(l->mutable_resources());
      if (coin()) l->mutable_oom_score_adj()->set_value(-999);
      if (coin()) (*l->mutable_sysctl())[s()] = s();
    }
    if (coin()) c.mutable_hooks()->add_prestart()->set_path(s());
    if (coin()) c.add_rlimits()->set_type(s());
    c.set_created_at(static_cast<int64_t>(rng()));
    c.set_exit_code(-static_cast<int32_t>(rng() % 100));
    return c;
  }
};

TEST(PbView, RandomizedMessagesDecodeAsLibprotobufDoes) {
  Gen g(20261201);
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    api::UpdateContainerRequest u;
    *u.mutable_pod() = g.pod();
    *u.mutable_container() = g.container();
    if (g.coin()) g.resources(u.mutable_linux_resources());
    std::string bytes = u.SerializeAsString();
    // An unknown field (99, length-delimited) at the top: both skip it.
    if (g.coin()) bytes += std::string("\x9a\x06\x03" "abc", 6);  // field 99, LEN 3
    ASSERT_EQ(differential("UpdateContainer", bytes), "");

    api::UpdatePodSandboxRequest ps;
    *ps.mutable_pod() = g.pod();
    if (g.coin()) g.resources(ps.mutable_linux_resources());
    if (g.coin()) g.resources(ps.mutable_overhead_linux_resources());
    ASSERT_EQ(differential("UpdatePodSandbox", ps.SerializeAsString()), "");

    api::StateChangeEvent ev;
    ev.set_event(static_cast<api::Event>(g.rng() % 15));
    *ev.mutable_pod() = g.pod();
    *ev.mutable_container() = g.container();
    ASSERT_EQ(differential("StateChange", ev.SerializeAsString()), "");
  }
  api::SynchronizeRequest sync;
  for (int i = 0; i < 50; ++i) *sync.add_pods() = g.pod();
  for (int i = 0; i < 150; ++i) *sync.add_containers() = g.container();
  ASSERT_EQ(differential("Synchronize", sync.SerializeAsString()), "");
}

TEST(PbView, DuplicateMapKeysAndScalarsLastOneWins) {
  api::PodSandbox a, b;
  (*a.mutable_annotations())["k"] = "first";
  a.set_uid("u1");
  (*b.mutable_annotations())["k"] = "second";
  b.set_uid("u2");
  // Concatenated encodings of one message are that message merged: map
  // entries accumulate (the last key wins) and scalars take the last value.
  const std::string bytes = a.SerializeAsString() + b.SerializeAsString();
  api::PodSandbox lib;
  ASSERT_TRUE(lib.ParseFromString(bytes));
  pb::PodSandboxView v;
  ASSERT_TRUE(pb::decode_pod(bytes, &v));
  EXPECT_EQ(compare(v, lib, ""), "");
  EXPECT_EQ(v.uid, "u2");
  EXPECT_EQ(v.annotations.find("k").value_or(""), "second");
  EXPECT_EQ(v.annotations.size(), 2u) << "both entries are on the wire";
}

// ---- malformed input ----------------------------------------------------------

std::string decode_error(std::string_view bytes) {
  pb::PodContainerRequestView v;
  auto r = pb::decode_pod_container_request(bytes, &v, "CreateContainerRequest");
  return r ? std::string() : r.error().message;
}

TEST(PbView, MalformedInputIsAnErrorNamingWhere) {
  // Truncated varint: field 4 (state) of the container, value cut short.
  std::string ctr = std::string("\x20\xff", 2);
  std::string req = std::string("\x12") + static_cast<char>(ctr.size()) + ctr;
  EXPECT_NE(decode_error(req).find("CreateContainerRequest.container"), std::string::npos) << decode_error(req);
  EXPECT_NE(decode_error(req).find("truncated varint"), std::string::npos) << decode_error(req);
  // A truncated tag.
  EXPECT_NE(decode_error(std::string("\xff", 1)).find("truncated field tag"), std::string::npos);
  // Length past the end.
  EXPECT_NE(decode_error(std::string("\x0a\x05" "ab", 4)).find("length 5 past the end"), std::string::npos);
  // The declared length of a sub-message past the end of the outer one.
  EXPECT_NE(decode_error(std::string("\x0a\x03\x0a\x09" "x", 5)).find("PodSandbox"), std::string::npos);
  // Wrong wire type for a known field: PodSandbox.id as a varint.
  auto e = decode_error(std::string("\x0a\x02\x08\x01", 4));
  EXPECT_NE(e.find("PodSandbox.id (field 1): wire type 0, expected 2"), std::string::npos) << e;
  // Invalid wire types 6 and 7.
  EXPECT_NE(decode_error(std::string("\x0e", 1)).find("invalid wire type 6"), std::string::npos);
  EXPECT_NE(decode_error(std::string("\x0f", 1)).find("invalid wire type 7"), std::string::npos);
  // A group end that never started; a group that never ends.
  EXPECT_NE(decode_error(std::string("\x0c", 1)).find("never started"), std::string::npos);
  EXPECT_NE(decode_error(std::string("\x7b\x08\x01", 3)).find("unterminated group"), std::string::npos);
  // A singular message field twice.
  std::string twice = std::string("\x0a\x00\x0a\x00", 4);
  EXPECT_NE(decode_error(twice).find("repeated on the wire"), std::string::npos) << decode_error(twice);
  // Invalid UTF-8 in a string podshim keeps.
  e = decode_error(std::string("\x0a\x03\x1a\x01\xff", 5));
  EXPECT_NE(e.find("PodSandbox.uid (field 3): string is not valid UTF-8"), std::string::npos) << e;
  // A varint longer than 10 bytes.
  EXPECT_NE(decode_error(std::string("\x08") + std::string(11, '\x80') + "\x01").find("truncated varint"),
            std::string::npos);
}

TEST(PbView, UpdateContainerReadsIdsAndResourcesAndLeavesTheRestForAFullDecode) {
  Gen g(11);
  api::UpdateContainerRequest m;
  *m.mutable_pod() = g.pod();
  *m.mutable_container() = g.container();
  m.mutable_linux_resources()->mutable_memory()->mutable_limit()->set_value(256 << 20);
  // A label value that is not UTF-8: libprotobuf-lite would not serialize
  // it, so it is patched into the bytes (same length, 'X' -> 0xff).
  (*m.mutable_container()->mutable_labels())["podshim.test/bad"] = "abcXdef";
  std::string bytes = m.SerializeAsString();
  const size_t at = bytes.find("abcXdef");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = '\xff';

  pb::PodContainerRequestView v;
  auto r = pb::decode_update_container(bytes, &v);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(v.pod.partial);
  EXPECT_TRUE(v.container.partial);
  EXPECT_EQ(v.container.id, m.container().id());
  EXPECT_EQ(v.pod.uid, m.pod().uid());
  ASSERT_TRUE(v.has_linux_resources);
  EXPECT_TRUE(v.linux_resources.memory_limit.has);
  EXPECT_EQ(v.linux_resources.memory_limit.value, 256u << 20);
  // Nothing of the unread part is exposed ...
  EXPECT_EQ(v.container.labels.size(), 0u);
  EXPECT_FALSE(v.container.has_linux);
  // ... and the full decode of the same bytes refuses it, naming the label.
  pb::ContainerView full;
  auto d = pb::decode_container(v.container.raw, &full, 1);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("labels"), std::string::npos) << d.error().message;
  EXPECT_NE(decode_error(bytes), "");

  // The wire structure is still checked everywhere: a length past the end
  // inside the container, and bad UTF-8 in an id the update reads.
  // The container with an unknown field 30 whose length runs past its end.
  std::string ctr = m.container().SerializeAsString() + "\xf2\x01\x7f";
  std::string len;
  for (size_t n = ctr.size(); ; n >>= 7) {
    len += static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    if (n <= 0x7f) break;
  }
  const std::string cut = std::string("\x12") + len + ctr;
  auto c = pb::decode_update_container(cut, &v);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("UpdateContainerRequest.container"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("past the end"), std::string::npos) << c.error().message;
  std::string bad_id = m.SerializeAsString();
  bad_id[bad_id.find(m.container().id())] = '\xff';
  auto e = pb::decode_update_container(bad_id, &v);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("Container.id (field 1): string is not valid UTF-8"), std::string::npos)
      << e.error().message;
}

TEST(PbView, DeepNestingIsRefusedNotRecursedInto) {
  // Unknown field 15 as groups nested 10000 deep: skipped with a depth
  // limit, so a hostile peer cannot exhaust the stack.
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "\x7b";  // field 15, SGROUP
  for (int i = 0; i < 10000; ++i) deep += "\x7c";  // field 15, EGROUP
  auto e = decode_error(deep);
  EXPECT_NE(e.find("nesting deeper than 64"), std::string::npos) << e;
  // Within the limit, groups are skipped like libprotobuf does.
  std::string ok;
  for (int i = 0; i < 10; ++i) ok += "\x7b";
  for (int i = 0; i < 10; ++i) ok += "\x7c";
  EXPECT_EQ(decode_error(ok), "");
  api::CreateContainerRequest lib;
  EXPECT_TRUE(lib.ParseFromString(ok));
}

TEST(PbView, EveryTruncationOfARealRequestIsSafe) {
  Gen g(7);
  api::CreateContainerRequest m;
  *m.mutable_pod() = g.pod();
  *m.mutable_container() = g.container();
  const std::string full = m.SerializeAsString();
  size_t accepted = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string cut = full.substr(0, n);
    if (decode_error(cut).empty()) {
      // A prefix is only whole up to a top-level field boundary; there
      // libprotobuf must agree that it is a message.
      api::CreateContainerRequest lib;
      EXPECT_TRUE(lib.ParseFromString(cut)) << "prefix " << n;
      ++accepted;
    }
  }
  EXPECT_LT(accepted, full.size());
  EXPECT_EQ(decode_error(full), "");
}

TEST(PbView, EnvelopeIsReadInPlace) {
  ::ttrpc::Request r;
  r.set_service("nri.pkg.api.v1alpha1.Plugin");
  r.set_method("CreateContainer");
  r.set_payload(std::string(100000, 'p'));
  r.set_timeout_nano(2'000'000'000);
  r.add_metadata()->set_key("k");
  const std::string bytes = r.SerializeAsString();
  pb::RequestView v;
  ASSERT_TRUE(pb::decode_request(bytes, &v));
  EXPECT_EQ(compare(v, r), "");
  // The payload points into the frame: no copy.
  EXPECT_GE(v.payload.data(), bytes.data());
  EXPECT_LE(v.payload.data() + v.payload.size(), bytes.data() + bytes.size());
}

// ---- the frame buffer ---------------------------------------------------------

TEST(PbView, FrameBufferIsSizedFromTheHeaderReusedAndReleased) {
  TtrpcDecoder d(kDefaultMaxRecvMessage);
  auto frame = [](size_t n) {
    std::string s;
    append_ttrpc_frame(s, 1, MsgType::Request, 0, std::string(n, 'x'));
    return s;
  };
  int got = 0;
  auto sink = [&](TtrpcMessage&&) -> Result<void> {
    ++got;
    return {};
  };
  // A 1 MiB message arriving in pieces: one buffer of exactly its size.
  const std::string big = frame(1u << 20);
  ASSERT_TRUE(d.feed(std::string_view(big).substr(0, 5000), sink));
  EXPECT_EQ(d.buffered_capacity(), 1u << 20) << "sized from the header, not doubled by appends";
  ASSERT_TRUE(d.feed(std::string_view(big).substr(5000), sink));
  EXPECT_EQ(got, 1);
  EXPECT_LT(d.buffered_capacity(), TtrpcDecoder::kRetainCapacity) << "released after an oversize message";
  // Small messages reuse one buffer.
  const std::string small = frame(3000);
  ASSERT_TRUE(d.feed(small, sink));
  const size_t cap = d.buffered_capacity();
  EXPECT_GE(cap, 3000u);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(d.feed(small, sink));
  EXPECT_EQ(d.buffered_capacity(), cap);
  EXPECT_EQ(got, 12);
  // Past 4 MiB (an old runtime's unpaged Synchronize) the buffer grows with
  // what arrives and ends exactly at the declared size.
  std::string huge;
  put_u32be(huge, 6u << 20);
  put_u32be(huge, 3);
  huge += '\x01';
  huge += '\0';
  ASSERT_TRUE(d.feed(huge + std::string(100, 'a'), sink));
  EXPECT_LT(d.buffered_capacity(), 4096u);
  std::string rest((6u << 20) - 100, 'b');
  size_t peak = 0;
  for (size_t off = 0; off < rest.size(); off += 65536) {
    ASSERT_TRUE(d.feed(std::string_view(rest).substr(off, 65536), sink));
    peak = std::max(peak, d.buffered_capacity());
  }
  EXPECT_EQ(got, 13);
  EXPECT_LE(peak, 6u << 20);
}

}  // namespace
}  // namespace podshim::nri::test

namespace podshim::nri::pb {
namespace {

// The ASCII fast path must not skip over a bad byte, whatever its offset in
// an eight-byte word; results against a byte-by-byte reference.
TEST(PbViewUtf8, AsciiWordsAndEveryOffsetOfABadByte) {
  const std::string ascii = "io.kubernetes.cri.sandbox-id/0123456789";
  EXPECT_TRUE(valid_utf8(ascii));
  for (size_t at = 0; at <= ascii.size(); ++at) {
    for (const std::string& bad : {std::string("\xff"), std::string("\xc3"), std::string("\xed\xa0\x80"),
                                  std::string("\xc0\xaf")}) {
      std::string s = ascii;
      s.insert(at, bad);
      EXPECT_FALSE(valid_utf8(s)) << "bad bytes at " << at;
    }
    std::string good = ascii;
    good.insert(at, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");  // é € 😀
    EXPECT_TRUE(valid_utf8(good)) << "good multibyte at " << at;
  }
}

}  // namespace
}  // namespace podshim::nri::pb
