// NRI event numbers, subscription masks and what a runtime's NRI version
// allows (containerd/nri pkg/api/event.go).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "shim/nri/nri_api.pb.h"

namespace podshim::nri {

namespace api = ::nri::pkg::api::v1alpha1;

// Mask bit of an event: 1 << (event - 1).
constexpr uint32_t event_bit(api::Event e) { return 1u << (static_cast<int>(e) - 1); }

// ValidEvents of the runtime side: LAST was 12 in v0.2–v0.9 and 15 from
// v0.10 on. A mask bit outside them gets the plugin rejected ("invalid plugin
// events"), and a mask of 0 means "all", which on v0.10+ would include
// UpdatePodSandbox and ValidateContainerAdjustment; hence explicit masks.
inline constexpr uint32_t kValidEventsV02 = 0x7FF;
inline constexpr uint32_t kValidEventsV10 = 0x3FFF;

struct NriVersion {
  int major = 0, minor = 0, patch = 0;
  bool known = false;  // false for "", "0.0.0-unknown" and the like
};

// Parses "v0.12.0", "0.12.2", "v1.7.13-beta" (pre-release suffix ignored).
NriVersion parse_version(std::string_view s);
bool version_at_least(const NriVersion& v, int major, int minor, int patch = 0);

// What we learn about the runtime from ConfigureRequest.
struct RuntimeInfo {
  std::string name;
  std::string version;
  std::string nri_version;           // "" before v0.12
  uint32_t valid_events = kValidEventsV02;
  bool dedicated_event_rpcs = false;  // v0.12+: RunPodSandbox etc. instead of StateChange
  int64_t registration_timeout_ms = 0;
  int64_t request_timeout_ms = 0;
};

// Decides ValidEvents:
//  1. NRI_version present (field added in v0.12; dev builds send
//     "0.0.0-unknown") → v0.12+ → 0x3FFF;
//  2. otherwise the runtime's own version, from the runtime → NRI table:
//     containerd ≥ 2.2.0 vendors NRI ≥ v0.10, CRI-O ≥ 1.34 likewise → 0x3FFF;
//  3. otherwise 0x7FF, which every runtime accepts; such a runtime may then
//     never send UpdatePodSandbox, which is the safe loss.
RuntimeInfo runtime_info(const api::ConfigureRequest& req);

// "RunPodSandbox" etc. for log messages.
std::string_view event_name(api::Event e);

}  // namespace podshim::nri
