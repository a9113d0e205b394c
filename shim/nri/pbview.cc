#include "shim/nri/pbview.h"

#include <cstring>

#include <fmt/format.h>

// `decl = *expr` or `lhs = *expr` when expr (a Result) holds a value,
// otherwise return its error.
#define PB_CAT2(a, b) a##b
#define PB_CAT(a, b) PB_CAT2(a, b)
#define PB_LET(decl, expr)                                                         \
  auto PB_CAT(pb_r_, __LINE__) = (expr);                                           \
  if (!PB_CAT(pb_r_, __LINE__)) return ::podshim::Unexpected(std::move(PB_CAT(pb_r_, __LINE__)).error()); \
  decl = std::move(*PB_CAT(pb_r_, __LINE__))
#define PB_SET(lhs, expr)                                                          \
  do {                                                                             \
    auto pb_r_ = (expr);                                                           \
    if (!pb_r_) return ::podshim::Unexpected(std::move(pb_r_).error());           \
    lhs = std::move(*pb_r_);                                                       \
  } while (0)

namespace podshim::nri::pb {

std::optional<uint64_t> read_varint_slow(std::string_view& p) {
  uint64_t v = 0;
  for (size_t i = 0; i < 10; ++i) {
    if (i >= p.size()) return std::nullopt;
    const auto b = static_cast<uint8_t>(p[i]);
    v |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) {
      p.remove_prefix(i + 1);
      return v;
    }
  }
  return std::nullopt;  // an 11th byte would be needed: not a 64-bit varint
}

Result<bool> Cursor::next() {
  if (p_.empty()) return false;
  auto tag = read_varint(p_);
  if (!tag) return fail(EPROTO, "{}: truncated field tag", msg_);
  if (*tag > 0xffffffffu || (*tag >> 3) == 0)
    return fail(EPROTO, "{}: invalid field tag {}", msg_, *tag);
  field_ = static_cast<uint32_t>(*tag >> 3);
  const unsigned wt = *tag & 7;
  wt_ = static_cast<WireType>(wt);
  bytes_ = {};
  u64_ = 0;
  switch (wt) {
    case 0: {
      auto v = read_varint(p_);
      if (!v) return fail(EPROTO, "{}: field {}: truncated varint", msg_, field_);
      u64_ = *v;
      return true;
    }
    case 1:
    case 5: {
      const size_t n = wt == 1 ? 8 : 4;
      if (p_.size() < n)
        return fail(EPROTO, "{}: field {}: {}-byte value past the end ({} bytes left)", msg_, field_, n,
                    p_.size());
      for (size_t i = 0; i < n; ++i) u64_ |= uint64_t{static_cast<uint8_t>(p_[i])} << (8 * i);
      p_.remove_prefix(n);
      return true;
    }
    case 2: {
      auto len = read_varint(p_);
      if (!len) return fail(EPROTO, "{}: field {}: truncated length", msg_, field_);
      if (*len > p_.size())
        return fail(EPROTO, "{}: field {}: length {} past the end ({} bytes left)", msg_, field_, *len,
                    p_.size());
      bytes_ = p_.substr(0, static_cast<size_t>(*len));
      p_.remove_prefix(static_cast<size_t>(*len));
      return true;
    }
    case 3:
      PODSHIM_TRY(skip_group(field_, depth_ + 1));
      return true;
    case 4:
      return fail(EPROTO, "{}: field {}: end of a group that was never started", msg_, field_);
    default:
      return fail(EPROTO, "{}: field {}: invalid wire type {}", msg_, field_, wt);
  }
}

// Groups (deprecated, never in NRI) are skipped to their matching end tag;
// nested groups count against the depth limit.
Result<void> Cursor::skip_group(uint32_t field, int depth) {
  if (depth > kMaxDepth) return fail(EPROTO, "{}: field {}: nesting deeper than {}", msg_, field, kMaxDepth);
  Cursor inner(p_, msg_, depth);
  while (true) {
    auto tag = read_varint(inner.p_);
    if (!tag) return fail(EPROTO, "{}: field {}: unterminated group", msg_, field);
    const uint32_t f = static_cast<uint32_t>(*tag >> 3);
    const unsigned wt = *tag & 7;
    if (wt == 4) {
      if (f != field) return fail(EPROTO, "{}: group {} ended by field {}", msg_, field, f);
      p_ = inner.p_;
      return {};
    }
    std::string_view rest = inner.p_;
    switch (wt) {
      case 0:
        if (!read_varint(rest)) return fail(EPROTO, "{}: field {}: truncated varint", msg_, f);
        break;
      case 1:
      case 5: {
        const size_t n = wt == 1 ? 8 : 4;
        if (rest.size() < n) return fail(EPROTO, "{}: field {}: value past the end", msg_, f);
        rest.remove_prefix(n);
        break;
      }
      case 2: {
        auto len = read_varint(rest);
        if (!len || *len > rest.size()) return fail(EPROTO, "{}: field {}: length past the end", msg_, f);
        rest.remove_prefix(static_cast<size_t>(*len));
        break;
      }
      case 3: {
        Cursor g(rest, msg_, depth);
        PODSHIM_TRY(g.skip_group(f, depth + 1));
        rest = g.p_;
        break;
      }
      default:
        return fail(EPROTO, "{}: field {}: invalid wire type {}", msg_, f, wt);
    }
    inner.p_ = rest;
  }
}

Result<void> Cursor::expect(WireType want, const char* name) const {
  if (wt_ == want) return {};
  return fail(EPROTO, "{}.{} (field {}): wire type {}, expected {}", msg_, name, field_,
              static_cast<int>(wt_), static_cast<int>(want));
}

void StringMapView::split_entry(std::string_view entry, std::string_view* key, std::string_view* value) {
  *key = {};
  *value = {};
  Cursor c(entry, "");
  while (true) {
    auto more = c.next();
    if (!more || !*more) return;
    if (c.wire_type() != WireType::Len) continue;
    if (c.field() == 1) *key = c.bytes();
    if (c.field() == 2) *value = c.bytes();
  }
}

std::optional<std::string_view> StringMapView::find(std::string_view key) const {
  std::optional<std::string_view> out;
  for_each([&](std::string_view k, std::string_view v) {
    if (k == key) out = v;
  });
  return out;
}

namespace {

// Field helpers: each checks the wire type and names the field on error.
Result<std::string_view> str(const Cursor& c, const char* name) {
  PODSHIM_TRY(c.expect(WireType::Len, name));
  if (!str::valid_utf8(c.bytes()))
    return fail(EPROTO, "{}.{} (field {}): string is not valid UTF-8", c.message(), name, c.field());
  return c.bytes();
}

Result<uint64_t> varint(const Cursor& c, const char* name) {
  PODSHIM_TRY(c.expect(WireType::Varint, name));
  return c.u64();
}

// A singular sub-message: its bytes, refused when it already appeared.
Result<std::string_view> sub(const Cursor& c, const char* name, bool* seen) {
  PODSHIM_TRY(c.expect(WireType::Len, name));
  if (*seen)
    return fail(EPROTO, "{}.{} (field {}): message field repeated on the wire", c.message(), name, c.field());
  if (c.depth() + 1 > kMaxDepth)
    return fail(EPROTO, "{}.{}: nesting deeper than {}", c.message(), name, kMaxDepth);
  *seen = true;
  return c.bytes();
}

Result<void> wrap_in(Result<void> r, const Cursor& c, const char* name) {
  if (r) return r;
  return Unexpected(r.error().wrap(fmt::format("{}.{}", c.message(), name)));
}

// A nested message field: sub() checks it, `decode` reads its bytes, and an
// error is named after the field it came from.
template <class Decode>
Result<void> nested(const Cursor& c, const char* name, bool* seen, Decode&& decode) {
  PB_LET(auto b, sub(c, name, seen));
  return wrap_in(decode(b), c, name);
}

// Every field of a message known to have no fields we read: just checked.
Result<void> check(std::string_view buf, const char* msg, int depth) {
  Cursor c(buf, msg, depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
  }
}

// OptionalInt64 / OptionalUInt64 / ...: { value = 1 } (varint).
Result<void> decode_opt(std::string_view buf, const char* msg, int depth, OptInt* out) {
  Cursor c(buf, msg, depth);
  out->has = true;
  out->value = 0;
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    if (c.field() == 1) PB_SET(out->value, varint(c, "value"));
  }
}

// A map<string, string> entry: key = 1, value = 2, both strings.
Result<void> check_string_entry(const Cursor& outer, const char* name) {
  PODSHIM_TRY(outer.expect(WireType::Len, name));
  Cursor c(outer.bytes(), name, outer.depth() + 1);
  while (true) {
    auto more = c.next();
    if (!more) return Unexpected(more.error().wrap(outer.message()));
    if (!*more) return {};
    if (c.field() == 1 || c.field() == 2) {
      if (auto s = str(c, c.field() == 1 ? "key" : "value"); !s)
        return Unexpected(s.error().wrap(outer.message()));
    }
  }
}

// A repeated message whose one string field `f` podshim reads.
Result<void> check_string_holder(const Cursor& outer, const char* name, const char* msg, uint32_t f,
                                 const char* fname) {
  PODSHIM_TRY(outer.expect(WireType::Len, name));
  if (outer.depth() + 1 > kMaxDepth) return fail(EPROTO, "{}.{}: nesting deeper than {}", outer.message(), name, kMaxDepth);
  Cursor c(outer.bytes(), msg, outer.depth() + 1);
  while (true) {
    auto more = c.next();
    if (!more) return Unexpected(more.error().wrap(fmt::format("{}.{}", outer.message(), name)));
    if (!*more) return {};
    if (c.field() == f) {
      if (auto s = str(c, fname); !s) return Unexpected(s.error().wrap(fmt::format("{}.{}", outer.message(), name)));
    }
  }
}

std::string_view first_string(std::string_view msg, uint32_t f) {
  std::string_view out;
  Cursor c(msg, "");
  while (true) {
    auto more = c.next();
    if (!more || !*more) return out;
    if (c.field() == f && c.wire_type() == WireType::Len) out = c.bytes();  // last wins
  }
}

Result<void> decode_memory(std::string_view buf, int depth, LinuxResourcesView* out) {
  Cursor c(buf, "LinuxMemory", depth);
  bool seen_limit = false;
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    if (c.field() == 1) {
      PODSHIM_TRY(nested(c, "limit", &seen_limit,
                         [&](std::string_view b) { return decode_opt(b, "OptionalInt64", depth + 1, &out->memory_limit); }));
    } else if (c.field() >= 2 && c.field() <= 8 && c.wire_type() == WireType::Len) {
      PODSHIM_TRY(wrap_in(check(c.bytes(), "Optional", depth + 1), c, "optional"));
    }
  }
}

Result<void> decode_cpu(std::string_view buf, int depth, LinuxResourcesView* out) {
  Cursor c(buf, "LinuxCPU", depth);
  bool seen[4] = {};
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1:
        PODSHIM_TRY(nested(c, "shares", &seen[1], [&](std::string_view b) { return decode_opt(b, "OptionalUInt64", depth + 1, &out->cpu_shares); }));
        break;
      case 2:
        PODSHIM_TRY(nested(c, "quota", &seen[2], [&](std::string_view b) { return decode_opt(b, "OptionalInt64", depth + 1, &out->cpu_quota); }));
        break;
      case 3:
        PODSHIM_TRY(nested(c, "period", &seen[3], [&](std::string_view b) { return decode_opt(b, "OptionalUInt64", depth + 1, &out->cpu_period); }));
        break;
      case 6: PB_SET(out->cpu_cpus, str(c, "cpus")); break;
      case 7: PB_SET(out->cpu_mems, str(c, "mems")); break;
      default: break;
    }
  }
}

// The id fields of a PodSandbox, read alike by decode_pod and decode_pod_ids:
// whether `c` is at one of them.
Result<bool> pod_id_field(const Cursor& c, PodSandboxView* out) {
  switch (c.field()) {
    case 1: PB_SET(out->id, str(c, "id")); return true;
    case 2: PB_SET(out->name, str(c, "name")); return true;
    case 3: PB_SET(out->uid, str(c, "uid")); return true;
    case 4: PB_SET(out->namespace_, str(c, "namespace")); return true;
    default: return false;
  }
}

// The id, state and pid fields of a Container, read alike by
// decode_container and decode_container_ids: whether `c` is at one of them.
Result<bool> container_id_field(const Cursor& c, ContainerView* out) {
  switch (c.field()) {
    case 1: PB_SET(out->id, str(c, "id")); return true;
    case 2: PB_SET(out->pod_sandbox_id, str(c, "pod_sandbox_id")); return true;
    case 3: PB_SET(out->name, str(c, "name")); return true;
    case 4: {
      PB_LET(auto v, varint(c, "state"));
      out->state = static_cast<int32_t>(v);  // an enum is an int32 on the wire
      return true;
    }
    case 12: {
      PB_LET(auto v, varint(c, "pid"));
      out->pid = static_cast<uint32_t>(v);
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::string_view mount_destination(std::string_view m) { return first_string(m, 1); }
std::string_view cdi_device_name(std::string_view d) { return first_string(d, 1); }
std::string_view device_path(std::string_view d) { return first_string(d, 1); }

Result<void> decode_request(std::string_view buf, RequestView* out) {
  *out = {};
  Cursor c(buf, "ttrpc.Request");
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1: PB_SET(out->service, str(c, "service")); break;
      case 2: PB_SET(out->method, str(c, "method")); break;
      case 3:
        PODSHIM_TRY(c.expect(WireType::Len, "payload"));  // bytes: no UTF-8 rule
        out->payload = c.bytes();
        break;
      case 4: {
        PB_LET(auto v, varint(c, "timeout_nano"));
        out->timeout_nano = static_cast<int64_t>(v);
        break;
      }
      case 5: PODSHIM_TRY(wrap_in(check_string_entry(c, "metadata"), c, "metadata")); break;
      default: break;
    }
  }
}

Result<void> decode_linux_resources(std::string_view buf, LinuxResourcesView* out, int depth) {
  *out = {};
  out->raw = buf;
  out->unified.entries = {buf, 6};
  Cursor c(buf, "LinuxResources", depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1:
        PODSHIM_TRY(nested(c, "memory", &out->has_memory, [&](std::string_view b) { return decode_memory(b, depth + 1, out); }));
        break;
      case 2:
        PODSHIM_TRY(nested(c, "cpu", &out->has_cpu, [&](std::string_view b) { return decode_cpu(b, depth + 1, out); }));
        break;
      case 6: PODSHIM_TRY(check_string_entry(c, "unified")); break;
      default: break;
    }
  }
}

Result<void> decode_pod(std::string_view buf, PodSandboxView* out, int depth) {
  *out = {};
  out->raw = buf;
  out->labels.entries = {buf, 5};
  out->annotations.entries = {buf, 6};
  Cursor c(buf, "PodSandbox", depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    PB_LET(bool id, pod_id_field(c, out));
    if (id) continue;
    switch (c.field()) {
      case 5: PODSHIM_TRY(check_string_entry(c, "labels")); break;
      case 6: PODSHIM_TRY(check_string_entry(c, "annotations")); break;
      case 7: PB_SET(out->runtime_handler, str(c, "runtime_handler")); break;
      case 8: {
        PB_LET(auto b, sub(c, "linux", &out->has_linux));
        Cursor l(b, "LinuxPodSandbox", depth + 1);
        while (true) {
          auto lm = l.next();
          if (!lm) return Unexpected(lm.error().wrap("PodSandbox.linux"));
          if (!*lm) break;
          Result<void> r;
          switch (l.field()) {
            case 1: {
              auto rb = sub(l, "pod_overhead", &out->has_pod_overhead);
              r = rb ? wrap_in(decode_linux_resources(*rb, &out->pod_overhead, depth + 2), l, "pod_overhead")
                     : Result<void>(Unexpected(rb.error()));
              break;
            }
            case 2: {
              auto rb = sub(l, "pod_resources", &out->has_pod_resources);
              r = rb ? wrap_in(decode_linux_resources(*rb, &out->pod_resources, depth + 2), l, "pod_resources")
                     : Result<void>(Unexpected(rb.error()));
              break;
            }
            case 3: {
              auto s = str(l, "cgroup_parent");
              if (s) out->cgroup_parent = *s; else r = Unexpected(s.error());
              break;
            }
            case 4: {
              auto s = str(l, "cgroups_path");
              if (s) out->cgroups_path = *s; else r = Unexpected(s.error());
              break;
            }
            default: break;
          }
          if (!r) return Unexpected(r.error().wrap("PodSandbox.linux"));
        }
        break;
      }
      case 9: {
        PB_LET(auto v, varint(c, "pid"));
        out->pid = static_cast<uint32_t>(v);
        break;
      }
      default: break;
    }
  }
}

namespace {

Result<void> decode_linux_container(std::string_view buf, int depth, ContainerView* out) {
  Cursor c(buf, "LinuxContainer", depth);
  out->devices = {buf, 2};
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 2: PODSHIM_TRY(check_string_holder(c, "devices", "LinuxDevice", 1, "path")); break;
      case 3:
        PODSHIM_TRY(nested(c, "resources", &out->has_resources, [&](std::string_view b) { return decode_linux_resources(b, &out->resources, depth + 1); }));
        break;
      case 5: PB_SET(out->cgroups_path, str(c, "cgroups_path")); break;
      default: break;
    }
  }
}

Result<void> decode_user(std::string_view buf, int depth, ContainerView* out) {
  Cursor c(buf, "User", depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    if (c.field() == 1) {
      PB_LET(auto v, varint(c, "uid"));
      out->uid = static_cast<uint32_t>(v);
    } else if (c.field() == 2) {
      PB_LET(auto v, varint(c, "gid"));
      out->gid = static_cast<uint32_t>(v);
    }
  }
}

}  // namespace

Result<void> decode_container(std::string_view buf, ContainerView* out, int depth) {
  *out = {};
  out->raw = buf;
  out->labels.entries = {buf, 5};
  out->annotations.entries = {buf, 6};
  out->args = {buf, 7};
  out->env = {buf, 8};
  out->mounts = {buf, 9};
  out->cdi_devices = {buf, 20};
  Cursor c(buf, "Container", depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    PB_LET(bool id, container_id_field(c, out));
    if (id) continue;
    switch (c.field()) {
      case 5: PODSHIM_TRY(check_string_entry(c, "labels")); break;
      case 6: PODSHIM_TRY(check_string_entry(c, "annotations")); break;
      case 7: PODSHIM_TRY(str(c, "args")); break;
      case 8: PODSHIM_TRY(str(c, "env")); break;
      case 9: PODSHIM_TRY(check_string_holder(c, "mounts", "Mount", 1, "destination")); break;
      case 11:
        PODSHIM_TRY(nested(c, "linux", &out->has_linux, [&](std::string_view b) { return decode_linux_container(b, depth + 1, out); }));
        break;
      case 20: PODSHIM_TRY(check_string_holder(c, "CDI_devices", "CDIDevice", 1, "name")); break;
      case 21:
        PODSHIM_TRY(nested(c, "user", &out->has_user, [&](std::string_view b) { return decode_user(b, depth + 1, out); }));
        break;
      default: break;
    }
  }
}

namespace {

// The id fields of a PodSandbox; everything else is walked, not read.
Result<void> decode_pod_ids(std::string_view buf, PodSandboxView* out, int depth) {
  *out = {};
  out->raw = buf;
  out->partial = true;
  Cursor c(buf, "PodSandbox", depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    PODSHIM_TRY(pod_id_field(c, out));
  }
}

// The id, state and pid fields of a Container; everything else is walked.
Result<void> decode_container_ids(std::string_view buf, ContainerView* out, int depth) {
  *out = {};
  out->raw = buf;
  out->partial = true;
  Cursor c(buf, "Container", depth);
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    PODSHIM_TRY(container_id_field(c, out));
  }
}

// { pod = 1, container = 2, linux_resources = 3 }, the pod and the
// container read by the decoders given (whole, or their ids only).
Result<void> decode_request_with(std::string_view buf, PodContainerRequestView* out, const char* what,
                                 Result<void> (*pod)(std::string_view, PodSandboxView*, int),
                                 Result<void> (*container)(std::string_view, ContainerView*, int)) {
  *out = {};
  Cursor c(buf, what);
  bool seen_pod = false, seen_ctr = false;
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1:
        PODSHIM_TRY(nested(c, "pod", &seen_pod, [&](std::string_view b) { return pod(b, &out->pod, 1); }));
        break;
      case 2:
        PODSHIM_TRY(nested(c, "container", &seen_ctr, [&](std::string_view b) { return container(b, &out->container, 1); }));
        break;
      case 3:
        PODSHIM_TRY(nested(c, "linux_resources", &out->has_linux_resources, [&](std::string_view b) { return decode_linux_resources(b, &out->linux_resources, 1); }));
        break;
      default: break;
    }
  }
}

}  // namespace

Result<void> decode_pod_container_request(std::string_view buf, PodContainerRequestView* out,
                                          const char* what) {
  return decode_request_with(buf, out, what, decode_pod, decode_container);
}

Result<void> decode_update_container(std::string_view buf, PodContainerRequestView* out) {
  return decode_request_with(buf, out, "UpdateContainerRequest", decode_pod_ids, decode_container_ids);
}


Result<void> decode_pod_sandbox_update(std::string_view buf, PodContainerRequestView* out) {
  *out = {};
  Cursor c(buf, "UpdatePodSandboxRequest");
  bool seen_pod = false, seen_overhead = false;
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1:
        PODSHIM_TRY(nested(c, "pod", &seen_pod, [&](std::string_view b) { return decode_pod(b, &out->pod, 1); }));
        break;
      case 2:
        PODSHIM_TRY(nested(c, "overhead_linux_resources", &seen_overhead, [&](std::string_view b) {
          LinuxResourcesView ignored;
          return decode_linux_resources(b, &ignored, 1);
        }));
        break;
      case 3:
        PODSHIM_TRY(nested(c, "linux_resources", &out->has_linux_resources, [&](std::string_view b) { return decode_linux_resources(b, &out->linux_resources, 1); }));
        break;
      default: break;
    }
  }
}

Result<void> decode_state_change(std::string_view buf, StateChangeView* out) {
  *out = {};
  Cursor c(buf, "StateChangeEvent");
  bool seen_pod = false, seen_ctr = false;
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1: {
        PB_LET(auto v, varint(c, "event"));
        out->event = static_cast<int32_t>(v);
        break;
      }
      case 2:
        PODSHIM_TRY(nested(c, "pod", &seen_pod, [&](std::string_view b) { return decode_pod(b, &out->pod, 1); }));
        break;
      case 3:
        PODSHIM_TRY(nested(c, "container", &seen_ctr, [&](std::string_view b) { return decode_container(b, &out->container, 1); }));
        break;
      default: break;
    }
  }
}

Result<void> decode_synchronize(std::string_view buf, SynchronizeView* out, bool check_items) {
  *out = {};
  out->pods = {buf, 1};
  out->containers = {buf, 2};
  Cursor c(buf, "SynchronizeRequest");
  while (true) {
    PB_LET(bool more, c.next());
    if (!more) return {};
    switch (c.field()) {
      case 1: {
        PODSHIM_TRY(c.expect(WireType::Len, "pods"));
        PodSandboxView p;
        if (auto r = check_items ? decode_pod(c.bytes(), &p, 1) : Result<void>{}; !r)
          return Unexpected(r.error().wrap(fmt::format("SynchronizeRequest.pods[{}]", out->pod_count)));
        out->pod_count++;
        break;
      }
      case 2: {
        PODSHIM_TRY(c.expect(WireType::Len, "containers"));
        ContainerView ct;
        if (auto r = check_items ? decode_container(c.bytes(), &ct, 1) : Result<void>{}; !r)
          return Unexpected(
              r.error().wrap(fmt::format("SynchronizeRequest.containers[{}]", out->container_count)));
        out->container_count++;
        break;
      }
      case 3: {
        PB_LET(auto v, varint(c, "more"));
        out->more = v != 0;
        break;
      }
      default: break;
    }
  }
}

}  // namespace podshim::nri::pb
