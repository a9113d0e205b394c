// podshimd's model: the pods and containers it knows, what was asked of each
// (desired), what podshim accepted (allocated) and what the kernel holds
// (actual), and where each resize stands — in the kubelet's own terms
// (KEP-1287 §Resource States and §Resize Status).
//
// The Store holds podshimd's model in memory. Every mutation gets a sequence
// number and is handed to subscribers (the /v1/watch stream, metrics) in that
// order.
//
// What is durable, and why (the rule; keep it):
//   - NRI mode: NOTHING on the event path. The runtime is the source of truth
//     for pods and containers: it resends every one of them in Synchronize on
//     each (re)connection (containerd/nri pkg/adaptation/plugin.go
//     synchronize), so the model is rebuilt from that and kept in memory
//     (Store::in_memory()).
//   - hooks-only mode (--nri=off): there is no runtime to resynchronize from,
//     so the registrations podshim-hook made are persisted (Store::open()).
//   - Either mode: the one thing neither the runtime nor the kernel can give
//     back is an in-flight shrink's memory.high clamp, which the cgroup engine
//     journals itself (cgroup/engine.cc, clamp journal) and undoes at start.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/boxed.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "shim/core/cgroup_types.h"
#include "shim/core/string_map.h"

namespace podshim::core {

using cgroup::K8sResources;

// Kubernetes QoS classes (pkg/apis/core/v1/helper/qos).
enum class QosClass { BestEffort, Burstable, Guaranteed };
std::string_view to_string(QosClass q);
Result<QosClass> parse_qos(std::string_view s);

// Container resizePolicy restartPolicy values; only these two exist in the
// API (PreferNoRestart was reverted, KEP-1287 history 2025-09-22).
enum class ResizePolicy { NotRequired, RestartContainer };
std::string_view to_string(ResizePolicy p);
Result<ResizePolicy> parse_resize_policy(std::string_view s);

// Where a container became known to podshimd.
enum class Source { Nri, Hook, Api };
std::string_view to_string(Source s);
Result<Source> parse_source(std::string_view s);

// Condition types and reasons, spelled as the kubelet spells them.
inline constexpr std::string_view kPodResizePending = "PodResizePending";
inline constexpr std::string_view kPodResizeInProgress = "PodResizeInProgress";
inline constexpr std::string_view kReasonDeferred = "Deferred";
inline constexpr std::string_view kReasonInfeasible = "Infeasible";
inline constexpr std::string_view kReasonError = "Error";
// podshim's own condition: the kernel holds a value other than the one
// podshim last gave it (shim/core/readback.h); present while any Drift is.
// Not a resize condition: a client counting resizes looks only at the two
// types above.
inline constexpr std::string_view kPodshimDrift = "PodshimDrift";

// One pod condition; its status is always "True" while present and it is
// removed when the resize is done (KEP-1287 §Resize Status).
struct Condition {
  std::string reason;   // Deferred|Infeasible for Pending; ""|Error for InProgress
  std::string message;
  int64_t observed_generation = 0;
  int64_t last_transition_unix_ms = 0;
  bool operator==(const Condition&) const = default;
};

struct ResizeConditions {
  Boxed<Condition> pending;      // PodResizePending
  Boxed<Condition> in_progress;  // PodResizeInProgress
  bool empty() const { return !pending && !in_progress; }
  bool operator==(const ResizeConditions&) const = default;
};

// A CDI device injected into a container: its fully qualified name and the
// device nodes it brought.
struct InjectedDevice {
  std::string cdi_name;
  std::vector<std::string> node_paths;
  bool operator==(const InjectedDevice&) const = default;
};

// What the kernel holds for a cgroup, read back after a resize.
struct ActualResources {
  K8sResources resources;  // cpu request/limit, memory limit (request unknowable)
  uint64_t memory_current = 0;
  uint64_t oom_kill = 0;
  int64_t read_unix_ms = 0;
  bool operator==(const ActualResources&) const = default;
};

// One value the kernel holds for a container that differs from what podshim
// last gave it (Container::kernel_target(): the allocated values, or those
// before a failed or refused actuation), found by the periodic read-back
// (shim/core/readback.h). A refused resize is not drift: it is
// PodResizeInProgress/Error. Values are the attribute's own text
// ("268435456", "50000 100000", "39"), so the `allocated` side is exactly
// what podshim would write.
struct Drift {
  std::string resource;   // cpu_request | cpu_limit | memory_limit
  std::string file;       // cpu.weight | cpu.max | memory.max
  std::string allocated;  // the attribute value kernel_target() implies
  std::string actual;     // what the kernel holds
  int64_t since_unix_ms = 0;
  bool operator==(const Drift&) const = default;
};

struct Pod {
  std::string uid;
  std::string sandbox_id;
  std::string name;
  std::string namespace_;
  std::string cgroup_path;  // as the runtime handed it over
  QosClass qos = QosClass::BestEffort;
  K8sResources resources;   // pod-level resources (KEP-2837), empty when unset
  std::optional<ActualResources> actual;
  StringMap annotations;
  StringMap labels;
  Source source = Source::Api;
  bool operator==(const Pod&) const = default;
};

struct Container {
  std::string id;
  std::string pod_uid;
  std::string name;
  std::string cgroup_path;  // as the runtime handed it over
  std::string state = "unknown";  // created|running|stopped|unknown
  pid_t pid = 0;
  ResizePolicy cpu_policy = ResizePolicy::NotRequired;
  ResizePolicy memory_policy = ResizePolicy::NotRequired;
  K8sResources desired;    // spec: what was last asked for
  K8sResources allocated;  // what podshim accepted
  // What the kernel was last given for this container when that is not
  // `allocated`: the values before an actuation that failed or was refused
  // (the engine rolls back; the runtime does not write a refused update), or
  // before a resize that waits for a restart. The kubelet keeps the same
  // distinction (pkg/kubelet/allocation, its actuated resources). Unset: the
  // kernel should hold `allocated`. Drift is judged against kernel_target().
  Boxed<K8sResources> actuated;
  std::optional<ActualResources> actual;
  std::vector<Drift> drift;  // kernel ≠ kernel_target(); empty while in step
  ResizeConditions conditions;
  bool restart_required = false;  // a RestartContainer resize awaits a restart
  int64_t generation = 0;         // bumped by every resize request
  std::vector<InjectedDevice> devices;
  std::string selinux_mount_label;
  std::string last_error;
  // The outcome of the last resize (core::to_string(ResizeOutcome)), for the
  // generation above; "in_progress" while the runtime or a shrink is busy.
  std::string last_outcome;
  StringMap annotations;
  Source source = Source::Api;
  // The values the kernel should hold: `actuated` when set, else `allocated`.
  const K8sResources& kernel_target() const { return actuated ? *actuated : allocated; }
  bool operator==(const Container&) const = default;
};

// Ids (container ids, pod uids) become file names and URL path segments:
// 1..128 of [A-Za-z0-9_.-], not starting with '.'.
Result<void> validate_id(std::string_view kind, std::string_view id);

// Kubernetes' QoS rules applied to a set of container resources (requests
// default to limits when only a limit is set, as the apiserver defaults them).
QosClass compute_qos(const std::vector<K8sResources>& containers);

enum class EventType {
  PodUpserted,
  PodRemoved,
  ContainerUpserted,
  ContainerRemoved,
};
std::string_view to_string(EventType t);

// One change to the model, numbered; `pod`/`container` point at the new
// state (or the last one for a removal). They are borrowed from the store and
// valid only during the subscriber's call: a subscriber that keeps anything
// copies what it keeps. (Copying both objects into every event cost every
// NRI event and every resize, whether or not a subscriber needed them.)
struct Event {
  uint64_t seq = 0;
  EventType type = EventType::ContainerUpserted;
  int64_t time_unix_ms = 0;
  const Pod* pod = nullptr;
  const Container* container = nullptr;
};

// The model. In memory only (NRI mode), or — hooks-only mode — also persisted:
// <state_dir>/snapshot, every object as one record per line, plus
// <state_dir>/journal, an append-only log of the changes made since the
// snapshot was written (the same records). A change costs one write() to the
// journal (see persist()); replacing an object's file each time (a new inode,
// a rename, and ext4's flush of the new data on rename, auto_da_alloc) was
// about 85% of a status-socket resize. The snapshot is rewritten, and the
// journal emptied, at open and when the journal passes kJournalCompactBytes
// (or the snapshot's size, if larger): then the journal is renamed to
// <state_dir>/journal.old, a new one takes the changes that follow, and a
// thread of its own writes the snapshot (a new file, fsynced, renamed over
// the old one) before it removes journal.old; open() replays the snapshot,
// journal.old, then journal. The per-object files pods/<uid>.json and
// containers/<id>.json of earlier versions are read at open and removed once
// the snapshot holds them. Thread-safe; subscribers are called
// under the store's lock, in sequence order, and may read the store but must
// not mutate it from the callback.
class Store {
 public:
  static constexpr uint64_t kJournalCompactBytes = 4 << 20;

  using Subscriber = std::function<void(const Event&)>;

  // Hooks-only mode: opens (creating it 0700) and loads `state_dir`, and
  // persists every registration. A corrupt record is skipped, a corrupt or
  // unreadable object file of an earlier version moved aside to
  // "<name>.corrupt"; both are reported in load_warnings() and never stop
  // the daemon.
  static Result<std::unique_ptr<Store>> open(const std::string& state_dir);
  // NRI mode (and tests): a store that persists nothing; the runtime's
  // Synchronize rebuilds it on every connection.
  static std::unique_ptr<Store> in_memory();

  const std::vector<std::string>& load_warnings() const { return load_warnings_; }

  Result<void> upsert_pod(Pod pod);
  // Returns false when there was no such pod (removal is idempotent).
  Result<bool> remove_pod(std::string_view uid);
  Result<void> upsert_container(Container c);
  Result<bool> remove_container(std::string_view id);

  // Applies `fn` to a copy of the container and stores the result;
  // ENOENT when there is no such container.
  Result<Container> update_container(std::string_view id,
                                     const std::function<void(Container&)>& fn);
  Result<Pod> update_pod(std::string_view uid, const std::function<void(Pod&)>& fn);

  std::optional<Pod> pod(std::string_view uid) const;
  std::optional<Container> container(std::string_view id) const;
  std::vector<Pod> pods() const;
  std::vector<Container> containers() const;
  // The containers of one pod, from a per-pod index (not a scan of all).
  std::vector<Container> containers_of(std::string_view pod_uid) const;
  size_t container_count() const;
  size_t pod_count() const;
  // The effective requests (cgroup::effective_cpu_request) of every
  // container's `allocated`, summed; kept as containers change, so reading
  // it is not a scan.
  struct Requests {
    int64_t cpu_milli = 0, memory_bytes = 0;
  };
  Requests allocated_requests() const;
  // Calls `fn` with the object under the store's lock, without copying it;
  // false (and no call) when there is none. `fn` must not call back into the
  // store.
  bool with_pod(std::string_view uid, const std::function<void(const Pod&)>& fn) const;
  bool with_container(std::string_view id, const std::function<void(const Container&)>& fn) const;
  // Appends container `id`'s JSON (append_json's form) to `out`; false when
  // there is no such container. Reuses what the journal was given.
  bool append_container_json(std::string_view id, std::string& out) const;
  // Visits the containers of one pod (in id order) through the per-pod index.
  void for_each_container_of(std::string_view pod_uid, const std::function<void(const Container&)>& fn) const;
  // Visits every object under the store's lock, without copying it; `fn`
  // must not call back into the store.
  void for_each_pod(const std::function<void(const Pod&)>& fn) const;
  void for_each_container(const std::function<void(const Container&)>& fn) const;

  // Groups many writes (NRI Synchronize brings thousands of objects and must
  // answer within the runtime's 2 s request timeout); closing the outermost
  // batch makes all of them durable with one syncfs(). Outside batches each
  // object is replaced atomically without an fsync (see persist()).
  class Batch {
   public:
    explicit Batch(Store& s);
    ~Batch();
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

   private:
    Store& store_;
  };

  // Sequence number of the last event (0 before any).
  uint64_t last_seq() const;

  // Registers a subscriber; returns its handle for unsubscribe().
  uint64_t subscribe(Subscriber fn);
  void unsubscribe(uint64_t handle);

  // Waits for a compaction running in the background (tests; the destructor).
  void drain();

  ~Store();

 private:
  Store() = default;
  Result<void> load_object_files();
  Result<void> replay_journal(std::string_view name);
  Result<void> compact();
  void remove_leftovers();
  uint64_t compact_threshold() const;
  void maybe_compact();
  // Rotates the journal and starts the background compaction; false when it
  // could not rotate (the caller compacts in place).
  bool start_compaction();
  struct Snapshot;
  Result<void> write_snapshot(const Snapshot& snap) const;
  Snapshot take_snapshot() const;
  Result<void> persist(std::string_view dir, std::string_view name, const std::string* json);
  void emit(Event& ev);

  mutable std::recursive_mutex mu_;
  UniqueFd dirfd_;  // invalid for in-memory stores
  UniqueFd journal_;  // <state_dir>/journal, O_APPEND
  uint64_t journal_bytes_ = 0;
  std::thread compactor_;
  bool compacting_ = false;       // compactor_ has not finished (under mu_)
  bool old_journal_ = false;      // journal.old exists and is not yet in the snapshot
  bool object_files_ = false;     // an earlier version's object files were loaded
  uint64_t snapshot_bytes_ = 0;   // the size of the last snapshot taken
  std::map<std::string, Pod, std::less<>> pods_;
  using Containers = std::map<std::string, Container, std::less<>>;
  Containers containers_;
  // pod uid -> its containers, by id (containers without a pod uid are not
  // indexed): containers_of() and the pod views without a scan of all, and
  // without looking each id up again in containers_. The keys view the ids
  // in containers_' nodes and the values point at them; a std::map node
  // stays where it is until it is erased, and index_remove comes first.
  std::map<std::string, std::map<std::string_view, const Container*>, std::less<>> by_pod_;
  void index_add(Containers::iterator it, std::string_view pod_uid);
  void index_remove(const Container& c);
  // Adds (sign 1) or takes away (-1) a container's share of allocated_.
  void tally(const Container& c, int sign);
  Requests allocated_;
  // A container's JSON as upsert_container last wrote it to the journal
  // (hooks-only mode, where a store has a state dir): the status socket's
  // answers and the compaction reuse it instead of serializing the
  // container again. An entry is only ever what json_string() gives for the
  // container as it is now: upsert_container replaces it whenever it stores
  // a change, remove_container and the load drop it.
  std::map<std::string, std::string, std::less<>> json_;
  uint64_t seq_ = 0;
  int batch_depth_ = 0;
  bool batch_dirty_ = false;
  uint64_t next_sub_ = 1;
  std::map<uint64_t, Subscriber> subs_;
  std::vector<std::string> load_warnings_;
};

int64_t now_unix_ms();

}  // namespace podshim::core
