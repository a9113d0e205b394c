// A zero-allocation reader for the NRI requests on the hot path: a protobuf
// wire-format cursor and view structs whose strings point into the received
// ttrpc frame. Decoding a CreateContainer this way costs no malloc; parsing
// it into the generated api:: classes cost hundreds (maps, repeated fields,
// strings) and dominated podshimd's CPU per event and its Synchronize peak.
//
// Only what podshim reads is exposed; everything else is skipped by wire
// type (protobuf encoding spec, "Message Structure": an unknown field is
// skipped, whatever its number). Every view keeps the bytes of its message
// (`raw`) so that a consumer that needs the full message can still parse it
// with libprotobuf.
//
// Rules (protobuf encoding spec):
//  - tag = varint (field << 3 | wire type); wire types 0 varint, 1 i64,
//    2 length-delimited, 5 i32; 3/4 (groups) are skipped with nesting, 6/7
//    are invalid;
//  - a scalar field repeated on the wire: the last value wins;
//  - map<K,V> is a repeated entry message {1: key, 2: value}; the last entry
//    with a key wins; a missing key or value is "".
// Stricter than libprotobuf in two ways, both errors naming the field, and
// neither ever sent by an NRI runtime (Go's marshaller writes each set
// field once, with its own wire type): a known field with another wire
// type (libprotobuf keeps it as an unknown field), and a singular message
// field repeated on the wire (libprotobuf merges the occurrences). Strings podshim keeps must be
// valid UTF-8, as proto3 requires of `string` fields. Looser in one way: a
// field podshim does not read is skipped unread, so malformed bytes inside
// it (a broken sub-message, invalid UTF-8) go unnoticed where libprotobuf
// would refuse the whole request; nothing of it reaches podshim.
//
// Views are only valid while the buffer they were decoded from lives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/str.h"

namespace podshim::nri::pb {

enum class WireType : uint8_t { Varint = 0, I64 = 1, Len = 2, SGroup = 3, EGroup = 4, I32 = 5 };

// Nesting allowed for sub-messages and skipped groups (libprotobuf's default
// recursion limit is 100; NRI's schema nests at most 6 deep).
inline constexpr int kMaxDepth = 64;

// One field at a time over a message's bytes. next() fails on a truncated
// varint, a length past the end, an invalid wire type or an unterminated
// group; `msg` names the message in errors.
class Cursor {
 public:
  Cursor(std::string_view buf, const char* msg, int depth = 0) : p_(buf), msg_(msg), depth_(depth) {}
  // Reads the next field; false at the end of the message.
  Result<bool> next();
  uint32_t field() const { return field_; }
  WireType wire_type() const { return wt_; }
  // The value of the current field: varint/i64/i32 in `u64()`, the bytes of
  // a length-delimited one in `bytes()`.
  uint64_t u64() const { return u64_; }
  std::string_view bytes() const { return bytes_; }
  int depth() const { return depth_; }
  const char* message() const { return msg_; }
  // Fails unless the current field has wire type `want` (`name` names it).
  Result<void> expect(WireType want, const char* name) const;

 private:
  Result<void> skip_group(uint32_t field, int depth);
  std::string_view p_;
  const char* msg_;
  int depth_;
  uint32_t field_ = 0;
  WireType wt_ = WireType::Varint;
  uint64_t u64_ = 0;
  std::string_view bytes_;
};

// Reads a base-128 varint from the front of `p` (at most 10 bytes); nullopt
// when truncated or longer than 10 bytes. Tags and most lengths are one
// byte: that case is inline.
std::optional<uint64_t> read_varint_slow(std::string_view& p);
inline std::optional<uint64_t> read_varint(std::string_view& p) {
  if (!p.empty() && static_cast<uint8_t>(p[0]) < 0x80) {
    const uint64_t v = static_cast<uint8_t>(p[0]);
    p.remove_prefix(1);
    return v;
  }
  return read_varint_slow(p);
}
using str::valid_utf8;  // base/str.h

// A repeated field of a message, iterated without storage: the bytes of
// every occurrence of `field` in `msg`, in order. Only built by the decoders
// below after they checked the whole message, so iteration cannot fail.
struct RepeatedView {
  std::string_view msg;
  uint32_t field = 0;
  template <typename F>
  void for_each(F&& fn) const {
    Cursor c(msg, "");
    while (true) {
      auto more = c.next();
      if (!more || !*more) return;
      if (c.field() == field && c.wire_type() == WireType::Len) fn(c.bytes());
    }
  }
  size_t size() const {
    size_t n = 0;
    for_each([&](std::string_view) { ++n; });
    return n;
  }
};

// map<string, string>, iterated as (key, value) in wire order (a later
// duplicate key overrides an earlier one, as on decode).
struct StringMapView {
  RepeatedView entries;
  template <typename F>
  void for_each(F&& fn) const {
    entries.for_each([&](std::string_view e) {
      std::string_view k, v;
      split_entry(e, &k, &v);
      fn(k, v);
    });
  }
  // The value of the last entry with `key`.
  std::optional<std::string_view> find(std::string_view key) const;
  size_t size() const { return entries.size(); }  // entries on the wire
  static void split_entry(std::string_view entry, std::string_view* key, std::string_view* value);
};

// OptionalInt64 / OptionalUInt64 { value = 1 }: present or not.
struct OptInt {
  bool has = false;
  uint64_t value = 0;  // as on the wire; int64 fields cast back
};

struct LinuxResourcesView {
  std::string_view raw;
  bool has_memory = false;
  bool has_cpu = false;
  OptInt memory_limit;  // LinuxMemory.limit (OptionalInt64)
  OptInt cpu_shares;    // LinuxCPU.shares (OptionalUInt64)
  OptInt cpu_quota;     // LinuxCPU.quota (OptionalInt64)
  OptInt cpu_period;    // LinuxCPU.period (OptionalUInt64)
  std::string_view cpu_cpus, cpu_mems;
  StringMapView unified;
};

struct PodSandboxView {
  std::string_view raw;
  // Only the ids were read (decode_update_container): decode_pod(raw) for
  // the rest, which is then checked as on any other request.
  bool partial = false;
  std::string_view id, name, uid, namespace_, runtime_handler;
  StringMapView labels, annotations;
  uint32_t pid = 0;
  // LinuxPodSandbox
  bool has_linux = false;
  std::string_view cgroup_parent, cgroups_path;
  bool has_pod_resources = false;
  LinuxResourcesView pod_resources;
  bool has_pod_overhead = false;
  LinuxResourcesView pod_overhead;
};

struct ContainerView {
  std::string_view raw;
  // Only the ids, state and pid were read (decode_update_container):
  // decode_container(raw) for the rest, checked as on any other request.
  bool partial = false;
  std::string_view id, pod_sandbox_id, name;
  int32_t state = 0;  // api::ContainerState
  uint32_t pid = 0;
  StringMapView labels, annotations;
  RepeatedView args, env;           // strings
  RepeatedView mounts;              // Mount messages; see mount_destination()
  RepeatedView cdi_devices;         // CDIDevice messages; see cdi_device_name()
  bool has_user = false;
  uint32_t uid = 0, gid = 0;
  // LinuxContainer
  bool has_linux = false;
  std::string_view cgroups_path;
  RepeatedView devices;             // LinuxDevice messages; see device_path()
  bool has_resources = false;
  LinuxResourcesView resources;
};

// Single fields of repeated sub-messages (checked on decode).
std::string_view mount_destination(std::string_view mount);
std::string_view cdi_device_name(std::string_view cdi_device);
std::string_view device_path(std::string_view linux_device);

// ttrpc.Request (containerd/ttrpc request.proto).
struct RequestView {
  std::string_view service, method, payload;
  int64_t timeout_nano = 0;
};

// { PodSandbox pod = 1; Container container = 2; LinuxResources = 3 }: the
// shape of CreateContainer, UpdateContainer, StopContainer, RemoveContainer,
// the Post*/Start container requests, the {pod} requests and
// UpdatePodSandbox (whose field 3 is linux_resources as well).
struct PodContainerRequestView {
  PodSandboxView pod;
  ContainerView container;
  bool has_linux_resources = false;
  LinuxResourcesView linux_resources;  // field 3 (UpdateContainer, UpdatePodSandbox)
};

struct StateChangeView {
  int32_t event = 0;
  PodSandboxView pod;
  ContainerView container;
};

// One page of Synchronize: pods and containers stay bytes here. With
// check_items, decode_synchronize decodes and checks each one (decoding it
// again with the functions below cannot fail then); without, it checks only
// the page's own fields, and the caller, which decodes each item anyway,
// reports a bad one (podshimd: one decode per item instead of two, the
// check pass was an eighth of a 3000-container Synchronize).
struct SynchronizeView {
  RepeatedView pods, containers;
  size_t pod_count = 0, container_count = 0;
  bool more = false;
};

Result<void> decode_request(std::string_view buf, RequestView* out);
Result<void> decode_linux_resources(std::string_view buf, LinuxResourcesView* out, int depth = 0);
Result<void> decode_pod(std::string_view buf, PodSandboxView* out, int depth = 0);
Result<void> decode_container(std::string_view buf, ContainerView* out, int depth = 0);
// CreateContainer, StopContainer, Post*/Start/Remove container requests
// (pod = 1, container = 2), UpdateContainer (+ linux_resources = 3), the
// {pod = 1} requests, UpdatePodSandbox (pod = 1, linux_resources = 3; its
// field 2, overhead, is skipped since podshim does not use it).
Result<void> decode_pod_container_request(std::string_view buf, PodContainerRequestView* out,
                                          const char* what);
// UpdateContainer, read for what an update uses: the new resources
// (field 3) in full, and of pod and container only their ids (pod: id,
// name, uid, namespace; container: id, pod_sandbox_id, name, state, pid),
// both marked `partial`. Their other fields (labels, annotations, args,
// env, mounts, linux, ...) are walked as wire structure only: podshim
// checked and stored them when it learnt the container (Synchronize,
// CreateContainer), and re-checking about 3 KB of the container's strings
// on every resize was most of podshim's own work per UpdateContainer. A
// container podshim does not know yet is decoded in full by the handler.
Result<void> decode_update_container(std::string_view buf, PodContainerRequestView* out);
Result<void> decode_pod_sandbox_update(std::string_view buf, PodContainerRequestView* out);
Result<void> decode_state_change(std::string_view buf, StateChangeView* out);
Result<void> decode_synchronize(std::string_view buf, SynchronizeView* out, bool check_items = true);

}  // namespace podshim::nri::pb
