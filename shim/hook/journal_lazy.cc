// sd_journal_sendv for podshim-hook without linking libsystemd: libsystemd
// and what it needs (libgcrypt, liblzma, libzstd, liblz4, libgpg-error, libcap)
// were six of the hook's sixteen shared objects, loaded and relocated on every
// container start, while the journal is written only when a runtime gives the
// hook /dev/null for stderr (base/log.cc). The library is dlopen'ed on first
// use, or up front by preload_journal() before the seccomp filter is in place.
#include <dlfcn.h>
#include <errno.h>
#include <sys/uio.h>

#include "shim/hook/journal_lazy.h"

namespace {
using SendV = int (*)(const struct iovec*, int);

SendV resolve() {
  static SendV fn = [] {
    void* h = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    return h ? reinterpret_cast<SendV>(dlsym(h, "sd_journal_sendv")) : nullptr;
  }();
  return fn;
}
}  // namespace

namespace podshim::hook {
bool preload_journal() { return resolve() != nullptr; }
}  // namespace podshim::hook

extern "C" int sd_journal_sendv(const struct iovec* iov, int n) {
  SendV fn = resolve();
  return fn ? fn(iov, n) : -ENOSYS;
}
