#include "shim/nri/plugin.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "base/str.h"
#include "base/guard.h"

namespace podshim::nri {

// ---- Handlers defaults ------------------------------------------------------------

Result<void> Handlers::configure(const api::ConfigureRequest&, const RuntimeInfo&) { return {}; }
Result<void> Handlers::synchronize(const api::SynchronizeRequest&, api::SynchronizeResponse*) {
  return {};
}
Result<void> Handlers::on_synchronize_page(const pb::SynchronizeView&, bool, api::SynchronizeResponse*,
                                           std::function<void()>*) {
  return {};
}
void Handlers::on_ready() {}
void Handlers::on_connection_error(const Error&, bool) {}

void Handlers::after_reply(std::function<void()> fn) {
  if (!fn) return;
  if (in_call_)
    after_reply_.push_back(std::move(fn));
  else
    fn();
}

// ---- options ------------------------------------------------------------------------

Result<void> check_plugin_name(std::string_view name) {
  if (name.empty()) return fail(EINVAL, "empty NRI plugin name");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '+' || c == '-';
    if (!ok) return fail(EINVAL, "invalid NRI plugin name '{}': only [a-zA-Z0-9_.+-] allowed", name);
  }
  return {};
}

Result<void> check_plugin_index(std::string_view index) {
  if (index.size() != 2 || !std::isdigit(static_cast<unsigned char>(index[0])) ||
      !std::isdigit(static_cast<unsigned char>(index[1]))) {
    return fail(EINVAL, "invalid NRI plugin index '{}': must be two digits", index);
  }
  return {};
}

Result<bool> apply_preinstalled_environment(PluginOptions* opts,
                                            const std::function<const char*(const char*)>& getenv) {
  const char* sock = getenv("NRI_PLUGIN_SOCKET");
  if (!sock) return false;
  auto fd = str::parse_u64(sock);
  if (!fd || *fd > 1u << 20) return fail(EINVAL, "invalid NRI_PLUGIN_SOCKET '{}'", sock);
  struct stat st;
  if (fstat(static_cast<int>(*fd), &st) < 0) return fail_errno("NRI_PLUGIN_SOCKET fd {}", *fd);
  if (!S_ISSOCK(st.st_mode)) return fail(ENOTSOCK, "NRI_PLUGIN_SOCKET fd {} is not a socket", *fd);
  opts->socket_fd = static_cast<int>(*fd);
  // Launched plugins are named by their file (NN-name); the runtime puts
  // both halves in the environment and does not check them again.
  if (const char* n = getenv("NRI_PLUGIN_NAME"); n && *n) opts->name = n;
  if (const char* i = getenv("NRI_PLUGIN_IDX"); i && *i) {
    PODSHIM_TRY(check_plugin_index(i));
    opts->index = i;
  }
  opts->reconnect = false;
  return true;
}

// ---- plugin -------------------------------------------------------------------------

namespace {

template <typename M>
bool parse(std::string_view payload, M* m) {
  return m->ParseFromArray(payload.data(), static_cast<int>(payload.size()));
}

CallResult reply(const google::protobuf::MessageLite& m) {
  CallResult r;
  m.SerializeToString(&r.payload);
  return r;
}

CallResult empty_reply() { return {}; }

// A handler's error as the Go stub sends it: code Unknown, the message as is.
CallResult error_reply(const Error& e) { return {{code::kUnknown, e.message}, {}}; }

CallResult bad_payload(std::string_view method) {
  return {{code::kInvalidArgument, fmt::format("invalid {} request payload", method)}, {}};
}

// The reader's error names the field (pbview.h).
CallResult bad_payload(std::string_view method, const Error& why) {
  return {{code::kInvalidArgument, fmt::format("invalid {} request payload: {}", method, why.message)}, {}};
}

}  // namespace

Plugin::Plugin(sd_event* loop, Handlers& handlers, PluginOptions opts)
    : loop_(loop), handlers_(handlers), opts_(std::move(opts)) {}

Plugin::~Plugin() {
  if (reconnect_timer_) sd_event_source_disable_unref(reconnect_timer_);
}

const TransportStats* Plugin::transport_stats() const {
  return transport_ ? &transport_->stats() : nullptr;
}

Result<void> Plugin::start() {
  // As pkg/stub's setupHandlers: a plugin that handles nothing is a bug.
  if (handlers_.events.mask() == 0) return fail(EINVAL, "NRI plugin handles no event");
  PODSHIM_TRY(check_plugin_index(opts_.index));
  // Only external plugins pick their own name; the runtime checks it.
  if (opts_.socket_fd < 0) PODSHIM_TRY(check_plugin_name(opts_.name));
  if (opts_.socket_fd >= 0) {
    auto r = attach(UniqueFd(opts_.socket_fd));
    opts_.socket_fd = -1;  // owned by the transport now, never reused
    return r;
  }
  if (opts_.socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    return fail(ENAMETOOLONG, "NRI socket path '{}' too long", opts_.socket_path);
  }
  connect_now();
  return {};
}

void Plugin::stop() {
  state_ = PluginState::Stopped;
  if (reconnect_timer_) reconnect_timer_ = sd_event_source_disable_unref(reconnect_timer_);
  transport_.reset();
}

void Plugin::connect_now() {
  if (state_ == PluginState::Stopped) return;
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    handlers_.on_connection_error(Error{errno, "creating NRI socket"}, opts_.reconnect);
    schedule_reconnect();
    return;
  }
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, opts_.socket_path.data(), opts_.socket_path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) {
    const int e = errno;
    handlers_.on_connection_error(
        Error{e, fmt::format("connecting to NRI socket {}: {}", opts_.socket_path, errno_string(e))},
        opts_.reconnect);
    schedule_reconnect();
    return;
  }
  if (auto r = attach(std::move(fd)); !r) {
    handlers_.on_connection_error(r.error(), opts_.reconnect);
    schedule_reconnect();
  }
}

void Plugin::schedule_reconnect() {
  if (!opts_.reconnect || state_ == PluginState::Stopped) {
    state_ = PluginState::Stopped;
    return;
  }
  state_ = PluginState::Idle;
  uint64_t delay = opts_.reconnect_min_usec;
  for (unsigned i = 0; i < attempts_ && delay < opts_.reconnect_max_usec; ++i) delay *= 2;
  delay = std::min(delay, opts_.reconnect_max_usec);
  attempts_++;
  if (reconnect_timer_) reconnect_timer_ = sd_event_source_disable_unref(reconnect_timer_);
  sd_event_add_time_relative(loop_, &reconnect_timer_, CLOCK_MONOTONIC, delay, 0,
                             &Plugin::on_reconnect_timer, this);
}

int Plugin::on_reconnect_timer(sd_event_source* s, uint64_t, void* userdata) {
  auto* self = static_cast<Plugin*>(userdata);
  sd_event_source_disable_unref(s);
  self->reconnect_timer_ = nullptr;
  contain("NRI: reconnecting", [&] { self->connect_now(); });
  return 0;
}

Result<void> Plugin::attach(UniqueFd fd) {
  TransportOptions to;
  to.max_recv_message = opts_.max_recv_message;
  auto t = Transport::create(loop_, std::move(fd), to);
  if (!t) return wrap(t, "setting up NRI connection");
  transport_ = std::move(*t);
  connects_++;
  sync_pages_.Clear();
  sync_first_page_ = true;
  events_ = 0;
  transport_->set_close_handler([this](const Error& why) { on_closed(why); });
  transport_->serve_async(kPluginServiceConn, [this](const pb::RequestView& req, Transport::Responder respond) {
    dispatch(req, std::move(respond));
  });

  api::RegisterPluginRequest reg;
  reg.set_plugin_name(opts_.name);
  reg.set_plugin_idx(opts_.index);
  reg.set_nri_version(kImplementedNriVersion);
  state_ = PluginState::Registering;
  Transport* t_raw = transport_.get();
  transport_->call(kRuntimeServiceConn, kRuntimeService, "RegisterPlugin", reg.SerializeAsString(),
                   opts_.register_timeout_usec, [this, t_raw](CallResult res) {
                     if (transport_.get() != t_raw) return;  // an older connection
                     if (!res.status.ok()) {
                       transport_->close(Error{EPROTO, fmt::format(
                           "RegisterPlugin failed: code {}: {}", res.status.code,
                           res.status.message)});
                       return;
                     }
                     if (state_ == PluginState::Registering) state_ = PluginState::Configuring;
                   });
  return {};
}

void Plugin::on_closed(const Error& why) {
  // Called from the transport's deferred close: destroying it here is safe.
  transport_.reset();
  sync_pages_.Clear();
  sync_first_page_ = true;
  const bool retry = opts_.reconnect && state_ != PluginState::Stopped;
  handlers_.on_connection_error(why, retry);
  if (retry) {
    schedule_reconnect();
  } else {
    state_ = PluginState::Stopped;
  }
}

namespace {

// A handler's Result as the reply to send.
template <typename T>
CallResult to_call_result(const Result<T>& r) {
  return r ? reply(*r) : error_reply(r.error());
}

}  // namespace

void Plugin::with_deadline(Transport::Responder respond, std::string_view method,
                           const std::function<void(Transport::Responder)>& start) {
  struct Once {
    Transport::Responder respond;
    sd_event_source* timer = nullptr;
    std::string method;
    uint64_t after_usec = 0;
  };
  auto once = std::make_shared<Once>();
  once->respond = std::move(respond);
  start([once](CallResult res) {
    if (once->timer) {
      delete static_cast<std::shared_ptr<Once>*>(sd_event_source_get_userdata(once->timer));
      once->timer = sd_event_source_disable_unref(once->timer);
    }
    if (auto resp = std::move(once->respond)) {
      once->respond = nullptr;
      resp(std::move(res));
    }
  });
  if (!once->respond) return;  // answered already

  const uint64_t timeout_usec = runtime_.request_timeout_ms > 0
                                    ? static_cast<uint64_t>(runtime_.request_timeout_ms) * 1000
                                    : 2'000'000;  // NRI's default (api/timeouts.go)
  const uint64_t after = timeout_usec > 2 * opts_.reply_margin_usec ? timeout_usec - opts_.reply_margin_usec
                                                                    : timeout_usec / 2;
  once->method = std::string(method);
  once->after_usec = after;
  auto* heap = new std::shared_ptr<Once>(once);
  // Accuracy 1 ms: 0 would be sd-event's default slack of 250 ms, and this
  // answer must reach the runtime before its own deadline, 300 ms away.
  const int r = sd_event_add_time_relative(
      loop_, &once->timer, CLOCK_MONOTONIC, after, 1000,
      [](sd_event_source* s, uint64_t, void* ud) -> int {
        std::unique_ptr<std::shared_ptr<Once>> o(static_cast<std::shared_ptr<Once>*>(ud));
        sd_event_source_disable_unref(s);
        (*o)->timer = nullptr;
        if (auto resp = std::move((*o)->respond)) {
          (*o)->respond = nullptr;
          contain("NRI: answering before the runtime's timeout", [&] {
            resp({{code::kUnknown, fmt::format("podshim: {} still in progress after {} ms; answering "
                                               "before the runtime's request timeout",
                                               (*o)->method, (*o)->after_usec / 1000)},
                  {}});
          });
        }
        return 0;
      },
      heap);
  if (r < 0) {
    delete heap;
    once->timer = nullptr;
  }
}

void Plugin::dispatch(const pb::RequestView& req, Transport::Responder respond) {
  auto& work = handlers_.after_reply_;
  handlers_.in_call_ = true;
  try {
    dispatch_call(req, std::move(respond));
  } catch (...) {
    // The transport answers a throw; the work the handler left goes with it.
    handlers_.in_call_ = false;
    work.clear();
    throw;
  }
  // Out of the call, after_reply() runs its work at once: nothing is added
  // to `work` while it runs.
  handlers_.in_call_ = false;
  for (auto& fn : work) contain("NRI: a handler's work after its reply", fn);
  work.clear();
}

void Plugin::dispatch_call(const pb::RequestView& req, Transport::Responder respond) {
  if (req.service != kPluginService) {
    respond({{code::kUnimplemented, fmt::format("service {}", req.service)}, {}});
    return;
  }
  const std::string_view m = req.method;
  if (m == "UpdateContainer") {
    pb::PodContainerRequestView r;
    if (auto d = pb::decode_update_container(req.payload, &r); !d)
      return respond(bad_payload(m, d.error()));
    const auto* h = subscribed<api::UPDATE_CONTAINER>();
    if (!h) return respond(reply(api::UpdateContainerResponse()));
    with_deadline(std::move(respond), m, [&](Transport::Responder later) {
      (*h)(r.pod, r.container, r.linux_resources,
           [later = std::move(later)](Result<api::UpdateContainerResponse> out) { later(to_call_result(out)); });
    });
    return;
  }
  if (m == "UpdatePodSandbox") {
    pb::PodContainerRequestView r;
    if (auto d = pb::decode_pod_sandbox_update(req.payload, &r); !d) return respond(bad_payload(m, d.error()));
    const auto* h = subscribed<api::UPDATE_POD_SANDBOX>();
    if (!h) return respond(reply(api::UpdatePodSandboxResponse()));
    with_deadline(std::move(respond), m, [&](Transport::Responder later) {
      (*h)(r.pod, r.linux_resources, req.payload,
           [later = std::move(later)](Result<api::UpdatePodSandboxResponse> out) { later(to_call_result(out)); });
    });
    return;
  }
  if (m == "Synchronize") {
    // The reply first, then what the handler left for after it: the
    // runtime's next page is encoded while this one is stored.
    std::function<void()> after_reply;
    respond(do_synchronize(req.payload, &after_reply));
    if (after_reply) after_reply();
    if (sync_done_) {
      sync_done_ = false;
      handlers_.on_ready();
    }
    return;
  }
  respond(dispatch_now(req));
}

namespace {

// An observed-only event: its handler is a PodEventFn or a ContainerEventFn.
template <typename Entry>
constexpr bool kPodEntry = std::is_same_v<decltype(Entry::fn), std::function<PodEventFn>>;
template <typename Entry>
constexpr bool kContainerEntry = std::is_same_v<decltype(Entry::fn), std::function<ContainerEventFn>>;
template <typename Entry>
constexpr bool kObservedEntry = kPodEntry<Entry> || kContainerEntry<Entry>;

// The observed-only event whose dedicated RPC (v0.12) is `method`, if any.
std::optional<api::Event> observed_event(const EventHandlers& table, std::string_view method) {
  std::optional<api::Event> found;
  table.for_each([&](const auto& entry) {
    if constexpr (kObservedEntry<std::decay_t<decltype(entry)>>)
      if (event_name(entry.event) == method) found = entry.event;
  });
  return found;
}

}  // namespace

void Plugin::observe(int32_t event, const pb::PodSandboxView& pod, const pb::ContainerView& ctr) {
  handlers_.events.for_each([&](const auto& entry) {
    using Entry = std::decay_t<decltype(entry)>;
    if (entry.event != event || !entry.fn || !(events_ & event_bit(entry.event))) return;
    if constexpr (kPodEntry<Entry>)
      entry.fn(pod);
    else if constexpr (kContainerEntry<Entry>)
      entry.fn(pod, ctr);
  });
}

template <api::Event E, typename Response>
CallResult Plugin::pod_container_call(const pb::RequestView& req, const char* what) {
  pb::PodContainerRequestView r;
  if (auto d = pb::decode_pod_container_request(req.payload, &r, what); !d) return bad_payload(req.method, d.error());
  Response out;
  if (const auto* h = subscribed<E>())
    if (auto res = (*h)(r.pod, r.container, &out); !res) return error_reply(res.error());
  return reply(out);
}

CallResult Plugin::dispatch_now(const pb::RequestView& req) {
  const std::string_view m = req.method;
  const std::string_view p = req.payload;

  if (m == "Configure") return do_configure(p);
  if (m == "StateChange") return do_state_change(p);
  if (m == "Shutdown") return empty_reply();
  if (m == "CreateContainer")
    return pod_container_call<api::CREATE_CONTAINER, api::CreateContainerResponse>(req, "CreateContainerRequest");
  if (m == "StopContainer")
    return pod_container_call<api::STOP_CONTAINER, api::StopContainerResponse>(req, "StopContainerRequest");
  if (m == "ValidateContainerAdjustment") {
    api::ValidateContainerAdjustmentRequest r;
    if (!parse(p, &r)) return bad_payload(m);
    api::ValidateContainerAdjustmentResponse out;
    if (const auto* h = subscribed<api::VALIDATE_CONTAINER_ADJUSTMENT>())
      if (auto res = (*h)(r, &out); !res) return error_reply(res.error());
    return reply(out);
  }
  // Answered with success whatever the handler does: the answer goes first,
  // the handler runs after it.
  if (auto e = observed_event(handlers_.events, m)) {
    pb::PodContainerRequestView r;
    if (auto d = pb::decode_pod_container_request(p, &r, "observed event request"); !d)
      return bad_payload(m, d.error());
    observed_ = {*e, r.pod, r.container};
    handlers_.after_reply([this] { observe(observed_.event, observed_.pod, observed_.container); });
    return empty_reply();
  }
  // ttrpc services.go wording, so the v0.12 runtime's fallback recognises it.
  return {{code::kUnimplemented, fmt::format("method {}", m)}, {}};
}

CallResult Plugin::do_configure(std::string_view payload) {
  api::ConfigureRequest req;
  if (!parse(payload, &req)) return bad_payload("Configure");
  runtime_ = runtime_info(req);
  if (auto ok = handlers_.configure(req, runtime_); !ok) return error_reply(ok.error());
  // What the plugin handles, less what this runtime's version does not know.
  const uint32_t handled = handlers_.events.mask();
  const uint32_t mask = handled & runtime_.valid_events;
  if (mask == 0) {
    // 0 would mean "everything" to the runtime: refuse instead.
    return {{code::kUnknown, fmt::format("plugin handles no event valid for this runtime "
                                         "(handles 0x{:x}, valid 0x{:x})", handled,
                                         runtime_.valid_events)}, {}};
  }
  events_ = mask;
  state_ = PluginState::Synchronizing;
  api::ConfigureResponse resp;
  resp.set_events(static_cast<int32_t>(mask));
  return reply(resp);
}

CallResult Plugin::do_synchronize(std::string_view payload, std::function<void()>* after_reply) {
  pb::SynchronizeView page;
  // A page handler decodes (and checks) every item itself.
  if (auto d = pb::decode_synchronize(payload, &page, !handlers_.synchronize_by_page()); !d)
    return bad_payload("Synchronize", d.error());
  const bool first = sync_first_page_;
  sync_first_page_ = !page.more;
  api::SynchronizeResponse resp;
  if (handlers_.synchronize_by_page()) {
    // Each page goes into the model as it arrives, so no second copy of
    // every pod and container is ever held.
    auto h = handlers_.on_synchronize_page(page, first, &resp, after_reply);
    if (!h) {
      sync_first_page_ = true;
      *after_reply = nullptr;  // nothing of a failed page is stored
      return error_reply(h.error());
    }
  } else {
    api::SynchronizeRequest parsed;
    if (!parse(payload, &parsed)) return bad_payload("Synchronize");
    if (first) sync_pages_.Clear();
    // Move, not copy: 3000 containers are megabytes.
    for (auto& pod : *parsed.mutable_pods()) sync_pages_.add_pods()->Swap(&pod);
    for (auto& c : *parsed.mutable_containers()) sync_pages_.add_containers()->Swap(&c);
    if (!page.more) {
      api::SynchronizeRequest all;
      all.Swap(&sync_pages_);
      auto h = handlers_.synchronize(all, &resp);
      if (!h) return error_reply(h.error());
    }
  }
  if (page.more) {
    // A non-final page: say we understand paging and want the rest. Any
    // update here would make the runtime close us (NRI v0.7 6fd59d6).
    api::SynchronizeResponse more;
    more.set_more(true);
    return reply(more);
  }
  resp.set_more(false);
  state_ = PluginState::Ready;
  attempts_ = 0;
  sync_done_ = true;  // on_ready once the last page is stored too (dispatch)
  return reply(resp);
}

CallResult Plugin::do_state_change(std::string_view payload) {
  pb::StateChangeView ev;
  // Never an error for an observed event, even an undecodable one.
  if (!pb::decode_state_change(payload, &ev)) return empty_reply();
  // A pod event's handler takes no container; an event that is not an
  // observed one (or unknown) finds no handler and is ignored. The answer
  // goes first, as for the v0.12 RPCs of these events.
  observed_ = ev;
  handlers_.after_reply([this] { observe(observed_.event, observed_.pod, observed_.container); });
  return empty_reply();
}

void Plugin::update_containers(std::vector<api::ContainerUpdate> update,
                               std::vector<api::ContainerEviction> evict, UpdateDone done) {
  if (!transport_ || state_ == PluginState::Registering) {
    auto* heap = new UpdateDone(std::move(done));
    sd_event_source* s = nullptr;
    // Report "not connected" from the loop, like every other outcome.
    const int r = sd_event_add_defer(loop_, &s, [](sd_event_source* src, void* ud) -> int {
      std::unique_ptr<UpdateDone> d(static_cast<UpdateDone*>(ud));
      sd_event_source_disable_unref(src);
      contain("NRI: UpdateContainers", [&] { (*d)(Unexpected(Error{ENOTCONN, "UpdateContainers: not connected to the runtime"})); });
      return 0;
    }, heap);
    if (r < 0) {
      std::unique_ptr<UpdateDone> d(heap);
      (*d)(Unexpected(Error{-r, "UpdateContainers: cannot schedule"}));
    }
    return;
  }
  api::UpdateContainersRequest req;
  for (auto& u : update) req.add_update()->Swap(&u);
  for (auto& e : evict) req.add_evict()->Swap(&e);
  transport_->call(kRuntimeServiceConn, kRuntimeService, "UpdateContainers",
                   req.SerializeAsString(), opts_.call_timeout_usec,
                   [done = std::move(done)](CallResult res) {
                     if (!res.status.ok()) {
                       done(Unexpected(Error{res.status.code == code::kDeadlineExceeded ? ETIMEDOUT : EIO,
                                             fmt::format("UpdateContainers: rpc error: code = {} desc = {}",
                                                         res.status.code, res.status.message)}));
                       return;
                     }
                     api::UpdateContainersResponse resp;
                     if (!resp.ParseFromString(res.payload)) {
                       done(Unexpected(Error{EPROTO, "UpdateContainers: invalid response payload"}));
                       return;
                     }
                     std::vector<api::ContainerUpdate> failed(resp.failed().begin(), resp.failed().end());
                     done(std::move(failed));
                   });
}

}  // namespace podshim::nri
