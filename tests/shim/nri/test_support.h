// Shared fixtures of the NRI tests: a loop runner with a hang guard and a
// Handlers implementation that records everything it is given.
#pragma once

#include <systemd/sd-event.h>

#include <functional>
#include <string>
#include <vector>

#include "shim/nri/plugin.h"

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

struct RecordingHandlers : Handlers {
  uint32_t want = kValidEventsV10;
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

  Result<uint32_t> configure(const api::ConfigureRequest& req, const RuntimeInfo&) override {
    last_configure = req;
    calls.push_back("Configure");
    return want;
  }
  Result<void> synchronize(const api::SynchronizeRequest& all, api::SynchronizeResponse*) override {
    syncs++;
    synced_pods = static_cast<size_t>(all.pods_size());
    synced_containers = static_cast<size_t>(all.containers_size());
    synced_ids.clear();
    for (const auto& c : all.containers()) synced_ids.push_back(c.id());
    return {};
  }
  Result<void> create_container(const api::PodSandbox&, const api::Container& ctr,
                                api::CreateContainerResponse* reply) override {
    calls.push_back("CreateContainer");
    (*reply->mutable_adjust()->mutable_annotations())["podshim.test/seen"] = ctr.name();
    if (big_adjustment) {
      (*reply->mutable_adjust()->mutable_annotations())["podshim.test/big"] =
          std::string(big_adjustment, 'x');
    }
    return {};
  }
  void update_container(const api::PodSandbox&, const api::Container& ctr, const api::LinuxResources& res,
                        Respond<api::UpdateContainerResponse> respond) override {
    calls.push_back("UpdateContainer");
    if (!fail_update_with.empty()) return respond(fail(EBUSY, "{}", fail_update_with));
    api::UpdateContainerResponse reply;
    auto* u = reply.add_update();
    u->set_container_id(ctr.id());
    *u->mutable_linux()->mutable_resources() = res;
    respond(std::move(reply));
  }
  Result<void> stop_container(const api::PodSandbox&, const api::Container&,
                              api::StopContainerResponse*) override {
    calls.push_back("StopContainer");
    return {};
  }
  void update_pod_sandbox(const api::UpdatePodSandboxRequest&,
                          Respond<api::UpdatePodSandboxResponse> respond) override {
    calls.push_back("UpdatePodSandbox");
    respond(api::UpdatePodSandboxResponse());
  }
  Result<void> validate_container_adjustment(const api::ValidateContainerAdjustmentRequest&,
                                             api::ValidateContainerAdjustmentResponse* r) override {
    calls.push_back("ValidateContainerAdjustment");
    r->set_reject(false);
    return {};
  }
  void run_pod_sandbox(const api::PodSandbox&) override { calls.push_back("RunPodSandbox"); }
  void stop_pod_sandbox(const api::PodSandbox&) override { calls.push_back("StopPodSandbox"); }
  void remove_pod_sandbox(const api::PodSandbox&) override { calls.push_back("RemovePodSandbox"); }
  void post_update_pod_sandbox(const api::PodSandbox&) override { calls.push_back("PostUpdatePodSandbox"); }
  void post_create_container(const api::PodSandbox&, const api::Container&) override { calls.push_back("PostCreateContainer"); }
  void start_container(const api::PodSandbox&, const api::Container&) override { calls.push_back("StartContainer"); }
  void post_start_container(const api::PodSandbox&, const api::Container&) override { calls.push_back("PostStartContainer"); }
  void post_update_container(const api::PodSandbox&, const api::Container&) override { calls.push_back("PostUpdateContainer"); }
  void remove_container(const api::PodSandbox&, const api::Container&) override { calls.push_back("RemoveContainer"); }
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
