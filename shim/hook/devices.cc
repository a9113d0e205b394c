#include "shim/hook/devices.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace podshim::hook {
namespace {

using nlohmann::json;

Result<void> check_dev_path(std::string_view what, std::string_view p) {
  if (p.empty() || p.front() != '/')
    return fail(EINVAL, "{}: '{}' is not an absolute path", what, p);
  // The rest (".." and symlinks) is refused by open_beneath when the path is used.
  return fs::check_relative(p.substr(1));
}

const char* type_name(mode_t m) {
  switch (m & S_IFMT) {
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a FIFO";
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symlink";
    case S_IFSOCK: return "a socket";
    default: return "an unknown file type";
  }
}

bool type_matches(std::string_view oci_type, mode_t m) {
  // "u" is an unbuffered character device: still S_IFCHR (config-linux.md §Devices).
  if (oci_type == "c" || oci_type == "u") return S_ISCHR(m);
  if (oci_type == "b") return S_ISBLK(m);
  if (oci_type == "p") return S_ISFIFO(m);
  return false;
}

}  // namespace

Result<std::vector<InjectedDevice>> parse_injected_devices(std::string_view value) {
  constexpr std::string_view what = kInjectedDevicesAnnotation;
  json doc = json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(EINVAL, "annotation {} is not valid JSON", what);
  if (!doc.is_array()) return fail(EINVAL, "annotation {} is not a JSON array", what);
  std::vector<InjectedDevice> out;
  for (const json& e : doc) {
    InjectedDevice d;
    if (e.is_string()) {
      d.path = e.get<std::string>();
    } else if (e.is_object()) {
      auto p = e.find("path");
      if (p == e.end() || !p->is_string())
        return fail(EINVAL, "annotation {}: an entry has no string 'path'", what);
      d.path = p->get<std::string>();
      if (auto h = e.find("hostPath"); h != e.end() && !h->is_null()) {
        if (!h->is_string())
          return fail(EINVAL, "annotation {}: 'hostPath' of '{}' is not a string", what, d.path);
        d.host_path = h->get<std::string>();
      }
    } else {
      return fail(EINVAL, "annotation {}: entries must be paths or {{path, hostPath}} objects",
                  what);
    }
    // CDI's own default (container-edits_unix.go fillMissingInfo): hostPath = path.
    if (d.host_path.empty()) d.host_path = d.path;
    if (auto r = check_dev_path(fmt::format("annotation {} path", what), d.path); !r)
      return Unexpected(r.error());
    if (auto r = check_dev_path(fmt::format("annotation {} hostPath", what), d.host_path); !r)
      return Unexpected(r.error());
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<InjectedDevice>> injected_devices(
    const std::map<std::string, std::string>& state_annotations,
    const std::map<std::string, std::string>& config_annotations) {
  const std::string key(kInjectedDevicesAnnotation);
  if (auto it = state_annotations.find(key); it != state_annotations.end())
    return parse_injected_devices(it->second);
  if (auto it = config_annotations.find(key); it != config_annotations.end())
    return parse_injected_devices(it->second);
  return std::vector<InjectedDevice>{};
}

Result<size_t> check_devices(int root_fd, const std::vector<InjectedDevice>& injected,
                             const std::vector<OciDevice>& spec_devices) {
  size_t checked = 0;
  for (const InjectedDevice& inj : injected) {
    const OciDevice* spec = nullptr;
    for (const OciDevice& d : spec_devices) {
      if (d.path == inj.path) spec = &d;  // the last entry wins, as runtimes apply them in order
    }
    if (!spec)
      return fail(ENOENT, "device '{}' is listed in {} but config.json linux.devices has no such "
                  "entry", inj.path, kInjectedDevicesAnnotation);
    // O_PATH: never opens the device itself (no driver open(), no FIFO block).
    auto fd = fs::open_beneath(root_fd, std::string_view(inj.host_path).substr(1), O_PATH);
    if (!fd) {
      if (fd.error().code == ELOOP)
        return fail(ELOOP, "host device '{}' for '{}' is reached through a symlink, refusing it",
                    inj.host_path, inj.path);
      return wrap(fd, fmt::format("host device '{}' for '{}'", inj.host_path, inj.path));
    }
    struct stat sb {};
    if (::fstat(fd->get(), &sb) < 0)
      return fail_errno("stat host device '{}'", inj.host_path);
    if (!type_matches(spec->type, sb.st_mode))
      return fail(EINVAL, "host device '{}' for '{}' is {}, but config.json says type '{}'",
                  inj.host_path, inj.path, type_name(sb.st_mode), spec->type);
    if (spec->type != "p") {
      const int64_t ma = ::major(sb.st_rdev), mi = ::minor(sb.st_rdev);
      if (ma != spec->major || mi != spec->minor)
        return fail(EINVAL, "host device '{}' for '{}' is {}:{}, but config.json says {}:{}",
                    inj.host_path, inj.path, ma, mi, spec->major, spec->minor);
    }
    ++checked;
  }
  return checked;
}

}  // namespace podshim::hook
