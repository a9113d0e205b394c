// Fuzzes what podshim-hook reads from the runtime: the OCI state on stdin and
// the bundle's config.json (shim/hook/oci.h), and the podshim annotations
// carried in them. podshim-hook runs as root in the runtime's namespace and
// is reachable through any hooks.d file, so every byte string must give a
// validated value or one clean error — never a crash, UB or an uncaught
// nlohmann exception escaping the parser.
//
// Input: byte 0 picks the entry point:
//   0  state JSON (then the Kubernetes identity and injected devices in it)
//   1  config.json (then the injected mounts and devices it lists)
//   2  state and config.json separated by the first NUL byte, through the
//      hook's whole read-only phase, device check beneath an empty root
//   3  the podshim.io/injected-devices annotation value alone
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shim/hook/devices.h"
#include "shim/hook/hook.h"
#include "shim/hook/labeler.h"
#include "shim/hook/oci.h"

using namespace podshim;
using namespace podshim::hook;

namespace {

int empty_root() {
  static int fd = [] {
    char tmpl[] = "/tmp/podshim-hook-fuzz.XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (!dir) __builtin_trap();
    return ::open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  }();
  return fd;
}

template <typename T>
void expect_message(const Result<T>& r) {
  if (!r && r.error().message.empty()) __builtin_trap();
}

void check_state(const Result<OciState>& st) {
  expect_message(st);
  if (!st) return;
  // What parse_state promises (oci.h).
  if (st->id.empty() || st->bundle.empty() || st->bundle[0] != '/' || st->pid < 0) __builtin_trap();
  if (st->bundle.find("/../") != std::string::npos || st->bundle.ends_with("/..")) __builtin_trap();
  auto who = kube_identity(st->annotations);
  expect_message(who);
  auto devs = injected_devices(st->annotations, {});
  expect_message(devs);
}

void check_config(const Result<OciConfig>& cfg) {
  expect_message(cfg);
  if (!cfg) return;
  auto mounts = injected_mounts(*cfg, cfg->annotations);
  expect_message(mounts);
  if (mounts) {
    // Only mounts that config.json really has come back.
    for (const auto& m : *mounts) {
      bool found = false;
      for (const auto& c : cfg->mounts) found = found || c.destination == m.destination;
      if (!found) __builtin_trap();
    }
  }
  expect_message(injected_devices({}, cfg->annotations));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view s(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      check_state(parse_state(s));
      break;
    case 1:
      check_config(parse_config(s));
      break;
    case 2: {
      const size_t nul = s.find('\0');
      auto st = parse_state(s.substr(0, nul));
      auto cfg = parse_config(nul == std::string_view::npos ? std::string_view{} : s.substr(nul + 1));
      check_state(st);
      check_config(cfg);
      if (!st || !cfg) break;
      auto devs = injected_devices(st->annotations, cfg->annotations);
      expect_message(devs);
      if (devs) {
        // Beneath an empty directory no host node exists: a listed device
        // can never pass the check.
        auto n = check_devices(empty_root(), *devs, cfg->devices);
        expect_message(n);
        if (n && !devs->empty()) __builtin_trap();
      }
      break;
    }
    case 3: {
      auto devs = parse_injected_devices(s);
      expect_message(devs);
      break;
    }
  }
  return 0;
}
