#include "shim/adapter/nri_adapter.h"

#include <chrono>
#include <set>

#include <fmt/ranges.h>

#include "base/log.h"
#include "base/str.h"
#include "cdi/requests.h"

namespace podshim::adapter {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whether `next` lowers the memory limit below what the kernel holds now
// (an unlimited cgroup gaining a limit counts as lowering).
bool lowers_memory(const cgroup::K8sResources& next, const std::optional<int64_t>& current) {
  if (!next.memory_limit_bytes) return false;
  return !current || *next.memory_limit_bytes < *current;
}

}  // namespace

NriAdapter::NriAdapter(core::Store& store, cgroup::Engine* engine, cdi::Registry* registry,
                       core::Metrics* metrics, AdapterOptions opts)
    : store_(store), engine_(engine), registry_(registry), metrics_(metrics), opts_(std::move(opts)) {}

void NriAdapter::count(api::Event e) {
  if (metrics_) metrics_->nri_events.inc({{"event", std::string(nri::event_name(e))}});
}

Result<uint32_t> NriAdapter::configure(const api::ConfigureRequest& req, const nri::RuntimeInfo& rt) {
  runtime_ = rt;
  if (opts_.formulas) opts_.formulas->set_runtime(fmt::format("{} {}", rt.name, rt.version));
  log::info("NRI: configured by {} {} (NRI {}), request timeout {} ms", rt.name, rt.version,
            rt.nri_version.empty() ? "< v0.12" : rt.nri_version, rt.request_timeout_ms);
  if (!req.config().empty()) {
    if (!opts_.on_config) return fail(EINVAL, "NRI Configure carried a config, but podshimd takes none here");
    PODSHIM_TRY(opts_.on_config(req.config()));
  }
  return opts_.events ? opts_.events : kDefaultEvents;
}

void NriAdapter::remember_pod(const api::PodSandbox& p) {
  auto pod = pod_from_nri(p);
  if (!pod) {
    log::warn("NRI: ignoring pod {}: {}", p.id(), pod.error().message);
    return;
  }
  if (auto old = store_.pod(pod->uid)) pod->actual = old->actual;
  if (auto r = store_.upsert_pod(std::move(*pod)); !r)
    log::err("NRI: storing pod {}: {}", p.uid(), r.error().message);
}

void NriAdapter::remember(const api::PodSandbox& pod, const api::Container& ctr,
                          bool take_resources) {
  auto c = container_from_nri(pod, ctr);
  if (!c) {
    log::warn("NRI: ignoring container {}: {}", ctr.id(), c.error().message);
    return;
  }
  if (auto old = store_.container(c->id)) {
    c->conditions = old->conditions;
    c->generation = old->generation;
    c->devices = old->devices;
    c->selinux_mount_label = old->selinux_mount_label;
    c->last_error = old->last_error;
    c->actual = old->actual;
    c->drift = old->drift;
    c->restart_required = old->restart_required;
    c->cpu_policy = old->cpu_policy;
    c->memory_policy = old->memory_policy;
    if (!take_resources) {
      c->desired = old->desired;
      c->allocated = old->allocated;
    }
  }
  if (auto r = store_.upsert_container(std::move(*c)); !r)
    log::at(log::Level::Err, {{"CONTAINER_ID", ctr.id()}}, "NRI: storing container: {}",
            r.error().message);
}

Result<void> NriAdapter::synchronize(const api::SynchronizeRequest& all,
                                     api::SynchronizeResponse* reply) {
  (void)reply;  // podshim never asks for updates at sync time
  std::set<std::string, std::less<>> pods, ctrs;
  std::map<std::string, const api::PodSandbox*, std::less<>> by_sandbox;
  for (const auto& p : all.pods()) {
    remember_pod(p);
    pods.insert(p.uid());
    by_sandbox[p.id()] = &p;
  }
  static const api::PodSandbox kNoPod;
  // weight_formula: auto learns from a few running containers' cpu.weight,
  // and containers podshim has never read (it was away when they started)
  // get their actual values now, with the formula learned.
  size_t probes = 0;
  std::vector<std::pair<std::string, uint64_t>> unread;
  for (const auto& c : all.containers()) {
    auto it = by_sandbox.find(c.pod_sandbox_id());
    remember(it == by_sandbox.end() ? kNoPod : *it->second, c, true);
    ctrs.insert(c.id());
    const uint64_t shares = c.linux().resources().cpu().shares().value();
    if (engine_ && opts_.formulas && opts_.formulas->wants_samples() && probes < kMaxFormulaProbes &&
        shares > 0 && !c.linux().cgroups_path().empty()) {
      ++probes;
      if (auto a = engine_->read_actual(c.linux().cgroups_path())) learn_formula(c, *a);
    }
    if (engine_ && c.state() == api::CONTAINER_RUNNING) {
      auto known = store_.container(c.id());
      if (known && !known->actual) unread.emplace_back(c.id(), 0);
    }
  }
  if (opts_.readback) {
    opts_.readback->touch_all();
  } else if (!unread.empty()) {
    auto work = [this, unread = std::move(unread)] {
      for (const auto& [id, shares] : unread) read_back_container(id, shares);
    };
    if (opts_.defer)
      opts_.defer(std::move(work));
    else
      work();
  }

  // What the runtime no longer has went away while podshim was not looking.
  std::vector<std::string> gone_ctrs, gone_pods;
  store_.for_each_container([&](const core::Container& c) {
    if (c.source == core::Source::Nri && !ctrs.count(c.id)) gone_ctrs.push_back(c.id);
  });
  store_.for_each_pod([&](const core::Pod& p) {
    if (p.source == core::Source::Nri && !pods.count(p.uid)) gone_pods.push_back(p.uid);
  });
  for (const auto& id : gone_ctrs) (void)store_.remove_container(id);
  for (const auto& uid : gone_pods) (void)store_.remove_pod(uid);
  const size_t dropped = gone_ctrs.size();
  log::info("NRI: synchronized {} pods and {} containers ({} stale containers dropped)",
            all.pods_size(), all.containers_size(), dropped);
  return {};
}

Result<void> NriAdapter::create_container(const api::PodSandbox& pod, const api::Container& ctr,
                                          api::CreateContainerResponse* reply) {
  count(api::CREATE_CONTAINER);
  remember_pod(pod);
  remember(pod, ctr, true);
  if (!registry_) return {};
  std::vector<std::string> names(ctr.cdi_devices_size());
  for (int i = 0; i < ctr.cdi_devices_size(); ++i) names[i] = ctr.cdi_devices(i).name();
  auto requested = cdi::requested_devices(names, merged_annotations(pod, ctr));
  if (!requested) return wrap(requested, fmt::format("container {}: CDI request", ctr.id()));
  if (requested->empty()) return {};

  cdi::ProcessIds ids;
  if (ctr.has_user()) ids = {ctr.user().uid(), ctr.user().gid()};
  auto edits = cdi::resolve_devices(*registry_, *requested, ids);
  if (!edits) {
    log::at(log::Level::Err, {{"CONTAINER_ID", ctr.id()}}, "CDI injection failed: {}",
            edits.error().message);
    return wrap(edits, fmt::format("container {}: CDI injection", ctr.id()));
  }
  auto added = edits_to_adjustment(*edits, ctr, opts_.adjustment, reply->mutable_adjust());
  if (metrics_) metrics_->cdi_injections.inc({}, static_cast<double>(requested->size()));
  auto stored = store_.update_container(ctr.id(), [&](core::Container& c) {
    c.devices.clear();
    for (const auto& name : *requested) {
      core::InjectedDevice d;
      d.cdi_name = name;
      c.devices.push_back(std::move(d));
    }
    // Node paths are per request set, not per name, in resolved edits.
    if (!c.devices.empty())
      for (const auto& d : edits->devices) c.devices.front().node_paths.push_back(d.path);
  });
  (void)stored;
  log::at(log::Level::Info, {{"CONTAINER_ID", ctr.id()}},
          "injected CDI devices {} ({} device nodes, {} mounts added)",
          fmt::join(*requested, ","), added.size(), reply->adjust().mounts_size());
  return {};
}

Result<void> NriAdapter::guard(const std::string& id, const std::string& cgroup_path,
                               const cgroup::K8sResources& next, bool is_pod) {
  if (!engine_ || cgroup_path.empty()) return {};
  auto actual = engine_->read_actual(cgroup_path);
  if (!actual) {
    // No cgroup (yet): nothing can be OOM-killed by the runtime's write.
    if (actual.error().code == ENOENT) return {};
    return wrap(actual, fmt::format("reading the cgroup of {}", id));
  }
  if (!lowers_memory(next, actual->memory_limit_bytes)) return {};

  cgroup::PodResizeRequest req;
  cgroup::ResizeTarget t{id, cgroup_path, next};
  if (is_pod)
    req.pod = t;
  else
    req.containers.push_back(t);
  auto start = std::chrono::steady_clock::now();
  auto r = engine_->resize(req);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (metrics_) metrics_->resize_latency.observe({}, secs);
  if (!r) {
    const bool refused = r.error().kind == ErrorKind::ShrinkRefused;
    if (metrics_) {
      metrics_->resize_requests.inc({{"result", refused ? "refused" : "error"}});
      if (refused) metrics_->shrinks_refused.inc();
    }
    return Unexpected(r.error());
  }
  if (metrics_) {
    metrics_->resize_requests.inc({{"result", "applied"}});
    metrics_->bytes_reclaimed.inc({}, static_cast<double>(r->bytes_reclaimed));
  }
  return {};
}

Result<void> NriAdapter::update_container(const api::PodSandbox& pod, const api::Container& ctr,
                                          const api::LinuxResources& resources,
                                          api::UpdateContainerResponse* reply) {
  (void)reply;  // the runtime applies the values the kubelet asked for
  count(api::UPDATE_CONTAINER);
  auto known = store_.container(ctr.id());
  if (!known) {
    remember(pod, ctr, true);
    known = store_.container(ctr.id());
  }
  const cgroup::K8sResources current = known ? known->desired : cgroup::K8sResources{};
  // Values the kernel would refuse are refused before anything is recorded (issue 17.5).
  if (auto k = cgroup::check_kernel_limits(linux_values(resources), {}, fmt::format("container {}", ctr.id())); !k) {
    log::at(log::Level::Warning, {{"CONTAINER_ID", ctr.id()}}, "refusing resize: {}", k.error().message);
    return Unexpected(k.error());
  }
  const cgroup::K8sResources next = resources_from_nri(resources, current);
  const std::string path = known ? known->cgroup_path : ctr.linux().cgroups_path();

  auto r = guard(ctr.id(), path, next, false);
  (void)store_.update_container(ctr.id(), [&](core::Container& c) {
    c.generation++;
    c.desired = next;
    if (r) {
      c.allocated = next;
      c.conditions.in_progress.reset();
      c.last_error.clear();
    } else {
      core::Condition cond;
      cond.reason = std::string(core::kReasonError);
      cond.message = r.error().message;
      cond.observed_generation = c.generation;
      cond.last_transition_unix_ms = now_ms();
      c.conditions.in_progress = cond;
      c.last_error = r.error().message;
    }
  });
  if (!r) {
    log::at(log::Level::Warning, {{"CONTAINER_ID", ctr.id()}}, "refusing resize: {}",
            r.error().message);
    return Unexpected(r.error());
  }
  return {};
}

Result<void> NriAdapter::update_pod_sandbox(const api::UpdatePodSandboxRequest& req) {
  count(api::UPDATE_POD_SANDBOX);
  const auto& p = req.pod();
  auto known = store_.pod(p.uid());
  const cgroup::K8sResources current = known ? known->resources : cgroup::K8sResources{};
  if (auto k = cgroup::check_kernel_limits(linux_values(req.linux_resources()), {}, fmt::format("pod {}", p.uid()));
      !k) {
    log::warn("refusing pod resize of {}: {}", p.uid(), k.error().message);
    return Unexpected(k.error());
  }
  const cgroup::K8sResources next = resources_from_nri(req.linux_resources(), current);
  auto r = guard(p.uid(), p.linux().cgroup_parent(), next, true);
  if (!r) {
    log::warn("refusing pod resize of {}: {}", p.uid(), r.error().message);
    return Unexpected(r.error());
  }
  remember_pod(p);
  (void)store_.update_pod(p.uid(), [&](core::Pod& pod) { pod.resources = next; });
  return {};
}

Result<void> NriAdapter::stop_container(const api::PodSandbox& pod, const api::Container& ctr,
                                        api::StopContainerResponse* reply) {
  (void)reply;
  count(api::STOP_CONTAINER);
  remember(pod, ctr, false);
  (void)store_.update_container(ctr.id(), [](core::Container& c) { c.state = "stopped"; });
  return {};
}

cgroup::WeightFormula NriAdapter::formula() const {
  return opts_.formulas ? opts_.formulas->formula() : opts_.formula;
}

void NriAdapter::learn_formula(const api::Container& ctr, const cgroup::Actual& a) {
  const uint64_t shares = ctr.linux().resources().cpu().shares().value();
  auto w = str::parse_u64(a.cpu_weight_raw);
  if (!opts_.formulas || !w || shares == 0) return;
  const auto before = opts_.formulas->learned();
  const auto vote = opts_.formulas->observe(shares, *w);
  const auto after = opts_.formulas->learned();
  if (after && before != after)
    log::notice("NRI: {} {} writes cpu.weight with the {} formula (container {}: {} shares → weight {})",
                runtime_.name, runtime_.version, cgroup::formula_name(*after), ctr.id(), shares, *w);
  else if (vote == cgroup::WeightVote::Neither)
    log::at(log::Level::Debug, {{"CONTAINER_ID", ctr.id()}},
            "cpu.weight {} matches neither formula for {} shares (rewritten since?)", *w, shares);
}

void NriAdapter::read_back_container(const std::string& id, uint64_t shares) {
  auto c = store_.container(id);
  if (!engine_ || !c || c->cgroup_path.empty()) return;
  auto a = engine_->read_actual(c->cgroup_path);
  if (a && shares > 0 && opts_.formulas) {
    api::Container sample;
    sample.set_id(id);
    sample.mutable_linux()->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(shares);
    learn_formula(sample, *a);
  }
  if (a) {
    // Converted with the formula as it stands after this very sample.
    if (auto w = str::parse_u64(a->cpu_weight_raw)) a->cpu_request_milli = cgroup::weight_to_milli_cpu(*w, formula());
  }
  if (!a) {
    log::at(log::Level::Debug, {{"CONTAINER_ID", id}}, "read-back failed, ignoring: {}",
            a.error().message);
    return;
  }
  (void)store_.update_container(id, [&](core::Container& ct) {
    core::ActualResources act;
    act.resources.cpu_request_milli = a->cpu_request_milli;
    // Many requests map onto one weight; when the kernel holds exactly the
    // weight of the allocated request, that request is what it holds.
    if (ct.allocated.cpu_request_milli &&
        a->cpu_weight_raw ==
            std::to_string(cgroup::milli_cpu_to_weight(*ct.allocated.cpu_request_milli, formula())))
      act.resources.cpu_request_milli = ct.allocated.cpu_request_milli;
    act.resources.cpu_limit_milli = a->cpu_limit_milli;
    act.resources.memory_limit_bytes = a->memory_limit_bytes;
    act.memory_current = a->memory_current;
    act.oom_kill = a->oom_kill;
    act.read_unix_ms = now_ms();
    if (metrics_ && ct.actual && a->oom_kill > ct.actual->oom_kill)
      metrics_->oom_kills.inc({{"container", id}}, static_cast<double>(a->oom_kill - ct.actual->oom_kill));
    ct.actual = act;
  });
}

void NriAdapter::run_pod_sandbox(const api::PodSandbox& pod) {
  count(api::RUN_POD_SANDBOX);
  remember_pod(pod);
}
void NriAdapter::stop_pod_sandbox(const api::PodSandbox& pod) { count(api::STOP_POD_SANDBOX); (void)pod; }
void NriAdapter::remove_pod_sandbox(const api::PodSandbox& pod) {
  count(api::REMOVE_POD_SANDBOX);
  for (const auto& c : store_.containers_of(pod.uid())) (void)store_.remove_container(c.id);
  (void)store_.remove_pod(pod.uid());
}
void NriAdapter::post_update_pod_sandbox(const api::PodSandbox& pod) {
  count(api::POST_UPDATE_POD_SANDBOX);
  remember_pod(pod);
}
void NriAdapter::post_create_container(const api::PodSandbox& pod, const api::Container& ctr) {
  count(api::POST_CREATE_CONTAINER);
  remember(pod, ctr, false);
}
void NriAdapter::start_container(const api::PodSandbox& pod, const api::Container& ctr) {
  count(api::START_CONTAINER);
  remember(pod, ctr, false);
}
void NriAdapter::post_start_container(const api::PodSandbox& pod, const api::Container& ctr) {
  count(api::POST_START_CONTAINER);
  remember(pod, ctr, false);
  if (opts_.readback)
    opts_.readback->touch(ctr.id(), ctr.linux().resources().cpu().shares().value());
  else
    read_back_container(ctr.id(), ctr.linux().resources().cpu().shares().value());
}
void NriAdapter::post_update_container(const api::PodSandbox& pod, const api::Container& ctr) {
  count(api::POST_UPDATE_CONTAINER);
  remember(pod, ctr, false);
  if (opts_.readback)
    opts_.readback->touch(ctr.id(), ctr.linux().resources().cpu().shares().value());
  else
    read_back_container(ctr.id(), ctr.linux().resources().cpu().shares().value());
}
void NriAdapter::remove_container(const api::PodSandbox& pod, const api::Container& ctr) {
  count(api::REMOVE_CONTAINER);
  (void)pod;
  (void)store_.remove_container(ctr.id());
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

NriActuator::NriActuator(cgroup::Engine& engine, nri::Plugin* plugin)
    : engine_(engine), plugin_(plugin) {}

Result<cgroup::ResizeReport> NriActuator::apply(const cgroup::PodResizeRequest& req) {
  auto r = engine_.resize(req);
  if (!r || !plugin_ || req.containers.empty()) return r;
  std::vector<api::ContainerUpdate> updates;
  for (const auto& t : req.containers) {
    api::ContainerUpdate u;
    u.set_container_id(t.id);
    *u.mutable_linux()->mutable_resources() = resources_to_nri(t.desired);
    updates.push_back(std::move(u));
  }
  plugin_->update_containers(std::move(updates), {}, [](auto failed) {
    if (!failed)
      log::warn("NRI: telling the runtime about a resize failed: {}", failed.error().message);
    else
      for (const auto& f : *failed)
        log::at(log::Level::Warning, {{"CONTAINER_ID", f.container_id()}},
                "NRI: runtime failed to record the resize");
  });
  return r;
}

Result<cgroup::Actual> NriActuator::read_actual(const std::string& cgroup_path) {
  return engine_.read_actual(cgroup_path);
}

}  // namespace podshim::adapter
