// Capability handling for podshimd and podshim-hook (libcap).
//
// podshim runs as uid 0 on every node. Root needs no capability to write the
// root-owned cgroup, /run and /var/lib files podshim manages — ordinary owner
// permissions suffice — so the programs drop every capability they do not
// use from all five sets (bounding, permitted, effective, inheritable,
// ambient) right at start, and give up the few they keep as soon as the step
// that needs them is done. The kept set and the reason for each capability
// is documented in docs/security.md.
#pragma once

#include <sys/capability.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace podshim::security {

// Keeps exactly `keep` in the permitted and effective sets, clears the
// inheritable and ambient sets, and removes everything else from the
// bounding set, so not even an exec of a setuid or file-capability binary
// can regain it. Fails with a message naming the capability when a kept
// capability is not held to begin with (a configuration that needs more
// than the process has).
Result<void> restrict_capabilities(const std::vector<cap_value_t>& keep);

// Like restrict_capabilities, but keeps only those of `wanted` the process
// actually holds (for programs that also run unprivileged, such as the hook
// in tests): never fails for a missing capability.
Result<void> restrict_capabilities_if_held(const std::vector<cap_value_t>& wanted);

// The capabilities in the given set of the calling thread, by name
// ("cap_chown"), for logs, tests and the status socket.
Result<std::vector<std::string>> capability_names(cap_flag_t set);

// True when `cap` is still in the bounding set.
bool in_bounding_set(cap_value_t cap);

// Parses "cap_chown" / "CAP_CHOWN" / "chown".
Result<cap_value_t> parse_capability(const std::string& name);

}  // namespace podshim::security
