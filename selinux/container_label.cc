#include "selinux/container_label.h"

#include <cerrno>
#include <string>

#include "base/fs.h"

namespace podshim::selinux {
namespace {

// PID_MAX_LIMIT on 64-bit kernels (include/linux/threads.h).
constexpr pid_t kPidMaxLimit = 4194304;

Result<std::optional<Label>> optional_label(std::string_view field, std::string_view value) {
  if (value.empty()) return std::optional<Label>{};
  auto l = Label::parse(value);
  if (!l) return wrap(l, field);
  return std::optional<Label>(std::move(*l));
}

Result<std::string> string_field(const nlohmann::json& parent, const char* key,
                                 std::string_view name) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return std::string();
  if (!it->is_string()) return fail(EINVAL, "{} is not a string", name);
  return it->get<std::string>();
}

}  // namespace

Result<ContainerLabels> labels_from_strings(std::string_view process_label,
                                            std::string_view mount_label) {
  ContainerLabels out;
  auto p = optional_label("process.selinuxLabel", process_label);
  if (!p) return Unexpected(p.error());
  auto m = optional_label("linux.mountLabel", mount_label);
  if (!m) return Unexpected(m.error());
  out.process = std::move(*p);
  out.mount = std::move(*m);
  return out;
}

Result<ContainerLabels> labels_from_oci(const nlohmann::json& config) {
  if (!config.is_object()) return fail(EINVAL, "OCI config is not a JSON object");
  std::string process_label, mount_label;
  if (auto it = config.find("process"); it != config.end() && !it->is_null()) {
    if (!it->is_object()) return fail(EINVAL, "OCI config: process is not an object");
    auto s = string_field(*it, "selinuxLabel", "process.selinuxLabel");
    if (!s) return wrap(s, "OCI config");
    process_label = std::move(*s);
  }
  if (auto it = config.find("linux"); it != config.end() && !it->is_null()) {
    if (!it->is_object()) return fail(EINVAL, "OCI config: linux is not an object");
    auto s = string_field(*it, "mountLabel", "linux.mountLabel");
    if (!s) return wrap(s, "OCI config");
    mount_label = std::move(*s);
  }
  auto r = labels_from_strings(process_label, mount_label);
  if (!r) return wrap(r, "OCI config");
  return r;
}

Result<Label> process_label_from_proc(int proc_root_fd, pid_t pid) {
  if (pid <= 0 || pid > kPidMaxLimit)
    return fail(EINVAL, "invalid pid {} (expected 1..{})", pid, kPidMaxLimit);
  std::string rel = fmt::format("{}/attr/current", pid);
  auto data = fs::read_file_at(proc_root_fd, rel, 4096);
  if (!data) return wrap(data, fmt::format("reading the SELinux label of pid {}", pid));
  std::string_view v = *data;
  // The kernel returns the context with a trailing NUL (selinux_getprocattr);
  // some tools write a newline. Strip both, nothing else.
  while (!v.empty() && (v.back() == '\0' || v.back() == '\n')) v.remove_suffix(1);
  if (v.empty()) return fail(ENODATA, "pid {} has an empty SELinux label", pid);
  auto l = Label::parse(v);
  if (!l) return wrap(l, fmt::format("/proc/{}/attr/current", pid));
  return l;
}

}  // namespace podshim::selinux
