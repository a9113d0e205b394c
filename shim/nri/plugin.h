// The NRI plugin stub: connects (or adopts the pre-installed socket),
// registers, answers Configure with the mask of the events its Handlers
// handle, hands paged Synchronize requests over page by page (or collected,
// for handlers that want them at once) and dispatches every lifecycle event
// to the handler set for it, in the shape of containerd/nri pkg/stub but on
// sd-event.
//
// Handlers see the requests as views into the received frame
// (shim/nri/pbview.h: no allocation, no libprotobuf objects); mapping them
// onto podshim's model of pods and containers is the daemon's job.
// Adjustments and updates are returned through reply messages, never
// applied in place.
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
#include <string_view>
#include <tuple>
#include <utility>
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

// ---- Event handlers: one table, one entry per NRI event ----------------------
//
// containerd/nri's Go stub (pkg/stub/stub.go, setupHandlers) subscribes a
// plugin to exactly the events whose handler interface it implements. C++
// cannot ask whether a virtual is overridden, so here a handler is a table
// entry that is set: the table below declares every event once, with its
// handler's signature, and the mask Configure sends is the set of entries a
// plugin filled (EventHandlers::mask). An entry left empty is neither
// subscribed to nor called; the stub calls an entry only for events the
// runtime accepted in the mask. Views are valid only during the call.

// The handler of NRI event E: empty when the plugin does not handle E.
template <api::Event E, typename Fn>
struct On {
  static constexpr api::Event event = E;
  std::function<Fn> fn;
};

// Observed-only events (RunPodSandbox … RemoveContainer, by dedicated RPC or
// StateChange): always answered with success, so they return nothing (an
// error on StateChange fails RunPodSandbox/StartContainer on runtimes up to
// v0.11, verified). The handlers of the other events have a reply.
using PodEventFn = void(const pb::PodSandboxView& pod);
using ContainerEventFn = void(const pb::PodSandboxView& pod, const pb::ContainerView& ctr);

// Events with a reply. An error goes back to the runtime as status Unknown
// with the error's message: the runtime reports it (e.g. the CRI
// UpdateContainerResources call fails) and keeps the plugin. UpdateContainer
// and UpdatePodSandbox answer through `respond`, now or later; their pod and
// container views are `partial` (pbview.h decode_update_container).
using CreateContainerFn = Result<void>(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                       api::CreateContainerResponse* reply);
using UpdateContainerFn = void(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                               const pb::LinuxResourcesView& resources,
                               Respond<api::UpdateContainerResponse> respond);
using StopContainerFn = Result<void>(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                     api::StopContainerResponse* reply);
using UpdatePodSandboxFn = void(const pb::PodSandboxView& pod, const pb::LinuxResourcesView& resources,
                                std::string_view raw_request, Respond<api::UpdatePodSandboxResponse> respond);
// Set reply->reject/reason to refuse.
using ValidateAdjustmentFn = Result<void>(const api::ValidateContainerAdjustmentRequest& req,
                                          api::ValidateContainerAdjustmentResponse* reply);

using EventTable = std::tuple<
    On<api::RUN_POD_SANDBOX, PodEventFn>,
    On<api::STOP_POD_SANDBOX, PodEventFn>,
    On<api::REMOVE_POD_SANDBOX, PodEventFn>,
    On<api::CREATE_CONTAINER, CreateContainerFn>,
    On<api::POST_CREATE_CONTAINER, ContainerEventFn>,
    On<api::START_CONTAINER, ContainerEventFn>,
    On<api::POST_START_CONTAINER, ContainerEventFn>,
    On<api::UPDATE_CONTAINER, UpdateContainerFn>,
    On<api::POST_UPDATE_CONTAINER, ContainerEventFn>,
    On<api::STOP_CONTAINER, StopContainerFn>,
    On<api::REMOVE_CONTAINER, ContainerEventFn>,
    On<api::UPDATE_POD_SANDBOX, UpdatePodSandboxFn>,
    On<api::POST_UPDATE_POD_SANDBOX, PodEventFn>,
    On<api::VALIDATE_CONTAINER_ADJUSTMENT, ValidateAdjustmentFn>>;

namespace detail {
template <size_t... I>
constexpr uint32_t table_bits(std::index_sequence<I...>) {
  return (event_bit(std::tuple_element_t<I, EventTable>::event) | ... | 0u);
}
inline constexpr size_t kTableSize = std::tuple_size_v<EventTable>;
template <api::Event E, size_t I = 0>
constexpr size_t table_index() {
  if constexpr (I == kTableSize) {
    static_assert(I != kTableSize, "event not in the NRI event table");
    return I;
  } else if constexpr (std::tuple_element_t<I, EventTable>::event == E) {
    return I;
  } else {
    return table_index<E, I + 1>();
  }
}
}  // namespace detail

// Every event a v0.10+ runtime may send, each in the table exactly once.
static_assert(detail::kTableSize == 14 &&
              detail::table_bits(std::make_index_sequence<detail::kTableSize>()) == kValidEventsV10);

class EventHandlers {
 public:
  // The handler of E, to set or to call (a compile error for no such event).
  template <api::Event E>
  auto& on() { return std::get<detail::table_index<E>()>(table_).fn; }
  template <api::Event E>
  const auto& on() const { return std::get<detail::table_index<E>()>(table_).fn; }
  // The events whose handler is set: what the plugin subscribes to.
  uint32_t mask() const {
    return std::apply([](const auto&... e) { return ((e.fn ? event_bit(e.event) : 0u) | ... | 0u); }, table_);
  }
  // f(entry) for every entry (each an On<E, Fn>).
  template <typename F>
  void for_each(F&& f) const {
    std::apply([&](const auto&... e) { (f(e), ...); }, table_);
  }

 private:
  EventTable table_;
};

// The plugin: its event handlers and its connection life. Not copyable:
// handlers capture the object they belong to.
class Handlers {
 public:
  Handlers() = default;
  Handlers(const Handlers&) = delete;
  Handlers& operator=(const Handlers&) = delete;
  virtual ~Handlers() = default;

  // Filled by the plugin before Plugin::start (which refuses a plugin that
  // handles no event); Configure subscribes to exactly the events set here
  // that the runtime's version allows.
  EventHandlers events;

  // `req.config()` carries the conf.d drop-in of a pre-installed plugin. An
  // error fails Configure.
  virtual Result<void> configure(const api::ConfigureRequest& req, const RuntimeInfo& rt);
  // All pages of a (possibly paged) Synchronize, concatenated.
  virtual Result<void> synchronize(const api::SynchronizeRequest& all,
                                   api::SynchronizeResponse* reply);
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

  // Work a handler leaves for after its answer: it runs once the reply is on
  // the socket (for an answer given before the handler returns) and before
  // the next request is read, with the request's views still valid. So the
  // runtime goes on while the plugin does its bookkeeping, and every later
  // request still finds it done. Outside a call it runs at once.
  void after_reply(std::function<void()> fn);

 private:
  friend class Plugin;
  bool in_call_ = false;
  std::vector<std::function<void()>> after_reply_;
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
  void dispatch_call(const pb::RequestView& req, Transport::Responder respond);
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
  // The handler of E when this connection subscribed to E (Configure), else
  // null: an event never subscribed to is never handled.
  template <api::Event E>
  const auto* subscribed() const {
    const auto& fn = handlers_.events.template on<E>();
    return (events_ & event_bit(E)) && fn ? &fn : nullptr;
  }
  // CreateContainer and StopContainer: {pod, container} in, a Response out.
  template <api::Event E, typename Response>
  CallResult pod_container_call(const pb::RequestView& req, const char* what);
  // An observed-only event, by dedicated RPC or StateChange (the number as
  // sent: any other finds no handler).
  void observe(int32_t event, const pb::PodSandboxView& pod, const pb::ContainerView& ctr);
  // The observed event whose handler runs after the answer: kept here, not
  // in the deferred work itself (a few hundred bytes of views, which would
  // make every observed event allocate). One at a time: the work runs
  // before the next request is read.
  pb::StateChangeView observed_;

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
