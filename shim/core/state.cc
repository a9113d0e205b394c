#include "shim/core/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "base/fs.h"
#include "base/log.h"
#include "base/names.h"
#include "base/str.h"
#include "shim/core/json.h"
#include "shim/core/json_writer.h"

namespace podshim::core {

namespace {

// Per-object files, as versions before the snapshot wrote them: read at
// open, removed once a snapshot holds them.
constexpr std::string_view kPodsDir = "pods";
constexpr std::string_view kContainersDir = "containers";
constexpr std::string_view kSuffix = ".json";
constexpr std::string_view kSnapshot = "snapshot";
constexpr std::string_view kJournal = "journal";
constexpr std::string_view kJournalOld = "journal.old";

constexpr bool id_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.';
}
constexpr str::ByteSet kIdChars = str::byte_set(id_char_ok);

}  // namespace

int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

constexpr Names<QosClass, 3> kQosNames{{{{QosClass::BestEffort, "BestEffort"},
                                         {QosClass::Burstable, "Burstable"},
                                         {QosClass::Guaranteed, "Guaranteed"}}}};
constexpr Names<ResizePolicy, 2> kResizePolicyNames{{{{ResizePolicy::NotRequired, "NotRequired"},
                                                      {ResizePolicy::RestartContainer, "RestartContainer"}}}};
constexpr Names<Source, 3> kSourceNames{{{{Source::Api, "api"}, {Source::Nri, "nri"}, {Source::Hook, "hook"}}}};
constexpr Names<EventType, 4> kEventTypeNames{{{{EventType::PodUpserted, "PodUpserted"},
                                                {EventType::PodRemoved, "PodRemoved"},
                                                {EventType::ContainerUpserted, "ContainerUpserted"},
                                                {EventType::ContainerRemoved, "ContainerRemoved"}}}};

std::string_view to_string(QosClass q) { return kQosNames.name(q); }

Result<QosClass> parse_qos(std::string_view s) { return kQosNames.parse(s, "QoS class"); }

std::string_view to_string(ResizePolicy p) { return kResizePolicyNames.name(p); }

Result<ResizePolicy> parse_resize_policy(std::string_view s) {
  return kResizePolicyNames.parse(s, "resize policy");
}

std::string_view to_string(Source s) { return kSourceNames.name(s); }

Result<Source> parse_source(std::string_view s) { return kSourceNames.parse(s, "source"); }

std::string_view to_string(EventType t) { return kEventTypeNames.name(t); }

Result<void> validate_id(std::string_view kind, std::string_view id) {
  if (id.empty()) return fail(EINVAL, "{} must not be empty", kind);
  if (id.size() > 128) return fail(EINVAL, "{} '{}...' longer than 128 characters", kind, id.substr(0, 32));
  if (id.front() == '.') return fail(EINVAL, "{} '{}' must not start with '.'", kind, id);
  if (str::find_not_in(id, kIdChars) != std::string_view::npos)
    return fail(EINVAL, "{} '{}' contains a character outside [A-Za-z0-9_.-]", kind, id);
  return {};
}

QosClass compute_qos(const std::vector<K8sResources>& containers) {
  // pkg/apis/core/v1/helper/qos.GetPodQOS: no requests/limits anywhere →
  // BestEffort; every container with cpu and memory limits equal to its
  // requests → Guaranteed; else Burstable. A limit without a request implies
  // request = limit (apiserver defaulting).
  bool any = false, guaranteed = !containers.empty();
  for (const auto& r : containers) {
    auto cpu_req = r.cpu_request_milli ? r.cpu_request_milli : r.cpu_limit_milli;
    auto mem_req = r.memory_request_bytes ? r.memory_request_bytes : r.memory_limit_bytes;
    if (cpu_req || mem_req || r.cpu_limit_milli || r.memory_limit_bytes) any = true;
    if (!r.cpu_limit_milli || !r.memory_limit_bytes || cpu_req != r.cpu_limit_milli ||
        mem_req != r.memory_limit_bytes) {
      guaranteed = false;
    }
  }
  if (!any) return QosClass::BestEffort;
  return guaranteed ? QosClass::Guaranteed : QosClass::Burstable;
}

Store::~Store() { drain(); }

void Store::drain() {
  std::thread t;
  {
    std::lock_guard lk(mu_);
    t = std::move(compactor_);
  }
  if (t.joinable()) t.join();
}

std::unique_ptr<Store> Store::in_memory() { return std::unique_ptr<Store>(new Store()); }

Result<std::unique_ptr<Store>> Store::open(const std::string& state_dir) {
  PODSHIM_TRY(fs::mkdir_p(state_dir, 0700));
  auto dir = fs::open_dir(state_dir);
  if (!dir) return wrap(dir, fmt::format("opening state dir {}", state_dir));
  std::unique_ptr<Store> s(new Store());
  s->dirfd_ = std::move(*dir);
  PODSHIM_TRY(s->load_object_files());
  struct stat snap {};
  if (fstatat(s->dirfd_.get(), std::string(kSnapshot).c_str(), &snap, AT_SYMLINK_NOFOLLOW) == 0) {
    PODSHIM_TRY(s->replay_journal(kSnapshot));
    s->snapshot_bytes_ = static_cast<uint64_t>(snap.st_size);
  }
  auto j = fs::open_beneath(s->dirfd_.get(), kJournal, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (!j) return wrap(j, fmt::format("opening {}/{}", state_dir, kJournal));
  s->journal_ = std::move(*j);
  // A compaction that a crash cut short left journal.old: older than journal.
  if (faccessat(s->dirfd_.get(), std::string(kJournalOld).c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    s->old_journal_ = true;
    PODSHIM_TRY(s->replay_journal(kJournalOld));
  }
  PODSHIM_TRY(s->replay_journal(kJournal));
  // Start every run with the snapshot up to date and an empty journal; the
  // object files of an earlier version are in it now.
  PODSHIM_TRY(s->compact());
  s->remove_leftovers();
  return s;
}

// Journal (and snapshot) records, one line each; ids are validated
// ([A-Za-z0-9_.-]) and the JSON of an object has no raw newline:
//   P <pod json>      C <container json>      p <uid>      c <id>
Result<void> Store::replay_journal(std::string_view name) {
  auto text = fs::read_file_at(dirfd_.get(), name, 1ull << 30);
  if (!text) return wrap(text, fmt::format("reading the state journal {}", name));
  size_t pos = 0, line_no = 0;
  while (pos < text->size()) {
    ++line_no;
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) {
      // A record cut short by a crash mid-write: the change it described was
      // never acknowledged.
      load_warnings_.push_back(fmt::format("state {}: incomplete last record (line {}) ignored", name, line_no));
      break;
    }
    std::string_view line(text->data() + pos, nl - pos);
    pos = nl + 1;
    auto bad = [&](std::string_view why) {
      load_warnings_.push_back(fmt::format("state {} line {}: {}; ignored", name, line_no, why));
    };
    if (line.size() < 3 || line[1] != ' ') {
      bad("malformed record");
      continue;
    }
    char op = line[0];
    std::string_view arg = line.substr(2);
    if (op == 'p' || op == 'c') {
      if (!validate_id("id", arg)) {
        bad("invalid id");
        continue;
      }
      std::string id(arg);
      if (op == 'p') {
        pods_.erase(id);
      } else {
        if (auto it = containers_.find(id); it != containers_.end()) {
          index_remove(it->second);
          tally(it->second, -1);
          containers_.erase(it);
        }
        json_.erase(id);
      }
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(arg, nullptr, false);
    if (j.is_discarded()) {
      bad("invalid JSON");
      continue;
    }
    if (op == 'P') {
      auto p = pod_from_json(j);
      if (!p || !validate_id("pod uid", p->uid)) {
        bad(p ? "invalid pod uid" : p.error().message);
        continue;
      }
      pods_[p->uid] = std::move(*p);
    } else if (op == 'C') {
      auto c = container_from_json(j);
      if (!c || !validate_id("container id", c->id) || (!c->pod_uid.empty() && !validate_id("pod uid", c->pod_uid))) {
        bad(c ? "invalid container or pod id" : c.error().message);
        continue;
      }
      json_.erase(c->id);
      auto it = containers_.find(c->id);
      if (it != containers_.end()) index_remove(it->second);
      else it = containers_.emplace(c->id, Container{}).first;
      index_add(it, c->pod_uid);
      tally(it->second, -1);
      it->second = std::move(*c);
      tally(it->second, 1);
    } else {
      bad("unknown record type");
    }
  }
  return {};
}

// What a compaction writes: every object as it stood when the snapshot was
// taken, as journal records ("P <json>" and "C <json>" lines).
struct Store::Snapshot {
  std::string text;
};

Store::Snapshot Store::take_snapshot() const {
  Snapshot snap;
  size_t size = 0;
  for (const auto& [id, j] : json_) size += j.size() + 3;
  snap.text.reserve(size + pods_.size() * 256);
  for (const auto& [uid, p] : pods_) {
    snap.text += "P ";
    append_json(snap.text, p);
    snap.text += '\n';
  }
  for (const auto& [id, c] : containers_) {
    snap.text += "C ";
    if (auto cached = json_.find(id); cached != json_.end()) snap.text += cached->second;
    else append_json(snap.text, c);
    snap.text += '\n';
  }
  return snap;
}

// Brings the snapshot up to date with what the journal holds, durably, then
// empties the journal (in that order: a crash in between replays the journal
// over a snapshot that already agrees with it).
Result<void> Store::compact() {
  if (!dirfd_ || !journal_) return {};
  struct stat st {};
  if (journal_bytes_ == 0 && !old_journal_ && !object_files_ && fstat(journal_.get(), &st) == 0 && st.st_size == 0)
    return {};
  auto snap = take_snapshot();
  PODSHIM_TRY(write_snapshot(snap));
  snapshot_bytes_ = snap.text.size();
  if (ftruncate(journal_.get(), 0) != 0) return fail_errno("emptying the state journal");
  journal_bytes_ = 0;
  if (old_journal_) {
    if (unlinkat(dirfd_.get(), std::string(kJournalOld).c_str(), 0) != 0 && errno != ENOENT)
      return fail_errno("removing the state journal {}", kJournalOld);
    old_journal_ = false;
  }
  return {};
}

// Writes a snapshot durably: a new file (fsynced) renamed over the old one,
// then the directory synced. One file, however many objects changed: the
// per-object files this replaces cost ext4's inode allocator ~0.4 ms of CPU
// each (1000 changed containers: 430 ms on the compaction thread, beside the
// loop on a 2-core node). Runs on the compaction thread too: no member but
// the (constant) directory fd.
Result<void> Store::write_snapshot(const Snapshot& snap) const {
  auto r = fs::write_file_atomic_at(dirfd_.get(), kSnapshot, snap.text, 0600, /*durable=*/true);
  if (!r) return wrap(r, fmt::format("persisting the state {}", kSnapshot));
  return {};
}

uint64_t Store::compact_threshold() const {
  // At least the snapshot's own size, so that rewriting it stays a fixed
  // share of what is appended however many objects there are.
  return std::max<uint64_t>(kJournalCompactBytes, snapshot_bytes_);
}

bool Store::start_compaction() {
  const std::string journal(kJournal), old(kJournalOld);
  if (renameat(dirfd_.get(), journal.c_str(), dirfd_.get(), old.c_str()) != 0) return false;
  auto j = fs::open_beneath(dirfd_.get(), kJournal, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (!j) {
    // Put it back: the changes keep going to the one journal. Should that
    // fail too, the open journal is journal.old, which open() replays.
    (void)renameat(dirfd_.get(), old.c_str(), dirfd_.get(), journal.c_str());
    return false;
  }
  journal_ = std::move(*j);
  journal_bytes_ = 0;
  old_journal_ = true;
  auto snap = std::make_shared<Snapshot>(take_snapshot());
  snapshot_bytes_ = snap->text.size();
  compacting_ = true;
  auto finish = [this, snap] {
    auto r = write_snapshot(*snap);
    // The snapshot now holds everything journal.old did.
    if (r && unlinkat(dirfd_.get(), std::string(kJournalOld).c_str(), 0) != 0 && errno != ENOENT)
      r = fail_errno("removing the state journal {}", kJournalOld);
    std::lock_guard lk(mu_);
    compacting_ = false;
    if (r) {
      old_journal_ = false;
      return;
    }
    // journal.old stays, so a crash loses nothing; the next compaction runs
    // in place (a snapshot of everything, so nothing is missed).
    log::warn("state: compacting the journal failed: {}", r.error().message);
  };
  try {
    compactor_ = std::thread(finish);
  } catch (const std::system_error&) {
    finish();  // no thread to be had: in place
  }
  return true;
}

Result<void> Store::load_object_files() {
  for (auto sub : {kPodsDir, kContainersDir}) {
    auto d = fs::open_beneath(dirfd_.get(), sub, O_RDONLY | O_DIRECTORY);
    if (!d && d.error().code == ENOENT) continue;  // none: a new dir, or one a snapshot holds
    if (!d) return wrap(d, fmt::format("opening state {}", sub));
    int dupfd = fcntl(d->get(), F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) return fail_errno("dup state dir");
    DIR* dp = fdopendir(dupfd);
    if (!dp) {
      close(dupfd);
      return fail_errno("reading state dir {}", sub);
    }
    std::vector<std::string> names;
    while (dirent* de = readdir(dp)) {
      std::string name = de->d_name;
      if (name.size() > kSuffix.size() && name.ends_with(kSuffix) && name.front() != '.') {
        names.push_back(name);
      }
    }
    closedir(dp);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      auto bad = [&](const std::string& why) {
        std::string aside = name + ".corrupt";
        std::string msg = fmt::format("state file {}/{}: {}; moved aside to {}", sub, name, why, aside);
        if (renameat(d->get(), name.c_str(), d->get(), aside.c_str()) != 0) {
          msg = fmt::format("state file {}/{}: {}; moving it aside failed: {}", sub, name, why,
                            errno_string(errno));
        }
        load_warnings_.push_back(std::move(msg));
      };
      auto text = fs::read_file_at(d->get(), name, 1 << 20);
      if (!text) {
        bad(text.error().message);
        continue;
      }
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_discarded()) {
        bad("invalid JSON");
        continue;
      }
      object_files_ = true;
      std::string id = name.substr(0, name.size() - kSuffix.size());
      if (sub == kPodsDir) {
        auto p = pod_from_json(j);
        if (!p) { bad(p.error().message); continue; }
        if (p->uid != id) { bad(fmt::format("uid '{}' does not match the file name", p->uid)); continue; }
        pods_.emplace(p->uid, std::move(*p));
      } else {
        auto c = container_from_json(j);
        if (!c) { bad(c.error().message); continue; }
        if (c->id != id) { bad(fmt::format("id '{}' does not match the file name", c->id)); continue; }
        auto [it, added] = containers_.emplace(c->id, std::move(*c));
        if (added) {
          index_add(it, it->second.pod_uid);
          tally(it->second, 1);
        }
      }
    }
  }
  return {};
}

// Once the snapshot holds what they held: the object files of an earlier
// version (a corrupt one moved aside stays, for its owner to look at), and
// a snapshot's temporary file that a crash left.
void Store::remove_leftovers() {
  auto unlink_matching = [](int dfd, auto&& match) {
    int dupfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) return;
    DIR* dp = fdopendir(dupfd);
    if (!dp) {
      close(dupfd);
      return;
    }
    std::vector<std::string> names;
    while (dirent* de = readdir(dp))
      if (match(std::string_view(de->d_name))) names.emplace_back(de->d_name);
    closedir(dp);
    for (const auto& n : names)
      if (unlinkat(dfd, n.c_str(), 0) != 0 && errno != ENOENT)
        log::warn("state: removing {}: {}", n, errno_string(errno));
  };
  unlink_matching(dirfd_.get(), [](std::string_view n) { return n.starts_with("." + std::string(kSnapshot) + ".tmp."); });
  if (!object_files_) return;
  for (auto sub : {kPodsDir, kContainersDir}) {
    auto d = fs::open_beneath(dirfd_.get(), sub, O_RDONLY | O_DIRECTORY);
    if (!d) continue;
    unlink_matching(d->get(), [](std::string_view n) { return n.ends_with(kSuffix) || n.find(".tmp.") != n.npos; });
    (void)unlinkat(dirfd_.get(), std::string(sub).c_str(), AT_REMOVEDIR);  // ENOTEMPTY: a .corrupt file stays
  }
  object_files_ = false;
}

Result<void> Store::persist(std::string_view dir, std::string_view name, const std::string* json) {
  if (!dirfd_) return {};
  // One record appended with one write(): a podshimd crash (even kill -9)
  // finds the change in the page cache, or — cut short — no change (replay
  // ignores an incomplete last record). No fsync per change: a node crash
  // ends every container this state describes. A batch still ends with one
  // syncfs().
  bool pod = dir == kPodsDir;
  std::string rec;
  rec.reserve((json ? json->size() : name.size()) + 3);
  rec += json ? (pod ? 'P' : 'C') : (pod ? 'p' : 'c');
  rec += ' ';
  rec += json ? std::string_view(*json) : name;
  rec += '\n';
  batch_dirty_ = batch_dirty_ || batch_depth_ > 0;
  size_t off = 0;
  while (off < rec.size()) {
    ssize_t n = write(journal_.get(), rec.data() + off, rec.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno("appending to the state journal for {}/{}", dir, name);
    }
    off += static_cast<size_t>(n);
  }
  journal_bytes_ += rec.size();
  return {};
}

// Called once a change is in the map as well as in the journal.
void Store::maybe_compact() {
  if (!journal_ || journal_bytes_ < compact_threshold() || batch_depth_ > 0 || compacting_) return;
  if (compactor_.joinable()) compactor_.join();  // finished: compacting_ is false
  // In the background, unless an earlier one failed (journal.old is still
  // there: the files must catch up with it first, in place).
  if (!old_journal_ && start_compaction()) return;
  if (auto r = compact(); !r) {
    // The journal still holds every change; the next change retries.
    log::warn("state: compacting the journal failed: {}", r.error().message);
  }
}

Store::Batch::Batch(Store& s) : store_(s) {
  std::lock_guard lk(store_.mu_);
  store_.batch_depth_++;
}

Store::Batch::~Batch() {
  std::lock_guard lk(store_.mu_);
  if (--store_.batch_depth_ == 0 && store_.batch_dirty_) {
    store_.batch_dirty_ = false;
    // One syncfs for the whole batch instead of two fsyncs per file.
    if (store_.dirfd_ && syncfs(store_.dirfd_.get()) != 0)
      log::warn("state: syncing the state directory after a batch: {}", errno_string(errno));
  }
  store_.maybe_compact();
}

void Store::emit(Event& ev) {
  ev.seq = ++seq_;
  if (subs_.empty()) return;
  ev.time_unix_ms = now_unix_ms();
  for (auto& [h, fn] : subs_) fn(ev);
}

void Store::index_add(Containers::iterator it, std::string_view pod_uid) {
  if (pod_uid.empty()) return;
  auto p = by_pod_.find(pod_uid);
  if (p == by_pod_.end()) p = by_pod_.emplace(std::string(pod_uid), std::map<std::string_view, const Container*>{}).first;
  p->second[it->first] = &it->second;
}

void Store::tally(const Container& c, int sign) {
  allocated_.cpu_milli += sign * cgroup::effective_cpu_request(c.allocated);
  allocated_.memory_bytes += sign * cgroup::effective_memory_request(c.allocated);
}

Store::Requests Store::allocated_requests() const {
  std::lock_guard lk(mu_);
  return allocated_;
}

void Store::index_remove(const Container& c) {
  if (c.pod_uid.empty()) return;
  auto it = by_pod_.find(c.pod_uid);
  if (it == by_pod_.end()) return;
  it->second.erase(c.id);
  if (it->second.empty()) by_pod_.erase(it);
}

Result<void> Store::upsert_pod(Pod pod) {
  PODSHIM_TRY(validate_id("pod uid", pod.uid));
  std::lock_guard lk(mu_);
  if (auto it = pods_.find(pod.uid); it != pods_.end() && it->second == pod) return {};
  if (dirfd_) {
    std::string j = json_string(pod);
    PODSHIM_TRY(persist(kPodsDir, pod.uid, &j));
  }
  auto& slot = pods_[pod.uid];
  slot = std::move(pod);
  Event ev;
  ev.type = EventType::PodUpserted;
  ev.pod = &slot;
  emit(ev);
  maybe_compact();
  return {};
}

Result<bool> Store::remove_pod(std::string_view uid) {
  PODSHIM_TRY(validate_id("pod uid", uid));
  std::lock_guard lk(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return false;
  PODSHIM_TRY(persist(kPodsDir, uid, nullptr));
  // The node leaves the map first, so a subscriber sees the store without it.
  auto node = pods_.extract(it);
  Event ev;
  ev.type = EventType::PodRemoved;
  ev.pod = &node.mapped();
  emit(ev);
  maybe_compact();
  return true;
}

Result<void> Store::upsert_container(Container c) {
  std::lock_guard lk(mu_);
  auto it = containers_.find(c.id);
  // A stored id was checked when it was stored, and so was the pod uid it
  // keeps: only what is new is checked (every resize stores its container).
  const bool known = it != containers_.end();
  if (!known) PODSHIM_TRY(validate_id("container id", c.id));
  if (!c.pod_uid.empty() && (!known || it->second.pod_uid != c.pod_uid)) PODSHIM_TRY(validate_id("pod uid", c.pod_uid));
  // A resynchronization re-sends what podshim already knows: nothing to
  // write and nothing to tell subscribers when the object did not change.
  if (known && it->second == c) return {};
  std::string j;
  if (dirfd_) {
    j = json_string(c);
    PODSHIM_TRY(persist(kContainersDir, c.id, &j));
  }
  // The per-pod index changes only with a new container or a new pod.
  if (it == containers_.end()) {
    it = containers_.emplace(c.id, Container{}).first;
    index_add(it, c.pod_uid);
  } else if (it->second.pod_uid != c.pod_uid) {
    index_remove(it->second);
    index_add(it, c.pod_uid);
  }
  tally(it->second, -1);
  it->second = std::move(c);
  tally(it->second, 1);
  if (dirfd_) json_.insert_or_assign(it->first, std::move(j));
  Event ev;
  ev.type = EventType::ContainerUpserted;
  ev.container = &it->second;
  emit(ev);
  maybe_compact();
  return {};
}

Result<bool> Store::remove_container(std::string_view id) {
  PODSHIM_TRY(validate_id("container id", id));
  std::lock_guard lk(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) return false;
  PODSHIM_TRY(persist(kContainersDir, id, nullptr));
  index_remove(it->second);
  tally(it->second, -1);
  if (auto cached = json_.find(id); cached != json_.end()) json_.erase(cached);
  auto node = containers_.extract(it);
  Event ev;
  ev.type = EventType::ContainerRemoved;
  ev.container = &node.mapped();
  emit(ev);
  maybe_compact();
  return true;
}

Result<Container> Store::update_container(std::string_view id,
                                          const std::function<void(Container&)>& fn) {
  std::lock_guard lk(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) return fail(ENOENT, "no container '{}'", id);
  Container c = it->second;
  fn(c);
  c.id = it->first;  // the key is not the callback's to change
  PODSHIM_TRY(upsert_container(c));
  return c;
}

Result<Pod> Store::update_pod(std::string_view uid, const std::function<void(Pod&)>& fn) {
  std::lock_guard lk(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return fail(ENOENT, "no pod '{}'", uid);
  Pod p = it->second;
  fn(p);
  p.uid = it->first;
  PODSHIM_TRY(upsert_pod(p));
  return p;
}

std::optional<Pod> Store::pod(std::string_view uid) const {
  std::lock_guard lk(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

std::optional<Container> Store::container(std::string_view id) const {
  std::lock_guard lk(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) return std::nullopt;
  return it->second;
}

std::vector<Pod> Store::pods() const {
  std::lock_guard lk(mu_);
  std::vector<Pod> out;
  out.reserve(pods_.size());
  for (const auto& [k, v] : pods_) out.push_back(v);
  return out;
}

std::vector<Container> Store::containers() const {
  std::lock_guard lk(mu_);
  std::vector<Container> out;
  out.reserve(containers_.size());
  for (const auto& [k, v] : containers_) out.push_back(v);
  return out;
}

std::vector<Container> Store::containers_of(std::string_view pod_uid) const {
  std::vector<Container> out;
  for_each_container_of(pod_uid, [&](const Container& c) { out.push_back(c); });
  return out;
}

void Store::for_each_container_of(std::string_view pod_uid, const std::function<void(const Container&)>& fn) const {
  std::lock_guard lk(mu_);
  auto it = by_pod_.find(pod_uid);
  if (it == by_pod_.end()) return;
  for (const auto& [id, c] : it->second) fn(*c);
}

bool Store::with_pod(std::string_view uid, const std::function<void(const Pod&)>& fn) const {
  std::lock_guard lk(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return false;
  fn(it->second);
  return true;
}

bool Store::append_container_json(std::string_view id, std::string& out) const {
  std::lock_guard lk(mu_);
  if (auto cached = json_.find(id); cached != json_.end()) {
    out += cached->second;
    return true;
  }
  auto it = containers_.find(id);
  if (it == containers_.end()) return false;
  append_json(out, it->second);
  return true;
}

bool Store::with_container(std::string_view id, const std::function<void(const Container&)>& fn) const {
  std::lock_guard lk(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) return false;
  fn(it->second);
  return true;
}

size_t Store::pod_count() const {
  std::lock_guard lk(mu_);
  return pods_.size();
}

void Store::for_each_pod(const std::function<void(const Pod&)>& fn) const {
  std::lock_guard lk(mu_);
  for (const auto& [k, v] : pods_) fn(v);
}

void Store::for_each_container(const std::function<void(const Container&)>& fn) const {
  std::lock_guard lk(mu_);
  for (const auto& [k, v] : containers_) fn(v);
}

size_t Store::container_count() const {
  std::lock_guard lk(mu_);
  return containers_.size();
}

uint64_t Store::last_seq() const {
  std::lock_guard lk(mu_);
  return seq_;
}

uint64_t Store::subscribe(Subscriber fn) {
  std::lock_guard lk(mu_);
  uint64_t h = next_sub_++;
  subs_.emplace(h, std::move(fn));
  return h;
}

void Store::unsubscribe(uint64_t handle) {
  std::lock_guard lk(mu_);
  subs_.erase(handle);
}

}  // namespace podshim::core
