#include "shim/hook/labeler.h"

#include <selinux/selinux.h>

#include <map>

#include <nlohmann/json.hpp>

#include "selinux/label.h"

namespace podshim::hook {
namespace {

class SelinuxLabeler final : public MountLabeler {
 public:
  Result<size_t> label(const OciConfig& cfg, const std::vector<OciMount>& mounts) override {
    // Gate everything on SELinux being on: on a disabled host a label is
    // meaningless and go-selinux's InitLabels returns none (facts Part 1d).
    if (mounts.empty() || !selinux::selinux_enabled()) return size_t{0};
    const std::string& base = !cfg.mount_label.empty() ? cfg.mount_label : cfg.process_label;
    if (base.empty()) return size_t{0};  // the runtime runs this container unconfined
    auto container = selinux::Label::parse(base);
    if (!container) return wrap(container, "container label from config.json");
    auto file = selinux::file_label_for(*container, selinux::Sharing::Shared);
    if (!file) return wrap(file, "building the file label");
    size_t n = 0;
    for (const OciMount& m : mounts) {
      // TODO(selinux/): switch to selinux/'s high-level relabel (recursive,
      // with go-selinux's refusal list) once it lands; this labels the
      // source itself, without following a symlink (lsetfilecon).
      if (::lsetfilecon(m.source.c_str(), file->str().c_str()) < 0)
        return fail_errno("labelling '{}' (mounted at '{}') {}", m.source, m.destination,
                          file->str());
      ++n;
    }
    return n;
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
