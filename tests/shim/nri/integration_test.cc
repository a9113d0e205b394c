// Simulator ↔ plugin, over a real unix socket and over a socketpair, for the
// emulated runtime-side NRI versions that exist in the field.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <type_traits>

#include <gtest/gtest.h>

#include "shim/nri/simulator.h"
#include "tests/shim/nri/test_support.h"

namespace podshim::nri::test {
namespace {

class NriIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sd_event_new(&loop_), 0);
    char tmpl[] = "/tmp/podshim-nri-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_path_ = dir_ + "/nri.sock";
  }
  void TearDown() override {
    plugin_.reset();
    sim_.reset();
    sd_event_unref(loop_);
    ::unlink(socket_path_.c_str());
    ::rmdir(dir_.c_str());
  }

  void make_sim(int minor, std::string runtime_version = "") {
    SimOptions o;
    o.nri_minor = minor;
    o.runtime_version = std::move(runtime_version);
    sim_ = std::make_unique<Simulator>(loop_, o);
    sim_->on_synchronized = [this](Status st) { sync_status_.push_back(st); };
  }

  void start_external() {
    ASSERT_TRUE(sim_->listen(socket_path_));
    PluginOptions po;
    po.socket_path = socket_path_;
    po.index = "42";
    po.reconnect_min_usec = 10'000;
    plugin_ = std::make_unique<Plugin>(loop_, h_, po);
    ASSERT_TRUE(plugin_->start());
  }

  void start_socketpair(Handlers* h = nullptr) {
    auto fd = sim_->socketpair();
    ASSERT_TRUE(fd) << fd.error().message;
    PluginOptions po;
    po.socket_fd = fd->release();
    po.name = "10-podshim";
    po.index = "10";
    plugin_ = std::make_unique<Plugin>(loop_, h ? *h : h_, po);
    ASSERT_TRUE(plugin_->start());
  }

  bool wait_synced() {
    return run_until(loop_, [&] { return sim_->synchronized() && plugin_->state() == PluginState::Ready; });
  }

  void set_cluster(int pods, int ctrs) {
    std::vector<api::PodSandbox> p;
    std::vector<api::Container> c;
    for (int i = 0; i < pods; ++i) p.push_back(make_pod(i));
    for (int i = 0; i < ctrs; ++i) c.push_back(make_container(p[static_cast<size_t>(i % pods)], i));
    sim_->set_state(std::move(p), std::move(c));
  }

  // Drives every event the emulated version knows; returns the statuses.
  std::vector<Status> drive_all_events() {
    std::vector<Status> st;
    int pending = 0;
    auto done = [&](Status s) { st.push_back(s); pending--; };
    const auto pod = make_pod(7);
    const auto ctr = make_container(pod, 7);
    auto observe = [&](api::Event e, const api::Container* c) {
      pending++;
      sim_->observe(e, pod, c, done);
      run_until(loop_, [&] { return pending == 0; });
    };
    observe(api::RUN_POD_SANDBOX, nullptr);
    pending++;
    sim_->create_container(pod, ctr, [&](Status s, api::CreateContainerResponse r) {
      EXPECT_EQ(r.adjust().annotations().at("podshim.test/seen"), ctr.name());
      done(s);
    });
    run_until(loop_, [&] { return pending == 0; });
    pending++;
    api::ValidateContainerAdjustmentRequest vr;
    *vr.mutable_pod() = pod;
    *vr.mutable_container() = ctr;
    sim_->validate_container_adjustment(vr, [&](Status s, api::ValidateContainerAdjustmentResponse r) {
      EXPECT_FALSE(r.reject());
      done(s);
    });
    run_until(loop_, [&] { return pending == 0; });
    observe(api::POST_CREATE_CONTAINER, &ctr);
    observe(api::START_CONTAINER, &ctr);
    observe(api::POST_START_CONTAINER, &ctr);
    pending++;
    api::LinuxResources res;
    res.mutable_memory()->mutable_limit()->set_value(123 << 20);
    sim_->update_container(pod, ctr, res, [&](Status s, api::UpdateContainerResponse r) {
      if (s.ok()) {
        EXPECT_EQ(r.update_size(), 1);
        if (r.update_size() == 1) {
          EXPECT_EQ(r.update(0).linux().resources().memory().limit().value(), 123 << 20);
        }
      }
      done(s);
    });
    run_until(loop_, [&] { return pending == 0; });
    observe(api::POST_UPDATE_CONTAINER, &ctr);
    pending++;
    api::UpdatePodSandboxRequest ur;
    *ur.mutable_pod() = pod;
    sim_->update_pod_sandbox(ur, done);
    run_until(loop_, [&] { return pending == 0; });
    observe(api::POST_UPDATE_POD_SANDBOX, nullptr);
    pending++;
    sim_->stop_container(pod, ctr, [&](Status s, api::StopContainerResponse) { done(s); });
    run_until(loop_, [&] { return pending == 0; });
    observe(api::REMOVE_CONTAINER, &ctr);
    observe(api::STOP_POD_SANDBOX, nullptr);
    observe(api::REMOVE_POD_SANDBOX, nullptr);
    return st;
  }

  sd_event* loop_ = nullptr;
  std::string dir_, socket_path_;
  RecordingHandlers h_;
  std::unique_ptr<Simulator> sim_;
  std::unique_ptr<Plugin> plugin_;
  std::vector<Status> sync_status_;
};

TEST_F(NriIntegration, HandshakeOverUnixSocketV012) {
  make_sim(12);
  start_external();
  ASSERT_TRUE(wait_synced());
  EXPECT_EQ(sim_->plugin().name, "podshim");
  EXPECT_EQ(sim_->plugin().index, "42");
  EXPECT_EQ(sim_->plugin().nri_version, kImplementedNriVersion);
  EXPECT_EQ(sim_->plugin().events, kValidEventsV10);
  EXPECT_EQ(plugin_->runtime().request_timeout_ms, 2000);
  EXPECT_TRUE(plugin_->runtime().dedicated_event_rpcs);
  ASSERT_EQ(sync_status_.size(), 1u);
  EXPECT_TRUE(sync_status_[0].ok()) << sync_status_[0].message;
}

TEST_F(NriIntegration, HandshakeOverSocketpairOldRuntimesGetOldMask) {
  for (int minor : {2, 4, 8}) {
    SCOPED_TRACE(minor);
    h_.forget();
    make_sim(minor, "v1.7.27");
    start_socketpair();
    ASSERT_TRUE(wait_synced());
    EXPECT_EQ(sim_->plugin().events, kValidEventsV02) << "v0.2-v0.9 accept only 0x7FF";
    EXPECT_EQ(sim_->plugin().name, "10-podshim");
    EXPECT_EQ(h_.last_configure.registration_timeout(), minor >= 7 ? 5000 : 0);
    plugin_.reset();
  }
}

TEST_F(NriIntegration, ContainerdWithNri010GetsFullMaskWithoutNriVersion) {
  make_sim(11, "v2.2.1");
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  EXPECT_EQ(sim_->plugin().events, kValidEventsV10);
}

TEST_F(NriIntegration, Paging3000ContainersV08) {
  make_sim(8, "v2.0.0");
  set_cluster(100, 3000);
  start_external();
  ASSERT_TRUE(wait_synced());
  const auto& pages = sim_->sync_pages();
  ASSERT_GE(pages.size(), 2u) << "3000 containers exceed 4 MiB and must be paged";
  for (size_t i = 0; i < pages.size(); ++i) {
    EXPECT_EQ(pages[i].more, i + 1 < pages.size());
    EXPECT_LE(pages[i].bytes, kTtrpcMaxMessage);
  }
  EXPECT_EQ(h_.syncs, 1u) << "pages are concatenated into one synchronize()";
  EXPECT_EQ(h_.synced_pods, 100u);
  ASSERT_EQ(h_.synced_containers, 3000u);
  EXPECT_EQ(h_.synced_ids.front(), make_container(make_pod(0), 0).id());
  EXPECT_EQ(h_.synced_ids.back(), make_container(make_pod(99), 2999).id());
  EXPECT_LE(sim_->max_plugin_frame(), kMaxMuxPayloadOut);
}

// A page handler's after_reply work runs once the page's reply has been
// sent (the runtime goes on meanwhile), before the next request is read,
// and on_ready only after the last page is stored.
TEST_F(NriIntegration, APagedSyncIsStoredAfterEachReplyAndBeforeTheNextRequest) {
  struct Paged : RecordingHandlers {
    Plugin** plugin = nullptr;
    std::vector<uint64_t> frames_at_check, frames_at_store;
    size_t stored = 0, stored_at_ready = 0, pages = 0;
    bool synchronize_by_page() const override { return true; }
    Result<void> on_synchronize_page(const pb::SynchronizeView& page, bool, api::SynchronizeResponse*,
                                     std::function<void()>* after_reply) override {
      ++pages;
      frames_at_check.push_back((*plugin)->transport_stats()->frames_out);
      *after_reply = [this, n = page.container_count] {
        frames_at_store.push_back((*plugin)->transport_stats()->frames_out);
        stored += n;
      };
      return {};
    }
    void on_ready() override {
      stored_at_ready = stored;
      RecordingHandlers::on_ready();
    }
  };
  Paged paged;
  Plugin* raw = nullptr;
  paged.plugin = &raw;
  make_sim(8, "v2.0.0");
  set_cluster(100, 3000);
  ASSERT_TRUE(sim_->listen(socket_path_));
  PluginOptions po;
  po.socket_path = socket_path_;
  po.index = "42";
  plugin_ = std::make_unique<Plugin>(loop_, paged, po);
  raw = plugin_.get();
  ASSERT_TRUE(plugin_->start());
  ASSERT_TRUE(wait_synced());
  ASSERT_GE(paged.pages, 2u);
  ASSERT_EQ(paged.frames_at_store.size(), paged.pages);
  for (size_t i = 0; i < paged.pages; ++i)
    EXPECT_GT(paged.frames_at_store[i], paged.frames_at_check[i]) << "page " << i << " stored before its reply";
  EXPECT_EQ(paged.stored_at_ready, 3000u) << "ready before the last page was stored";
  EXPECT_EQ(paged.ready, 1);
}

TEST_F(NriIntegration, OneHugeSynchronizeFromV04) {
  make_sim(4, "v1.7.13");
  set_cluster(100, 3000);
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  ASSERT_EQ(sim_->sync_pages().size(), 1u);
  EXPECT_GT(sim_->sync_pages()[0].bytes, kTtrpcMaxMessage) << "v0.4 sends it in one message";
  EXPECT_EQ(h_.synced_containers, 3000u);
}

TEST_F(NriIntegration, EveryEventV012DedicatedRpcs) {
  make_sim(12);
  start_external();
  ASSERT_TRUE(wait_synced());
  auto st = drive_all_events();
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_FALSE(sim_->uses_state_change()) << "our plugin implements the v0.12 RPCs";
  const std::vector<std::string> want = {
      "Configure", "RunPodSandbox", "CreateContainer", "ValidateContainerAdjustment",
      "PostCreateContainer", "StartContainer", "PostStartContainer", "UpdateContainer",
      "PostUpdateContainer", "UpdatePodSandbox", "PostUpdatePodSandbox", "StopContainer",
      "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"};
  EXPECT_EQ(h_.calls, want);
}

TEST_F(NriIntegration, EveryEventV08StateChange) {
  make_sim(8, "v2.0.0");
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  auto st = drive_all_events();
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(sim_->uses_state_change());
  // v0.8 has no UpdatePodSandbox / Validate / PostUpdatePodSandbox.
  const std::vector<std::string> want = {
      "Configure", "RunPodSandbox", "CreateContainer", "PostCreateContainer", "StartContainer",
      "PostStartContainer", "UpdateContainer", "PostUpdateContainer", "StopContainer",
      "RemoveContainer", "StopPodSandbox", "RemovePodSandbox"};
  EXPECT_EQ(h_.calls, want);
}

// An event that only informs is answered before its handler runs, and the
// work a handler leaves with after_reply runs after its answer, before the
// next request: at those points the plugin has answered every request it
// has read (one frame out per message in, these messages being small), while
// a handler that answers itself runs before its own answer.
struct AnswerOrder : RecordingHandlers {
  Plugin** plugin = nullptr;
  // (where, every request read was answered then)
  std::vector<std::pair<std::string, bool>> seen;
  bool all_answered() const {
    const TransportStats* t = (*plugin)->transport_stats();
    return t && t->frames_out == t->messages_in;
  }
  template <typename Entry>
  void watch() {
    using Fn = decltype(Entry::fn);
    const std::string name(event_name(Entry::event));
    if constexpr (std::is_same_v<Fn, std::function<PodEventFn>>)
      events.on<Entry::event>() = [this, name](const pb::PodSandboxView&) { seen.emplace_back(name, all_answered()); };
    else if constexpr (std::is_same_v<Fn, std::function<ContainerEventFn>>)
      events.on<Entry::event>() = [this, name](const pb::PodSandboxView&, const pb::ContainerView&) {
        seen.emplace_back(name, all_answered());
      };
  }
  AnswerOrder() {
    events.for_each([&](const auto& entry) { watch<std::decay_t<decltype(entry)>>(); });
    events.on<api::CREATE_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView& ctr,
                                                api::CreateContainerResponse* reply) -> Result<void> {
      seen.emplace_back("CreateContainer", all_answered());
      after_reply([this] { seen.emplace_back("CreateContainer after_reply", all_answered()); });
      (*reply->mutable_adjust()->mutable_annotations())["podshim.test/seen"] = std::string(ctr.name);
      return {};
    };
    events.on<api::STOP_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView&,
                                              api::StopContainerResponse*) -> Result<void> {
      after_reply([this] { seen.emplace_back("StopContainer after_reply", all_answered()); });
      return {};
    };
  }
};

TEST_F(NriIntegration, ObservedEventsAndAfterReplyWorkRunOnceTheAnswerIsSent) {
  for (int minor : {12, 8}) {
    SCOPED_TRACE(minor == 12 ? "v0.12: dedicated RPCs" : "v0.8: StateChange");
    plugin_.reset();
    make_sim(minor, "v2.0.0");
    AnswerOrder h;
    Plugin* raw = nullptr;
    h.plugin = &raw;
    start_socketpair(&h);
    raw = plugin_.get();
    ASSERT_TRUE(wait_synced());
    for (const auto& s : drive_all_events()) EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(sim_->uses_state_change(), minor == 8);
    size_t observed = 0;
    for (const auto& [where, answered] : h.seen) {
      if (where == "CreateContainer") {
        EXPECT_FALSE(answered) << "a handler that answers runs before its answer";
      } else {
        EXPECT_TRUE(answered) << where << " ran before its answer was sent";
        if (where.find("after_reply") == std::string::npos) ++observed;
      }
    }
    EXPECT_GE(observed, 8u);
    EXPECT_EQ(std::count(h.seen.begin(), h.seen.end(), std::pair<std::string, bool>("CreateContainer after_reply", true)), 1);
    EXPECT_EQ(std::count(h.seen.begin(), h.seen.end(), std::pair<std::string, bool>("StopContainer after_reply", true)), 1);
    plugin_.reset();
  }
}

// Each handler of the table alone subscribes to its event alone.
TEST(NriEventTable, EachHandlerIsExactlyItsEventsBit) {
  EXPECT_EQ(EventHandlers().mask(), 0u);
  EventHandlers().for_each([](const auto& entry) {
    using Entry = std::decay_t<decltype(entry)>;
    using R = typename decltype(Entry::fn)::result_type;
    EventHandlers one;
    one.on<Entry::event>() = [](auto&&...) { return R(); };
    EXPECT_EQ(one.mask(), event_bit(Entry::event)) << event_name(Entry::event);
  });
}

// A plugin subscribes to exactly what it handles (less what the runtime's
// version does not know: UpdatePodSandbox before v0.10), and an event it did
// not subscribe to reaches no handler, however the runtime sends it; one
// that handles nothing does not start (pkg/stub refuses it too).
TEST_F(NriIntegration, APluginSubscribesToExactlyTheEventsItHandles) {
  struct Two : Handlers {
    std::vector<std::string> seen;
    Two() {
      events.on<api::CREATE_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView& c,
                                                  api::CreateContainerResponse*) -> Result<void> {
        seen.emplace_back(c.id);
        return {};
      };
      events.on<api::UPDATE_POD_SANDBOX>() = [this](const pb::PodSandboxView& p, const pb::LinuxResourcesView&,
                                                    std::string_view, Respond<api::UpdatePodSandboxResponse> r) {
        seen.emplace_back(p.id);
        r(api::UpdatePodSandboxResponse());
      };
    }
  } two;
  EXPECT_EQ(two.events.mask(), event_bit(api::CREATE_CONTAINER) | event_bit(api::UPDATE_POD_SANDBOX));
  for (int minor : {8, 12}) {
    SCOPED_TRACE(minor);
    two.seen.clear();
    make_sim(minor, "v2.0.0");
    start_socketpair(&two);
    ASSERT_TRUE(wait_synced());
    const auto pod = make_pod(3);
    const auto ctr = make_container(pod, 3);
    std::vector<std::string> want = {ctr.id()};
    uint32_t mask = event_bit(api::CREATE_CONTAINER);
    if (minor >= 10) {
      want.push_back(pod.id());
      mask |= event_bit(api::UPDATE_POD_SANDBOX);
    }
    EXPECT_EQ(sim_->plugin().events, mask);
    for (int e = api::RUN_POD_SANDBOX; e <= api::VALIDATE_CONTAINER_ADJUSTMENT; ++e) {
      SCOPED_TRACE(event_name(static_cast<api::Event>(e)));
      for (const auto& st : send_regardless(loop_, *sim_, static_cast<api::Event>(e), pod, ctr))
        EXPECT_TRUE(st.ok()) << st.message;
    }
    EXPECT_EQ(two.seen, want);
    plugin_.reset();
  }

  Handlers none;
  PluginOptions po;
  po.socket_path = socket_path_;
  Plugin idle(loop_, none, po);
  auto r = idle.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "NRI plugin handles no event");
}

TEST_F(NriIntegration, UpdateErrorGoesBackAsUnknownAndPluginStays) {
  make_sim(12);
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  h_.fail_update_with = "memory shrink below usage is unsafe";
  bool got = false;
  Status status;
  const auto pod = make_pod(1);
  sim_->update_container(pod, make_container(pod, 1), {}, [&](Status s, api::UpdateContainerResponse) {
    status = s;
    got = true;
  });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  EXPECT_EQ(status.code, code::kUnknown);
  EXPECT_EQ(status.message, "memory shrink below usage is unsafe");
  EXPECT_TRUE(sim_->connected());
  EXPECT_EQ(plugin_->state(), PluginState::Ready);
}

TEST_F(NriIntegration, UnknownMethodIsUnimplemented) {
  make_sim(12);
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  CallResult res;
  bool got = false;
  sim_->call("NoSuchMethod", "", [&](CallResult r) { res = r; got = true; });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  EXPECT_EQ(res.status.code, code::kUnimplemented);
  EXPECT_EQ(res.status.message, "method NoSuchMethod");
}

TEST_F(NriIntegration, MessagesLargerThan4096BothWays) {
  make_sim(12);
  start_external();
  ASSERT_TRUE(wait_synced());
  h_.big_adjustment = 200'000;
  auto pod = make_pod(3);
  auto ctr = make_container(pod, 3);
  (*ctr.mutable_annotations())["big"] = std::string(150'000, 'y');
  bool got = false;
  api::CreateContainerResponse reply;
  sim_->create_container(pod, ctr, [&](Status s, api::CreateContainerResponse r) {
    EXPECT_TRUE(s.ok()) << s.message;
    reply = std::move(r);
    got = true;
  });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  EXPECT_EQ(reply.adjust().annotations().at("podshim.test/big").size(), 200'000u);
  // Every frame the plugin wrote, as counted on the receiving side.
  EXPECT_LE(sim_->max_plugin_frame(), kMaxMuxPayloadOut);
  EXPECT_GT(sim_->stats()->frames_in, 200'000u / kMaxMuxPayloadOut);
  EXPECT_LE(plugin_->transport_stats()->max_frame_payload_out, kMaxMuxPayloadOut);
  EXPECT_GT(plugin_->transport_stats()->max_frame_payload_in, kMaxMuxPayloadOut)
      << "the simulator sends Go-style >4096 frames, which the plugin must accept";
}

TEST_F(NriIntegration, PluginInitiatedUpdateContainers) {
  make_sim(12);
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  sim_->on_update_containers = [](const api::UpdateContainersRequest& r) {
    api::UpdateContainersResponse resp;
    *resp.add_failed() = r.update(1);  // the runtime failed the second one
    return resp;
  };
  std::vector<api::ContainerUpdate> ups(2);
  ups[0].set_container_id("a");
  ups[1].set_container_id("b");
  ups[1].mutable_linux()->mutable_resources()->mutable_memory()->mutable_limit()->set_value(1 << 30);
  std::vector<api::ContainerEviction> ev(1);
  ev[0].set_container_id("c");
  ev[0].set_reason("test");
  bool got = false;
  std::vector<api::ContainerUpdate> failed;
  plugin_->update_containers(ups, ev, [&](Result<std::vector<api::ContainerUpdate>> r) {
    ASSERT_TRUE(r) << r.error().message;
    failed = *r;
    got = true;
  });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].container_id(), "b");
  ASSERT_EQ(sim_->update_requests().size(), 1u);
  EXPECT_EQ(sim_->update_requests()[0].evict(0).reason(), "test");
}

TEST_F(NriIntegration, UpdateContainersWhileDisconnectedFails) {
  make_sim(12);
  PluginOptions po;
  po.socket_path = socket_path_;  // nobody listens
  po.reconnect_min_usec = 1'000'000;
  plugin_ = std::make_unique<Plugin>(loop_, h_, po);
  ASSERT_TRUE(plugin_->start());
  bool got = false;
  plugin_->update_containers({}, {}, [&](Result<std::vector<api::ContainerUpdate>> r) {
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error().code, ENOTCONN);
    }
    got = true;
  });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  ASSERT_FALSE(h_.errors.empty());
  EXPECT_NE(h_.errors[0].find(socket_path_), std::string::npos) << h_.errors[0];
}

TEST_F(NriIntegration, RuntimeRestartReconnectsAndResynchronizes) {
  make_sim(12);
  set_cluster(2, 5);
  start_external();
  ASSERT_TRUE(wait_synced());
  EXPECT_EQ(h_.synced_containers, 5u);
  // The runtime goes away...
  sim_.reset();
  ASSERT_TRUE(run_until(loop_, [&] { return !h_.errors.empty(); }));
  EXPECT_TRUE(h_.retries.back());
  EXPECT_NE(plugin_->state(), PluginState::Ready);
  // ...and comes back with more containers.
  make_sim(12);
  set_cluster(3, 9);
  ASSERT_TRUE(sim_->listen(socket_path_));
  ASSERT_TRUE(wait_synced());
  EXPECT_EQ(plugin_->connects(), 2u);
  EXPECT_EQ(h_.syncs, 2u);
  EXPECT_EQ(h_.synced_containers, 9u);
  EXPECT_EQ(h_.ready, 2);
}

TEST_F(NriIntegration, GarbageDropsConnectionAndPluginReconnects) {
  make_sim(12);
  start_external();
  ASSERT_TRUE(wait_synced());
  sim_->write_raw(std::string("GET / HTTP/1.1\r\nHost: nri\r\n\r\n") + std::string(5000, '\xff'));
  ASSERT_TRUE(run_until(loop_, [&] { return !h_.errors.empty(); }));
  EXPECT_NE(h_.errors[0].find("unknown connection id"), std::string::npos) << h_.errors[0];
  EXPECT_TRUE(h_.retries[0]);
  // Still alive: it reconnects to the (still listening) runtime.
  ASSERT_TRUE(run_until(loop_, [&] { return plugin_->connects() == 2 && sim_->synchronized() &&
                                            plugin_->state() == PluginState::Ready; }));
  EXPECT_EQ(sim_->accepted(), 2u);
}

TEST_F(NriIntegration, GarbageInsideValidMuxFramesIsAnsweredNotFatal) {
  make_sim(12);
  start_socketpair();
  ASSERT_TRUE(wait_synced());
  // A valid mux frame on conn 1 carrying a ttrpc request whose body is not a
  // protobuf Request: the server answers InvalidArgument and carries on.
  std::string frame;
  append_ttrpc_frame(frame, 1001, MsgType::Request, 0, "\xff\xff\xff\xff");
  std::string mux;
  append_mux_frames(mux, kPluginServiceConn, frame);
  sim_->write_raw(mux);
  bool got = false;
  const auto pod = make_pod(1);
  sim_->stop_container(pod, make_container(pod, 1), [&](Status s, api::StopContainerResponse) {
    // The stream id 1001 consumed above is higher than the simulator's next
    // id, so the plugin rejects its next (lower) stream id, as ttrpc would.
    EXPECT_EQ(s.code, code::kInvalidArgument);
    got = true;
  });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  EXPECT_TRUE(sim_->connected());
  EXPECT_TRUE(h_.errors.empty());
}

TEST_F(NriIntegration, PreinstalledPluginProcess) {
  make_sim(12);
  set_cluster(1, 2);
  auto pid = sim_->spawn_plugin(PODSHIM_NRI_TEST_PLUGIN, "podshim", "07");
  ASSERT_TRUE(pid) << pid.error().message;
  ASSERT_TRUE(run_until(loop_, [&] { return sim_->synchronized(); }));
  EXPECT_EQ(sim_->plugin().name, "podshim");
  EXPECT_EQ(sim_->plugin().index, "07");
  bool got = false;
  api::CreateContainerResponse reply;
  const auto pod = make_pod(0);
  sim_->create_container(pod, make_container(pod, 0), [&](Status s, api::CreateContainerResponse r) {
    EXPECT_TRUE(s.ok()) << s.message;
    reply = r;
    got = true;
  });
  ASSERT_TRUE(run_until(loop_, [&] { return got; }));
  const auto& ann = reply.adjust().annotations();
  EXPECT_EQ(ann.at("podshim.test/path"), "unset") << "launched plugins get no PATH";
  EXPECT_EQ(ann.at("podshim.test/synced"), "2");
  // The runtime goes away: a pre-installed plugin exits.
  sim_->close_plugin();
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace podshim::nri::test
