// The CDI registry: spec files from ordered directories, devices by qualified
// name, and live refresh through inotify.
//
// Upstream semantics (pkg/cdi cache.go, spec-dirs.go): directories in
// increasing priority (default /etc/cdi, then /var/run/cdi; later wins); each
// scanned non-recursively in lexical order, only *.json and *.yaml; a missing
// directory is ignored; a per-file error is recorded and the scan goes on; the
// same device at equal priority is a conflict recorded on both files and the
// device becomes unresolvable.
//
// Safer than upstream: a spec file that is not a regular file (symlinks
// included), is group- or world-writable, or is not owned by the required
// owner (root) is ignored with an error, since its content becomes device
// nodes, mounts and hooks in someone's container.
//
// Not thread-safe: one owner (podshimd's event loop) calls refresh(), the
// watch callback and the lookups.
#pragma once

#include <sys/types.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "cdi/edits.h"
#include "cdi/spec.h"

namespace podshim::cdi {

inline const std::vector<std::string>& default_spec_dirs() {
  static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}

struct RegistryOptions {
  // Increasing priority.
  std::vector<std::string> spec_dirs = default_spec_dirs();
  // Owner every spec file must have; nullopt accepts any owner (unit tests
  // running unprivileged, `podshimctl cdi validate` on a developer's files).
  std::optional<uid_t> required_owner = 0;
  // Test seam: called with a spec file's path each time its content is
  // parsed (refresh() and live refresh), so tests can count parses.
  std::function<void(const std::string& path)> on_parse;
};

// One loaded, valid spec file.
struct SpecFile {
  std::string path;  // dir + "/" + file name
  int priority = 0;  // index of its directory
  Spec spec;
  // The two halves of spec.kind (validated when loaded), read from it rather
  // than stored twice in each of a registry's thousands of spec files.
  std::string_view vendor() const { return std::string_view(spec.kind).substr(0, spec.kind.find('/')); }
  std::string_view cls() const {
    size_t slash = spec.kind.find('/');
    return slash == std::string::npos ? std::string_view() : std::string_view(spec.kind).substr(slash + 1);
  }
};

// The verdict for one candidate file seen by the last scan.
struct FileVerdict {
  std::string path;
  bool loaded = false;               // parsed and valid (it may still have conflicts)
  std::vector<std::string> errors;   // load error, safety refusal, conflicts
};

// Registers `fd` with the caller's event loop; `on_readable` is to be called
// whenever fd is readable. podshimd adapts this to sd_event_add_io, which
// keeps cdi/ free of sd-event.
using FdWatcher = std::function<Result<void>(int fd, std::function<void()> on_readable)>;

class Registry {
 public:
  explicit Registry(RegistryOptions options = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Rescans every directory, re-reading every file, and replaces the
  // registry's content. Never fails as a whole: per-file problems are in
  // verdicts()/errors(). Drops queued live-refresh work (it is redundant).
  void refresh();

  // Starts live refresh: an inotify fd watching every spec directory (and
  // the parent of a missing one, so a directory created later is picked up).
  // Call after construction; refresh() is done here too.
  //
  // A change re-reads only what inotify names: a spec file event re-reads
  // that one file; only a directory's own events (created, replaced,
  // removed, chmod) or a queue overflow re-list a directory, and then each of
  // its files is a job of its own. After a directory event a file whose
  // inode, size, mtime and ctime are those it was read with is not read
  // again (its own change would have had its own event); after an overflow,
  // when events may be lost, every file is read again. Each readable callback drains
  // the inotify fd into a de-duplicated queue and runs at most one job (one
  // file's read and parse, or one directory listing), so a burst of changes
  // never holds the event loop for longer than one file's parse. While jobs
  // remain the registered fd stays readable (an epoll fd holding the inotify
  // fd and an eventfd), so the loop calls back on its next iteration.
  Result<void> watch(const FdWatcher& register_fd);
  // The fd registered with the event loop (-1 before watch()); readable
  // while inotify has events or jobs are queued. For tests and loops that poll.
  int watch_fd() const { return epoll_.get(); }
  // Drains pending inotify events into the queue and runs at most one job.
  // Returns whether a job ran.
  bool process_watch_events();
  // Jobs queued by process_watch_events() and not yet run.
  size_t pending_jobs() const { return queue_.size(); }

  // Sorted qualified names of every resolvable device.
  std::vector<std::string> devices() const;
  // One verdict per candidate file (and per unreadable directory), in scan
  // order: directories by priority, files in lexical order.
  const std::vector<FileVerdict>& verdicts() const;
  // path → errors, for files with at least one error.
  std::map<std::string, std::vector<std::string>> errors() const;
  // Every loaded spec file, in scan order.
  const std::vector<std::shared_ptr<const SpecFile>>& specs() const;
  const RegistryOptions& options() const { return options_; }
  // Number of content updates so far: one per refresh() and one per live
  // refresh job (tests of live refresh).
  uint64_t generation() const { return generation_; }

  // Looks up devices and merges their edits in request order: each spec's
  // global edits once (the first time one of its devices is seen), then the
  // device's own (pkg/cdi Cache.InjectDevices). Duplicate requests count once.
  // If any name is unresolvable nothing is merged and the error lists the
  // unresolvable names (ENOENT).
  Result<ContainerEdits> resolve(const std::vector<std::string>& names) const;
  // The same without the merged copy: the edits in merge order, pointing
  // into the registry (valid until its content next changes).
  Result<std::vector<const ContainerEdits*>> resolve_parts(const std::vector<std::string>& names) const;

 private:
  struct FileState;
  struct Provider {
    FileState* file = nullptr;
    size_t index = 0;  // in file->spec->spec.devices
  };
  // A name's providers in scan order. Nearly every name has one: it is
  // held in place, and a list is allocated only for a second.
  class Providers {
   public:
    size_t size() const { return many_ ? many_->size() : one_.file ? 1 : 0; }
    bool empty() const { return size() == 0; }
    const Provider& operator[](size_t i) const { return many_ ? (*many_)[i] : one_; }
    void insert(size_t pos, Provider p);
    // Removes the providers of `file`.
    void erase_file(const FileState* file);

   private:
    Provider one_;                                  // the only one, when !many_
    std::unique_ptr<std::vector<Provider>> many_;   // all of them, when two or more
  };
  // Every file defining a qualified name, in scan order; the winner and the
  // conflicts are derived from them with the scan's rules (conflicts only
  // when verdicts are built). The name itself is not stored: it is the
  // first provider's kind, "=" and device name (a registry of DRA claims
  // holds thousands of names of 60 bytes and more).
  struct NameState {
    uint64_t hash = 0;  // FlatHash of the qualified name
    // The winner's spec file and device, set with `winner`: a lookup then
    // touches this entry only, not the providers list and the file state
    // behind it (each a cache miss in a registry just loaded).
    const SpecFile* winner_spec = nullptr;
    const Device* winner_device = nullptr;
    Providers providers;
    int winner = -1;  // index in providers; -1: unresolvable (conflict)
    // Whether this is the entry of `qn` (providers not empty).
    bool is(std::string_view qn) const;
    std::string qualified() const;
  };
  // The lookup side of names_: open addressing over one array of {hash,
  // entry}. A name's slot holds its full hash, so a lookup is the slot and
  // then the entry, and resolve_parts() looks all of a request's names up
  // in passes that prefetch the next step for every name before taking it.
  struct NameSlot {
    uint64_t hash = 0;
    uint32_t at = 0;  // index in names_ + 1; 0: empty
  };
  // The entry of `qn`, created (empty) when missing; then the caller adds
  // its first provider before any other lookup.
  NameState& name_state(const std::string& qn);
  // Removes the entry at `at` in names_ (the last entry moves into its place).
  void name_erase(size_t at);
  // The slot holding entry `at` (index in names_ + 1), or, for 0, where
  // the probe for `hash` ends.
  size_t index_probe(uint64_t hash, uint32_t at) const;
  const NameState* index_find(std::string_view qn, uint64_t hash) const;
  // Calls each(later, first, index in later) for every conflict of `ns`;
  // returns the winner's index, or -1.
  template <typename F>
  static int scan_rules(const NameState& ns, F&& each);
  struct DirState {
    std::string error;  // the directory could not be opened or listed
    int wd = -1;        // its inotify watch
    std::map<std::string, std::unique_ptr<FileState>> files;  // by name: scan order
  };
  struct Job {
    size_t prio;
    std::string name;  // empty: re-list the directory
  };
  // How a queued job reads: a file job re-reads its file unless it is only
  // a directory re-list's check (kIfChanged); a re-list job queues its files
  // as kIfChanged, or after lost events (kAll) as forced re-reads.
  enum class Read : uint8_t { kIfChanged, kAlways, kAll };

  std::string file_path(size_t prio, const std::string& name) const;
  // Re-reads one candidate and updates the index; removes it when it is
  // gone or no longer a candidate.
  void update_file(size_t prio, const std::string& name, bool only_if_changed = false);
  // Lists a directory's candidate names (spec extensions, lexical order) and
  // records or clears its directory error. False when it is missing or
  // unreadable.
  bool list_candidates(size_t prio, std::vector<std::string>* names);
  void replace_file(size_t prio, const std::string& name, std::unique_ptr<FileState> next);
  void recompute(const std::string& qn);
  void enqueue(size_t prio, std::string name, Read how = Read::kAlways);
  void run_job(const Job& job, Read how);
  void add_watches();
  void signal_pending();

  RegistryOptions options_;
  std::vector<DirState> dirs_;
  std::vector<NameState> names_;  // in no order; found through slots_
  std::vector<NameSlot> slots_;   // a power of two, at most half full
  size_t slots_used_ = 0;
  // Built on demand from the state above.
  mutable bool views_stale_ = true;
  mutable std::vector<FileVerdict> verdicts_;
  mutable std::vector<std::shared_ptr<const SpecFile>> specs_;
  void build_views() const;

  UniqueFd inotify_, epoll_, event_;
  std::unordered_map<int, std::vector<size_t>> wd_dirs_;  // watch → directories (by priority)
  std::unordered_set<int> ancestor_wds_;
  std::deque<Job> queue_;
  std::map<std::pair<size_t, std::string>, Read> queued_;  // the strongest read asked for
  bool signalled_ = false;
  uint64_t generation_ = 0;
};

}  // namespace podshim::cdi

namespace podshim::cdi {

// registry.resolve(names) + resolve_edits(); cdi_devices is set to the
// de-duplicated request list. The daemon converts the result to an NRI
// ContainerAdjustment.
Result<ResolvedEdits> resolve_devices(const Registry& registry, const std::vector<std::string>& names,
                                      const ProcessIds& ids, const HostLookup& lookup = lstat_host_device);

// The OCI back end end to end: resolves `names`, takes the uid/gid defaults
// from the config's process.user and applies the edits to `config`. On any
// error `config` is left unchanged.
Result<void> inject_oci(const Registry& registry, nlohmann::json& config,
                        const std::vector<std::string>& names, const HostLookup& lookup = lstat_host_device);

// inject_oci and then config.dump(indent), byte for byte, through
// inject_edits_oci_text (no JSON nodes built for the edits). `config` is
// taken by value: move it in.
Result<std::string> inject_oci_text(const Registry& registry, nlohmann::json config,
                                    const std::vector<std::string>& names, int indent = -1,
                                    const HostLookup& lookup = lstat_host_device);

}  // namespace podshim::cdi
