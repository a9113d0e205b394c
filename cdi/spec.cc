#include "cdi/spec.h"

#include <yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "base/str.h"
#include "cdi/name.h"

namespace podshim::cdi {

using json = nlohmann::json;

namespace {

// Nesting deeper than this is not a CDI spec; refusing it bounds recursion.
constexpr int kMaxDepth = 64;
// Aliases can expand a small YAML file exponentially ("billion laughs").
constexpr size_t kMaxNodes = 1u << 20;

// Internal to this file: thrown by the decoders, caught in parse_spec.
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void error_at(const std::string& path, const std::string& msg) {
  throw ParseError(path.empty() ? msg : path + ": " + msg);
}

// ---------------------------------------------------------------------------
// YAML → JSON, as sigs.k8s.io/yaml does before decoding: plain scalars are
// resolved with YAML 1.1 rules (go-yaml v2 resolve.go), so `fileMode: 0666` is
// the integer 438; quoted scalars stay strings.

std::optional<json> resolve_yaml_int(std::string_view s) {
  std::string t;
  for (char c : s)
    if (c != '_') t += c;  // go-yaml v2 drops underscores before ParseInt
  bool neg = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (i >= t.size()) return std::nullopt;
  int base = 10;
  if (t.size() - i > 2 && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'X')) base = 16, i += 2;
  else if (t.size() - i > 2 && t[i] == '0' && (t[i + 1] == 'o' || t[i + 1] == 'O')) base = 8, i += 2;
  else if (t.size() - i > 2 && t[i] == '0' && (t[i + 1] == 'b' || t[i + 1] == 'B')) base = 2, i += 2;
  else if (t.size() - i > 1 && t[i] == '0') base = 8, i += 1;
  unsigned __int128 v = 0;
  for (; i < t.size(); i++) {
    char c = t[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    if (d >= base) return std::nullopt;
    v = v * base + d;
    if (v > (static_cast<unsigned __int128>(1) << 64)) return std::nullopt;
  }
  if (neg) {
    if (v > static_cast<unsigned __int128>(INT64_MAX) + 1) return std::nullopt;
    return json(static_cast<int64_t>(-static_cast<__int128>(v)));
  }
  if (v > UINT64_MAX) return std::nullopt;
  return json(static_cast<uint64_t>(v));
}

bool looks_like_yaml_float(std::string_view s) {
  // ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ and .inf/.nan forms
  static const std::set<std::string_view> specials = {
      ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
      ".nan", ".NaN", ".NAN"};
  if (specials.count(s)) return true;
  size_t i = 0;
  auto digits = [&] {
    size_t b = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
    return i > b;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) i++;
  if (i < s.size() && s[i] == '.') {
    i++;
    if (!digits()) return false;
  } else {
    if (!digits()) return false;
    if (i < s.size() && s[i] == '.') {
      i++;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) i++;
    if (!digits()) return false;
  }
  return i == s.size();
}

json resolve_plain_scalar(const std::string& s) {
  // Most plain scalars in a spec are paths and names: a first character no
  // null, bool, number or float form starts with makes it a string.
  if (!s.empty()) {
    char c = s.front();
    bool maybe = (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == '~' || c == 'n' ||
                 c == 'N' || c == 'y' || c == 'Y' || c == 'o' || c == 'O' || c == 't' || c == 'T' ||
                 c == 'f' || c == 'F' || c == '_';
    if (!maybe) return s;
  }
  static const std::set<std::string_view> nulls = {"", "~", "null", "Null", "NULL"};
  static const std::set<std::string_view> trues = {"y", "Y", "yes", "Yes", "YES", "on", "On",
                                                   "ON", "true", "True", "TRUE"};
  static const std::set<std::string_view> falses = {"n", "N", "no", "No", "NO", "off", "Off",
                                                    "OFF", "false", "False", "FALSE"};
  if (nulls.count(s)) return nullptr;
  if (trues.count(s)) return true;
  if (falses.count(s)) return false;
  if (auto i = resolve_yaml_int(s)) return *i;
  if (looks_like_yaml_float(s)) {
    // Kept as a float so that integer fields reject it, as Go's decoder does.
    return json(0.5);
  }
  return s;
}

// Builds the JSON tree from libyaml's event stream (libyaml is the C
// parser go-yaml v2 was ported from, so its reading of a file is upstream's).
// Anchors keep their converted value and size; an alias adds that size to
// the node count, so expansion is bounded before anything is copied.
class YamlConverter {
 public:
  explicit YamlConverter(std::string_view data) {
    if (!yaml_parser_initialize(&parser_)) throw ParseError("malformed YAML: out of memory");
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  }
  ~YamlConverter() {
    if (have_event_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  YamlConverter(const YamlConverter&) = delete;
  YamlConverter& operator=(const YamlConverter&) = delete;

  json document() {
    expect(next(), YAML_STREAM_START_EVENT);
    if (next() == YAML_STREAM_END_EVENT) return nullptr;  // an empty file
    expect(type(), YAML_DOCUMENT_START_EVENT);
    next();
    json root = node(Where{}, 0);
    expect(next(), YAML_DOCUMENT_END_EVENT);
    if (next() != YAML_STREAM_END_EVENT) throw ParseError("more than one YAML document in a spec file");
    return root;
  }

 private:
  // Where a node is, rendered only for an error message: building the path
  // string of every node was a fifth of the load time.
  struct Where {
    const Where* parent = nullptr;
    std::string_view key;  // a mapping key, or
    size_t index = 0;      // a sequence index when key is empty and parent set
    std::string str() const {
      if (!parent) return "";
      std::string p = parent->str();
      if (!key.empty()) return p.empty() ? std::string(key) : p + "." + std::string(key);
      return fmt::format("{}[{}]", p, index);
    }
  };

  struct Anchor {
    json value;
    size_t nodes;
    std::optional<std::string> raw;  // a scalar's text, for use as a key
  };

  yaml_event_type_t type() const { return event_.type; }

  yaml_event_type_t next() {
    if (have_event_) yaml_event_delete(&event_);
    have_event_ = false;
    if (!yaml_parser_parse(&parser_, &event_)) {
      std::string where = fmt::format("line {}, column {}", parser_.problem_mark.line + 1,
                                      parser_.problem_mark.column + 1);
      std::string what = parser_.problem ? parser_.problem : "parse error";
      if (parser_.context) what = std::string(parser_.context) + ": " + what;
      throw ParseError(fmt::format("malformed YAML: {}: {}", where, what));
    }
    have_event_ = true;
    return event_.type;
  }

  void expect(yaml_event_type_t got, yaml_event_type_t want) {
    if (got != want) throw ParseError("malformed YAML: unexpected event");
  }

  void count(const Where& path, size_t n = 1) {
    nodes_ += n;
    if (nodes_ > kMaxNodes) error_at(path.str(), "document too large (alias expansion?)");
  }

  static std::string anchor_name(const yaml_char_t* a) { return a ? reinterpret_cast<const char*>(a) : ""; }

  json scalar(const Where& path) {
    const auto& sc = event_.data.scalar;
    std::string value(reinterpret_cast<const char*>(sc.value), sc.length);
    std::string_view tag = sc.tag ? reinterpret_cast<const char*>(sc.tag) : "";
    if (tag.empty()) {
      // Untagged: a plain scalar is resolved (YAML 1.1), any other style
      // (quoted, literal, folded) is a string.
      if (sc.style == YAML_PLAIN_SCALAR_STYLE) return resolve_plain_scalar(value);
      return value;
    }
    if (tag == "!" || tag == "tag:yaml.org,2002:str") return value;
    if (tag == "tag:yaml.org,2002:int") {
      if (auto i = resolve_yaml_int(value)) return *i;
      error_at(path.str(), fmt::format("invalid !!int value \"{}\"", value));
    }
    if (tag == "tag:yaml.org,2002:null") return nullptr;
    if (tag == "tag:yaml.org,2002:bool") return resolve_plain_scalar(value);
    error_at(path.str(), fmt::format("unsupported YAML tag \"{}\"", tag));
  }

  // Converts the node that starts at the current event (consumed up to its
  // last event).
  json node(const Where& path, int depth, std::optional<std::string>* raw = nullptr) {
    if (depth > kMaxDepth) error_at(path.str(), "nesting too deep");
    switch (type()) {
      case YAML_ALIAS_EVENT: {
        auto it = anchors_.find(anchor_name(event_.data.alias.anchor));
        if (it == anchors_.end())
          error_at(path.str(), fmt::format("unknown anchor \"{}\"", anchor_name(event_.data.alias.anchor)));
        count(path, it->second.nodes);
        if (raw) *raw = it->second.raw;
        return it->second.value;
      }
      case YAML_SCALAR_EVENT: {
        count(path);
        json v = scalar(path);
        // The raw text only when it is needed: a key, or an anchor's (a
        // copy of every scalar's text was a tenth of the conversion).
        const auto& sc = event_.data.scalar;
        if (sc.anchor || raw) {
          std::string text(reinterpret_cast<const char*>(sc.value), sc.length);
          if (sc.anchor) anchors_[anchor_name(sc.anchor)] = Anchor{v, 1, text};
          if (raw) *raw = std::move(text);
        }
        return v;
      }
      case YAML_SEQUENCE_START_EVENT: {
        count(path);
        size_t start = nodes_;
        std::string anchor = anchor_name(event_.data.sequence_start.anchor);
        json out = json::array();
        for (size_t i = 0; next() != YAML_SEQUENCE_END_EVENT; i++)
          out.push_back(node(Where{&path, {}, i}, depth + 1));
        if (!anchor.empty()) anchors_[anchor] = Anchor{out, nodes_ - start + 1, std::nullopt};
        return out;
      }
      case YAML_MAPPING_START_EVENT: {
        count(path);
        size_t start = nodes_;
        std::string anchor = anchor_name(event_.data.mapping_start.anchor);
        json out = json::object();
        while (next() != YAML_MAPPING_END_EVENT) {
          std::optional<std::string> key;
          bool scalar_key = type() == YAML_SCALAR_EVENT || type() == YAML_ALIAS_EVENT;
          // The key comes back through `key`; its node is not needed.
          if (scalar_key) (void)node(path, depth + 1, &key);
          if (!key) error_at(path.str(), "mapping key is not a scalar");
          // One lookup for the duplicate check and the insertion: map
          // iterators stay valid while the value is converted.
          auto& members = out.get_ref<json::object_t&>();
          auto at = members.lower_bound(*key);
          if (at != members.end() && at->first == *key)
            error_at(path.str(), fmt::format("duplicate key \"{}\"", *key));
          next();
          json v = node(Where{&path, *key, 0}, depth + 1);
          members.emplace_hint(at, std::move(*key), std::move(v));
        }
        if (!anchor.empty()) anchors_[anchor] = Anchor{out, nodes_ - start + 1, std::nullopt};
        return out;
      }
      default:
        error_at(path.str(), "unexpected YAML node");
    }
  }

  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool have_event_ = false;
  size_t nodes_ = 0;
  std::unordered_map<std::string, Anchor> anchors_;
};

// True when a document marker ("---" at column 0) follows content: a second
// YAML document. A scan before parsing, so that a second document is refused
// whatever the first one holds (yaml-cpp 0.7's LoadAll, used before libyaml,
// looped forever on some malformed input; found by tests/fuzz/cdi_fuzz).
bool has_second_document(std::string_view data) {
  bool content = false;
  for (std::string_view line : str::split(data, '\n')) {
    bool marker = str::starts_with(line, "---") &&
                  (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker) {
      if (content) return true;
      std::string_view rest = str::trim(line.substr(3));  // "--- {kind: ...}" starts with content
      content = !rest.empty() && rest.front() != '#';
      continue;
    }
    std::string_view t = str::trim(line);
    if (!t.empty() && t.front() != '#' && t.front() != '%') content = true;
  }
  return false;
}

json yaml_to_json(std::string_view data) {
  if (has_second_document(data)) throw ParseError("more than one YAML document in a spec file");
  YamlConverter c(data);
  return c.document();
}

// Strict JSON: nlohmann keeps the last of duplicate keys silently, so the
// parser callback tracks the keys of every open object and refuses repeats.
json parse_strict_json(std::string_view data) {
  std::vector<std::set<std::string>> open_objects;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth > kMaxDepth) throw ParseError("nesting too deep");
    switch (ev) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!open_objects.empty() && !open_objects.back().insert(k).second)
          throw ParseError(fmt::format("duplicate key \"{}\"", k));
        break;
      }
      default:
        break;
    }
    return true;
  };
  return json::parse(data.begin(), data.end(), cb, /*allow_exceptions=*/true,
                     /*ignore_comments=*/false);
}

// ---------------------------------------------------------------------------
// Strict decoding of the JSON tree into the model.

class Decoder {
 public:
  explicit Decoder(Format f) : format_(f) {}

  // Checks that `j` is an object (or null, meaning "absent") whose keys are
  // all in `known`. Returns false for null.
  bool object(const json& j, const std::string& path, std::initializer_list<std::string_view> known) {
    if (j.is_null()) return false;
    if (!j.is_object()) error_at(path, fmt::format("expected an object, got {}", j.type_name()));
    for (const auto& [k, v] : j.items()) {
      if (std::find(known.begin(), known.end(), k) == known.end())
        error_at(path, fmt::format("unknown field \"{}\"", k));
    }
    return true;
  }

  std::string string(const json& j, const std::string& path) {
    if (j.is_null()) return "";
    if (j.is_string()) return j.get<std::string>();
    // sigs.k8s.io/yaml turns a YAML int or bool into a string when the
    // target field is a string (`name: 0` is the device "0"). JSON files are
    // held to their types.
    if (format_ == Format::Yaml) {
      if (j.is_number_integer()) return j.dump();
      if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
    }
    error_at(path, fmt::format("expected a string, got {}", j.type_name()));
  }

  int64_t i64(const json& j, const std::string& path) {
    if (j.is_number_unsigned()) {
      if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) error_at(path, "integer out of range");
      return static_cast<int64_t>(j.get<uint64_t>());
    }
    if (j.is_number_integer()) return j.get<int64_t>();
    error_at(path, fmt::format("expected an integer, got {}", j.is_number_float() ? "a fraction" : j.type_name()));
  }

  uint32_t u32(const json& j, const std::string& path) {
    int64_t v = i64(j, path);
    if (v < 0 || v > static_cast<int64_t>(UINT32_MAX))
      error_at(path, fmt::format("integer {} out of range for an unsigned 32-bit value", v));
    return static_cast<uint32_t>(v);
  }

  bool boolean(const json& j, const std::string& path) {
    if (j.is_null()) return false;
    if (j.is_boolean()) return j.get<bool>();
    error_at(path, fmt::format("expected a boolean, got {}", j.type_name()));
  }

  template <typename F>
  void array(const json& j, const std::string& path, F&& each) {
    if (j.is_null()) return;
    if (!j.is_array()) error_at(path, fmt::format("expected an array, got {}", j.type_name()));
    for (size_t i = 0; i < j.size(); i++) each(j[i], fmt::format("{}[{}]", path, i));
  }

  std::vector<std::string> strings(const json& j, const std::string& path) {
    std::vector<std::string> out;
    array(j, path, [&](const json& e, const std::string& p) { out.push_back(string(e, p)); });
    return out;
  }

  std::map<std::string, std::string> string_map(const json& j, const std::string& path) {
    std::map<std::string, std::string> out;
    if (j.is_null()) return out;
    if (!j.is_object()) error_at(path, fmt::format("expected an object, got {}", j.type_name()));
    for (const auto& [k, v] : j.items()) out[k] = string(v, path + "." + k);
    return out;
  }

  DeviceNode device_node(const json& j, const std::string& p) {
    DeviceNode d;
    if (!object(j, p, {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions",
                       "uid", "gid"}))
      error_at(p, "null device node");
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (v.is_null()) continue;
      if (k == "path") d.path = string(v, fp);
      else if (k == "hostPath") d.host_path = string(v, fp);
      else if (k == "type") d.type = string(v, fp);
      else if (k == "major") d.major = i64(v, fp);
      else if (k == "minor") d.minor = i64(v, fp);
      else if (k == "fileMode") d.file_mode = u32(v, fp);
      else if (k == "permissions") d.permissions = string(v, fp);
      else if (k == "uid") d.uid = u32(v, fp);
      else if (k == "gid") d.gid = u32(v, fp);
    }
    return d;
  }

  Mount mount(const json& j, const std::string& p) {
    Mount m;
    if (!object(j, p, {"hostPath", "containerPath", "options", "type"})) error_at(p, "null mount");
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (k == "hostPath") m.host_path = string(v, fp);
      else if (k == "containerPath") m.container_path = string(v, fp);
      else if (k == "options") m.options = strings(v, fp);
      else if (k == "type") m.type = string(v, fp);
    }
    return m;
  }

  Hook hook(const json& j, const std::string& p) {
    Hook h;
    if (!object(j, p, {"hookName", "path", "args", "env", "timeout"})) error_at(p, "null hook");
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (k == "hookName") h.hook_name = string(v, fp);
      else if (k == "path") h.path = string(v, fp);
      else if (k == "args") h.args = strings(v, fp);
      else if (k == "env") h.env = strings(v, fp);
      else if (k == "timeout" && !v.is_null()) {
        int64_t t = i64(v, fp);
        // Go decodes into *int (64-bit here); OCI wants a positive timeout,
        // which the runtime checks.
        h.timeout = t;
      }
    }
    return h;
  }

  IntelRdt intel_rdt(const json& j, const std::string& p) {
    IntelRdt r;
    object(j, p, {"closID", "l3CacheSchema", "memBwSchema", "schemata", "enableMonitoring"});
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (k == "closID") r.clos_id = string(v, fp);
      else if (k == "l3CacheSchema") r.l3_cache_schema = string(v, fp);
      else if (k == "memBwSchema") r.mem_bw_schema = string(v, fp);
      else if (k == "schemata" && !v.is_null()) r.schemata = strings(v, fp);
      else if (k == "enableMonitoring") r.enable_monitoring = boolean(v, fp);
    }
    return r;
  }

  NetDevice net_device(const json& j, const std::string& p) {
    NetDevice n;
    if (!object(j, p, {"hostInterfaceName", "name"})) error_at(p, "null net device");
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (k == "hostInterfaceName") n.host_interface_name = string(v, fp);
      else if (k == "name") n.name = string(v, fp);
    }
    return n;
  }

  ContainerEdits edits(const json& j, const std::string& p) {
    ContainerEdits e;
    if (!object(j, p, {"env", "deviceNodes", "netDevices", "hooks", "mounts", "intelRdt",
                       "additionalGids"}))
      return e;
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (k == "env") e.env = strings(v, fp);
      else if (k == "deviceNodes")
        array(v, fp, [&](const json& x, const std::string& xp) { e.device_nodes.push_back(device_node(x, xp)); });
      else if (k == "netDevices")
        array(v, fp, [&](const json& x, const std::string& xp) { e.net_devices.push_back(net_device(x, xp)); });
      else if (k == "hooks")
        array(v, fp, [&](const json& x, const std::string& xp) { e.hooks.push_back(hook(x, xp)); });
      else if (k == "mounts")
        array(v, fp, [&](const json& x, const std::string& xp) { e.mounts.push_back(mount(x, xp)); });
      else if (k == "intelRdt" && !v.is_null())
        e.intel_rdt = intel_rdt(v, fp);
      else if (k == "additionalGids")
        array(v, fp, [&](const json& x, const std::string& xp) { e.additional_gids.push_back(u32(x, xp)); });
    }
    return e;
  }

  Device device(const json& j, const std::string& p) {
    Device d;
    if (!object(j, p, {"name", "annotations", "containerEdits"})) error_at(p, "null device");
    for (const auto& [k, v] : j.items()) {
      std::string fp = p + "." + k;
      if (k == "name") d.name = string(v, fp);
      else if (k == "annotations") {
        if (auto m = string_map(v, fp); !m.empty()) d.annotations = std::move(m);
      }
      else if (k == "containerEdits") d.edits = edits(v, fp);
    }
    return d;
  }

  Spec spec(const json& j) {
    Spec s;
    if (j.is_null()) throw ParseError("no spec data");
    if (!object(j, "", {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}))
      throw ParseError("no spec data");
    for (const auto& [k, v] : j.items()) {
      if (k == "cdiVersion") s.version = string(v, k);
      else if (k == "kind") s.kind = string(v, k);
      else if (k == "annotations") {
        if (auto m = string_map(v, k); !m.empty()) s.annotations = std::move(m);
      }
      else if (k == "devices")
        array(v, k, [&](const json& x, const std::string& xp) { s.devices.push_back(device(x, xp)); });
      else if (k == "containerEdits") s.edits = edits(v, k);
    }
    return s;
  }

 private:
  Format format_;
};

// ---------------------------------------------------------------------------
// Validation helpers.

Result<void> validate_env(const std::vector<std::string>& env, std::string_view what) {
  for (const auto& e : env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(EINVAL, "{}: invalid environment variable \"{}\" (expected KEY=VALUE)", what, e);
  }
  return {};
}

// podshim is stricter than upstream: a container path must be absolute and
// must not climb with "..", so an edit cannot aim outside what it names.
Result<void> validate_container_path(std::string_view p, std::string_view what) {
  if (p.empty() || p.front() != '/')
    return fail(EINVAL, "{} \"{}\": container path must be absolute", what, p);
  for (auto c : str::split(p, '/'))
    if (c == "..") return fail(EINVAL, "{} \"{}\": container path must not contain \"..\"", what, p);
  if (p.find('\0') != std::string_view::npos)
    return fail(EINVAL, "{}: container path contains NUL", what);
  return {};
}

bool is_hook_stage(std::string_view s) {
  return s == "prestart" || s == "createRuntime" || s == "createContainer" ||
         s == "startContainer" || s == "poststart" || s == "poststop";
}

}  // namespace

// ---------------------------------------------------------------------------

bool ContainerEdits::empty() const {
  return env.empty() && device_nodes.empty() && net_devices.empty() && hooks.empty() &&
         mounts.empty() && !intel_rdt && additional_gids.empty();
}

void ContainerEdits::append(const ContainerEdits& o) {
  env.insert(env.end(), o.env.begin(), o.env.end());
  device_nodes.insert(device_nodes.end(), o.device_nodes.begin(), o.device_nodes.end());
  net_devices.append(o.net_devices);
  hooks.insert(hooks.end(), o.hooks.begin(), o.hooks.end());
  mounts.insert(mounts.end(), o.mounts.begin(), o.mounts.end());
  if (o.intel_rdt) intel_rdt = o.intel_rdt;
  additional_gids.append(o.additional_gids);
}

std::optional<Format> format_for_path(std::string_view path) {
  if (str::ends_with(path, ".json")) return Format::Json;
  if (str::ends_with(path, ".yaml")) return Format::Yaml;
  return std::nullopt;
}

Result<Spec> parse_spec(std::string_view data, Format format) {
  try {
    json j = format == Format::Json ? parse_strict_json(data) : yaml_to_json(data);
    return Decoder(format).spec(j);
  } catch (const ParseError& e) {
    return fail(EINVAL, "invalid CDI spec: {}", e.what());
  } catch (const json::exception& e) {
    return fail(EINVAL, "invalid CDI spec: malformed JSON: {}", e.what());
  } catch (const std::exception& e) {
    return fail(EINVAL, "invalid CDI spec: {}", e.what());
  }
}

std::string Version::str() const { return fmt::format("{}.{}.{}", major, minor, patch); }

Result<Version> parse_version(std::string_view v) {
  static constexpr Version kKnown[] = {{0, 1, 0}, {0, 2, 0}, {0, 3, 0}, {0, 4, 0}, {0, 5, 0}, {0, 6, 0},
                                       {0, 7, 0}, {0, 8, 0}, {1, 0, 0}, {1, 1, 0}};
  std::string_view s = v;
  if (str::starts_with(s, "v")) s.remove_prefix(1);
  for (const Version& k : kKnown)
    if (s == k.str()) return k;
  return fail(EINVAL, "invalid cdiVersion \"{}\" (known: 0.3.0 to {})", v, kCurrentVersion.str());
}

Version minimum_required_version(const Spec& spec) {
  std::vector<const ContainerEdits*> all{&spec.edits};
  for (const auto& d : spec.devices) all.push_back(&d.edits);
  auto any = [&](auto pred) {
    return std::any_of(all.begin(), all.end(), [&](const ContainerEdits* e) { return pred(*e); });
  };
  // 1.1.0: netDevices, intelRdt.schemata, intelRdt.enableMonitoring.
  if (any([](const ContainerEdits& e) {
        return !e.net_devices.empty() ||
               (e.intel_rdt && (e.intel_rdt->schemata || e.intel_rdt->enable_monitoring));
      }))
    return {1, 1, 0};
  // 0.7.0: intelRdt, additionalGids.
  if (any([](const ContainerEdits& e) { return e.intel_rdt || !e.additional_gids.empty(); }))
    return {0, 7, 0};
  // 0.6.0: annotations anywhere, or a '.' in the class.
  auto any_annotations = [](const Annotations& a) { return a && !a->empty(); };
  bool annotations = any_annotations(spec.annotations);
  for (const auto& d : spec.devices) annotations = annotations || any_annotations(d.annotations);
  size_t slash = spec.kind.find('/');
  if (annotations || (slash != std::string::npos && slash > 0 &&
                      spec.kind.find('.', slash + 1) != std::string::npos))
    return {0, 6, 0};
  // 0.5.0: a device name not starting with a letter, or deviceNodes[].hostPath.
  for (const auto& d : spec.devices) {
    char c = d.name.empty() ? 'a' : d.name.front();
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return {0, 5, 0};
  }
  if (any([](const ContainerEdits& e) {
        return std::any_of(e.device_nodes.begin(), e.device_nodes.end(),
                           [](const DeviceNode& n) { return !n.host_path.empty(); });
      }))
    return {0, 5, 0};
  // 0.4.0: mounts[].type.
  if (any([](const ContainerEdits& e) {
        return std::any_of(e.mounts.begin(), e.mounts.end(),
                           [](const Mount& m) { return !m.type.empty(); });
      }))
    return {0, 4, 0};
  return kEarliestVersion;
}

Result<void> validate_edits(const ContainerEdits& e) {
  PODSHIM_TRY(validate_env(e.env, "invalid container edits"));
  for (const auto& d : e.device_nodes) {
    if (d.path.empty()) return fail(EINVAL, "invalid device node: empty path");
    if (d.type != "" && d.type != "b" && d.type != "c" && d.type != "u" && d.type != "p")
      return fail(EINVAL, "device node \"{}\": invalid type \"{}\" (expected b, c, u or p)", d.path, d.type);
    // -1 is the OCI wildcard; a negative number in a spec is a mistake.
    if (d.major < 0 || d.minor < 0)
      return fail(EINVAL, "device node \"{}\": invalid (negative) device number {}:{}", d.path,
                  d.major, d.minor);
    if (!d.permissions.empty() && d.permissions != "none" &&
        d.permissions.find_first_not_of("rwm") != std::string::npos)
      return fail(EINVAL, "device node \"{}\": invalid permissions \"{}\" (expected a subset of rwm, or none)",
                  d.path, d.permissions);
    PODSHIM_TRY(validate_container_path(d.path, "device node"));
  }
  for (const auto& h : e.hooks) {
    if (!is_hook_stage(h.hook_name)) return fail(EINVAL, "invalid hook name \"{}\"", h.hook_name);
    if (h.path.empty()) return fail(EINVAL, "invalid hook \"{}\" with empty path", h.hook_name);
    PODSHIM_TRY(validate_env(h.env, fmt::format("invalid hook \"{}\"", h.hook_name)));
  }
  for (const auto& m : e.mounts) {
    if (m.host_path.empty()) return fail(EINVAL, "invalid mount: empty host path");
    if (m.container_path.empty()) return fail(EINVAL, "invalid mount: empty container path");
    PODSHIM_TRY(validate_container_path(m.container_path, "mount"));
  }
  if (e.intel_rdt) {
    // closID names a resctrl directory; "/" is the root CLOS.
    const std::string& c = e.intel_rdt->clos_id;
    if (c != "/" && (c.size() >= 4096 || c == "." || c == ".." ||
                     c.find_first_of("/\n") != std::string::npos))
      return fail(EINVAL, "invalid intelRdt closID \"{}\"", c);
  }
  std::map<std::string, std::string> host_seen, name_seen;
  for (const auto& n : e.net_devices) {
    if (n.host_interface_name.empty()) return fail(EINVAL, "invalid net device: empty hostInterfaceName");
    if (n.name.empty()) return fail(EINVAL, "invalid net device: empty name");
    if (auto [it, ok] = host_seen.emplace(n.host_interface_name, n.name); !ok)
      return fail(EINVAL, "invalid net device: duplicate hostInterfaceName \"{}\" (names \"{}\", \"{}\")",
                  n.host_interface_name, n.name, it->second);
    if (auto [it, ok] = name_seen.emplace(n.name, n.host_interface_name); !ok)
      return fail(EINVAL, "invalid net device: duplicate name \"{}\" (host interfaces \"{}\", \"{}\")",
                  n.name, n.host_interface_name, it->second);
  }
  return {};
}

namespace {

// HEAD's pkg/cdi annotation check is a no-op (ValidateSpecAnnotations
// type-asserts map[string]any on a map[string]string); the JSON schema asks
// for Kubernetes-style annotations. We keep the part that matters for
// safety: keys are non-empty and the total stays small (256 KiB, the
// Kubernetes limit).
Result<void> validate_annotations(const Annotations& a, std::string_view what) {
  if (!a) return {};
  size_t total = 0;
  for (const auto& [k, v] : *a) {
    if (k.empty()) return fail(EINVAL, "{}: empty annotation key", what);
    total += k.size() + v.size();
  }
  if (total > 256 * 1024) return fail(EINVAL, "{}: annotations larger than 256 KiB", what);
  return {};
}

}  // namespace

Result<void> validate_spec(const Spec& spec) {
  auto version = parse_version(spec.version);
  if (!version) return Unexpected(version.error());
  if (*version < kEarliestVersion)
    return fail(EINVAL, "the spec version must be at least v{} (got \"{}\")", kEarliestVersion.str(),
                spec.version);
  Version min = minimum_required_version(spec);
  if (min > *version)
    return fail(EINVAL, "the spec version must be at least v{} for the fields it uses (got \"{}\")",
                min.str(), spec.version);
  PODSHIM_TRY(parse_kind(spec.kind));
  PODSHIM_TRY(validate_annotations(spec.annotations, "spec"));
  if (auto r = validate_edits(spec.edits); !r) return wrap(r, "spec containerEdits");
  std::set<std::string> names;
  for (const auto& d : spec.devices) {
    auto ctx = fmt::format("device \"{}\"", d.name);
    if (auto r = validate_device_name(d.name); !r) return Unexpected(r.error());
    if (auto r = validate_annotations(d.annotations, ctx); !r) return Unexpected(r.error());
    if (d.edits.empty()) return fail(EINVAL, "{}: empty device edits", ctx);
    if (auto r = validate_edits(d.edits); !r) return wrap(r, ctx);
    if (!names.insert(d.name).second) return fail(EINVAL, "invalid spec: multiple devices named \"{}\"", d.name);
  }
  if (spec.devices.empty()) return fail(EINVAL, "invalid spec: no devices");
  return {};
}

Result<Spec> load_spec(std::string_view data, Format format) {
  auto s = parse_spec(data, format);
  if (!s) return s;
  if (auto r = validate_spec(*s); !r) return Unexpected(r.error());
  return s;
}

}  // namespace podshim::cdi
