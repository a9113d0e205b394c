// A runtime-side NRI peer of our own, speaking the wire format from the
// runtime's end the way containerd/nri pkg/adaptation does: it serves
// Runtime.RegisterPlugin/UpdateContainers on conn 2, configures the plugin,
// synchronizes pods and containers (paged on ResourceExhausted, v0.7+),
// and drives every event, as StateChange or as v0.12's dedicated RPCs
// depending on the emulated NRI version. For tests, benchmarks and
// podshim-nri-sim; it is not meant to be a runtime.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "shim/nri/events.h"
#include "shim/nri/nri_api.pb.h"
#include "shim/nri/transport.h"

namespace podshim::nri {

struct SimOptions {
  // Emulated runtime-side NRI minor version (0.x): 2..12. Decides Configure
  // fields, ValidEvents, paging, the event transport and the framing.
  int nri_minor = 12;
  std::string runtime_name = "containerd";
  // Default: a containerd release whose go.mod pins that NRI version,
  // so a plugin's version detection sees a consistent runtime.
  std::string runtime_version;
  std::string nri_version;        // sent from v0.12 on; default "v0.<minor>.0"
  std::string config;             // ConfigureRequest.config
  int64_t registration_timeout_ms = 5000;
  int64_t request_timeout_ms = 2000;
  uint64_t call_timeout_usec = 2'000'000;
  // Frame like the Go mux of that version unless overridden.
  bool override_framing = false;
  Framing framing = Framing::Chunked;
  // Check plugin names/indices as the runtime does for external plugins.
  bool check_plugin_identity = true;
};

struct SimPluginInfo {
  std::string name;
  std::string index;
  std::string nri_version;
  uint32_t events = 0;
};

struct SyncPage {
  size_t bytes = 0;  // marshalled SynchronizeRequest
  int pods = 0;
  int containers = 0;
  bool more = false;
};

class Simulator {
 public:
  template <typename T>
  using Reply = std::function<void(Status status, T reply)>;
  using Done = std::function<void(Status status)>;

  Simulator(sd_event* loop, SimOptions opts);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Listens on a unix socket (stale socket removed); each accepted
  // connection replaces the current plugin.
  Result<void> listen(const std::string& path);
  void stop_listening();
  // A socketpair: the simulator keeps one end, the other is returned for the
  // plugin (pre-installed mode hands it over as fd 3).
  Result<UniqueFd> socketpair();
  // Forks and execs a pre-installed plugin the way pkg/adaptation does:
  // socket on fd 3, environment only NRI_PLUGIN_NAME/IDX/SOCKET, stdio on
  // /dev/null. Returns the pid.
  Result<pid_t> spawn_plugin(const std::string& exe, const std::string& name,
                             const std::string& index);
  // Drops the plugin connection (a runtime restart, seen from the plugin).
  void close_plugin();
  // Writes raw bytes to the plugin, bypassing all framing (garbage tests).
  void write_raw(std::string_view bytes) { if (transport_) transport_->write_raw(bytes); }

  // Pods and containers sent in the next Synchronize.
  void set_state(std::vector<api::PodSandbox> pods, std::vector<api::Container> containers);

  // Callbacks. on_synchronized fires after the handshake completes or fails;
  // on_plugin_closed when the connection ends.
  std::function<void(Status)> on_synchronized;
  std::function<void(const Error&)> on_plugin_closed;
  // Serves Runtime.UpdateContainers; default: all succeed.
  std::function<api::UpdateContainersResponse(const api::UpdateContainersRequest&)> on_update_containers;

  // Events. Each runs only if the plugin subscribed; otherwise the callback
  // gets OK and an empty reply, as the runtime would skip the plugin.
  void create_container(const api::PodSandbox& pod, const api::Container& ctr,
                        Reply<api::CreateContainerResponse> cb);
  void update_container(const api::PodSandbox& pod, const api::Container& ctr,
                        const api::LinuxResources& res, Reply<api::UpdateContainerResponse> cb);
  void stop_container(const api::PodSandbox& pod, const api::Container& ctr,
                      Reply<api::StopContainerResponse> cb);
  void update_pod_sandbox(const api::UpdatePodSandboxRequest& req, Done cb);
  void validate_container_adjustment(const api::ValidateContainerAdjustmentRequest& req,
                                     Reply<api::ValidateContainerAdjustmentResponse> cb);
  // Observed-only events (RunPodSandbox, Post*, Start, Remove*, ...).
  void observe(api::Event event, const api::PodSandbox& pod, const api::Container* ctr, Done cb);
  // Any Plugin method with a raw payload.
  void call(const std::string& method, std::string payload, std::function<void(CallResult)> cb);

  bool connected() const { return transport_ != nullptr; }
  bool synchronized() const { return synchronized_; }
  const SimPluginInfo& plugin() const { return plugin_; }
  uint32_t valid_events() const { return opts_.nri_minor >= 10 ? kValidEventsV10 : kValidEventsV02; }
  bool uses_state_change() const { return state_change_fallback_ || opts_.nri_minor < 12; }
  const std::vector<SyncPage>& sync_pages() const { return pages_; }
  const std::vector<api::UpdateContainersRequest>& update_requests() const { return update_requests_; }
  const TransportStats* stats() const { return transport_ ? &transport_->stats() : nullptr; }
  // Largest mux payload the plugin ever wrote to us, across connections.
  uint64_t max_plugin_frame() const;
  void set_frame_tap(Transport::FrameTap tap) { tap_ = std::move(tap); }
  uint64_t accepted() const { return accepted_; }

 private:
  static int on_accept(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  Result<void> attach(UniqueFd fd);
  CallResult serve_runtime(const pb::RequestView& req);
  void configure();
  void synchronize();
  void send_pages(size_t pod_off, size_t ctr_off);
  void fail_handshake(Status st);
  TransportOptions transport_options() const;
  bool subscribed(api::Event e) const { return (plugin_.events & event_bit(e)) != 0; }

  sd_event* loop_;
  SimOptions opts_;
  UniqueFd listen_fd_;
  sd_event_source* listen_src_ = nullptr;
  std::string listen_path_;
  std::unique_ptr<Transport> transport_;
  SimPluginInfo plugin_;
  bool synchronized_ = false;
  bool state_change_fallback_ = false;
  std::vector<api::PodSandbox> pods_;
  std::vector<api::Container> containers_;
  std::vector<SyncPage> pages_;
  std::vector<api::ContainerUpdate> sync_updates_;
  std::vector<api::UpdateContainersRequest> update_requests_;
  Transport::FrameTap tap_;
  uint64_t max_plugin_frame_prev_ = 0;
  uint64_t accepted_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Test data shaped like the captures: a pod with cgroup parent, overhead,
// resources, namespaces; a container with resources, mounts, devices.
api::PodSandbox make_pod(int n);
api::Container make_container(const api::PodSandbox& pod, int n);

}  // namespace podshim::nri
