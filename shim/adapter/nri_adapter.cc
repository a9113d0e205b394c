#include "shim/adapter/nri_adapter.h"

#include <chrono>
#include <set>

#include <fmt/ranges.h>

#include "base/log.h"
#include "base/str.h"
#include "cdi/requests.h"

namespace podshim::adapter {

namespace {

// A store change a runtime event asked for. NRI mode's store lives in memory
// (Store::in_memory), so the failure to expect is ENOENT: the object is
// already gone (a repeated or late event), and nothing needs doing. Anything
// else is logged and not fatal: the next Synchronize rebuilds the store.
template <typename T>
void stored_or_gone(const Result<T>& r, std::string_view what, std::string_view id) {
  if (!r && r.error().code != ENOENT) log::warn("NRI: {} {}: {}", what, id, r.error().message);
}

}  // namespace

NriAdapter::NriAdapter(core::Store& store, cgroup::Engine* engine, cdi::Registry* registry,
                       core::Metrics* metrics, AdapterOptions opts)
    : store_(store), engine_(engine), registry_(registry), metrics_(metrics), opts_(std::move(opts)) {
  set_handlers();
}

// Every event podshimd subscribes to, and what it does with it. Not here, so
// not subscribed to: StopPodSandbox (its containers' StopContainer and the
// pod's RemovePodSandbox carry all podshimd keeps) and
// ValidateContainerAdjustment (podshimd has no opinion on other plugins'
// adjustments).
void NriAdapter::set_handlers() {
  using P = const pb::PodSandboxView&;
  using C = const pb::ContainerView&;
  handle<api::RUN_POD_SANDBOX>([this](P pod) { remember_pod(pod); });
  handle<api::REMOVE_POD_SANDBOX>([this](P pod) { remove_pod(pod.uid); });
  handle<api::UPDATE_POD_SANDBOX>([this](P pod, const pb::LinuxResourcesView& res, std::string_view,
                                         nri::Respond<api::UpdatePodSandboxResponse> respond) {
    update_pod_sandbox(pod, res, std::move(respond));
  });
  handle<api::POST_UPDATE_POD_SANDBOX>([this](P pod) {
    remember_pod(pod);
    if (actuator_ && !pod.cgroup_parent.empty()) actuator_->landed(std::string(pod.cgroup_parent));
  });
  handle<api::CREATE_CONTAINER>(
      [this](P pod, C ctr, api::CreateContainerResponse* reply) { return create_container(pod, ctr, reply); });
  handle<api::POST_CREATE_CONTAINER>([this](P pod, C ctr) { remember(pod.uid, ctr, false); });
  handle<api::START_CONTAINER>([this](P pod, C ctr) { remember(pod.uid, ctr, false); });
  handle<api::POST_START_CONTAINER>([this](P pod, C ctr) {
    remember(pod.uid, ctr, false);
    refresh_actual(ctr);
  });
  handle<api::UPDATE_CONTAINER>([this](P pod, C ctr, const pb::LinuxResourcesView& res,
                                       nri::Respond<api::UpdateContainerResponse> respond) {
    update_container(pod, ctr, res, std::move(respond));
  });
  handle<api::POST_UPDATE_CONTAINER>([this](P pod, C ctr) {
    remember(pod.uid, ctr, false);
    if (actuator_) {
      std::string path;
      store_.with_container(ctr.id, [&](const core::Container& k) { path = k.cgroup_path; });
      if (!path.empty()) actuator_->landed(path);
    }
    refresh_actual(ctr);
  });
  // Nothing of the answer depends on the store: it is updated after the answer.
  handle<api::STOP_CONTAINER>([this](P pod, C ctr, api::StopContainerResponse*) -> Result<void> {
    after_reply([this, pod, ctr] {
      remember(pod.uid, ctr, false);
      stored_or_gone(store_.update_container(ctr.id, [](core::Container& c) { c.state = "stopped"; }),
                     "marking stopped the container", ctr.id);
    });
    return {};
  });
  handle<api::REMOVE_CONTAINER>(
      [this](P, C ctr) { stored_or_gone(store_.remove_container(ctr.id), "forgetting the container", ctr.id); });
}

void NriAdapter::count(api::Event e) {
  if (!metrics_) return;
  auto it = event_cells_.find(e);
  if (it == event_cells_.end()) {
    it = event_cells_.emplace(e, metrics_->nri_events.cell({{"event", std::string(nri::event_name(e))}})).first;
  }
  it->second.inc();
}

Result<void> NriAdapter::configure(const api::ConfigureRequest& req, const nri::RuntimeInfo& rt) {
  runtime_ = rt;
  if (opts_.formulas) opts_.formulas->set_runtime(fmt::format("{} {}", rt.name, rt.version));
  log::info("NRI: configured by {} {} (NRI {}), request timeout {} ms", rt.name, rt.version,
            rt.nri_version.empty() ? "< v0.12" : rt.nri_version, rt.request_timeout_ms);
  if (!req.config().empty()) {
    if (!opts_.on_config) return fail(EINVAL, "NRI Configure carried a config, but podshimd takes none here");
    PODSHIM_TRY(opts_.on_config(req.config()));
  }
  return {};
}

void NriAdapter::remember_pod(const pb::PodSandboxView& p) {
  // The runtime resends the pod with every container event: when the model
  // already holds it as sent, nothing is built or stored.
  bool unchanged = false;
  store_.with_pod(p.uid, [&](const core::Pod& known) { unchanged = pod_unchanged(p, known); });
  if (unchanged) return;
  core::Pod pod;
  if (auto r = assign_pod_from_nri(p, &pod); !r) {
    log::warn("NRI: ignoring pod {}: {}", p.id, r.error().message);
    return;
  }
  // Only what NRI does not tell is kept from the known pod.
  store_.with_pod(pod.uid, [&](const core::Pod& old) { pod.actual = old.actual; });
  if (auto r = store_.upsert_pod(std::move(pod)); !r)
    log::err("NRI: storing pod {}: {}", p.uid, r.error().message);
}

void NriAdapter::remember(std::string_view pod_uid, const pb::ContainerView& ctr, bool take_resources,
                          bool pod_later) {
  const bool pending = pod_later && pod_uid.empty();
  // Most events resend a container as the model already holds it (Start,
  // PostStart, PostUpdate, a re-sync): then nothing is built or stored.
  bool unchanged = false;
  if (!pending)
    store_.with_container(ctr.id, [&](const core::Container& known) {
      unchanged = container_unchanged(pod_uid, ctr, take_resources, known);
    });
  if (unchanged) return;
  core::Container c;
  // A pending pod is checked when it comes; everything else is checked now.
  if (auto r = assign_container_from_nri(pending ? std::string_view("pending") : pod_uid, ctr, true, &c); !r) {
    log::warn("NRI: ignoring container {}: {}", ctr.id, r.error().message);
    return;
  }
  if (pending) c.pod_uid.clear();
  // Read in place under the store's lock: no copy of the known container.
  store_.with_container(c.id, [&](const core::Container& old) {
    c.conditions = old.conditions;
    c.generation = old.generation;
    c.devices = old.devices;
    c.selinux_mount_label = old.selinux_mount_label;
    c.last_error = old.last_error;
    c.last_outcome = old.last_outcome;
    c.actual = old.actual;
    c.drift = old.drift;
    c.restart_required = old.restart_required;
    c.cpu_policy = old.cpu_policy;
    c.memory_policy = old.memory_policy;
    if (!take_resources) {
      c.desired = old.desired;
      c.allocated = old.allocated;
    }
  });
  if (auto r = store_.upsert_container(std::move(c)); !r)
    log::at(log::Level::Err, {{"CONTAINER_ID", std::string(ctr.id)}}, "NRI: storing container: {}",
            r.error().message);
}

void NriAdapter::sync_container(std::string_view pod_uid, const pb::ContainerView& c, bool pod_later) {
  remember(pod_uid, c, true, pod_later);
  sync_.ctrs.emplace(c.id);
  const uint64_t shares = c.resources.cpu_shares.value;
  if (engine_ && opts_.formulas && opts_.formulas->wants_samples() && sync_.probes < kMaxFormulaProbes &&
      shares > 0 && !c.cgroups_path.empty()) {
    ++sync_.probes;
    // The weight alone is wanted: read_limits skips memory.stat, the
    // costliest file, which read_actual builds for display.
    if (auto a = engine_->read_limits(std::string(c.cgroups_path))) learn_formula(c.id, shares, *a);
  }
}

Result<void> NriAdapter::on_synchronize_page(const pb::SynchronizeView& page, bool first,
                                             api::SynchronizeResponse* reply,
                                             std::function<void()>* after_reply) {
  (void)reply;  // podshim never asks for updates at sync time
  // Paging (containerd/nri pkg/adaptation, v0.7 "more"): every page is
  // answered at once with more=true and the runtime sends the next; only
  // the answer to the last page may carry updates. So each page is stored
  // as it comes, and what the runtime no longer has is dropped after the
  // last one, when the whole set is known.
  if (first) {
    sync_error_.reset();
    sync_page_ = 0;
  }
  const size_t n = ++sync_page_;
  if (page.more) {
    // A page before the last is answered more=true whatever it holds (the
    // runtime closes a plugin that answers it otherwise: pkg/adaptation's
    // "plugin does not handle split sync requests"), and the sync's outcome
    // is the last page's answer. So this answer goes out at once and the
    // page is checked and stored after it, while the runtime encodes its
    // next page: podshim's part of the runtime's wait is the last page
    // alone (pkg/adaptation at v0.8.0 sent 100 pods / 3000 containers as
    // 4.2 + 2.8 MB; checking the last took 2.2 ms under strace). A bad item
    // fails the sync at the last page's answer, named with its page;
    // nothing of its page, or of a later one, is stored.
    *after_reply = [this, page, first, n] {
      if (sync_error_) return;
      if (auto r = check_synchronize_page(page); !r) {
        sync_error_ = r.error().wrap(fmt::format("Synchronize page {}", n));
        return;
      }
      store_synchronize_page(page, first);
    };
    return {};
  }
  if (sync_error_) {
    Error e = std::move(*sync_error_);
    sync_error_.reset();
    return Unexpected(std::move(e));
  }
  // The last page is checked before its answer (a bad item fails the sync,
  // and nothing of the page is stored) and stored after it.
  if (auto r = check_synchronize_page(page); !r)
    return Unexpected(n == 1 ? r.error() : r.error().wrap(fmt::format("Synchronize page {}", n)));
  *after_reply = [this, page, first] { store_synchronize_page(page, first); };
  return {};
}

Result<void> NriAdapter::check_synchronize_page(const pb::SynchronizeView& page) const {
  std::optional<Error> bad;
  auto check = [&](auto decode, auto view, const char* field) {
    size_t i = 0;
    return [&bad, decode, view, field, i](std::string_view raw) mutable {
      const size_t at = i++;
      if (bad) return;
      if (auto r = decode(raw, &view, 1); !r) bad = r.error().wrap(fmt::format("SynchronizeRequest.{}[{}]", field, at));
    };
  };
  page.pods.for_each(check(pb::decode_pod, pb::PodSandboxView{}, "pods"));
  if (!bad) page.containers.for_each(check(pb::decode_container, pb::ContainerView{}, "containers"));
  if (bad) return Unexpected(std::move(*bad));
  return {};
}

void NriAdapter::store_synchronize_page(const pb::SynchronizeView& page, bool first) {
  if (first) {
    sync_ = SyncState{};
    if (opts_.readback) opts_.readback->hold();
  }
  sync_.pod_count += page.pod_count;
  sync_.container_count += page.container_count;
  // Checked: every item decodes (a failure here would be a bug; it is
  // logged and the item skipped).
  page.pods.for_each([&](std::string_view raw) {
    pb::PodSandboxView p;
    if (auto r = pb::decode_pod(raw, &p, 1); !r) return log::err("NRI: Synchronize pod: {}", r.error().message);
    remember_pod(p);
    sync_.pods.emplace(p.uid);
    sync_.uid_by_sandbox.insert_or_assign(std::string(p.id), std::string(p.uid));
  });
  page.containers.for_each([&](std::string_view raw) {
    pb::ContainerView c;
    if (auto r = pb::decode_container(raw, &c, 1); !r)
      return log::err("NRI: Synchronize container: {}", r.error().message);
    auto it = sync_.uid_by_sandbox.find(c.pod_sandbox_id);
    if (it == sync_.uid_by_sandbox.end() && page.more) {
      // Its pod may be on a later page: stored now (no copy of its bytes
      // is kept), given its pod uid at the end.
      sync_container({}, c, true);
      sync_.orphans.emplace_back(std::string(c.id), std::string(c.pod_sandbox_id));
      return;
    }
    sync_container(it == sync_.uid_by_sandbox.end() ? std::string_view() : std::string_view(it->second), c);
  });
  if (!page.more) finish_synchronize();
}

void NriAdapter::finish_synchronize() {
  for (const auto& [id, sandbox] : sync_.orphans) {
    auto it = sync_.uid_by_sandbox.find(sandbox);
    if (it == sync_.uid_by_sandbox.end()) {
      // No such pod in the whole sync: ignored, as a container with an
      // unknown pod is at any other time.
      log::warn("NRI: ignoring container {}: its pod sandbox {} is not in the Synchronize", id, sandbox);
      stored_or_gone(store_.remove_container(id), "forgetting the container", id);
      sync_.ctrs.erase(id);
      continue;
    }
    const std::string& uid = it->second;
    stored_or_gone(store_.update_container(id, [&](core::Container& c) { c.pod_uid = uid; }),
                   "giving its pod to the container", id);
  }
  // weight_formula: auto learns from a few running containers' cpu.weight
  // (sync_container), and containers podshim has never read (it was away
  // when they started) get their actual values now, with the formula learned.
  if (opts_.readback) opts_.readback->touch_all();

  // What the runtime no longer has went away while podshim was not looking.
  std::vector<std::string> gone_ctrs, gone_pods;
  store_.for_each_container([&](const core::Container& c) {
    if (c.source == core::Source::Nri && !sync_.ctrs.count(c.id)) gone_ctrs.push_back(c.id);
  });
  store_.for_each_pod([&](const core::Pod& p) {
    if (p.source == core::Source::Nri && !sync_.pods.count(p.uid)) gone_pods.push_back(p.uid);
  });
  for (const auto& id : gone_ctrs) stored_or_gone(store_.remove_container(id), "dropping the stale container", id);
  for (const auto& uid : gone_pods) stored_or_gone(store_.remove_pod(uid), "dropping the stale pod", uid);
  log::info("NRI: synchronized {} pods and {} containers ({} stale containers dropped)", sync_.pod_count,
            sync_.container_count, gone_ctrs.size());
  sync_ = SyncState{};  // release the sets of a big sync
}

Result<void> NriAdapter::create_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                          api::CreateContainerResponse* reply) {
  // The answer needs only the CDI edits; what podshimd keeps of the pod and
  // the container is recorded after it, before the next request is read
  // (also when the answer is an error: the runtime knows the container).
  after_reply([this, pod, ctr] {
    remember_pod(pod);
    remember(pod.uid, ctr, true);
  });
  if (!registry_) return {};
  std::vector<std::string> names;
  ctr.cdi_devices.for_each([&](std::string_view d) { names.emplace_back(pb::cdi_device_name(d)); });
  auto requested = cdi::requested_devices(names, cdi_annotations(pod, ctr));
  if (!requested) return wrap(requested, fmt::format("container {}: CDI request", ctr.id));
  if (requested->empty()) return {};

  cdi::ProcessIds ids;
  if (ctr.has_user) ids = {ctr.uid, ctr.gid};
  auto edits = cdi::resolve_devices(*registry_, *requested, ids);
  if (!edits) {
    log::at(log::Level::Err, {{"CONTAINER_ID", std::string(ctr.id)}}, "CDI injection failed: {}",
            edits.error().message);
    return wrap(edits, fmt::format("container {}: CDI injection", ctr.id));
  }
  auto added = edits_to_adjustment(*edits, ctr, opts_.adjustment, reply->mutable_adjust());
  if (metrics_) metrics_->cdi_injections.inc({}, static_cast<double>(requested->size()));
  // Node paths are per request set, not per name, in resolved edits.
  std::vector<std::string> paths;
  for (const auto& d : edits->devices) paths.push_back(d.path);
  after_reply([this, id = std::string(ctr.id), names = std::move(*requested), paths = std::move(paths),
               nodes = added.size(), mounts = reply->adjust().mounts_size()] {
    auto stored = store_.update_container(id, [&](core::Container& c) {
      c.devices.clear();
      for (const auto& name : names) {
        core::InjectedDevice d;
        d.cdi_name = name;
        c.devices.push_back(std::move(d));
      }
      if (!c.devices.empty()) c.devices.front().node_paths = paths;
    });
    // The devices are in the adjustment whatever the store says; a container
    // gone meanwhile (ENOENT) only loses their record.
    stored_or_gone(stored, "recording the CDI devices of the container", id);
    log::at(log::Level::Info, {{"CONTAINER_ID", id}}, "injected CDI devices {} ({} device nodes, {} mounts added)",
            fmt::join(names, ","), nodes, mounts);
  });
  return {};
}

namespace {

// The runtime's new values as a container resize of the service: what is
// set is the new value, what the runtime no longer sets is removed.
core::ContainerResize to_container_resize(const std::string& id, const cgroup::K8sResources& current,
                                          const cgroup::K8sResources& next) {
  core::ContainerResize r;
  r.container_id = id;
  r.resources = next;
  r.remove.cpu_request = current.cpu_request_milli && !next.cpu_request_milli;
  r.remove.cpu_limit = current.cpu_limit_milli && !next.cpu_limit_milli;
  r.remove.memory_request = current.memory_request_bytes && !next.memory_request_bytes;
  r.remove.memory_limit = current.memory_limit_bytes && !next.memory_limit_bytes;
  return r;
}

// A service outcome as the runtime's answer: Error goes back as an error
// (the runtime fails the CRI call, the kubelet retries); everything else
// lets the runtime write.
Result<void> to_runtime_answer(const Result<core::ResizeResult>& r) {
  if (!r) return Unexpected(r.error());
  if (r->outcome == core::ResizeOutcome::Error) return fail(EBUSY, "{}", r->message);
  return {};
}

}  // namespace

void NriAdapter::update_container(const pb::PodSandboxView& pod, const pb::ContainerView& ctr,
                                  const pb::LinuxResourcesView& resources,
                                  nri::Respond<api::UpdateContainerResponse> respond) {
  // Only the pod uid and the desired values of the known container matter
  // here: read them in place instead of copying the container.
  std::optional<std::pair<std::string, cgroup::K8sResources>> known;
  auto look = [&] {
    store_.with_container(ctr.id, [&](const core::Container& c) { known.emplace(c.pod_uid, c.desired); });
  };
  look();
  if (!known) {
    // New to podshim: the whole container is read and checked now (the
    // request's views hold only its ids, decode_update_container).
    pb::ContainerView full;
    if (ctr.partial) {
      if (auto d = pb::decode_container(ctr.raw, &full, 1); !d)
        return respond(Unexpected(d.error().wrap("UpdateContainerRequest.container")));
    }
    remember(pod.uid, ctr.partial ? full : ctr, true);
    look();
  }
  // Values the kernel would refuse are refused before anything is recorded.
  // The context is formatted only on a refusal, not on every update.
  if (auto k = cgroup::check_kernel_limits(linux_values(resources)); !k) {
    auto e = std::move(k).error().wrap(fmt::format("container {}", ctr.id));
    log::at(log::Level::Warning, {{"CONTAINER_ID", std::string(ctr.id)}}, "refusing resize: {}", e.message);
    return respond(Unexpected(std::move(e)));
  }
  if (!known || !resize_) return respond(api::UpdateContainerResponse());
  const cgroup::K8sResources next = resources_from_nri(resources, known->second);
  core::ResizeIntent in;
  in.source = core::IntentSource::NriUpdateContainer;
  in.pod_uid = std::move(known->first);
  in.containers.push_back(to_container_resize(std::string(ctr.id), known->second, next));
  resize_->submit(std::move(in), [respond = std::move(respond)](Result<core::ResizeResult> r) {
    auto answer = to_runtime_answer(r);
    if (!answer) return respond(Unexpected(answer.error()));
    respond(api::UpdateContainerResponse());
  });
}

void NriAdapter::update_pod_sandbox(const pb::PodSandboxView& p, const pb::LinuxResourcesView& resources,
                                    nri::Respond<api::UpdatePodSandboxResponse> respond) {
  cgroup::K8sResources current;
  store_.with_pod(p.uid, [&](const core::Pod& known) { current = known.resources; });
  if (auto k = cgroup::check_kernel_limits(linux_values(resources)); !k) {
    auto e = std::move(k).error().wrap(fmt::format("pod {}", p.uid));
    log::warn("refusing pod resize of {}: {}", p.uid, e.message);
    return respond(Unexpected(std::move(e)));
  }
  const cgroup::K8sResources next = resources_from_nri(resources, current);
  remember_pod(p);
  if (!resize_) return respond(api::UpdatePodSandboxResponse());
  core::ResizeIntent in;
  in.source = core::IntentSource::NriUpdatePodSandbox;
  in.pod_uid = p.uid;
  in.pod_resources = next;
  in.pod_cgroup_path = p.cgroup_parent;
  resize_->submit(std::move(in), [respond = std::move(respond)](Result<core::ResizeResult> r) {
    auto answer = to_runtime_answer(r);
    if (!answer) return respond(Unexpected(answer.error()));
    respond(api::UpdatePodSandboxResponse());
  });
}

void NriAdapter::learn_formula(std::string_view id, uint64_t shares, const cgroup::Actual& a) {
  const auto& w = a.cpu_weight;
  if (!opts_.formulas || !w || shares == 0) return;
  const auto learned = opts_.formulas->learn(shares, *w, id);
  if (learned.notice)
    log::notice("NRI: {}", *learned.notice);
  else if (learned.vote == cgroup::WeightVote::Neither)
    log::at(log::Level::Debug, {{"CONTAINER_ID", std::string(id)}},
            "cpu.weight {} matches neither formula for {} shares (rewritten since?)", *w, shares);
}

void NriAdapter::remove_pod(std::string_view uid) {
  std::vector<std::string> ids;
  store_.for_each_container_of(uid, [&](const core::Container& k) { ids.push_back(k.id); });
  for (const auto& id : ids) stored_or_gone(store_.remove_container(id), "forgetting the container", id);
  stored_or_gone(store_.remove_pod(uid), "forgetting the pod", uid);
}

void NriAdapter::refresh_actual(const pb::ContainerView& ctr) {
  const uint64_t shares = ctr.resources.cpu_shares.value;
  if (opts_.readback) opts_.readback->touch_soon(std::string(ctr.id), shares);
}

void NriAdapter::on_ready() {
  if (metrics_) metrics_->nri_connected.set({}, 1);
  log::notice("NRI: registered and synchronized with {} {}", runtime_.name, runtime_.version);
}

void NriAdapter::on_connection_error(const Error& why, bool will_retry) {
  if (metrics_) metrics_->nri_connected.set({}, 0);
  log::warn("NRI: connection lost: {}{}", why.message, will_retry ? "; reconnecting" : "");
  if (opts_.on_disconnect) opts_.on_disconnect(will_retry);
}

NriActuator::NriActuator(cgroup::Engine& engine, nri::Plugin* plugin, core::Scheduler schedule,
                         std::chrono::milliseconds release_after)
    : engine_(engine), plugin_(plugin), schedule_(std::move(schedule)), release_after_(release_after) {}

NriActuator::~NriActuator() {
  *alive_ = false;
  std::vector<std::string> paths;
  for (const auto& [p, token] : held_) paths.push_back(p);
  release(paths);
}

void NriActuator::apply(const core::Actuation& a, Done done) {
  if (a.source == core::IntentSource::Api)
    apply_from_api(a, std::move(done));
  else
    apply_from_runtime(a, std::move(done));
}

void NriActuator::hold(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, uint64_t>> tokens;
  for (const auto& p : paths) {
    held_[p] = ++next_token_;
    tokens.emplace_back(p, next_token_);
  }
  if (!schedule_ || tokens.empty()) return;
  // The runtime's Post* event may never come (the write failed, an old
  // runtime): the clamp goes after a bound either way.
  schedule_(release_after_, [this, alive = std::weak_ptr<bool>(alive_), tokens] {
    auto a = alive.lock();
    if (!a || !*a) return;
    std::vector<std::string> due;
    for (const auto& [p, t] : tokens)
      if (auto it = held_.find(p); it != held_.end() && it->second == t) due.push_back(p);
    if (!due.empty()) {
      log::info("NRI: no PostUpdate for {} cgroup(s) within {} ms; releasing the memory.high clamp", due.size(),
                release_after_.count());
      release(due);
    }
  });
}

void NriActuator::release(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  for (const auto& p : paths) held_.erase(p);
  if (auto r = engine_.release(paths); !r)
    log::warn("NRI: restoring memory.high after the runtime's write failed: {}", r.error().message);
}

void NriActuator::landed(const std::string& cgroup_path) {
  if (held_.count(cgroup_path)) release({cgroup_path});
}

void NriActuator::apply_from_runtime(const core::Actuation& a, Done done) {
  // Only a memory shrink needs the engine: the runtime writes everything
  // else itself. Judged against what the kernel holds now.
  cgroup::PodResizeRequest req;
  req.mode = cgroup::WriteMode::ReclaimOnly;
  std::vector<std::string> paths;
  auto needs_room = [&](const cgroup::ResizeTarget& t) -> Result<bool> {
    if (!t.desired.memory_limit_bytes || t.cgroup_path.empty()) return false;
    // memory.max alone: this runs on every UpdateContainer that carries a
    // memory limit, and the full read-back (memory.stat among its files) is
    // the read-back's job, not the update path's.
    auto now = engine_.read_memory_max(t.cgroup_path);
    if (!now) return wrap(now, fmt::format("reading the cgroup of {}", t.id));
    // No cgroup (yet): nothing can be OOM-killed by the runtime's write.
    if (!now->exists) return false;
    return !now->limit_bytes || static_cast<uint64_t>(*t.desired.memory_limit_bytes) < *now->limit_bytes;
  };
  for (const auto& t : a.plan.containers) {
    auto n = needs_room(t);
    if (!n) return done(Unexpected(n.error()));
    if (*n) {
      req.containers.push_back(t);
      paths.push_back(t.cgroup_path);
    }
  }
  if (a.plan.pod) {
    auto n = needs_room(*a.plan.pod);
    if (!n) return done(Unexpected(n.error()));
    if (*n) {
      req.pod = a.plan.pod;
      paths.push_back(a.plan.pod->cgroup_path);
    }
  }
  if (paths.empty()) return done(cgroup::ResizeReport{});
  engine_.resize(req, [this, alive = std::weak_ptr<bool>(alive_), paths, done = std::move(done)](
                          Result<cgroup::ResizeReport> r) {
    auto live = alive.lock();
    if (live && *live && r) hold(paths);
    done(std::move(r));
  });
}

namespace {

// Whether the kernel holds what was asked, in the units the runtime writes
// (limits; cpu.weight is not compared: its conversion is not one to one).
std::string read_back_mismatch(const cgroup::ResizeTarget& t, const cgroup::Actual& a) {
  if (t.desired.memory_limit_bytes && a.memory_limit_bytes != t.desired.memory_limit_bytes)
    return fmt::format("container {}: the runtime confirmed the update, but memory.max reads {} (asked {})", t.id,
                       a.memory_max_raw, *t.desired.memory_limit_bytes);
  if (t.desired.cpu_limit_milli && a.cpu_limit_milli != t.desired.cpu_limit_milli)
    return fmt::format("container {}: the runtime confirmed the update, but cpu.max reads '{}' (asked {}m)", t.id,
                       a.cpu_max_raw, *t.desired.cpu_limit_milli);
  return {};
}

}  // namespace

void NriActuator::apply_from_api(const core::Actuation& a, Done done) {
  auto pod_then_done = [this, alive = std::weak_ptr<bool>(alive_), pod = a.plan.pod, done](
                           Result<cgroup::ResizeReport> containers) mutable {
    auto live = alive.lock();
    if (!live || !*live || !containers || !pod) return done(std::move(containers));
    cgroup::PodResizeRequest preq;
    preq.pod = pod;
    preq.mode = cgroup::WriteMode::All;  // no NRI call writes a pod sandbox's cgroup
    engine_.resize(preq, [done, before = std::move(*containers)](Result<cgroup::ResizeReport> r) mutable {
      if (!r) return done(std::move(r));
      before.steps.insert(before.steps.end(), r->steps.begin(), r->steps.end());
      before.bytes_reclaimed += r->bytes_reclaimed;
      for (const auto& [id, e] : r->events) before.events[id] = e;
      for (auto& [id, a] : r->after) before.after[id] = std::move(a);
      before.duration += r->duration;
      done(std::move(before));
    });
  };
  if (a.plan.containers.empty()) return pod_then_done(cgroup::ResizeReport{});
  if (!plugin_) return done(fail(ENOTCONN, "resize: not connected to the runtime (NRI)"));

  cgroup::PodResizeRequest req;
  req.containers = a.plan.containers;
  req.mode = cgroup::WriteMode::ReclaimOnly;
  engine_.resize(req, [this, alive = std::weak_ptr<bool>(alive_), targets = a.plan.containers,
                       next = std::move(pod_then_done)](Result<cgroup::ResizeReport> r) mutable {
    auto live = alive.lock();
    if (!live || !*live) return;
    if (!r) return next(std::move(r));
    std::vector<std::string> paths;
    std::vector<api::ContainerUpdate> updates;
    for (const auto& t : targets) {
      paths.push_back(t.cgroup_path);
      api::ContainerUpdate u;
      u.set_container_id(t.id);
      *u.mutable_linux()->mutable_resources() = resources_to_nri(t.desired);
      updates.push_back(std::move(u));
    }
    if (!plugin_) {
      release(paths);
      return next(fail(ENOTCONN, "resize: not connected to the runtime (NRI)"));
    }
    plugin_->update_containers(
        std::move(updates), {},
        [this, alive = std::weak_ptr<bool>(alive_), targets, paths, report = std::move(*r),
         next = std::move(next)](Result<std::vector<api::ContainerUpdate>> failed) mutable {
          auto live = alive.lock();
          if (!live || !*live) return;
          release(paths);
          if (!failed) return next(Unexpected(failed.error().wrap("asking the runtime to resize")));
          if (!failed->empty())
            return next(fail(EIO, "the runtime failed to update container {}", (*failed)[0].container_id()));
          // Confirmed: now the kernel must agree.
          for (const auto& t : targets) {
            auto act = engine_.read_limits(t.cgroup_path);
            if (!act) return next(Unexpected(act.error().wrap(fmt::format("reading back {}", t.id))));
            if (auto why = read_back_mismatch(t, *act); !why.empty()) return next(fail(EIO, "{}", why));
          }
          next(std::move(report));
        });
  });
}

Result<cgroup::Actual> NriActuator::read_actual(const std::string& cgroup_path) {
  return engine_.read_limits(cgroup_path);
}

}  // namespace podshim::adapter
