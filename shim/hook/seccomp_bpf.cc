#include "shim/hook/seccomp_bpf.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace podshim::hook {

Result<void> install_hook_seccomp() {
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(kHookSeccompBpfSize / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<unsigned char*>(kHookSeccompBpf));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail_errno("setting no_new_privs");
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
    return fail_errno("loading the podshim-hook seccomp filter");
  }
  return {};
}

}  // namespace podshim::hook
