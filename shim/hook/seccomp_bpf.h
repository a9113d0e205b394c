// podshim-hook's seccomp filter, compiled at build time (seccomp_gen.cc).
#pragma once

#include "base/result.h"

namespace podshim::hook {

extern const unsigned char kHookSeccompBpf[];
extern const unsigned long kHookSeccompBpfSize;

// Sets no_new_privs and loads the precompiled filter (TSYNC), as
// security::install_seccomp(security::hook_profile()) would.
Result<void> install_hook_seccomp();

}  // namespace podshim::hook
