// podshimd's NRI event handlers: keeps the model in step with the runtime,
// injects CDI devices at CreateContainer, and translates UpdateContainer and
// UpdatePodSandbox into resize intents for the one resize service
// (shim/core/resize.h), answering the runtime when the service is done. The
// runtime writes the values; podshim only makes room for a memory shrink
// before it does (the runtime-side check kubernetes#135670 asks for). A
// refusal goes back to the runtime as an error, which it surfaces to the
// kubelet; the kubelet then reports PodResizeInProgress/Error and retries.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cdi/registry.h"
#include "cgroup/engine.h"
#include "shim/adapter/nri_map.h"
#include "shim/core/engine_actuator.h"
#include "shim/core/metrics.h"
#include "shim/core/readback.h"
#include "shim/core/resize.h"
#include "shim/core/state.h"
#include "shim/nri/plugin.h"

namespace podshim::adapter {

struct AdapterOptions {
  AdjustmentOptions adjustment;
  // When set (weight_formula: auto), the formula comes from here, and the
  // handlers feed it the (shares, cpu.weight) pairs they see per runtime.
  std::shared_ptr<cgroup::WeightFormulaTracker> formulas;
  // The one read-back of the daemon (actual values, drift, oom_kill): the
  // adapter only tells it what changed, touch() after PostStart and
  // PostUpdateContainer, touch_all() after Synchronize; it reads on the
  // daemon's loop, outside the runtime's 2 s Synchronize budget. Null (the
  // adapter's own tests): nothing is read back.
  core::ReadBack* readback = nullptr;
  // A pre-installed plugin's configuration arrives in Configure's `config`
  // (the conf.d drop-in); an error here fails Configure.
  std::function<Result<void>(const std::string& config)> on_config;
  // The connection ended; will_retry is false for a pre-installed plugin,
  // whose runtime starts a new process instead of reconnecting.
  std::function<void(bool will_retry)> on_disconnect;
};

// Containers whose cpu.weight a Synchronize reads at most to learn the
// runtime's formula (weight_formula: auto); later starts and updates add more.
inline constexpr size_t kMaxFormulaProbes = 32;

class NriActuator;

class NriAdapter : public nri::Handlers {
 public:
  // Borrows everything; engine and registry may be null (no cgroup access /
  // no CDI), metrics may be null.
  NriAdapter(core::Store& store, cgroup::Engine* engine, cdi::Registry* registry,
             core::Metrics* metrics, AdapterOptions opts);
  // Where UpdateContainer / UpdatePodSandbox go (null: answered at once,
  // nothing applied), and the actuator whose memory.high clamps the
  // runtime's Post* events release (may be null).
  void set_resize(core::ResizeManager* resize, NriActuator* actuator) {
    resize_ = resize;
    actuator_ = actuator;
  }

  Result<void> configure(const api::ConfigureRequest& req, const nri::RuntimeInfo& rt) override;
  // Synchronize page by page: each page goes into the model as it arrives;
  // what the runtime no longer has is dropped after the last one.
  bool synchronize_by_page() const override { return true; }
  Result<void> on_synchronize_page(const pb::SynchronizeView& page, bool first,
                                   api::SynchronizeResponse* reply,
                                   std::function<void()>* after_reply) override;

  void on_ready() override;
  void on_connection_error(const Error& why, bool will_retry) override;

  const nri::RuntimeInfo& runtime() const { return runtime_; }

 private:
  // Fills `events` (nri::Handlers): what podshimd handles is what it
  // subscribes to.
  void set_handlers();
  // Sets the handler of E to `fn`, counting the event first.
  template <api::Event E, typename F>
  void handle(F fn) {
    events.on<E>() = [this, fn = std::move(fn)](auto&&... a) {
      count(E);
      return fn(std::forward<decltype(a)>(a)...);
    };
  }
  void count(api::Event e);
  // The event handlers that are more than a line (views into the request).
  Result<void> create_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                api::CreateContainerResponse* reply);
  void update_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                        const pb::LinuxResourcesView& resources,
                        nri::Respond<api::UpdateContainerResponse> respond);
  void update_pod_sandbox(const pb::PodSandboxView& pod, const pb::LinuxResourcesView& resources,
                          nri::Respond<api::UpdatePodSandboxResponse> respond);
  void remove_pod(std::string_view uid);
  // After the runtime started or updated a container: has the read-back
  // read its kernel values into its actual, right after this event is
  // answered (ReadBack::touch_soon).
  void refresh_actual(const pb::ContainerView& ctr);
  // Upserts the container, keeping what podshim knows that NRI does not
  // (conditions, generation, devices, labels); `take_resources` false keeps
  // the known desired/allocated (a new container always takes NRI's).
  // `pod_later`: an empty pod_uid means the pod comes on a later
  // Synchronize page; the container is stored without one until then.
  void remember(std::string_view pod_uid, const pb::ContainerView& ctr, bool take_resources,
                bool pod_later = false);
  void remember_pod(const pb::PodSandboxView& pod);
  // Feeds the formula tracker the weight the runtime wrote for a container
  // asked for `shares`.
  void learn_formula(std::string_view id, uint64_t shares, const cgroup::Actual& a);
  // One container of a Synchronize page, its pod known by `pod_uid`.
  void sync_container(std::string_view pod_uid, const pb::ContainerView& c, bool pod_later = false);
  // Decodes every item of the page, the first bad one failing it (named).
  Result<void> check_synchronize_page(const pb::SynchronizeView& page) const;
  // Stores a checked page; after the last, drops what the runtime no longer has.
  void store_synchronize_page(const pb::SynchronizeView& page, bool first);
  void finish_synchronize();

  // The Synchronize in progress (pages arrive one call at a time).
  struct SyncState {
    std::set<std::string, std::less<>> pods, ctrs;
    std::map<std::string, std::string, std::less<>> uid_by_sandbox;
    // Containers whose pod had not arrived yet: (id, sandbox id), stored
    // without a pod uid and given it after the last page. The runtime's
    // pages split the pod and container lists independently
    // (pkg/adaptation's paged synchronize), so a container can come pages
    // before its pod.
    std::vector<std::pair<std::string, std::string>> orphans;
    size_t probes = 0;
    size_t pod_count = 0, container_count = 0;
  };
  SyncState sync_;
  // The sync's first bad item, found on a page answered before it was
  // checked; reported in the last page's answer. And the page count.
  std::optional<Error> sync_error_;
  size_t sync_page_ = 0;
  core::Store& store_;
  cgroup::Engine* engine_;
  cdi::Registry* registry_;
  core::Metrics* metrics_;
  // podshim_nri_events_total's series by event, found once (count runs for
  // every event).
  std::map<api::Event, core::Family::Cell> event_cells_;
  AdapterOptions opts_;
  nri::RuntimeInfo runtime_;
  core::ResizeManager* resize_ = nullptr;
  NriActuator* actuator_ = nullptr;
};

// The NRI-mode actuator: one writer per value, the runtime. The engine runs
// with WriteMode::ReclaimOnly: it only makes room for a memory shrink
// (memory.high clamp + reclaim) and keeps the clamp until the runtime's
// write has landed.
//  - Runtime-sent updates (UpdateContainer / UpdatePodSandbox): reclaim,
//    then the service answers the runtime, which writes; the clamp is
//    released at PostUpdateContainer / PostUpdatePodSandbox, or after
//    `release_after` if that never comes.
//  - API resizes: reclaim, then Runtime.UpdateContainers; done only when
//    the runtime confirmed and the kernel read-back agrees (else an error
//    naming the difference). NRI has no call that updates a pod sandbox, so
//    the pod cgroup of an API pod resize is written by the engine itself
//    (WriteMode::All), after the containers.
class NriActuator : public core::Actuator {
 public:
  NriActuator(cgroup::Engine& engine, nri::Plugin* plugin, core::Scheduler schedule,
              std::chrono::milliseconds release_after = std::chrono::milliseconds(5000));
  ~NriActuator() override;
  void apply(const core::Actuation& a, Done done) override;
  Result<cgroup::Actual> read_actual(const std::string& cgroup_path) override;
  void set_plugin(nri::Plugin* p) { plugin_ = p; }
  // The runtime's write to this cgroup has landed: restore its clamp.
  void landed(const std::string& cgroup_path);
  size_t held() const { return held_.size(); }

 private:
  void apply_from_runtime(const core::Actuation& a, Done done);
  void apply_from_api(const core::Actuation& a, Done done);
  void hold(const std::vector<std::string>& paths);
  void release(const std::vector<std::string>& paths);

  cgroup::Engine& engine_;
  nri::Plugin* plugin_;
  core::Scheduler schedule_;
  std::chrono::milliseconds release_after_;
  std::map<std::string, uint64_t> held_;  // cgroup path → hold token
  uint64_t next_token_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace podshim::adapter
