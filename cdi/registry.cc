#include "cdi/registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "base/fs.h"
#include "base/str.h"
#include "cdi/flat_index.h"
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

// Opens one candidate spec file (never through a symlink) and fstat()s it
// into *st.
Result<UniqueFd> open_candidate(int dirfd, const std::string& name, struct stat* st) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ELOOP) return fail(ELOOP, "is a symlink, ignoring it (spec files must be regular files)");
    return fail_errno("opening");
  }
  UniqueFd owned(fd);
  if (::fstat(fd, st) < 0) return fail_errno("fstat");
  return owned;
}

// Reads an opened candidate, refusing what podshim should not trust:
// anything but a regular file, group/world-writable files and files not
// owned by the required owner. Upstream reads any file it can open
// (os.ReadFile follows symlinks).
Result<std::string> read_candidate(int fd, const struct stat& st, const RegistryOptions& opt) {
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

// The file a verdict was made from: a file with the same inode, size,
// mtime and ctime has not changed since (ctime covers chmod and chown).
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  struct timespec mtime {}, ctime {};
  static FileIdentity of(const struct stat& st) { return {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim}; }
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

struct Registry::FileState {
  size_t prio = 0;
  const std::string* name = nullptr;  // its key in DirState::files
  std::string error;                      // load error or safety refusal
  std::shared_ptr<const SpecFile> spec;   // null when not loaded
  std::optional<FileIdentity> read_from;  // the opened file this state came from
  // kind=name of each device, in order; derived, not stored (a registry of
  // DRA claims holds thousands).
  std::vector<std::string> qualified() const {
    std::vector<std::string> out;
    if (!spec) return out;
    out.reserve(spec->spec.devices.size());
    for (const auto& d : spec->spec.devices) out.push_back(spec->spec.kind + "=" + d.name);
    return out;
  }
};

namespace {

// Scan order of two files: directory priority, then name.
template <typename F>
bool scan_before(const F& a, const F& b) {
  return a.prio != b.prio ? a.prio < b.prio : *a.name < *b.name;
}

}  // namespace

Registry::Registry(RegistryOptions options) : options_(std::move(options)) {
  dirs_.resize(options_.spec_dirs.size());
}
Registry::~Registry() = default;

std::string Registry::file_path(size_t prio, const std::string& name) const {
  const std::string& dir = options_.spec_dirs[prio];
  return (str::ends_with(dir, "/") ? dir : dir + "/") + name;
}

bool Registry::list_candidates(size_t prio, std::vector<std::string>* names) {
  const std::string& dir = options_.spec_dirs[prio];
  DirState& ds = dirs_[prio];
  ds.error.clear();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    // A missing directory is not an error (upstream).
    if (errno != ENOENT) ds.error = fmt::format("opening spec directory: {}", errno_string(errno));
    return false;
  }
  UniqueFd dirfd(dfd);
  auto all = list_dir(dfd);
  if (!all) {
    ds.error = all.error().message;
    return false;
  }
  for (auto& n : *all)
    if (format_for_path(n)) names->push_back(std::move(n));
  return true;
}

void Registry::update_file(size_t prio, const std::string& name, bool only_if_changed) {
  const std::string& dir = options_.spec_dirs[prio];
  auto format = format_for_path(name);
  int dfd = format ? ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (dfd < 0) {
    replace_file(prio, name, nullptr);
    return;
  }
  UniqueFd dirfd(dfd);
  struct stat st {};
  if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? S_ISDIR(st.st_mode) : errno == ENOENT) {
    replace_file(prio, name, nullptr);  // gone, or a sub-directory (skipped, whatever its name)
    return;
  }
  auto f = std::make_unique<FileState>();
  f->prio = prio;
  struct stat fst {};
  auto fd = open_candidate(dfd, name, &fst);
  if (fd) {
    f->read_from = FileIdentity::of(fst);
    if (only_if_changed) {
      auto& files = dirs_[prio].files;
      auto it = files.find(name);
      if (it != files.end() && it->second->read_from == f->read_from) return;  // the same file: verdict stands
    }
  }
  auto data = fd ? read_candidate(fd->get(), fst, options_) : Result<std::string>(Unexpected(fd.error()));
  if (data && options_.on_parse) options_.on_parse(file_path(prio, name));
  if (!data) {
    f->error = data.error().message;
  } else if (auto spec = load_spec(*data, *format); !spec) {
    f->error = fmt::format("failed to load CDI spec: {}", spec.error().message);
  } else {
    auto file = std::make_shared<SpecFile>(SpecFile{file_path(prio, name), static_cast<int>(prio), std::move(*spec)});
    f->spec = std::move(file);
  }
  replace_file(prio, name, std::move(f));
}

void Registry::replace_file(size_t prio, const std::string& name, std::unique_ptr<FileState> next) {
  auto& files = dirs_[prio].files;
  auto it = files.find(name);
  std::vector<std::string> affected;
  if (it != files.end()) {
    FileState* old = it->second.get();
    for (auto& qn : old->qualified()) {
      NameState& ns = name_state(qn);
      ns.providers.erase_file(old);
      // The winner may have been `old`, freed below: until recompute()
      // the name is read from the providers.
      ns.winner = -1;
      ns.winner_spec = nullptr;
      ns.winner_device = nullptr;
      // Gone at once when it has no provider left: its name is read from
      // its providers.
      if (ns.providers.empty()) name_erase(static_cast<size_t>(&ns - names_.data()));
      affected.push_back(std::move(qn));
    }
  }
  FileState* added = next.get();
  if (next) {
    if (it == files.end()) it = files.emplace(name, nullptr).first;
    next->name = &it->first;
    it->second = std::move(next);
  } else if (it != files.end()) {
    files.erase(it);
  }
  if (added) {
    auto qualified = added->qualified();
    for (size_t i = 0; i < qualified.size(); i++) {
      Providers& providers = name_state(qualified[i]).providers;
      size_t pos = providers.size();
      while (pos > 0 && scan_before(*added, *providers[pos - 1].file)) pos--;
      providers.insert(pos, Provider{added, i});
      affected.push_back(std::move(qualified[i]));
    }
  }
  for (const auto& qn : affected) recompute(qn);
  views_stale_ = true;
}

// The scan's rules for one name, over its providers in scan order: a later
// directory replaces an earlier one; a second definition at the same
// priority is a conflict recorded on both files, and the name then stays
// unresolvable even if a higher directory defines it again (pkg/cdi
// Cache.refresh).
template <typename F>
int Registry::scan_rules(const NameState& ns, F&& each) {
  int cur = -1;
  bool conflicted = false;
  for (size_t i = 0; i < ns.providers.size(); i++) {
    const Provider& p = ns.providers[i];
    if (cur >= 0 && ns.providers[cur].file->prio == p.file->prio) {
      each(p.file, ns.providers[cur].file, p.index);
      conflicted = true;
      continue;
    }
    cur = static_cast<int>(i);
  }
  return conflicted ? -1 : cur;
}

void Registry::Providers::insert(size_t pos, Provider p) {
  if (!many_ && !one_.file) {
    one_ = p;
    return;
  }
  if (!many_) many_ = std::make_unique<std::vector<Provider>>(1, one_);
  many_->insert(many_->begin() + static_cast<ptrdiff_t>(pos), p);
}

void Registry::Providers::erase_file(const FileState* file) {
  if (!many_) {
    if (one_.file == file) one_ = Provider{};
    return;
  }
  std::erase_if(*many_, [&](const Provider& p) { return p.file == file; });
  if (many_->size() <= 1) {
    one_ = many_->empty() ? Provider{} : many_->front();
    many_.reset();
  }
}

bool Registry::NameState::is(std::string_view qn) const {
  const Spec* spec;
  const std::string* name;
  if (winner_device) {
    spec = &winner_spec->spec;
    name = &winner_device->name;
  } else {
    const Provider& p = providers[0];
    spec = &p.file->spec->spec;
    name = &spec->devices[p.index].name;
  }
  const std::string& kind = spec->kind;
  return qn.size() == kind.size() + 1 + name->size() && qn.compare(0, kind.size(), kind) == 0 &&
         qn[kind.size()] == '=' && qn.substr(kind.size() + 1) == *name;
}

std::string Registry::NameState::qualified() const {
  const Provider& p = providers[0];
  const Spec& spec = p.file->spec->spec;
  return spec.kind + "=" + spec.devices[p.index].name;
}

Registry::NameState& Registry::name_state(const std::string& qn) {
  const uint64_t hash = FlatHash{}(std::string_view(qn));
  if (const NameState* ns = index_find(qn, hash)) return const_cast<NameState&>(*ns);
  if (2 * (slots_used_ + 1) > slots_.size()) {
    std::vector<NameSlot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, 2 * old.size()), NameSlot{});
    for (const NameSlot& s : old)
      if (s.at) slots_[index_probe(s.hash, 0)] = s;
  }
  names_.emplace_back();
  names_.back().hash = hash;
  slots_[index_probe(hash, 0)] = NameSlot{hash, static_cast<uint32_t>(names_.size())};
  slots_used_++;
  return names_.back();
}

size_t Registry::index_probe(uint64_t hash, uint32_t at) const {
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].at && slots_[i].at != at) i = (i + 1) & mask;
  return i;
}

void Registry::name_erase(size_t at) {
  // Linear probing's deletion without tombstones: the entries after the
  // hole, up to the next empty slot, move back into it when their probe
  // passed it.
  const size_t mask = slots_.size() - 1;
  size_t hole = index_probe(names_[at].hash, static_cast<uint32_t>(at + 1));
  slots_[hole] = NameSlot{};
  slots_used_--;
  for (size_t i = (hole + 1) & mask; slots_[i].at; i = (i + 1) & mask) {
    size_t home = slots_[i].hash & mask;
    // Movable when its home is not in (hole, i], cyclically.
    bool stays = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (stays) continue;
    slots_[hole] = slots_[i];
    slots_[i] = NameSlot{};
    hole = i;
  }
  // The last entry moves into the erased one's place; its slot follows.
  const size_t last = names_.size() - 1;
  if (at != last) {
    slots_[index_probe(names_[last].hash, static_cast<uint32_t>(last + 1))].at = static_cast<uint32_t>(at + 1);
    names_[at] = std::move(names_[last]);
  }
  names_.pop_back();
}

const Registry::NameState* Registry::index_find(std::string_view qn, uint64_t hash) const {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask; slots_[i].at; i = (i + 1) & mask) {
    if (slots_[i].hash != hash) continue;
    const NameState& ns = names_[slots_[i].at - 1];
    if (ns.is(qn)) return &ns;
  }
  return nullptr;
}

void Registry::recompute(const std::string& qn) {
  const NameState* found = index_find(qn, FlatHash{}(std::string_view(qn)));
  if (!found) return;  // no provider left: erased with its last one
  NameState& ns = const_cast<NameState&>(*found);
  ns.winner = scan_rules(ns, [](const FileState*, const FileState*, size_t) {});
  ns.winner_spec = nullptr;
  ns.winner_device = nullptr;
  if (ns.winner >= 0) {
    const Provider& p = ns.providers[static_cast<size_t>(ns.winner)];
    ns.winner_spec = p.file->spec.get();
    ns.winner_device = &ns.winner_spec->spec.devices[p.index];
  }
}

void Registry::build_views() const {
  if (!views_stale_) return;
  // Conflict messages land on both files, ordered as the scan records them:
  // by the later file's scan position, then its device order.
  struct Msg {
    const FileState* later;
    size_t index;
    std::string text;
  };
  std::unordered_map<const FileState*, std::vector<Msg>> msgs;
  for (const NameState& ns : names_) {
    if (ns.providers.size() < 2) continue;
    const std::string qn = ns.qualified();
    scan_rules(ns, [&](const FileState* later, const FileState* first, size_t index) {
      std::string text = fmt::format("conflicting device \"{}\" (specs \"{}\", \"{}\")", qn,
                                     later->spec->path, first->spec->path);
      msgs[first].push_back({later, index, text});
      msgs[later].push_back({later, index, std::move(text)});
    });
  }
  verdicts_.clear();
  specs_.clear();
  for (size_t prio = 0; prio < dirs_.size(); prio++) {
    const DirState& ds = dirs_[prio];
    if (!ds.error.empty()) verdicts_.push_back(FileVerdict{options_.spec_dirs[prio], false, {ds.error}});
    for (const auto& [name, f] : ds.files) {
      FileVerdict v{f->spec ? f->spec->path : file_path(prio, name), f->spec != nullptr, {}};
      if (!f->error.empty()) v.errors.push_back(f->error);
      if (auto m = msgs.find(f.get()); m != msgs.end()) {
        std::sort(m->second.begin(), m->second.end(), [](const Msg& a, const Msg& b) {
          if (a.later != b.later) return scan_before(*a.later, *b.later);
          return a.index < b.index;
        });
        for (auto& x : m->second) v.errors.push_back(std::move(x.text));
      }
      if (f->spec) specs_.push_back(f->spec);
      verdicts_.push_back(std::move(v));
    }
  }
  views_stale_ = false;
}

void Registry::refresh() {
  dirs_.clear();
  dirs_.resize(options_.spec_dirs.size());
  names_.clear();
  slots_.clear();
  slots_used_ = 0;
  // Watches first, so that a change made while the scan runs is reported
  // and read again later rather than missed. The directory jobs this
  // queues are what the scan below does.
  if (inotify_) add_watches();
  for (size_t prio = 0; prio < options_.spec_dirs.size(); prio++) {
    std::vector<std::string> names;
    if (!list_candidates(prio, &names)) continue;
    for (const auto& n : names) update_file(prio, n);
  }
  views_stale_ = true;
  generation_++;
  queue_.clear();
  queued_.clear();
  signal_pending();
}

const std::vector<FileVerdict>& Registry::verdicts() const {
  build_views();
  return verdicts_;
}

const std::vector<std::shared_ptr<const SpecFile>>& Registry::specs() const {
  build_views();
  return specs_;
}

std::vector<std::string> Registry::devices() const {
  std::vector<std::string> out;
  out.reserve(names_.size());
  for (const NameState& ns : names_)
    if (ns.winner >= 0) out.push_back(ns.qualified());
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::vector<std::string>> Registry::errors() const {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& v : verdicts())
    if (!v.errors.empty()) out[v.path] = v.errors;
  return out;
}

Result<std::vector<const ContainerEdits*>> Registry::resolve_parts(const std::vector<std::string>& names) const {
  std::vector<const NameState*> found;
  std::vector<std::string> unresolved;
  // The request's distinct names and their hashes, each name's slot
  // prefetched; then each slot read and the node it names prefetched, then
  // each key; only then compared. The misses of all the names overlap
  // instead of queueing one name's four behind the previous name's.
  FlatIndex<std::string_view, char> wanted(names.size());
  std::vector<const std::string*> distinct;
  std::vector<uint64_t> hashes;
  distinct.reserve(names.size());
  hashes.reserve(names.size());
  const size_t mask = slots_.empty() ? 0 : slots_.size() - 1;
  for (const auto& n : names) {
    if (!wanted.insert(n)) continue;  // a duplicate request counts once
    distinct.push_back(&n);
    hashes.push_back(FlatHash{}(std::string_view(n)));
    if (!slots_.empty()) __builtin_prefetch(&slots_[hashes.back() & mask]);
  }
  std::vector<const NameState*> guess(distinct.size(), nullptr);
  if (!slots_.empty()) {
    for (size_t i = 0; i < distinct.size(); i++) {
      for (size_t at = hashes[i] & mask; slots_[at].at; at = (at + 1) & mask) {
        if (slots_[at].hash != hashes[i]) continue;
        guess[i] = &names_[slots_[at].at - 1];
        __builtin_prefetch(guess[i]);
        break;
      }
    }
    // The name is compared with the winner's kind and device name.
    for (const NameState* g : guess)
      if (g && g->winner_device) __builtin_prefetch(g->winner_device->name.data());
  }
  found.reserve(distinct.size());
  for (size_t i = 0; i < distinct.size(); i++) {
    const std::string& n = *distinct[i];
    // A guess is the first slot with the full hash; another name with that
    // hash is found by the plain lookup.
    const NameState* ns = guess[i] && guess[i]->is(n) ? guess[i] : index_find(n, hashes[i]);
    if (ns && ns->winner >= 0) {
      found.push_back(ns);
      __builtin_prefetch(&ns->winner_spec->spec.edits);
      __builtin_prefetch(&ns->winner_device->edits);
      continue;
    }
    auto q = parse_qualified_name(n);
    unresolved.push_back(q ? n : fmt::format("{} ({})", n, q.error().message));
  }
  if (!unresolved.empty()) {
    std::string list;
    for (const auto& u : unresolved) list += (list.empty() ? "" : ", ") + u;
    return fail(ENOENT, "unresolvable CDI devices {}", list);
  }
  std::vector<const ContainerEdits*> parts;
  parts.reserve(found.size() * 2);
  FlatIndex<const SpecFile*, char> seen(found.size());
  for (const NameState* ns : found) {
    if (seen.insert(ns->winner_spec)) parts.push_back(&ns->winner_spec->spec.edits);
    parts.push_back(&ns->winner_device->edits);
  }
  return parts;
}

Result<ContainerEdits> Registry::resolve(const std::vector<std::string>& names) const {
  auto parts = resolve_parts(names);
  if (!parts) return Unexpected(parts.error());
  ContainerEdits merged;
  for (const ContainerEdits* e : *parts) merged.append(*e);
  return merged;
}

// ---------------------------------------------------------------------------
// Live refresh.

void Registry::add_watches() {
  wd_dirs_.clear();
  ancestor_wds_.clear();
  for (size_t prio = 0; prio < options_.spec_dirs.size(); prio++) {
    const std::string& dir = options_.spec_dirs[prio];
    int wd = ::inotify_add_watch(inotify_.get(), dir.c_str(), kDirMask);
    if (wd >= 0) {
      wd_dirs_[wd].push_back(prio);
      // A directory watched anew (created, or replaced by another) is
      // listed again and all its files read: none was seen through this watch.
      if (dirs_[prio].wd != wd) enqueue(prio, "", Read::kAll);
      dirs_[prio].wd = wd;
      continue;
    }
    dirs_[prio].wd = -1;
    // Missing: watch the nearest existing ancestor for its creation, the way
    // upstream's watcher follows a spec directory that appears later.
    std::string p = clean_path(dir);
    while (p != "/" && p != ".") {
      size_t slash = p.rfind('/');
      p = slash == 0 ? "/" : p.substr(0, slash);
      int awd = ::inotify_add_watch(inotify_.get(), p.c_str(), kAncestorMask);
      if (awd >= 0) {
        ancestor_wds_.insert(awd);
        break;
      }
    }
  }
}

Result<void> Registry::watch(const FdWatcher& register_fd) {
  if (!inotify_) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return fail_errno("inotify_init1");
    inotify_.reset(fd);
    int ev = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ev < 0) return fail_errno("eventfd");
    event_.reset(ev);
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return fail_errno("epoll_create1");
    epoll_.reset(ep);
    for (int f : {inotify_.get(), event_.get()}) {
      struct epoll_event e {};
      e.events = EPOLLIN;
      e.data.fd = f;
      if (::epoll_ctl(ep, EPOLL_CTL_ADD, f, &e) < 0) return fail_errno("epoll_ctl");
    }
  }
  refresh();  // records the watches too
  if (register_fd) {
    // Whether a job ran matters only to callers that poll.
    auto r = register_fd(epoll_.get(), [this] { (void)process_watch_events(); });
    if (!r) return wrap(r, "registering the CDI spec directory watch");
  }
  return {};
}

void Registry::enqueue(size_t prio, std::string name, Read how) {
  auto [it, fresh] = queued_.emplace(std::make_pair(prio, name), how);
  if (!fresh) {
    it->second = std::max(it->second, how);  // a queued job reads as strongly as asked since
    return;
  }
  queue_.push_back(Job{prio, std::move(name)});
}

// Keeps the eventfd readable exactly while jobs are queued.
void Registry::signal_pending() {
  if (!event_) return;
  bool want = !queue_.empty();
  if (want == signalled_) return;
  if (want) {
    uint64_t one = 1;
    if (::write(event_.get(), &one, sizeof one) == sizeof one) signalled_ = true;
  } else {
    uint64_t v;
    // Drains the eventfd; the count is not needed.
    (void)!::read(event_.get(), &v, sizeof v);
    signalled_ = false;
  }
}

void Registry::run_job(const Job& job, Read how) {
  if (!job.name.empty()) {
    update_file(job.prio, job.name, how == Read::kIfChanged);
    return;
  }
  // Re-list the directory: every listed candidate and every file known
  // from before becomes a job of its own; one unchanged since it was read
  // is not read again unless events were lost.
  add_watches();
  std::vector<std::string> names;
  list_candidates(job.prio, &names);
  views_stale_ = true;  // the directory error may have changed
  Read files = how == Read::kAll ? Read::kAlways : Read::kIfChanged;
  for (auto& n : names) enqueue(job.prio, std::move(n), files);
  for (const auto& [n, _] : dirs_[job.prio].files) enqueue(job.prio, n, files);
}

bool Registry::process_watch_events() {
  if (!inotify_) return false;
  alignas(struct inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      p += sizeof(struct inotify_event) + ev->len;
      std::string_view name = ev->len ? std::string_view(ev->name) : std::string_view();
      if (ev->mask & IN_Q_OVERFLOW) {  // lost events: list every directory again
        for (size_t prio = 0; prio < dirs_.size(); prio++) enqueue(prio, "", Read::kAll);
        continue;
      }
      if (ancestor_wds_.count(ev->wd)) {
        // Something appeared on the way to a missing directory: watch again;
        // a directory that now exists is queued by add_watches().
        add_watches();
      }
      auto it = wd_dirs_.find(ev->wd);
      if (it == wd_dirs_.end()) continue;
      for (size_t prio : it->second) {
        if (name.empty()) {
          // The directory itself (removed, moved, chmod); IN_IGNORED alone
          // follows a removal already reported.
          if (!(ev->mask & IN_IGNORED)) enqueue(prio, "");
        } else if (format_for_path(name)) {
          enqueue(prio, std::string(name));
        }
      }
    }
  }
  bool ran = false;
  if (!queue_.empty()) {
    Job job = std::move(queue_.front());
    queue_.pop_front();
    auto q = queued_.find({job.prio, job.name});
    Read how = q->second;
    queued_.erase(q);
    run_job(job, how);
    generation_++;
    ran = true;
  }
  signal_pending();
  return ran;
}

Result<ResolvedEdits> resolve_devices(const Registry& registry, const std::vector<std::string>& names,
                                      const ProcessIds& ids, const HostLookup& lookup) {
  auto parts = registry.resolve_parts(names);
  if (!parts) return Unexpected(parts.error());
  auto r = resolve_edits(*parts, ids, lookup);
  if (!r) return Unexpected(r.error().wrap("failed to inject CDI devices"));
  FlatIndex<std::string_view, char> seen(names.size());
  r->cdi_devices.reserve(names.size());
  for (const auto& n : names)
    if (seen.insert(n)) r->cdi_devices.push_back(n);
  return r;
}

Result<void> inject_oci(const Registry& registry, nlohmann::json& config,
                        const std::vector<std::string>& names, const HostLookup& lookup) {
  auto parts = registry.resolve_parts(names);
  if (!parts) return Unexpected(parts.error());
  return inject_edits_oci(*parts, config, lookup);
}

Result<std::string> inject_oci_text(const Registry& registry, nlohmann::json config,
                                    const std::vector<std::string>& names, int indent, const HostLookup& lookup) {
  auto parts = registry.resolve_parts(names);
  if (!parts) return Unexpected(parts.error());
  return inject_edits_oci_text(*parts, std::move(config), indent, lookup);
}

}  // namespace podshim::cdi
