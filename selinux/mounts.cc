#include "selinux/mounts.h"

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "base/str.h"

namespace podshim::selinux {
namespace {

// File systems whose labels come from policy (genfscon / fs_use_task) or that
// reject the context= option; runc does not give them the mount label either
// (libcontainer/rootfs_linux.go mountToRootfs: proc, sysfs, cgroup, mqueue).
constexpr std::string_view kPseudoTypes[] = {
    "proc",   "sysfs",    "cgroup",  "cgroup2", "mqueue",   "securityfs", "selinuxfs",
    "debugfs", "tracefs", "bpf",     "configfs", "fusectl", "pstore",     "efivarfs",
    "binfmt_misc",
};

constexpr std::string_view kSecurityOptions[] = {"context=", "fscontext=", "defcontext=",
                                                 "rootcontext="};

bool iequals_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

bool has_bind_option(const MountEntry& m) {
  for (const auto& o : m.options)
    for (std::string_view p : split_options(o)) {
      p = str::trim(p);
      if (p == "bind" || p == "rbind") return true;
    }
  return false;
}

}  // namespace

MountKind classify(const MountEntry& m) {
  if (m.type == "bind" || m.type.empty() || has_bind_option(m)) return MountKind::Bind;
  for (std::string_view t : kPseudoTypes)
    if (m.type == t) return MountKind::Pseudo;
  return MountKind::Fresh;
}

std::vector<std::string_view> split_options(std::string_view s) {
  std::vector<std::string_view> out;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') quoted = !quoted;
    if (s[i] == ',' && !quoted) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

Result<void> check_no_security_options(const MountEntry& m) {
  for (const auto& o : m.options) {
    for (std::string_view part : split_options(o)) {
      std::string_view p = str::trim(part);
      for (std::string_view sec : kSecurityOptions)
        if (iequals_prefix(p, sec))
          return fail(EPERM,
                      "mount of '{}' onto '{}' carries the SELinux option '{}': podshim chooses "
                      "the labels of the mounts it injects and refuses specs that set them",
                      m.source, m.destination, p);
    }
  }
  return {};
}

std::string context_option(const Label& label) {
  // Label components are restricted to [A-Za-z0-9_.-] and the level to
  // [a-z0-9:,.-] (label.h), so the label cannot contain a quote.
  return fmt::format("context=\"{}\"", label.str());
}

SharedSourceTracker::SharedSourceTracker(SharedSourceTracker&& o) noexcept {
  std::lock_guard lock(o.mu_);
  pods_by_source_ = std::move(o.pods_by_source_);
}

SharedSourceTracker& SharedSourceTracker::operator=(SharedSourceTracker&& o) noexcept {
  if (this != &o) {
    std::scoped_lock lock(mu_, o.mu_);
    pods_by_source_ = std::move(o.pods_by_source_);
  }
  return *this;
}

Result<bool> SharedSourceTracker::register_use(const std::string& source,
                                               const std::string& pod_uid) {
  if (pod_uid.empty()) return fail(EINVAL, "empty pod uid for source '{}'", source);
  if (source.empty() || source[0] != '/')
    return fail(EINVAL, "source '{}' is not an absolute path", source);
  std::lock_guard lock(mu_);
  auto& pods = pods_by_source_[source];
  pods.insert(pod_uid);
  return pods.size() > 1;
}

void SharedSourceTracker::release_pod(const std::string& pod_uid) {
  std::lock_guard lock(mu_);
  for (auto it = pods_by_source_.begin(); it != pods_by_source_.end();) {
    it->second.erase(pod_uid);
    if (it->second.empty())
      it = pods_by_source_.erase(it);
    else
      ++it;
  }
}

bool SharedSourceTracker::is_shared(const std::string& source) const {
  return pods_using(source) > 1;
}

size_t SharedSourceTracker::pods_using(const std::string& source) const {
  std::lock_guard lock(mu_);
  auto it = pods_by_source_.find(source);
  return it == pods_by_source_.end() ? 0 : it->second.size();
}

nlohmann::json SharedSourceTracker::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [src, pods] : pods_by_source_) sources[src] = pods;
  return nlohmann::json{{"sources", sources}};
}

Result<SharedSourceTracker> SharedSourceTracker::from_json(const nlohmann::json& j) {
  SharedSourceTracker t;
  if (!j.is_object()) return fail(EINVAL, "shared-source state is not a JSON object");
  auto it = j.find("sources");
  if (it == j.end()) return t;
  if (!it->is_object()) return fail(EINVAL, "shared-source state: 'sources' is not an object");
  for (const auto& [src, pods] : it->items()) {
    if (!pods.is_array())
      return fail(EINVAL, "shared-source state: pods of '{}' are not an array", src);
    for (const auto& p : pods) {
      if (!p.is_string())
        return fail(EINVAL, "shared-source state: a pod uid of '{}' is not a string", src);
      auto r = t.register_use(src, p.get<std::string>());
      if (!r) return wrap(r, "shared-source state");
    }
  }
  return t;
}

}  // namespace podshim::selinux
