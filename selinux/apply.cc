#include "selinux/apply.h"

#include <cerrno>
#include <map>

#include <fmt/ranges.h>

#include "base/str.h"

namespace podshim::selinux {
namespace {

Result<void> check_mounts(const std::vector<InjectedMount>& mounts) {
  for (const auto& m : mounts) {
    if (m.destination.empty()) return fail(EINVAL, "mount of '{}' has no destination", m.source);
    PODSHIM_TRY(check_no_security_options(m));
  }
  return {};
}

ApplyResult disabled_result() {
  ApplyResult out;
  out.selinux_enabled = false;
  out.notes.push_back("SELinux is disabled; podshim applies no labels to injected mounts");
  return out;
}

bool under_dev(std::string_view p) { return p == "/dev" || str::starts_with(p, "/dev/"); }

// Whether the on-disk label says another pod already uses the source.
Result<bool> disk_says_shared(const std::string& resolved, const Label& private_label) {
  auto cur = get_label(resolved);
  if (!cur) return Unexpected(cur.error());
  if (!*cur) return false;
  auto l = Label::parse(**cur);
  if (!l) return false;  // a label podshim did not write: ours replaces it
  if (l->type() != private_label.type()) return false;
  return l->level() != private_label.level();
}

}  // namespace

Result<ApplyResult> apply_labels(const ContainerLabels& labels,
                                 const std::vector<InjectedMount>& mounts,
                                 const std::vector<InjectedDevice>& devices,
                                 const ApplyConfig& config) {
  PODSHIM_TRY(check_mounts(mounts));
  if (config.tracker && config.pod_uid.empty())
    return fail(EINVAL, "a shared-source tracker needs the pod uid");
  if (!selinux_enabled()) return disabled_result();
  ApplyResult out;
  out.selinux_enabled = true;
  const Label* level_source = labels.level_source();
  if (!level_source) {
    out.notes.push_back(
        "the container has no SELinux label (no linux.mountLabel or process.selinuxLabel); "
        "injected mounts are not labelled");
    return out;
  }
  auto priv = file_label_for(*level_source, Sharing::Private, config.file);
  if (!priv) return wrap(priv, "container SELinux label");
  auto shared = file_label_for(*level_source, Sharing::Shared, config.file);
  if (!shared) return wrap(shared, "container SELinux label");
  out.private_file_label = *priv;

  std::map<std::string, size_t> done;  // resolved source → index in out.labelled
  std::vector<std::string> dev_sources;
  for (const auto& m : mounts) {
    switch (classify(m)) {
      case MountKind::Pseudo:
        break;
      case MountKind::Fresh: {
        MountEdit e{m.destination, m.options};
        e.options.push_back(context_option(*priv));
        out.mount_edits.push_back(std::move(e));
        break;
      }
      case MountKind::Bind: {
        auto resolved = resolve_path(m.source);
        if (!resolved) return wrap(resolved, fmt::format("bind mount onto '{}'", m.destination));
        if (under_dev(*resolved)) {
          dev_sources.push_back(*resolved);
          break;
        }
        if (done.count(*resolved)) break;
        Sharing sharing = Sharing::Private;
        if (config.tracker) {
          auto s = config.tracker->register_use(*resolved, config.pod_uid);
          if (!s) return Unexpected(s.error());
          if (*s) sharing = Sharing::Shared;
        }
        if (sharing == Sharing::Private && config.infer_sharing_from_disk &&
            priv->level() != shared->level()) {
          auto d = disk_says_shared(*resolved, *priv);
          if (!d) return wrap(d, fmt::format("bind mount onto '{}'", m.destination));
          if (*d) sharing = Sharing::Shared;
        }
        const Label& label = sharing == Sharing::Shared ? *shared : *priv;
        auto stats = relabel(*resolved, label, config.relabel);
        if (!stats)
          return wrap(stats, fmt::format("relabelling the source of the bind mount onto '{}'",
                                         m.destination));
        done[*resolved] = out.labelled.size();
        out.labelled.push_back(LabelledSource{m.source, *resolved, label.str(), sharing, *stats});
        break;
      }
    }
  }
  if (!dev_sources.empty())
    out.notes.push_back(fmt::format("bind-mount sources under /dev are host device nodes and keep "
                                    "their labels: {}",
                                    fmt::join(dev_sources, ", ")));
  if (!devices.empty()) {
    std::vector<std::string> paths;
    for (const auto& d : devices) paths.push_back(d.path);
    out.notes.push_back(fmt::format(
        "device nodes are not relabelled (the runtime creates them in the container's /dev, "
        "labelled by its mount label): {}",
        fmt::join(paths, ", ")));
  }
  return out;
}

Result<ApplyResult> apply_labels(const nlohmann::json& oci_config,
                                 const std::vector<InjectedMount>& mounts,
                                 const std::vector<InjectedDevice>& devices,
                                 const ApplyConfig& config) {
  // Smuggled options are refused before anything else, even when the
  // container's labels are unreadable.
  PODSHIM_TRY(check_mounts(mounts));
  // With SELinux off the labels in the spec are never used (runc ignores
  // them too), so a malformed one is not this component's error.
  if (!selinux_enabled()) return disabled_result();
  auto labels = labels_from_oci(oci_config);
  if (!labels) return Unexpected(labels.error());
  return apply_labels(*labels, mounts, devices, config);
}

}  // namespace podshim::selinux
