#include "shim/core/json_writer.h"
#include "shim/core/json.h"

#include <charconv>

namespace podshim::core {

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (Unicode 15, table 3-7),
// 0 when it is not one.
size_t utf8_len(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  size_t left = s.size() - i;
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < left && b(k) >= lo && b(k) <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

template <typename T>
void num(std::string& out, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// `"key":` — keys are literals from this file, never escaped.
void key(std::string& out, std::string_view k) {
  out += '"';
  out += k;
  out += "\":";
}

void str_field(std::string& out, std::string_view k, std::string_view v) {
  key(out, k);
  append_json_string(out, v);
}

// A comma before every member but the first.
void sep(std::string& out, bool& first) {
  if (!first) out += ',';
  first = false;
}

// `{"k":v,…}` of a sorted map, each value written by `value`.
template <typename Map, typename Value>
void map_object(std::string& out, const Map& m, Value value) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : m) {
    sep(out, first);
    append_json_string(out, k);
    out += ':';
    value(v);
  }
  out += '}';
}

void resources_fields(std::string& out, const K8sResources& r, bool& first, bool with_current,
                      uint64_t current) {
  auto opt = [&](std::string_view k, const std::optional<int64_t>& v) {
    if (!v) return;
    sep(out, first);
    key(out, k);
    num(out, *v);
  };
  opt("cpuLimitMilli", r.cpu_limit_milli);
  opt("cpuRequestMilli", r.cpu_request_milli);
  if (!r.extra.empty()) {
    sep(out, first);
    key(out, "extra");
    map_object(out, r.extra, [&](int64_t v) { num(out, v); });
  }
  if (with_current) {
    sep(out, first);
    key(out, "memoryCurrentBytes");
    num(out, current);
  }
  opt("memoryLimitBytes", r.memory_limit_bytes);
  opt("memoryRequestBytes", r.memory_request_bytes);
}

void actual(std::string& out, const std::optional<ActualResources>& a) {
  if (!a) {
    out += "null";
    return;
  }
  out += '{';
  bool first = true;
  resources_fields(out, a->resources, first, true, a->memory_current);
  out += ",\"oomKill\":";
  num(out, a->oom_kill);
  out += ",\"readUnixMs\":";
  num(out, a->read_unix_ms);
  out += '}';
}

void string_map(std::string& out, const StringMap& m) {
  map_object(out, m, [&](std::string_view v) { append_json_string(out, v); });
}

void condition(std::string& out, const Condition& c, std::string_view type) {
  out += "{\"lastTransitionTimeUnixMs\":";
  num(out, c.last_transition_unix_ms);
  out += ',';
  str_field(out, "message", c.message);
  out += ",\"observedGeneration\":";
  num(out, c.observed_generation);
  out += ',';
  str_field(out, "reason", c.reason);
  out += ",\"status\":\"True\",";
  str_field(out, "type", type);
  out += '}';
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t run = 0;  // start of the bytes copied as they are
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    const char* esc = nullptr;
    char u[7];
    size_t skip = 1;
    if (c >= 0x20 && c < 0x80) {
      if (c == '"') esc = "\\\"";
      else if (c == '\\') esc = "\\\\";
      else {
        ++i;
        continue;
      }
    } else if (c < 0x20) {
      switch (c) {
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
          u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0', u[4] = kHex[c >> 4], u[5] = kHex[c & 15], u[6] = 0;
          esc = u;
      }
    } else if (size_t n = utf8_len(s, i); n > 0) {
      i += n;
      continue;
    } else {
      esc = "\xEF\xBF\xBD";  // U+FFFD for a byte that starts no valid sequence
    }
    out.append(s.data() + run, i - run);
    out += esc;
    i += skip;
    run = i;
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

void append_json(std::string& out, const K8sResources& r) {
  out += '{';
  bool first = true;
  resources_fields(out, r, first, false, 0);
  out += '}';
}

void append_json(std::string& out, const Pod& p) { append_json(out, p, {}); }

void append_json(std::string& out, const Pod& p, const std::function<void(std::string&)>& extra) {
  out += '{';
  key(out, "actual");
  actual(out, p.actual);
  out += ',';
  key(out, "annotations");
  string_map(out, p.annotations);
  out += ',';
  str_field(out, "cgroupPath", p.cgroup_path);
  if (extra) extra(out);
  out += ',';
  key(out, "labels");
  string_map(out, p.labels);
  out += ',';
  str_field(out, "name", p.name);
  out += ',';
  str_field(out, "namespace", p.namespace_);
  out += ',';
  str_field(out, "qosClass", to_string(p.qos));
  out += ',';
  key(out, "resources");
  append_json(out, p.resources);
  out += ',';
  str_field(out, "sandboxId", p.sandbox_id);
  out += ',';
  str_field(out, "source", to_string(p.source));
  out += ',';
  str_field(out, "uid", p.uid);
  out += '}';
}

// "conditions":[...]: the pod resize conditions, then podshim's drift.
void conditions(std::string& out, const Container& c) {
  out += "\"conditions\":[";
  if (c.conditions.pending) condition(out, *c.conditions.pending, kPodResizePending);
  if (c.conditions.in_progress) {
    if (c.conditions.pending) out += ',';
    condition(out, *c.conditions.in_progress, kPodResizeInProgress);
  }
  if (!c.drift.empty()) {
    if (c.conditions.pending || c.conditions.in_progress) out += ',';
    condition(out, drift_condition(c), kPodshimDrift);
  }
  out += ']';
}

// "devices":[...]: the CDI devices injected, with their nodes.
void devices(std::string& out, const std::vector<InjectedDevice>& ds) {
  out += "\"devices\":[";
  for (size_t i = 0; i < ds.size(); ++i) {
    if (i) out += ',';
    out += '{';
    str_field(out, "name", ds[i].cdi_name);
    out += ",\"nodes\":[";
    for (size_t k = 0; k < ds[i].node_paths.size(); ++k) {
      if (k) out += ',';
      append_json_string(out, ds[i].node_paths[k]);
    }
    out += "]}";
  }
  out += ']';
}

// "drift":[...]
void drifts(std::string& out, const std::vector<Drift>& ds) {
  out += "\"drift\":[";
  for (size_t i = 0; i < ds.size(); ++i) {
    const Drift& d = ds[i];
    if (i) out += ',';
    out += '{';
    str_field(out, "actual", d.actual);
    out += ',';
    str_field(out, "allocated", d.allocated);
    out += ',';
    str_field(out, "file", d.file);
    out += ',';
    str_field(out, "resource", d.resource);
    out += ",\"sinceUnixMs\":";
    num(out, d.since_unix_ms);
    out += '}';
  }
  out += ']';
}

void append_json(std::string& out, const Container& c) {
  out += '{';
  key(out, "actual");
  actual(out, c.actual);
  out += ',';
  key(out, "actuated");
  append_json(out, c.kernel_target());
  out += ',';
  key(out, "allocated");
  append_json(out, c.allocated);
  out += ',';
  key(out, "annotations");
  string_map(out, c.annotations);
  out += ',';
  str_field(out, "cgroupPath", c.cgroup_path);
  out += ',';
  conditions(out, c);
  out += ',';
  key(out, "desired");
  append_json(out, c.desired);
  out += ',';
  devices(out, c.devices);
  out += ',';
  drifts(out, c.drift);
  out += ",\"generation\":";
  num(out, c.generation);
  out += ',';
  str_field(out, "id", c.id);
  out += ',';
  str_field(out, "lastError", c.last_error);
  out += ',';
  str_field(out, "lastResizeOutcome", c.last_outcome);
  out += ',';
  str_field(out, "name", c.name);
  out += ",\"pid\":";
  num(out, c.pid);
  out += ',';
  str_field(out, "podUid", c.pod_uid);
  out += ",\"resizePolicy\":{";
  str_field(out, "cpu", to_string(c.cpu_policy));
  out += ',';
  str_field(out, "memory", to_string(c.memory_policy));
  out += "},\"restartRequired\":";
  out += c.restart_required ? "true" : "false";
  out += ',';
  str_field(out, "selinuxMountLabel", c.selinux_mount_label);
  out += ',';
  str_field(out, "source", to_string(c.source));
  out += ',';
  str_field(out, "state", c.state);
  out += '}';
}

void append_json(std::string& out, const Event& e) {
  out += '{';
  if (e.container) {
    key(out, "container");
    append_json(out, *e.container);
    out += ',';
  }
  if (e.pod) {
    key(out, "pod");
    append_json(out, *e.pod);
    out += ',';
  }
  out += "\"seq\":";
  num(out, e.seq);
  out += ",\"timeUnixMs\":";
  num(out, e.time_unix_ms);
  out += ',';
  str_field(out, "type", to_string(e.type));
  out += '}';
}

}  // namespace podshim::core
