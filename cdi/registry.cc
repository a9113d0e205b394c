#include "cdi/registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "base/fs.h"
#include "base/str.h"
#include "cdi/name.h"

namespace podshim::cdi {

namespace {

// Lists the names in a directory fd, sorted bytewise like Go's os.ReadDir.
Result<std::vector<std::string>> list_dir(int dirfd) {
  int fd = ::dup(dirfd);
  if (fd < 0) return fail_errno("dup");
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return fail_errno("fdopendir");
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
    errno = 0;
  }
  int saved = errno;
  ::closedir(d);
  if (saved) return fail_code(saved, "reading directory");
  std::sort(names.begin(), names.end());
  return names;
}

// Opens and reads one candidate spec file, refusing what podshim should not
// trust: anything but a regular file, group/world-writable files and files
// not owned by the required owner. Upstream reads any file it can open
// (os.ReadFile follows symlinks).
Result<std::string> read_candidate(int dirfd, const std::string& name, const RegistryOptions& opt) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ELOOP) return fail(ELOOP, "is a symlink, ignoring it (spec files must be regular files)");
    return fail_errno("opening");
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) < 0) return fail_errno("fstat");
  if (!S_ISREG(st.st_mode)) return fail(EPERM, "not a regular file, ignoring it");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fail(EPERM, "is group- or world-writable (mode {:04o}), ignoring it", st.st_mode & 07777);
  if (opt.required_owner && st.st_uid != *opt.required_owner)
    return fail(EPERM, "is owned by uid {}, not {}, ignoring it", st.st_uid, *opt.required_owner);
  return fs::read_fd(fd, fs::kDefaultMaxRead);
}

constexpr uint32_t kDirMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE |
                              IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr uint32_t kAncestorMask = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_MASK_ADD;

}  // namespace

Registry::Registry(RegistryOptions options) : options_(std::move(options)) {}
Registry::~Registry() = default;

void Registry::refresh() {
  std::vector<std::shared_ptr<const SpecFile>> specs;
  std::map<std::string, DeviceEntry> devices;
  std::vector<FileVerdict> verdicts;
  std::map<std::string, size_t> verdict_of;
  std::set<std::string> conflicts;

  for (size_t prio = 0; prio < options_.spec_dirs.size(); prio++) {
    const std::string& dir = options_.spec_dirs[prio];
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
      if (errno == ENOENT) continue;  // a missing directory is not an error (upstream)
      verdicts.push_back(FileVerdict{dir, false, {fmt::format("opening spec directory: {}", errno_string(errno))}});
      continue;
    }
    UniqueFd dirfd(dfd);
    auto names = list_dir(dfd);
    if (!names) {
      verdicts.push_back(FileVerdict{dir, false, {names.error().message}});
      continue;
    }
    for (const auto& name : *names) {
      auto format = format_for_path(name);
      if (!format) continue;
      struct stat st {};
      if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        continue;  // sub-directories are skipped, whatever their name
      std::string path = (str::ends_with(dir, "/") ? dir : dir + "/") + name;
      FileVerdict v{path, false, {}};
      auto data = read_candidate(dfd, name, options_);
      if (!data) {
        v.errors.push_back(data.error().message);
      } else if (auto spec = load_spec(*data, *format); !spec) {
        v.errors.push_back(fmt::format("failed to load CDI spec: {}", spec.error().message));
      } else {
        auto kind = parse_kind(spec->kind);  // validated by load_spec
        auto file = std::make_shared<SpecFile>(
            SpecFile{path, static_cast<int>(prio), kind->first, kind->second, std::move(*spec)});
        v.loaded = true;
        for (size_t i = 0; i < file->spec.devices.size(); i++) {
          std::string qn = file->spec.kind + "=" + file->spec.devices[i].name;
          auto it = devices.find(qn);
          if (it != devices.end() && it->second.spec->priority == file->priority) {
            // Equal priority: neither wins (pkg/cdi Cache.refresh). As
            // upstream, the name stays unresolvable even if a higher
            // directory defines it again later in the scan.
            std::string msg = fmt::format("conflicting device \"{}\" (specs \"{}\", \"{}\")", qn, path,
                                          it->second.spec->path);
            v.errors.push_back(msg);
            verdicts[verdict_of.at(it->second.spec->path)].errors.push_back(msg);
            conflicts.insert(qn);
            continue;
          }
          devices[qn] = DeviceEntry{file, i};  // new or from a higher-priority directory
        }
        specs.push_back(std::move(file));
      }
      verdict_of[path] = verdicts.size();
      verdicts.push_back(std::move(v));
    }
  }
  for (const auto& c : conflicts) devices.erase(c);
  specs_ = std::move(specs);
  devices_ = std::move(devices);
  verdicts_ = std::move(verdicts);
  generation_++;
}

std::vector<std::string> Registry::devices() const {
  std::vector<std::string> out;
  out.reserve(devices_.size());
  for (const auto& [qn, _] : devices_) out.push_back(qn);
  return out;
}

std::map<std::string, std::vector<std::string>> Registry::errors() const {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& v : verdicts_)
    if (!v.errors.empty()) out[v.path] = v.errors;
  return out;
}

Result<ContainerEdits> Registry::resolve(const std::vector<std::string>& names) const {
  std::vector<std::string> wanted, unresolved;
  for (const auto& n : names)
    if (std::find(wanted.begin(), wanted.end(), n) == wanted.end()) wanted.push_back(n);
  for (const auto& n : wanted) {
    if (devices_.count(n)) continue;
    auto q = parse_qualified_name(n);
    unresolved.push_back(q ? n : fmt::format("{} ({})", n, q.error().message));
  }
  if (!unresolved.empty()) {
    std::string list;
    for (const auto& u : unresolved) list += (list.empty() ? "" : ", ") + u;
    return fail(ENOENT, "unresolvable CDI devices {}", list);
  }
  ContainerEdits merged;
  std::set<const SpecFile*> seen;
  for (const auto& n : wanted) {
    const DeviceEntry& e = devices_.at(n);
    if (seen.insert(e.spec.get()).second) merged.append(e.spec->spec.edits);
    merged.append(e.spec->spec.devices[e.index].edits);
  }
  return merged;
}

void Registry::add_watches() {
  for (const auto& dir : options_.spec_dirs) {
    if (::inotify_add_watch(inotify_.get(), dir.c_str(), kDirMask) >= 0) continue;
    // Missing: watch the nearest existing ancestor for its creation, the way
    // upstream's watcher follows a spec directory that appears later.
    std::string p = clean_path(dir);
    while (p != "/" && p != ".") {
      size_t slash = p.rfind('/');
      p = slash == 0 ? "/" : p.substr(0, slash);
      if (::inotify_add_watch(inotify_.get(), p.c_str(), kAncestorMask) >= 0) break;
    }
  }
}

Result<void> Registry::watch(const FdWatcher& register_fd) {
  if (!inotify_) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return fail_errno("inotify_init1");
    inotify_.reset(fd);
  }
  add_watches();
  refresh();
  if (register_fd) {
    auto r = register_fd(inotify_.get(), [this] { (void)process_watch_events(); });
    if (!r) return wrap(r, "registering the CDI spec directory watch");
  }
  return {};
}

bool Registry::process_watch_events() {
  if (!inotify_) return false;
  bool relevant = false;
  alignas(struct inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      p += sizeof(struct inotify_event) + ev->len;
      std::string_view name = ev->len ? std::string_view(ev->name) : std::string_view();
      if (ev->mask & IN_Q_OVERFLOW) relevant = true;                     // lost events: rescan
      else if (name.empty()) relevant = relevant || !(ev->mask & IN_IGNORED);  // the directory itself
      else if ((ev->mask & IN_ISDIR) || format_for_path(name)) relevant = true;
    }
  }
  if (!relevant) return false;
  add_watches();  // a directory may have appeared or been replaced
  refresh();
  return true;
}

Result<ResolvedEdits> resolve_devices(const Registry& registry, const std::vector<std::string>& names,
                                      const ProcessIds& ids, const HostLookup& lookup) {
  auto merged = registry.resolve(names);
  if (!merged) return Unexpected(merged.error());
  auto r = resolve_edits(*merged, ids, lookup);
  if (!r) return Unexpected(r.error().wrap("failed to inject CDI devices"));
  for (const auto& n : names)
    if (std::find(r->cdi_devices.begin(), r->cdi_devices.end(), n) == r->cdi_devices.end())
      r->cdi_devices.push_back(n);
  return r;
}

Result<void> inject_oci(const Registry& registry, nlohmann::json& config,
                        const std::vector<std::string>& names, const HostLookup& lookup) {
  auto edits = resolve_devices(registry, names, process_ids_from_oci(config), lookup);
  if (!edits) return Unexpected(edits.error());
  nlohmann::json copy = config;
  PODSHIM_TRY(apply_to_oci(*edits, copy));
  config = std::move(copy);
  return {};
}

}  // namespace podshim::cdi
