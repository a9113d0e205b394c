#include "shim/nri/simulator.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "shim/nri/plugin.h"

namespace podshim::nri {

namespace {

// Room left for the ttrpc envelope (service, method, timeout, length
// prefixes) when packing a Synchronize page under the 4 MiB limit.
constexpr size_t kEnvelopeReserve = 1024;

size_t varint_len(size_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Encoded size of one element of a repeated message field (tag + length + body).
size_t element_size(const google::protobuf::MessageLite& m) {
  const size_t body = m.ByteSizeLong();
  return 1 + varint_len(body) + body;
}

}  // namespace

Simulator::Simulator(sd_event* loop, SimOptions opts) : loop_(loop), opts_(std::move(opts)) {
  if (opts_.nri_version.empty()) opts_.nri_version = fmt::format("v0.{}.0", opts_.nri_minor);
  if (opts_.runtime_version.empty()) {
    const int m = opts_.nri_minor;
    opts_.runtime_version = m >= 12 ? "v2.3.0" : m >= 10 ? "v2.2.1" : m >= 7 ? "v2.0.0"
                          : m >= 4 ? "v1.7.13" : "v1.7.0";
  }
  on_update_containers = [](const api::UpdateContainersRequest&) {
    return api::UpdateContainersResponse();
  };
}

Simulator::~Simulator() {
  *alive_ = false;
  stop_listening();
}

TransportOptions Simulator::transport_options() const {
  TransportOptions t;
  t.max_recv_message = kTtrpcMaxMessage;
  if (opts_.nri_minor < 7) {
    // ttrpc ≤ v1.2.5 had no send-side check, and the mux had no splitting:
    // the v0.4 runtime sent an 8.8 MB Synchronize in one frame.
    t.max_send_message = 1u << 30;
    t.framing = Framing::Whole;
  } else {
    t.max_send_message = kTtrpcMaxMessage;
    t.framing = Framing::GoStyle;
  }
  if (opts_.override_framing) t.framing = opts_.framing;
  return t;
}

uint64_t Simulator::max_plugin_frame() const {
  uint64_t m = max_plugin_frame_prev_;
  if (transport_) m = std::max(m, transport_->stats().max_frame_payload_in);
  return m;
}

Result<void> Simulator::listen(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) return fail(ENAMETOOLONG, "socket path '{}' too long", path);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("creating listening socket");
  ::unlink(path.c_str());  // stale socket, as adaptation.go startListener does
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) return fail_errno("binding {}", path);
  if (::listen(fd.get(), 16) < 0) return fail_errno("listening on {}", path);
  const int r = sd_event_add_io(loop_, &listen_src_, fd.get(), EPOLLIN, &Simulator::on_accept, this);
  if (r < 0) return fail_code(-r, "watching {}", path);
  listen_fd_ = std::move(fd);
  listen_path_ = path;
  return {};
}

void Simulator::stop_listening() {
  if (listen_src_) listen_src_ = sd_event_source_disable_unref(listen_src_);
  if (listen_fd_) {
    listen_fd_.reset();
    ::unlink(listen_path_.c_str());
  }
}

int Simulator::on_accept(sd_event_source*, int fd, uint32_t, void* userdata) {
  auto* self = static_cast<Simulator*>(userdata);
  UniqueFd c(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!c) return 0;
  // A connection that cannot be served is closed; the plugin sees that.
  if (auto r = self->attach(std::move(c)); !r) log::warn("NRI simulator: {}", r.error().message);
  return 0;
}

Result<UniqueFd> Simulator::socketpair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return fail_errno("socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  PODSHIM_TRY(attach(std::move(ours)));
  return theirs;
}

Result<pid_t> Simulator::spawn_plugin(const std::string& exe, const std::string& name,
                                      const std::string& index) {
  auto theirs = socketpair();
  if (!theirs) return wrap(theirs, "spawning plugin");
  const std::string env_name = "NRI_PLUGIN_NAME=" + name;
  const std::string env_idx = "NRI_PLUGIN_IDX=" + index;
  const std::string env_sock = "NRI_PLUGIN_SOCKET=3";
  const pid_t pid = ::fork();
  if (pid < 0) return fail_errno("fork");
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    // dup2 onto itself would keep O_CLOEXEC and lose the fd at exec.
    if (theirs->get() == 3) {
      if (::fcntl(3, F_SETFD, 0) < 0) _exit(127);
    } else if (::dup2(theirs->get(), 3) < 0) {
      _exit(127);
    }
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    const char* argv[] = {exe.c_str(), nullptr};
    const char* envp[] = {env_name.c_str(), env_idx.c_str(), env_sock.c_str(), nullptr};
    ::execve(exe.c_str(), const_cast<char* const*>(argv), const_cast<char* const*>(envp));
    _exit(127);
  }
  return pid;
}

void Simulator::close_plugin() {
  if (!transport_) return;
  max_plugin_frame_prev_ = max_plugin_frame();
  transport_.reset();
  synchronized_ = false;
}

void Simulator::set_state(std::vector<api::PodSandbox> pods, std::vector<api::Container> containers) {
  pods_ = std::move(pods);
  containers_ = std::move(containers);
}

Result<void> Simulator::attach(UniqueFd fd) {
  close_plugin();
  auto t = Transport::create(loop_, std::move(fd), transport_options());
  if (!t) return wrap(t, "simulator connection");
  transport_ = std::move(*t);
  accepted_++;
  plugin_ = {};
  synchronized_ = false;
  state_change_fallback_ = false;
  if (tap_) transport_->set_frame_tap(tap_);
  transport_->serve(kRuntimeServiceConn, [this](const pb::RequestView& r) { return serve_runtime(r); });
  Transport* raw = transport_.get();
  transport_->set_close_handler([this, raw](const Error& why) {
    if (transport_.get() != raw) return;
    max_plugin_frame_prev_ = max_plugin_frame();
    transport_.reset();
    synchronized_ = false;
    if (on_plugin_closed) on_plugin_closed(why);
  });
  return {};
}

CallResult Simulator::serve_runtime(const pb::RequestView& req) {
  if (req.service != kRuntimeService) {
    return {{code::kUnimplemented, fmt::format("service {}", req.service)}, {}};
  }
  if (req.method == "RegisterPlugin") {
    api::RegisterPluginRequest r;
    if (!r.ParseFromArray(req.payload.data(), static_cast<int>(req.payload.size()))) return {{code::kInvalidArgument, "bad RegisterPlugin"}, {}};
    if (opts_.check_plugin_identity) {
      if (auto c = check_plugin_index(r.plugin_idx()); !c) return {{code::kUnknown, c.error().message}, {}};
      if (opts_.nri_minor >= 12) {
        if (auto c = check_plugin_name(r.plugin_name()); !c) return {{code::kUnknown, c.error().message}, {}};
      } else if (r.plugin_name().empty()) {
        return {{code::kUnknown, "empty plugin name"}, {}};
      }
    }
    plugin_.name = r.plugin_name();
    plugin_.index = r.plugin_idx();
    plugin_.nri_version = r.nri_version();
    // Configure goes out after this reply, from the loop.
    sd_event_source* s = nullptr;
    auto alive = alive_;
    auto* ctx = new std::pair<Simulator*, std::shared_ptr<bool>>(this, alive);
    sd_event_add_defer(loop_, &s, [](sd_event_source* src, void* ud) -> int {
      std::unique_ptr<std::pair<Simulator*, std::shared_ptr<bool>>> c(
          static_cast<std::pair<Simulator*, std::shared_ptr<bool>>*>(ud));
      sd_event_source_disable_unref(src);
      if (*c->second) c->first->configure();
      return 0;
    }, ctx);
    return {};
  }
  if (req.method == "UpdateContainers") {
    api::UpdateContainersRequest r;
    if (!r.ParseFromArray(req.payload.data(), static_cast<int>(req.payload.size()))) return {{code::kInvalidArgument, "bad UpdateContainers"}, {}};
    update_requests_.push_back(r);
    CallResult res;
    on_update_containers(r).SerializeToString(&res.payload);
    return res;
  }
  return {{code::kUnimplemented, fmt::format("method {}", req.method)}, {}};
}

void Simulator::fail_handshake(Status st) {
  if (on_synchronized) on_synchronized(st);
  close_plugin();
}

void Simulator::configure() {
  if (!transport_) return;
  api::ConfigureRequest req;
  req.set_config(opts_.config);
  req.set_runtime_name(opts_.runtime_name);
  req.set_runtime_version(opts_.runtime_version);
  if (opts_.nri_minor >= 7) {
    req.set_registration_timeout(opts_.registration_timeout_ms);
    req.set_request_timeout(opts_.request_timeout_ms);
  }
  if (opts_.nri_minor >= 12) req.set_nri_version(opts_.nri_version);
  call("Configure", req.SerializeAsString(), [this](CallResult res) {
    if (!res.status.ok()) return fail_handshake(res.status);
    api::ConfigureResponse resp;
    if (!resp.ParseFromString(res.payload)) return fail_handshake({code::kInternal, "bad ConfigureResponse"});
    uint32_t events = static_cast<uint32_t>(resp.events());
    if (events == 0) events = valid_events();  // adaptation: 0 = all
    if (events & ~valid_events()) {
      return fail_handshake({code::kInvalidArgument,
                             fmt::format("invalid plugin events 0x{:x}", resp.events())});
    }
    plugin_.events = events;
    synchronize();
  });
}

void Simulator::synchronize() {
  pages_.clear();
  sync_updates_.clear();
  api::SynchronizeRequest req;
  for (const auto& p : pods_) *req.add_pods() = p;
  for (const auto& c : containers_) *req.add_containers() = c;
  const size_t bytes = req.ByteSizeLong();
  const int npods = req.pods_size(), nctrs = req.containers_size();
  call("Synchronize", req.SerializeAsString(), [this, bytes, npods, nctrs](CallResult res) {
    if (res.status.code == code::kResourceExhausted && opts_.nri_minor >= 7) {
      // v0.7+: split into pages (adaptation plugin.go, NRI 6fd59d6).
      send_pages(0, 0);
      return;
    }
    if (!res.status.ok()) return fail_handshake(res.status);
    pages_.push_back({bytes, npods, nctrs, false});
    api::SynchronizeResponse resp;
    if (!resp.ParseFromString(res.payload)) return fail_handshake({code::kInternal, "bad SynchronizeResponse"});
    synchronized_ = true;
    if (on_synchronized) on_synchronized({});
  });
}

void Simulator::send_pages(size_t pod_off, size_t ctr_off) {
  const size_t budget = kTtrpcMaxMessage - kEnvelopeReserve;
  api::SynchronizeRequest page;
  size_t size = 0;
  size_t p = pod_off, c = ctr_off;
  while (p < pods_.size() && size + element_size(pods_[p]) <= budget) {
    size += element_size(pods_[p]);
    *page.add_pods() = pods_[p++];
  }
  if (p == pods_.size()) {
    while (c < containers_.size() && size + element_size(containers_[c]) <= budget) {
      size += element_size(containers_[c]);
      *page.add_containers() = containers_[c++];
    }
  }
  if (p == pod_off && c == ctr_off && (p < pods_.size() || c < containers_.size())) {
    return fail_handshake({code::kResourceExhausted, "a single pod or container exceeds the message limit"});
  }
  const bool more = p < pods_.size() || c < containers_.size();
  page.set_more(more);
  pages_.push_back({page.ByteSizeLong(), page.pods_size(), page.containers_size(), more});
  call("Synchronize", page.SerializeAsString(), [this, more, p, c](CallResult res) {
    if (!res.status.ok()) return fail_handshake(res.status);
    api::SynchronizeResponse resp;
    if (!resp.ParseFromString(res.payload)) return fail_handshake({code::kInternal, "bad SynchronizeResponse"});
    if (more) {
      if (!resp.more() || resp.update_size() > 0) {
        return fail_handshake({code::kInternal, "plugin does not handle split sync requests"});
      }
      send_pages(p, c);
      return;
    }
    for (const auto& u : resp.update()) sync_updates_.push_back(u);
    synchronized_ = true;
    if (on_synchronized) on_synchronized({});
  });
}

void Simulator::call(const std::string& method, std::string payload, std::function<void(CallResult)> cb) {
  if (!transport_) {
    cb({{code::kUnavailable, "no plugin connected"}, {}});
    return;
  }
  transport_->call(kPluginServiceConn, kPluginService, method, std::move(payload),
                   opts_.call_timeout_usec, std::move(cb));
}

namespace {

template <typename T>
std::function<void(CallResult)> decode_into(Simulator::Reply<T> cb) {
  return [cb = std::move(cb)](CallResult res) {
    T out;
    if (res.status.ok() && !out.ParseFromString(res.payload)) {
      res.status = {code::kInternal, "invalid reply payload"};
    }
    cb(res.status, std::move(out));
  };
}

}  // namespace

void Simulator::create_container(const api::PodSandbox& pod, const api::Container& ctr,
                                 Reply<api::CreateContainerResponse> cb) {
  if (!subscribed(api::CREATE_CONTAINER)) return cb({}, {});
  api::CreateContainerRequest req;
  *req.mutable_pod() = pod;
  *req.mutable_container() = ctr;
  call("CreateContainer", req.SerializeAsString(), decode_into(std::move(cb)));
}

void Simulator::update_container(const api::PodSandbox& pod, const api::Container& ctr,
                                 const api::LinuxResources& res, Reply<api::UpdateContainerResponse> cb) {
  if (!subscribed(api::UPDATE_CONTAINER)) return cb({}, {});
  api::UpdateContainerRequest req;
  *req.mutable_pod() = pod;
  *req.mutable_container() = ctr;
  *req.mutable_linux_resources() = res;
  call("UpdateContainer", req.SerializeAsString(), decode_into(std::move(cb)));
}

void Simulator::stop_container(const api::PodSandbox& pod, const api::Container& ctr,
                               Reply<api::StopContainerResponse> cb) {
  if (!subscribed(api::STOP_CONTAINER)) return cb({}, {});
  api::StopContainerRequest req;
  *req.mutable_pod() = pod;
  *req.mutable_container() = ctr;
  call("StopContainer", req.SerializeAsString(), decode_into(std::move(cb)));
}

void Simulator::update_pod_sandbox(const api::UpdatePodSandboxRequest& req, Done cb) {
  if (opts_.nri_minor < 10 || !subscribed(api::UPDATE_POD_SANDBOX)) return cb({});
  call("UpdatePodSandbox", req.SerializeAsString(), [cb = std::move(cb)](CallResult r) { cb(r.status); });
}

void Simulator::validate_container_adjustment(const api::ValidateContainerAdjustmentRequest& req,
                                              Reply<api::ValidateContainerAdjustmentResponse> cb) {
  if (opts_.nri_minor < 10 || !subscribed(api::VALIDATE_CONTAINER_ADJUSTMENT)) return cb({}, {});
  call("ValidateContainerAdjustment", req.SerializeAsString(), decode_into(std::move(cb)));
}

void Simulator::observe(api::Event event, const api::PodSandbox& pod, const api::Container* ctr, Done cb) {
  if (!subscribed(event)) return cb({});
  if (!uses_state_change()) {
    // v0.12: the dedicated RPC; on Unimplemented switch this plugin to
    // StateChange for good (plugin_type.go wrapOrigImpl).
    std::string payload;
    const bool pod_only = event == api::RUN_POD_SANDBOX || event == api::STOP_POD_SANDBOX ||
                          event == api::REMOVE_POD_SANDBOX || event == api::POST_UPDATE_POD_SANDBOX;
    if (pod_only) {
      api::RunPodSandboxRequest r;  // { PodSandbox pod = 1; } like the other three
      *r.mutable_pod() = pod;
      payload = r.SerializeAsString();
    } else {
      api::PostCreateContainerRequest r;  // { pod = 1; container = 2; }
      *r.mutable_pod() = pod;
      if (ctr) *r.mutable_container() = *ctr;
      payload = r.SerializeAsString();
    }
    auto alive = alive_;
    const api::PodSandbox pod_copy = pod;
    std::optional<api::Container> ctr_copy;
    if (ctr) ctr_copy = *ctr;
    call(std::string(event_name(event)), std::move(payload),
         [this, alive, event, pod_copy, ctr_copy, cb = std::move(cb)](CallResult r) mutable {
           if (*alive && r.status.code == code::kUnimplemented) {
             state_change_fallback_ = true;
             observe(event, pod_copy, ctr_copy ? &*ctr_copy : nullptr, std::move(cb));
             return;
           }
           cb(r.status);
         });
    return;
  }
  api::StateChangeEvent ev;
  ev.set_event(event);
  *ev.mutable_pod() = pod;
  if (ctr) *ev.mutable_container() = *ctr;
  call("StateChange", ev.SerializeAsString(), [cb = std::move(cb)](CallResult r) { cb(r.status); });
}

// ---- test data ---------------------------------------------------------------------

namespace {

api::LinuxResources make_resources(int64_t mem, uint64_t shares, int64_t quota) {
  api::LinuxResources r;
  r.mutable_memory()->mutable_limit()->set_value(mem);
  r.mutable_memory()->mutable_swap()->set_value(mem);
  r.mutable_cpu()->mutable_shares()->set_value(shares);
  r.mutable_cpu()->mutable_quota()->set_value(quota);
  r.mutable_cpu()->mutable_period()->set_value(100000);
  r.mutable_cpu()->set_cpus("0-1");
  auto* hp = r.add_hugepage_limits();
  hp->set_page_size("2MB");
  hp->set_limit(0);
  (*r.mutable_unified())["memory.high"] = std::to_string(mem / 10 * 9);
  r.mutable_blockio_class()->set_value("normal");
  return r;
}

}  // namespace

api::PodSandbox make_pod(int n) {
  api::PodSandbox p;
  p.set_id(fmt::format("pod{:04d}-0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab", n));
  p.set_name(fmt::format("test-pod-{}", n));
  p.set_uid(fmt::format("6f7d2c1e-0000-4000-8000-{:012d}", n));
  p.set_namespace_("default");
  (*p.mutable_labels())["io.kubernetes.pod.name"] = p.name();
  (*p.mutable_labels())["io.kubernetes.pod.namespace"] = "default";
  (*p.mutable_annotations())["io.kubernetes.cri.sandbox-id"] = p.id();
  p.set_runtime_handler("runc");
  auto* l = p.mutable_linux();
  *l->mutable_pod_overhead() = make_resources(64 << 20, 10, 5000);
  *l->mutable_pod_resources() = make_resources(512 << 20, 512, 50000);
  l->set_cgroup_parent(fmt::format("kubepods-burstable-pod{}.slice", n));
  l->set_cgroups_path(fmt::format("kubepods-burstable-pod{}.slice:cri-containerd:{}", n, p.id()));
  for (const char* ns : {"ipc", "uts", "network"}) {
    auto* x = l->add_namespaces();
    x->set_type(ns);
    x->set_path(fmt::format("/proc/{}/ns/{}", 1000 + n, ns));
  }
  p.set_pid(static_cast<uint32_t>(1000 + n));
  p.add_ips(fmt::format("10.0.{}.{}", n / 250, n % 250 + 1));
  return p;
}

api::Container make_container(const api::PodSandbox& pod, int n) {
  api::Container c;
  c.set_id(fmt::format("ctr{:06d}-0123456789abcdef0123456789abcdef0123456789abcdef012345", n));
  c.set_pod_sandbox_id(pod.id());
  c.set_name(fmt::format("ctr-{}", n));
  c.set_state(api::CONTAINER_RUNNING);
  (*c.mutable_labels())["io.kubernetes.container.name"] = c.name();
  (*c.mutable_annotations())["io.kubernetes.cri.container-type"] = "container";
  for (const char* a : {"/bin/sh", "-c", "sleep infinity"}) c.add_args(a);
  c.add_env("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  c.add_env("HOSTNAME=" + pod.name());
  // Service-link variables, as the kubelet injects for every service in the
  // namespace: real containers carry kilobytes of them.
  for (int i = 0; i < 16; ++i) {
    c.add_env(fmt::format("SERVICE_{:02d}_PORT_8080_TCP_ADDR=10.96.{}.{} # tcp://10.96.{}.{}:8080", i, i, n % 250, i, n % 250));
  }
  (*c.mutable_annotations())["io.kubernetes.cri.image-name"] = "registry.k8s.io/e2e-test-images/agnhost:2.53";
  (*c.mutable_annotations())["io.kubernetes.cri.sandbox-id"] = pod.id();
  (*c.mutable_annotations())["io.kubernetes.cri.sandbox-name"] = pod.name();
  for (const char* dst : {"/etc/hosts", "/dev/termination-log", "/etc/hostname", "/etc/resolv.conf",
                          "/var/run/secrets/kubernetes.io/serviceaccount"}) {
    auto* m = c.add_mounts();
    m->set_destination(dst);
    m->set_type("bind");
    m->set_source(fmt::format("/var/lib/kubelet/pods/{}/volumes{}", pod.uid(), dst));
    for (const char* o : {"rbind", "rprivate", "rw"}) m->add_options(o);
  }
  auto* l = c.mutable_linux();
  for (const char* ns : {"pid", "ipc", "uts", "mount", "network"}) {
    auto* x = l->add_namespaces();
    x->set_type(ns);
  }
  auto* d = l->add_devices();
  d->set_path("/dev/fuse");
  d->set_type("c");
  d->set_major(10);
  d->set_minor(229);
  d->mutable_file_mode()->set_value(0666);
  *l->mutable_resources() = make_resources(256 << 20, 256, 25000);
  l->mutable_oom_score_adj()->set_value(1000);
  l->set_cgroups_path(fmt::format("{}:cri-containerd:{}", pod.linux().cgroup_parent(), c.id()));
  c.set_pid(static_cast<uint32_t>(2000 + n));
  return c;
}

}  // namespace podshim::nri
