// podshim-hook's own sd_journal_sendv (journal_lazy.cc): libsystemd is loaded
// only when the journal is written to.
#pragma once

namespace podshim::hook {
// Loads libsystemd now (call before the seccomp filter when logging to the
// journal); false when it is not installed, and journal writes then fail.
bool preload_journal();
}  // namespace podshim::hook
