#include "shim/hook/hook.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/str.h"
#include "base/unique_fd.h"
#include "shim/hook/devices.h"

namespace podshim::hook {
namespace {

// The upper bound for --timeout-ms: above this the hook is no longer "short";
// runtimes' own hook timeouts are counted in seconds.
constexpr int64_t kMaxTimeoutMs = 30000;

// runtime-spec runtime.md lifecycle: createRuntime runs while the container
// is being created ("creating"), poststop after delete ("stopped"). runc
// 1.1.5 reports exactly that; crun 1.8.1 (Debian 12) reports "created" at
// createRuntime (measured in the VM test, tests/kernel/hook), so both are
// accepted there. Anything else means the hook was wired to the wrong stage.
bool status_fits(Stage s, std::string_view status) {
  if (s == Stage::CreateRuntime) return status == "creating" || status == "created";
  return status == "stopped";
}

std::string_view expected_status(Stage s) {
  return s == Stage::CreateRuntime ? "creating' or 'created" : "stopped";
}

Result<void> append_record(const std::string& path, Stage stage, const OciState& st) {
  if (path.empty() || path.front() != '/')
    return fail(EINVAL, "--record path '{}' is not absolute", path);
  nlohmann::json j = {{"stage", std::string(to_string(stage))},
                      {"id", st.id},
                      {"status", st.status},
                      {"pid", st.pid},
                      {"bundle", st.bundle},
                      {"annotations", st.annotations}};
  std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return fail_errno("opening --record file '{}'", path);
  UniqueFd owner(fd);
  // O_APPEND + one write: concurrent hooks (two containers) do not interleave.
  ssize_t n = ::write(fd, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) return fail_errno("writing --record file '{}'", path);
  return {};
}

// What podshimd answered a registration or deregistration: whether it took
// it. Without --strict (Options::strict) its error becomes a warning and the
// hook goes on; with it the error is the hook's.
Result<bool> registrar_answer(Result<void> r, const Options& opts, Outcome* out) {
  if (r) return true;
  if (opts.strict) return Unexpected(r.error());
  out->warnings.push_back(r.error().message + ", ignoring");
  return false;
}

}  // namespace

Result<Stage> parse_stage(std::string_view s) {
  if (s == "createRuntime" || s == "prestart") return Stage::CreateRuntime;
  if (s == "poststop") return Stage::Poststop;
  return fail(EINVAL, "unknown hook stage '{}' (expected createRuntime, prestart or poststop)", s);
}

std::string_view to_string(Stage s) {
  return s == Stage::CreateRuntime ? "createRuntime" : "poststop";
}

Result<KubeIdentity> kube_identity(const std::map<std::string, std::string>& a) {
  nlohmann::json crio_labels;
  if (auto it = a.find("io.kubernetes.cri-o.Labels"); it != a.end()) {
    crio_labels = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    // CRI-O writes the container's labels with Go's json.Marshal
    // (cri-o server/container_create*.go), which turns a container with no
    // labels into `null`: no labels, not an error (it failed every such
    // container's start when the hook refused it).
    if (crio_labels.is_discarded() || !(crio_labels.is_object() || crio_labels.is_null()))
      return fail(EINVAL, "annotation io.kubernetes.cri-o.Labels is not a JSON object");
  }
  auto pick = [&](std::string_view kubelet_key, std::string_view containerd_key,
                  std::string* out) -> Result<void> {
    if (auto it = a.find(std::string(kubelet_key)); it != a.end()) {
      *out = it->second;
    } else if (auto it2 = a.find(std::string(containerd_key)); it2 != a.end()) {
      *out = it2->second;
    } else if (crio_labels.is_object()) {
      if (auto l = crio_labels.find(kubelet_key); l != crio_labels.end()) {
        if (!l->is_string())
          return fail(EINVAL, "io.kubernetes.cri-o.Labels: {} is not a string", kubelet_key);
        *out = l->get<std::string>();
      }
    }
    return {};
  };
  KubeIdentity k;
  PODSHIM_TRY(pick("io.kubernetes.pod.uid", "io.kubernetes.cri.sandbox-uid", &k.pod_uid));
  PODSHIM_TRY(pick("io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name", &k.pod_name));
  PODSHIM_TRY(pick("io.kubernetes.pod.namespace", "io.kubernetes.cri.sandbox-namespace",
                   &k.pod_namespace));
  PODSHIM_TRY(pick("io.kubernetes.container.name", "io.kubernetes.cri.container-name",
                   &k.container_name));
  // Kubernetes uids are 36-byte UUIDs; 128 matches podshimd's id rule.
  if (!k.pod_uid.empty()) PODSHIM_TRY(check_id("pod uid", k.pod_uid));
  // Names are DNS labels/subdomains (≤ 253); refuse anything that is not.
  for (const std::string* n : {&k.pod_name, &k.pod_namespace, &k.container_name}) {
    if (!n->empty()) PODSHIM_TRY(check_token("pod or container name", *n, 253));
  }
  return k;
}

std::string_view usage() {
  return "Usage: podshim-hook [--strict] [--socket PATH] [--timeout-ms MS] [--record FILE] [--no-seccomp]\n"
         "                    createRuntime|prestart|poststop\n"
         "       podshim-hook --help | --version\n"
         "\n"
         "The OCI hook for CRI-O/podman hooks.d (and podshimd's NRI mode). Reads the OCI\n"
         "state from stdin. createRuntime (or prestart, the same): label CDI mounts, check\n"
         "injected devices, register the container with podshimd. poststop: deregister it.\n"
         "\n"
         "  --strict         fail the container when podshimd does not take the registration\n"
         "  --socket PATH    podshimd's status socket (default /run/podshim/podshim.sock)\n"
         "  --timeout-ms MS  how long to wait for podshimd, 1..30000 (default 500)\n"
         "  --record FILE    append one JSON line describing the parsed state (debugging)\n"
         "  --no-seccomp     do not install the syscall allow-list (debugging)\n"
         "  --help           this text\n"
         "  --version        print the version\n"
         "\n"
         "Exit status:\n"
         "  0  done (without --strict, a registration podshimd did not take is a warning)\n"
         "  1  failed: one \"<3>podshim-hook: ...\" line on stderr; the runtime fails the container\n"
         "  2  bad command line\n"
         "\n"
         "Container ids and pod uids: 1..128 characters of [A-Za-z0-9_.-], not starting\n"
         "with '.' (podshimd's limits). See podshim-hook(8).\n";
}

Result<Options> parse_args(const std::vector<std::string_view>& args) {
  Options o;
  std::optional<Stage> stage;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    auto value = [&](std::string_view flag) -> Result<std::string_view> {
      if (i + 1 >= args.size()) return fail(EINVAL, "{} needs a value", flag);
      return args[++i];
    };
    // --socket and --record: an absolute path.
    auto path_value = [&](std::string_view flag) -> Result<std::string> {
      auto v = value(flag);
      if (!v) return Unexpected(v.error());
      if (v->empty() || v->front() != '/') return fail(EINVAL, "{} '{}' is not an absolute path", flag, *v);
      return std::string(*v);
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    } else if (a == "--version") {
      o.version = true;
      return o;
    } else if (a == "--strict") {
      o.strict = true;
    } else if (a == "--no-seccomp") {
      o.no_seccomp = true;
    } else if (a == "--socket") {
      auto p = path_value(a);
      if (!p) return Unexpected(p.error());
      o.socket_path = std::move(*p);
    } else if (a == "--timeout-ms") {
      auto v = value(a);
      if (!v) return Unexpected(v.error());
      auto n = str::parse_i64(*v);
      if (!n || *n <= 0 || *n > kMaxTimeoutMs)
        return fail(EINVAL, "--timeout-ms '{}' is not an integer in 1..{}", *v, kMaxTimeoutMs);
      o.timeout = std::chrono::milliseconds(*n);
    } else if (a == "--record") {
      auto p = path_value(a);
      if (!p) return Unexpected(p.error());
      o.record_path = std::move(*p);
    } else if (str::starts_with(a, "-")) {
      return fail(EINVAL, "unknown option '{}'", a);
    } else {
      if (stage) return fail(EINVAL, "more than one stage given ('{}')", a);
      auto s = parse_stage(a);
      if (!s) return Unexpected(s.error());
      stage = *s;
    }
  }
  if (!stage) return fail(EINVAL, "no hook stage given (createRuntime or poststop)");
  o.stage = *stage;
  return o;
}

Result<Outcome> run(const Options& opts, std::string_view state_json, const Deps& deps) {
  Outcome out;
  auto st = parse_state(state_json);
  if (!st) return Unexpected(st.error());
  out.state = std::move(*st);
  const OciState& state = out.state;

  // The stage comes from argv (hooks.d `args`); the state says where the
  // runtime really is. A mismatch is a misconfigured hook, e.g. a hooks.d file
  // that puts "createRuntime" in args but lists the poststop stage.
  if (!status_fits(opts.stage, state.status))
    return fail(EINVAL, "hook called for stage {} but the OCI state status is '{}' (expected '{}')",
                to_string(opts.stage), state.status, expected_status(opts.stage));

  if (opts.stage == Stage::Poststop) {
    if (!opts.record_path.empty()) PODSHIM_TRY(append_record(opts.record_path, opts.stage, state));
    if (deps.registrar) {
      auto done = registrar_answer(deps.registrar->deregister_container(state.id), opts, &out);
      if (!done) return Unexpected(done.error());
      out.deregistered = *done;
    }
    return out;
  }

  // createRuntime: everything is read and validated first.
  auto text = read_bundle_config(state.bundle);
  if (!text) return Unexpected(text.error());
  auto cfg = parse_config(*text);
  if (!cfg) return wrap(cfg, fmt::format("'{}/config.json'", state.bundle));
  auto devices = injected_devices(state.annotations, cfg->annotations);
  if (!devices) return Unexpected(devices.error());
  auto mounts = injected_mounts(*cfg, state.annotations);
  if (!mounts) return Unexpected(mounts.error());
  // State annotations are the config's as the runtime saw them; prefer them,
  // fall back to config.json for runtimes that leave them out of the state.
  std::map<std::string, std::string> annotations = cfg->annotations;
  for (const auto& [k, v] : state.annotations) annotations[k] = v;
  auto who = kube_identity(annotations);
  if (!who) return Unexpected(who.error());
  if (!opts.record_path.empty()) PODSHIM_TRY(append_record(opts.record_path, opts.stage, state));

  auto checked = check_devices(deps.root_fd, *devices, cfg->devices);
  if (!checked) return Unexpected(checked.error());
  out.devices_checked = *checked;

  if (deps.labeler) {
    auto rep = deps.labeler->label(*text, *cfg, *mounts, *devices);
    if (!rep) return Unexpected(rep.error());
    out.mounts_labelled = rep->labelled;
    for (auto& n : rep->notes) out.notes.push_back(std::move(n));
    for (auto& w : rep->warnings) out.warnings.push_back(std::move(w));
  }

  if (deps.registrar) {
    Registration reg;
    reg.id = state.id;
    reg.pod_uid = who->pod_uid;
    reg.cgroup_path = cfg->cgroups_path;
    reg.name = who->container_name;
    reg.pod_name = who->pod_name;
    reg.pod_namespace = who->pod_namespace;
    reg.pid = state.pid;
    reg.annotations = std::move(annotations);
    kube_resources(cfg->resources, &reg);
    auto done = registrar_answer(deps.registrar->register_container(reg), opts, &out);
    if (!done) return Unexpected(done.error());
    out.registered = *done;
  }
  return out;
}

}  // namespace podshim::hook
