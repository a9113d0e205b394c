// The NRI plugin stub: connects (or adopts the pre-installed socket),
// registers, answers Configure with an explicit event mask, hands paged
// Synchronize requests over page by page (or collected, for handlers that
// want them at once) and dispatches every lifecycle event to a Handlers
// object, in the shape of containerd/nri pkg/stub but on sd-event.
//
// Handlers see the requests either as views into the received frame
// (shim/nri/pbview.h: no allocation, what the daemon uses) or, by default,
// as libprotobuf messages materialized from those views; mapping them onto
// podshim's model of pods and containers is the daemon's job. Adjustments
// and updates are returned through reply messages, never applied in place.
//
// Everything runs on the caller's sd-event loop, single-threaded; handlers
// are called from it and must never block it. Work that takes time (a
// memory shrink) answers later through a Respond: ttrpc matches replies by
// stream id, so other events are served meanwhile. The runtime's per-call
// deadline is 2 s by default, and missing it gets the plugin dropped
// (pkg/adaptation plugin.go isFatalError on DeadlineExceeded); a reply still
// pending shortly before the runtime's request timeout is therefore
// answered with an error by the stub, and the late answer dropped.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "shim/core/defaults.h"
#include "shim/nri/events.h"
#include "shim/nri/nri_api.pb.h"
#include "shim/nri/pbview.h"
#include "shim/nri/transport.h"

namespace podshim::nri {

inline constexpr char kDefaultSocketPath[] = "/var/run/nri/nri.sock";
inline constexpr char kPluginService[] = "nri.pkg.api.v1alpha1.Plugin";
inline constexpr char kRuntimeService[] = "nri.pkg.api.v1alpha1.Runtime";
// The NRI API level this stub implements, reported in RegisterPlugin.
inline constexpr char kImplementedNriVersion[] = "v0.12.2";

struct PluginOptions {
  std::string name = "podshim";
  std::string index = std::string(core::kDefaultNriPluginIndex);  // two digits; the default is config's
  std::string socket_path = kDefaultSocketPath;
  // Pre-installed mode: the connected socket the runtime gave us (fd 3 via
  // NRI_PLUGIN_SOCKET). -1 = external mode, connect to socket_path.
  int socket_fd = -1;
  // External mode: reconnect after the runtime goes away (restart), with
  // exponential backoff between these bounds.
  bool reconnect = true;
  uint64_t reconnect_min_usec = 100'000;
  uint64_t reconnect_max_usec = 30'000'000;
  // How long before the runtime's request timeout a pending reply is
  // answered with an error, so the runtime never drops the plugin.
  uint64_t reply_margin_usec = 300'000;
  // Deadline of our calls to the runtime (RegisterPlugin, UpdateContainers);
  // the Go stub uses the 5 s registration timeout for the former.
  uint64_t register_timeout_usec = 5'000'000;
  uint64_t call_timeout_usec = 2'000'000;
  size_t max_recv_message = kDefaultMaxRecvMessage;
};

// The plugin name rule of NRI v0.12 (CheckPluginName): non-empty,
// [a-zA-Z0-9_.+-] only; the index rule (CheckPluginIndex): two digits.
Result<void> check_plugin_name(std::string_view name);
Result<void> check_plugin_index(std::string_view index);

// Applies the pre-installed environment (NRI_PLUGIN_SOCKET, NRI_PLUGIN_NAME,
// NRI_PLUGIN_IDX) to `opts`, using `getenv`. Returns false when
// NRI_PLUGIN_SOCKET is unset (external mode). The fd must be an open socket.
Result<bool> apply_preinstalled_environment(PluginOptions* opts,
                                            const std::function<const char*(const char*)>& getenv);

// The answer to an event that may complete later: call exactly once, from
// the loop (inline is fine). An error goes back as status Unknown.
template <typename T>
using Respond = std::function<void(Result<T> reply)>;

// One virtual per event, each a no-op by default (pkg/stub's interfaces).
class Handlers {
 public:
  virtual ~Handlers() = default;

  // The event mask to subscribe to; the stub keeps only the bits the
  // runtime's version allows and never sends 0. `req.config()` carries the
  // conf.d drop-in of a pre-installed plugin. An error fails Configure.
  virtual Result<uint32_t> configure(const api::ConfigureRequest& req, const RuntimeInfo& rt);
  // All pages of a (possibly paged) Synchronize, concatenated.
  virtual Result<void> synchronize(const api::SynchronizeRequest& all,
                                   api::SynchronizeResponse* reply);

  // Events with a reply. An error goes back to the runtime as status
  // Unknown with the error's message: the runtime reports it (e.g. the CRI
  // UpdateContainerResources call fails) and keeps the plugin.
  virtual Result<void> create_container(const api::PodSandbox& pod, const api::Container& ctr,
                                        api::CreateContainerResponse* reply);
  // UpdateContainer and UpdatePodSandbox answer through `respond`, now or
  // later (references to the request are valid only during the call).
  virtual void update_container(const api::PodSandbox& pod, const api::Container& ctr,
                                const api::LinuxResources& resources,
                                Respond<api::UpdateContainerResponse> respond);
  virtual Result<void> stop_container(const api::PodSandbox& pod, const api::Container& ctr,
                                      api::StopContainerResponse* reply);
  virtual void update_pod_sandbox(const api::UpdatePodSandboxRequest& req,
                                  Respond<api::UpdatePodSandboxResponse> respond);
  // Subscribe to VALIDATE_CONTAINER_ADJUSTMENT to be asked; set
  // reply->reject/reason to refuse.
  virtual Result<void> validate_container_adjustment(
      const api::ValidateContainerAdjustmentRequest& req,
      api::ValidateContainerAdjustmentResponse* reply);

  // Observed-only events: always answered with success, so they return
  // nothing (an error here would fail pod or container start on old runtimes).
  virtual void run_pod_sandbox(const api::PodSandbox& pod);
  virtual void stop_pod_sandbox(const api::PodSandbox& pod);
  virtual void remove_pod_sandbox(const api::PodSandbox& pod);
  virtual void post_update_pod_sandbox(const api::PodSandbox& pod);
  virtual void post_create_container(const api::PodSandbox& pod, const api::Container& ctr);
  virtual void start_container(const api::PodSandbox& pod, const api::Container& ctr);
  virtual void post_start_container(const api::PodSandbox& pod, const api::Container& ctr);
  virtual void post_update_container(const api::PodSandbox& pod, const api::Container& ctr);
  virtual void remove_container(const api::PodSandbox& pod, const api::Container& ctr);

  // ---- The zero-copy interface the stub calls. Views are valid only
  // during the call. Each default parses the view's bytes into the api::
  // messages and calls the virtual above, so a handler overrides one or
  // the other.
  virtual Result<void> on_create_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                           api::CreateContainerResponse* reply);
  virtual void on_update_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                   const pb::LinuxResourcesView& resources,
                                   Respond<api::UpdateContainerResponse> respond);
  virtual Result<void> on_stop_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                         api::StopContainerResponse* reply);
  virtual void on_update_pod_sandbox(const pb::PodSandboxView& pod, const pb::LinuxResourcesView& resources,
                                     std::string_view raw_request,
                                     Respond<api::UpdatePodSandboxResponse> respond);
  // Observed-only events (RunPodSandbox … RemoveContainer, dedicated RPC or
  // StateChange): `ctr` is null for pod events.
  virtual void on_observed(api::Event e, const pb::PodSandboxView& pod, const pb::ContainerView* ctr);
  // Synchronize page by page, when synchronize_by_page() says so: each page
  // as it arrives (`first` on the first of a sync, page.more false on the
  // last, when `reply` may carry updates; it is ignored on the others).
  // Otherwise the stub collects the pages and calls synchronize() once.
  // The handler checks the page and fills the reply; the work it leaves in
  // `after_reply` runs once the reply is on the socket and before the next
  // request is read, with the page's views still valid. So the runtime
  // goes on (encodes its next page, or finishes its sync) while the page is
  // stored, and every later request still finds it stored. An error fails
  // the page and `after_reply` is not run.
  virtual bool synchronize_by_page() const { return false; }
  virtual Result<void> on_synchronize_page(const pb::SynchronizeView& page, bool first,
                                           api::SynchronizeResponse* reply,
                                           std::function<void()>* after_reply);

  // Connection life. on_ready: configured and synchronized (the runtime's
  // Shutdown RPC, which current runtimes never send, is answered and
  // otherwise ignored: they just close). on_connection_error: a connection attempt failed or a connection ended,
  // with the reason; will_retry says whether the stub reconnects by itself.
  virtual void on_ready();
  virtual void on_connection_error(const Error& why, bool will_retry);
};

enum class PluginState { Idle, Registering, Configuring, Synchronizing, Ready, Stopped };

class Plugin {
 public:
  using UpdateDone = std::function<void(Result<std::vector<api::ContainerUpdate>> failed)>;

  Plugin(sd_event* loop, Handlers& handlers, PluginOptions opts);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Validates the options, then connects (external) or adopts socket_fd.
  // Connection failures in external mode are retried, not returned.
  Result<void> start();
  // Disconnects and stops reconnecting.
  void stop();

  // Plugin-initiated update/eviction (Runtime.UpdateContainers on conn 2).
  // Asynchronous: `done` runs from the loop with the containers the runtime
  // failed to update, or an error (not connected, rpc error, timeout).
  void update_containers(std::vector<api::ContainerUpdate> update,
                         std::vector<api::ContainerEviction> evict, UpdateDone done);

  PluginState state() const { return state_; }
  const RuntimeInfo& runtime() const { return runtime_; }
  uint64_t connects() const { return connects_; }
  // Stats of the current connection (nullptr when disconnected).
  const TransportStats* transport_stats() const;

 private:
  void connect_now();
  void schedule_reconnect();
  static int on_reconnect_timer(sd_event_source* s, uint64_t usec, void* userdata);
  Result<void> attach(UniqueFd fd);
  void on_closed(const Error& why);
  void dispatch(const pb::RequestView& req, Transport::Responder respond);
  CallResult dispatch_now(const pb::RequestView& req);
  // Runs start(reply) for a request whose handler may answer later; a reply
  // still pending when start returns gets a timer, so that near the
  // runtime's request timeout it is answered with an error instead (once).
  // An answer given within start (every update that needs no reclaim) costs
  // no timer.
  void with_deadline(Transport::Responder respond, std::string_view method,
                     const std::function<void(Transport::Responder)>& start);
  CallResult do_configure(std::string_view payload);
  CallResult do_synchronize(std::string_view payload, std::function<void()>* after_reply);
  CallResult do_state_change(std::string_view payload);

  sd_event* loop_;
  Handlers& handlers_;
  PluginOptions opts_;
  std::unique_ptr<Transport> transport_;
  sd_event_source* reconnect_timer_ = nullptr;
  PluginState state_ = PluginState::Idle;
  RuntimeInfo runtime_;
  uint32_t events_ = 0;
  unsigned attempts_ = 0;
  uint64_t connects_ = 0;
  api::SynchronizeRequest sync_pages_;  // handlers that take the pages at once
  bool sync_first_page_ = true;         // the next Synchronize page starts a sync
  bool sync_done_ = false;              // the last page answered: on_ready once it is stored
};

}  // namespace podshim::nri
