#include "shim/nri/events.h"

#include <cctype>

#include "base/str.h"

namespace podshim::nri {

NriVersion parse_version(std::string_view s) {
  NriVersion v;
  s = str::trim(s);
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s.remove_prefix(1);
  const size_t dash = s.find_first_of("-+");
  std::string_view suffix = dash == std::string_view::npos ? "" : s.substr(dash);
  if (dash != std::string_view::npos) s = s.substr(0, dash);
  auto parts = str::split(s, '.');
  if (parts.size() < 2 || parts.size() > 3) return v;
  int nums[3] = {0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    auto n = str::parse_u64(parts[i]);
    if (!n || *n > 100000) return v;
    nums[i] = static_cast<int>(*n);
  }
  v.major = nums[0];
  v.minor = nums[1];
  v.patch = nums[2];
  // Go's module version of an untagged build.
  v.known = !(v.major == 0 && v.minor == 0 && v.patch == 0 && suffix.find("unknown") != std::string_view::npos);
  if (v.major == 0 && v.minor == 0 && v.patch == 0) v.known = false;
  return v;
}

bool version_at_least(const NriVersion& v, int major, int minor, int patch) {
  if (!v.known) return false;
  if (v.major != major) return v.major > major;
  if (v.minor != minor) return v.minor > minor;
  return v.patch >= patch;
}

RuntimeInfo runtime_info(const api::ConfigureRequest& req) {
  RuntimeInfo info;
  info.name = req.runtime_name();
  info.version = req.runtime_version();
  info.nri_version = req.nri_version();
  info.registration_timeout_ms = req.registration_timeout();
  info.request_timeout_ms = req.request_timeout();
  if (!req.nri_version().empty()) {
    info.valid_events = kValidEventsV10;
    info.dedicated_event_rpcs = true;
    return info;
  }
  std::string name;
  for (char c : req.runtime_name()) name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const NriVersion rv = parse_version(req.runtime_version());
  if ((name == "containerd" && version_at_least(rv, 2, 2)) ||
      ((name == "cri-o" || name == "crio") && version_at_least(rv, 1, 34))) {
    info.valid_events = kValidEventsV10;
  }
  return info;
}

std::string_view event_name(api::Event e) {
  switch (e) {
    case api::RUN_POD_SANDBOX: return "RunPodSandbox";
    case api::STOP_POD_SANDBOX: return "StopPodSandbox";
    case api::REMOVE_POD_SANDBOX: return "RemovePodSandbox";
    case api::CREATE_CONTAINER: return "CreateContainer";
    case api::POST_CREATE_CONTAINER: return "PostCreateContainer";
    case api::START_CONTAINER: return "StartContainer";
    case api::POST_START_CONTAINER: return "PostStartContainer";
    case api::UPDATE_CONTAINER: return "UpdateContainer";
    case api::POST_UPDATE_CONTAINER: return "PostUpdateContainer";
    case api::STOP_CONTAINER: return "StopContainer";
    case api::REMOVE_CONTAINER: return "RemoveContainer";
    case api::UPDATE_POD_SANDBOX: return "UpdatePodSandbox";
    case api::POST_UPDATE_POD_SANDBOX: return "PostUpdatePodSandbox";
    case api::VALIDATE_CONTAINER_ADJUSTMENT: return "ValidateContainerAdjustment";
    default: return "Unknown";
  }
}

}  // namespace podshim::nri
