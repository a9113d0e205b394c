#include "shim/hook/labeler.h"

#include <map>

#include <nlohmann/json.hpp>

#include "selinux/apply.h"

namespace podshim::hook {
namespace {

class SelinuxLabeler final : public MountLabeler {
 public:
  Result<LabelReport> label(std::string_view config_json, const OciConfig&,
                            const std::vector<OciMount>& mounts,
                            const std::vector<InjectedDevice>& devices) override {
    LabelReport report;
    // The common case (no CDI mounts) costs no second parse of config.json.
    if (mounts.empty()) return report;
    auto doc = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return fail(EINVAL, "config.json is not valid JSON");
    std::vector<selinux::InjectedMount> ms;
    for (const OciMount& m : mounts) ms.push_back({m.source, m.destination, m.type, m.options});
    std::vector<selinux::InjectedDevice> ds;
    for (const InjectedDevice& d : devices) ds.push_back({d.path, d.host_path});
    auto res = selinux::apply_labels(doc, ms, ds);
    if (!res) return wrap(res, "labelling injected mounts");
    report.labelled = res->labelled.size();
    report.notes = std::move(res->notes);
    // A fresh file system needs context= in its mount options, but at
    // createRuntime the runtime has already read config.json: only podshimd
    // (NRI, before creation) can add it. Say so rather than pretend.
    for (const auto& e : res->mount_edits)
      report.warnings.push_back(fmt::format(
          "mount '{}' needs a context= option that a hook cannot add after the runtime read "
          "config.json", e.destination));
    return report;
  }
};

}  // namespace

Result<std::vector<OciMount>> injected_mounts(
    const OciConfig& cfg, const std::map<std::string, std::string>& state_annotations) {
  const std::string key(kInjectedMountsAnnotation);
  const std::string* value = nullptr;
  if (auto it = state_annotations.find(key); it != state_annotations.end())
    value = &it->second;
  else if (auto it2 = cfg.annotations.find(key); it2 != cfg.annotations.end())
    value = &it2->second;
  std::vector<OciMount> out;
  if (!value) return out;
  auto doc = nlohmann::json::parse(*value, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_array())
    return fail(EINVAL, "annotation {} is not a JSON array of paths", key);
  for (const auto& e : doc) {
    if (!e.is_string()) return fail(EINVAL, "annotation {}: an entry is not a string", key);
    const std::string dst = e.get<std::string>();
    const OciMount* found = nullptr;
    for (const OciMount& m : cfg.mounts) {
      if (m.destination == dst) found = &m;
    }
    if (!found)
      return fail(ENOENT, "mount '{}' is listed in {} but config.json has no mount there", dst,
                  key);
    if (found->source.empty() || found->source.front() != '/')
      return fail(EINVAL, "mount '{}' listed in {} has a non-absolute source '{}'", dst, key,
                  found->source);
    out.push_back(*found);
  }
  return out;
}

std::unique_ptr<MountLabeler> make_selinux_labeler() { return std::make_unique<SelinuxLabeler>(); }

}  // namespace podshim::hook
