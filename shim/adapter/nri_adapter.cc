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
    c->last_outcome = old->last_outcome;
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

void NriAdapter::update_container(const api::PodSandbox& pod, const api::Container& ctr,
                                  const api::LinuxResources& resources,
                                  nri::Respond<api::UpdateContainerResponse> respond) {
  count(api::UPDATE_CONTAINER);
  auto known = store_.container(ctr.id());
  if (!known) {
    remember(pod, ctr, true);
    known = store_.container(ctr.id());
  }
  // Values the kernel would refuse are refused before anything is recorded (issue 17.5).
  if (auto k = cgroup::check_kernel_limits(linux_values(resources), {}, fmt::format("container {}", ctr.id())); !k) {
    log::at(log::Level::Warning, {{"CONTAINER_ID", ctr.id()}}, "refusing resize: {}", k.error().message);
    return respond(Unexpected(k.error()));
  }
  if (!known || !resize_) return respond(api::UpdateContainerResponse());
  const cgroup::K8sResources next = resources_from_nri(resources, known->desired);
  core::ResizeIntent in;
  in.source = core::IntentSource::NriUpdateContainer;
  in.pod_uid = known->pod_uid;
  in.containers.push_back(to_container_resize(ctr.id(), known->desired, next));
  resize_->submit(std::move(in), [respond = std::move(respond)](Result<core::ResizeResult> r) {
    auto answer = to_runtime_answer(r);
    if (!answer) return respond(Unexpected(answer.error()));
    respond(api::UpdateContainerResponse());
  });
}

void NriAdapter::update_pod_sandbox(const api::UpdatePodSandboxRequest& req,
                                    nri::Respond<api::UpdatePodSandboxResponse> respond) {
  count(api::UPDATE_POD_SANDBOX);
  const auto& p = req.pod();
  auto known = store_.pod(p.uid());
  const cgroup::K8sResources current = known ? known->resources : cgroup::K8sResources{};
  if (auto k = cgroup::check_kernel_limits(linux_values(req.linux_resources()), {}, fmt::format("pod {}", p.uid()));
      !k) {
    log::warn("refusing pod resize of {}: {}", p.uid(), k.error().message);
    return respond(Unexpected(k.error()));
  }
  const cgroup::K8sResources next = resources_from_nri(req.linux_resources(), current);
  remember_pod(p);
  if (!resize_) return respond(api::UpdatePodSandboxResponse());
  core::ResizeIntent in;
  in.source = core::IntentSource::NriUpdatePodSandbox;
  in.pod_uid = p.uid();
  in.pod_resources = next;
  in.pod_cgroup_path = p.linux().cgroup_parent();
  resize_->submit(std::move(in), [respond = std::move(respond)](Result<core::ResizeResult> r) {
    auto answer = to_runtime_answer(r);
    if (!answer) return respond(Unexpected(answer.error()));
    respond(api::UpdatePodSandboxResponse());
  });
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
  if (actuator_ && !pod.linux().cgroup_parent().empty()) actuator_->landed(pod.linux().cgroup_parent());
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
  if (actuator_) {
    if (auto c = store_.container(ctr.id()); c && !c->cgroup_path.empty()) actuator_->landed(c->cgroup_path);
  }
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
    auto actual = engine_.read_actual(t.cgroup_path);
    if (!actual) {
      // No cgroup (yet): nothing can be OOM-killed by the runtime's write.
      if (actual.error().code == ENOENT) return false;
      return wrap(actual, fmt::format("reading the cgroup of {}", t.id));
    }
    return !actual->memory_limit_bytes || *t.desired.memory_limit_bytes < *actual->memory_limit_bytes;
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
            auto act = engine_.read_actual(t.cgroup_path);
            if (!act) return next(Unexpected(act.error().wrap(fmt::format("reading back {}", t.id))));
            if (auto why = read_back_mismatch(t, *act); !why.empty()) return next(fail(EIO, "{}", why));
          }
          next(std::move(report));
        });
  });
}

Result<cgroup::Actual> NriActuator::read_actual(const std::string& cgroup_path) {
  return engine_.read_actual(cgroup_path);
}

}  // namespace podshim::adapter
