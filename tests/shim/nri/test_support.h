// Shared fixtures of the NRI tests: a loop runner with a hang guard and a
// Handlers implementation that records everything it is given.
#pragma once

#include <systemd/sd-event.h>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "shim/nri/plugin.h"
#include "shim/nri/simulator.h"

namespace podshim::nri::test {

// Runs the loop until pred() holds; false if it did not within `seconds`
// (a hang guard, never a timing assertion).
inline bool run_until(sd_event* loop, const std::function<bool()>& pred, double seconds = 60) {
  const uint64_t steps = static_cast<uint64_t>(seconds * 100);
  for (uint64_t i = 0; i < steps; ++i) {
    if (pred()) return true;
    if (sd_event_run(loop, 10'000) < 0) return false;
  }
  return pred();
}

// The request of event e's dedicated RPC (v0.12) about `pod` and `ctr`.
inline std::string request_for(api::Event e, const api::PodSandbox& pod, const api::Container& ctr) {
  auto fill = [&](auto r) {
    *r.mutable_pod() = pod;
    if constexpr (requires { r.mutable_container(); }) *r.mutable_container() = ctr;
    if constexpr (requires { r.mutable_linux_resources(); })
      *r.mutable_linux_resources() = ctr.linux().resources();
    return r.SerializeAsString();
  };
  switch (e) {
    case api::UPDATE_CONTAINER: return fill(api::UpdateContainerRequest());
    case api::UPDATE_POD_SANDBOX: return fill(api::UpdatePodSandboxRequest());
    case api::VALIDATE_CONTAINER_ADJUSTMENT: return fill(api::ValidateContainerAdjustmentRequest());
    default: return fill(api::CreateContainerRequest());  // {pod = 1, container = 2}, as every other
  }
}

// Sends event e as a runtime of any version would, whatever the plugin
// subscribed to: by its dedicated RPC (v0.12) and by StateChange (earlier
// runtimes; the plugin ignores one of an event that has a reply). Returns
// the two answers' statuses once both came.
inline std::vector<Status> send_regardless(sd_event* loop, Simulator& sim, api::Event e,
                                           const api::PodSandbox& pod, const api::Container& ctr) {
  api::StateChangeEvent sc;
  sc.set_event(e);
  *sc.mutable_pod() = pod;
  *sc.mutable_container() = ctr;
  std::vector<Status> st;
  auto done = [&](CallResult r) { st.push_back(r.status); };
  sim.call(std::string(event_name(e)), request_for(e, pod, ctr), done);
  sim.call("StateChange", sc.SerializeAsString(), done);
  run_until(loop, [&] { return st.size() == 2; });
  return st;
}

// What RecordingHandlers saw; forget() starts over.
struct Recorded {
  std::vector<std::string> calls;
  api::ConfigureRequest last_configure;
  size_t synced_pods = 0, synced_containers = 0, syncs = 0;
  std::vector<std::string> synced_ids;
  std::vector<std::string> errors;
  std::vector<bool> retries;
  int ready = 0;
  std::string fail_update_with;      // non-empty: UpdateContainer fails with this
  size_t big_adjustment = 0;         // bytes of annotations added on CreateContainer
  std::function<void()> on_ready_hook;
};

// Handles every event, recording its name.
struct RecordingHandlers : Handlers, Recorded {
  RecordingHandlers() {
    events.for_each([&](const auto& entry) { record<std::decay_t<decltype(entry)>>(); });
    events.on<api::CREATE_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView& ctr,
                                                api::CreateContainerResponse* reply) -> Result<void> {
      calls.push_back("CreateContainer");
      auto& ann = *reply->mutable_adjust()->mutable_annotations();
      ann["podshim.test/seen"] = std::string(ctr.name);
      if (big_adjustment) ann["podshim.test/big"] = std::string(big_adjustment, 'x');
      return {};
    };
    events.on<api::UPDATE_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView& ctr,
                                                const pb::LinuxResourcesView& res,
                                                Respond<api::UpdateContainerResponse> respond) {
      calls.push_back("UpdateContainer");
      if (!fail_update_with.empty()) return respond(fail(EBUSY, "{}", fail_update_with));
      api::UpdateContainerResponse reply;
      auto* u = reply.add_update();
      u->set_container_id(std::string(ctr.id));
      u->mutable_linux()->mutable_resources()->ParseFromArray(res.raw.data(), static_cast<int>(res.raw.size()));
      respond(std::move(reply));
    };
    events.on<api::STOP_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView&,
                                              api::StopContainerResponse*) -> Result<void> {
      calls.push_back("StopContainer");
      return {};
    };
    events.on<api::UPDATE_POD_SANDBOX>() = [this](const pb::PodSandboxView&, const pb::LinuxResourcesView&,
                                                  std::string_view, Respond<api::UpdatePodSandboxResponse> respond) {
      calls.push_back("UpdatePodSandbox");
      respond(api::UpdatePodSandboxResponse());
    };
    events.on<api::VALIDATE_CONTAINER_ADJUSTMENT>() = [this](const api::ValidateContainerAdjustmentRequest&,
                                                             api::ValidateContainerAdjustmentResponse* r) {
      calls.push_back("ValidateContainerAdjustment");
      r->set_reject(false);
      return Result<void>{};
    };
  }
  void forget() { static_cast<Recorded&>(*this) = Recorded{}; }

  // Observed events: only the name is recorded.
  template <typename Entry>
  void record() {
    using Fn = decltype(Entry::fn);
    if constexpr (std::is_same_v<Fn, std::function<PodEventFn>>)
      events.on<Entry::event>() = [this](const pb::PodSandboxView&) { calls.emplace_back(event_name(Entry::event)); };
    else if constexpr (std::is_same_v<Fn, std::function<ContainerEventFn>>)
      events.on<Entry::event>() = [this](const pb::PodSandboxView&, const pb::ContainerView&) {
        calls.emplace_back(event_name(Entry::event));
      };
  }

  Result<void> configure(const api::ConfigureRequest& req, const RuntimeInfo&) override {
    last_configure = req;
    calls.push_back("Configure");
    return {};
  }
  Result<void> synchronize(const api::SynchronizeRequest& all, api::SynchronizeResponse*) override {
    syncs++;
    synced_pods = static_cast<size_t>(all.pods_size());
    synced_containers = static_cast<size_t>(all.containers_size());
    synced_ids.clear();
    for (const auto& c : all.containers()) synced_ids.push_back(c.id());
    return {};
  }
  void on_ready() override {
    ready++;
    if (on_ready_hook) on_ready_hook();
  }
  void on_connection_error(const Error& why, bool will_retry) override {
    errors.push_back(why.message);
    retries.push_back(will_retry);
  }
};

}  // namespace podshim::nri::test
