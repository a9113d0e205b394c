// podshim-hook's logic, callable from tests: one invocation of the OCI hook
// at one stage, from the state JSON to the work done.
//
// Order matters for "nothing half-done": every input (state, config.json,
// podshim's annotations) is parsed and validated, and the device nodes are
// checked (read-only), before the first side effect (labelling, then
// registration). Each step is idempotent, so a hook run twice does no harm.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "shim/hook/labeler.h"
#include "shim/hook/oci.h"
#include "shim/hook/registrar.h"

namespace podshim::hook {

// The stages podshim-hook handles. `prestart` is accepted as createRuntime:
// containers/common injects a hooks.d "prestart" stage into
// hooks.createRuntime since dc0f2633 (2024-02), and older runtimes run both
// at the same point (runtime-spec config.md: prestart is called before
// createRuntime, in the runtime namespace).
enum class Stage { CreateRuntime, Poststop };
Result<Stage> parse_stage(std::string_view s);
std::string_view to_string(Stage s);

struct Options {
  Stage stage = Stage::CreateRuntime;
  // Fail the container when podshimd cannot be reached or refuses the
  // registration (default: warn and go on).
  bool strict = false;
  std::string socket_path = std::string(kDefaultSocketPath);
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // When set, one JSON line per run describing the parsed state is appended
  // here (tests and debugging: proves the stage and state the runtime gave).
  std::string record_path;
  // Skip the syscall allow-list (debugging; docs/security.md).
  bool no_seccomp = false;
  bool help = false;     // --help: print usage() and exit 0
  bool version = false;  // --version: print the version and exit 0
};

// The --help text.
std::string_view usage();

// The seams: production passes "/" and the socket registrar and SELinux
// labeler; tests pass a temp root, a fake or real socket, a recording labeler.
struct Deps {
  int root_fd = -1;
  Registrar* registrar = nullptr;
  MountLabeler* labeler = nullptr;
};

// What a successful run did; warnings are for the caller to log.
struct Outcome {
  OciState state;
  size_t devices_checked = 0;
  size_t mounts_labelled = 0;
  bool registered = false;    // createRuntime: podshimd took the registration
  bool deregistered = false;  // poststop
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // informational, e.g. "SELinux is disabled"
};

// Who a container is in Kubernetes terms, from its annotations. Each field
// comes from the first source that has it: the kubelet's own keys
// (io.kubernetes.pod.uid, .pod.name, .pod.namespace, .container.name),
// containerd's (io.kubernetes.cri.sandbox-uid, -name, -namespace,
// container-name), then the same kubelet keys inside CRI-O's
// io.kubernetes.cri-o.Labels JSON. Empty fields for a plain podman container.
struct KubeIdentity {
  std::string pod_uid;
  std::string pod_name;
  std::string pod_namespace;
  std::string container_name;
};
Result<KubeIdentity> kube_identity(const std::map<std::string, std::string>& annotations);

// Runs the hook for `opts.stage` on the state JSON read from stdin.
Result<Outcome> run(const Options& opts, std::string_view state_json, const Deps& deps);

// Parses argv (without argv[0]): [--strict] [--socket PATH] [--timeout-ms N]
// [--record FILE] [--no-seccomp] STAGE, or --help or --version alone.
Result<Options> parse_args(const std::vector<std::string_view>& args);

}  // namespace podshim::hook
