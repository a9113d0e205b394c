#include "cdi/requests.h"

#include <algorithm>

#include "base/str.h"
#include "cdi/name.h"

namespace podshim::cdi {

namespace {

void add_unique(std::vector<std::string>& out, std::string_view n) {
  if (std::find(out.begin(), out.end(), n) == out.end()) out.emplace_back(n);
}

}  // namespace

Result<std::vector<std::string>> devices_from_annotations(const std::map<std::string, std::string>& annotations) {
  std::vector<std::string> out;
  for (const auto& [key, value] : annotations) {
    if (!str::starts_with(key, kAnnotationPrefix) && key != kPodshimAnnotation) continue;
    for (std::string_view n : str::split(value, ',')) {
      // Upstream does not trim; a space after a comma is a common slip, and
      // trimming cannot change which device a valid name means.
      n = str::trim(n);
      if (auto q = parse_qualified_name(n); !q) return wrap(q, fmt::format("annotation \"{}\"", key));
      add_unique(out, n);
    }
  }
  return out;
}

Result<std::vector<std::string>> requested_devices(const std::vector<std::string>& nri_cdi_devices,
                                                   const std::map<std::string, std::string>& annotations) {
  std::vector<std::string> out;
  for (const auto& n : nri_cdi_devices) {
    if (auto q = parse_qualified_name(n); !q) return wrap(q, "NRI CDI device");
    add_unique(out, n);
  }
  auto a = devices_from_annotations(annotations);
  if (!a) return a;
  for (const auto& n : *a) add_unique(out, n);
  return out;
}

}  // namespace podshim::cdi
