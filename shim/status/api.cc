#include "shim/status/api.h"

#include <fcntl.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

#include "base/fs.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "cgroup/controllers.h"
#include "cgroup/path.h"
#include "base/str.h"
#include "shim/core/json.h"
#include "shim/core/json_writer.h"
#include "shim/core/quantity.h"

namespace podshim::status {

using nlohmann::json;

namespace {

Result<json> parse_body(std::string_view body) { return parse_json_object(body); }

Result<void> only_keys(const json& j, std::string_view where, std::initializer_list<std::string_view> known) {
  if (!j.is_object()) return fail(EINVAL, "'{}' must be an object", where);
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (auto w : known) ok = ok || w == k;
    if (!ok) return fail(EINVAL, "unknown field '{}{}{}'", where, where.empty() ? "" : ".", k);
  }
  return {};
}

Result<std::string> get_string(const json& j, const char* key, std::string_view where, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return fail(EINVAL, "missing field '{}{}{}'", where, where.empty() ? "" : ".", key);
    return std::string();
  }
  if (!it->is_string()) return fail(EINVAL, "field '{}{}{}' must be a string", where, where.empty() ? "" : ".", key);
  return it->get<std::string>();
}

// The text of a quantity at `where`.`key` (`key` empty: at `where`): a
// string as given, or a JSON number as written (plain cores, bytes or
// counts; `integral`: an integer only).
Result<std::string> quantity_text(const json& v, std::string_view where, std::string_view key, bool integral) {
  if (v.is_string()) return v.get<std::string>();
  if (integral ? v.is_number_integer() : v.is_number()) return v.dump();
  return fail(EINVAL, "field '{}{}{}' must be a quantity string", where, key.empty() ? "" : ".", key);
}

// One quantity; JSON numbers are accepted as plain values (cores / bytes).
Result<std::optional<int64_t>> quantity(const json& j, const char* key, bool cpu, std::string_view where,
                                        bool* removed) {
  auto it = j.find(key);
  if (it == j.end()) return std::optional<int64_t>{};
  if (it->is_null()) {
    *removed = true;
    return std::optional<int64_t>{};
  }
  auto q = quantity_text(*it, where, key, false);
  if (!q) return Unexpected(q.error());
  auto v = cpu ? core::parse_cpu_milli(*q) : core::parse_memory_bytes(*q);
  if (!v) return Unexpected(v.error().wrap(fmt::format("field '{}.{}'", where, key)));
  return std::optional<int64_t>(*v);
}

// A registered resource's quantity (cgroup::register_resource): its row's
// parser, or a plain non-negative integer.
Result<int64_t> extra_quantity(const cgroup::Controller& row, const json& v, std::string_view where) {
  if (v.is_null()) return fail(EINVAL, "'{}': {} cannot be removed", where, row.name);
  auto q = quantity_text(v, where, {}, true);
  if (!q) return Unexpected(q.error());
  if (row.quantity) {
    auto n = row.quantity(*q);
    if (!n) return Unexpected(n.error().wrap(fmt::format("field '{}'", where)));
    return *n;
  }
  auto n = str::parse_u64(*q);
  if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return fail(EINVAL, "field '{}': '{}' is not a count", where, *q);
  return static_cast<int64_t>(*n);
}

// `where`.requests and .limits: cpu and memory, and with `extra` the
// registered resources (a limit row under limits, a request row under
// requests).
Result<void> parse_resources(const json& j, std::string_view where, core::K8sResources* r, core::Removals* rm,
                             bool extra = true) {
  PODSHIM_TRY(only_keys(j, where, {"requests", "limits"}));
  for (const char* part : {"requests", "limits"}) {
    auto it = j.find(part);
    if (it == j.end() || it->is_null()) continue;
    std::string w = fmt::format("{}.{}", where, part);
    bool req = std::string_view(part) == "requests";
    if (!it->is_object()) return fail(EINVAL, "'{}' must be an object", w);
    for (const auto& item : it->items()) {
      const std::string& k = item.key();
      if (k == "cpu" || k == "memory") continue;
      const cgroup::Controller* row = extra ? cgroup::resource_named(k) : nullptr;
      if (!row || row->limit == req) return fail(EINVAL, "unknown field '{}.{}'", w, k);
      auto v = extra_quantity(*row, item.value(), fmt::format("{}.{}", w, k));
      if (!v) return Unexpected(v.error());
      r->extra.insert_or_assign(k, *v);
    }
    bool rm_cpu = false, rm_mem = false;
    auto cpu = quantity(*it, "cpu", true, w, &rm_cpu);
    if (!cpu) return Unexpected(cpu.error());
    auto mem = quantity(*it, "memory", false, w, &rm_mem);
    if (!mem) return Unexpected(mem.error());
    (req ? r->cpu_request_milli : r->cpu_limit_milli) = *cpu;
    (req ? r->memory_request_bytes : r->memory_limit_bytes) = *mem;
    if (rm) {
      (req ? rm->cpu_request : rm->cpu_limit) |= rm_cpu;
      (req ? rm->memory_request : rm->memory_limit) |= rm_mem;
    } else if (rm_cpu || rm_mem) {
      return fail(EINVAL, "'{}': null is not allowed here", w);
    }
  }
  return {};
}

Result<void> parse_policy(const json& j, core::ContainerResize* out) {
  if (!j.is_array()) return fail(EINVAL, "'resizePolicy' must be a list");
  for (size_t i = 0; i < j.size(); ++i) {
    std::string w = fmt::format("resizePolicy[{}]", i);
    PODSHIM_TRY(only_keys(j[i], w, {"resourceName", "restartPolicy"}));
    auto name = get_string(j[i], "resourceName", w, true);
    if (!name) return Unexpected(name.error());
    auto pol = get_string(j[i], "restartPolicy", w, true);
    if (!pol) return Unexpected(pol.error());
    auto p = core::parse_resize_policy(*pol);
    if (!p) return Unexpected(p.error().wrap(w));
    if (*name == "cpu") out->cpu_policy = *p;
    else if (*name == "memory") out->memory_policy = *p;
    else return fail(EINVAL, "'{}.resourceName': only cpu and memory resources are mutable, not '{}'", w, *name);
  }
  return {};
}

Result<core::ContainerResize> container_resize_from(const json& j, std::string_view where, bool with_id) {
  if (with_id) PODSHIM_TRY(only_keys(j, where, {"id", "resources", "resizePolicy"}));
  else PODSHIM_TRY(only_keys(j, where, {"resources", "resizePolicy"}));
  core::ContainerResize r;
  if (with_id) {
    auto id = get_string(j, "id", where, true);
    if (!id) return Unexpected(id.error());
    r.container_id = *id;
  }
  if (auto it = j.find("resources"); it != j.end()) {
    PODSHIM_TRY(parse_resources(*it, where.empty() ? "resources" : fmt::format("{}.resources", where), &r.resources,
                                &r.remove));
  }
  if (auto it = j.find("resizePolicy"); it != j.end()) PODSHIM_TRY(parse_policy(*it, &r));
  return r;
}

Reply json_reply(int status, const json& j) { return Reply{status, "application/json", core::dump(j) + "\n"}; }

int status_for(const Error& e) {
  switch (e.code) {
    case ENOENT: return 404;
    case EINVAL: case ERANGE: return 400;
    default: return 500;
  }
}

bool is_segment_ok(std::string_view s) { return core::validate_id("id", s).has_value(); }

// A pod's object with its containers ("containers", full objects) or their
// ids ("containerIds") added, written straight into `out` under the store's
// lock, through the per-pod index.
void append_pod_view(std::string& out, const core::Store& s, const core::Pod& p, bool full) {
  core::append_json(out, p, [&](std::string& o) {
    o += full ? ",\"containers\":[" : ",\"containerIds\":[";
    bool first = true;
    s.for_each_container_of(p.uid, [&](const core::Container& c) {
      if (!first) o += ',';
      first = false;
      if (full) core::append_json(o, c);
      else core::append_json_string(o, c.id);
    });
    o += ']';
  });
}

Reply raw_reply(int status, std::string body) { return Reply{status, "application/json", std::move(body)}; }

}  // namespace

// nlohmann's lexer takes a NUL byte for the end of its input
// (lexer::scan, case '\0'), so `{"memory":"256Mi"}\0garbage` would read as
// the object alone: a body must be exactly one JSON value, and a raw NUL is
// never part of one (JSON strings escape control characters).
static Result<void> one_json_text(std::string_view body) {
  if (auto nul = body.find('\0'); nul != std::string_view::npos) {
    return fail(EINVAL, "request body contains a NUL byte at offset {}; a body is one JSON value and nothing else",
                nul);
  }
  return {};
}

Result<json> parse_json_object(std::string_view body) {
  PODSHIM_TRY(one_json_text(body));
  if (str::trim(body).empty()) return fail(EINVAL, "request body is empty");
  // One set of keys per open object; the callback sees keys in order.
  std::vector<std::set<std::string>> open;
  std::string dup;
  auto cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start: open.emplace_back(); break;
      case json::parse_event_t::object_end: if (!open.empty()) open.pop_back(); break;
      case json::parse_event_t::key:
        if (!open.empty() && parsed.is_string() && !open.back().insert(parsed.get<std::string>()).second &&
            dup.empty()) {
          dup = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;
  };
  json j = json::parse(body, cb, false);
  if (j.is_discarded()) return fail(EINVAL, "request body is not valid JSON");
  if (!dup.empty()) return fail(EINVAL, "request body repeats the key '{}'", dup);
  if (!j.is_object()) return fail(EINVAL, "request body must be a JSON object");
  return j;
}

std::string allowed_methods(std::string_view path) {
  if (path == "/healthz" || path == "/readyz") return "GET, HEAD";
  if (path == "/metrics" || path == "/v1/watch") return "GET";
  if (str::starts_with(path, "/v1/")) {
    auto parts = str::split(path.substr(4), '/');
    bool pods = !parts.empty() && parts[0] == "pods";
    bool ctrs = !parts.empty() && parts[0] == "containers";
    if (pods || ctrs) {
      if (parts.size() == 1) return ctrs ? "GET, HEAD, POST" : "GET, HEAD";
      if (parts.size() == 2) return ctrs ? "GET, HEAD, DELETE" : "GET, HEAD";
      if (parts.size() == 3 && parts[2] == "resize") return "POST";
    }
  }
  return "GET, HEAD, POST, DELETE";
}

Reply error_reply(int status, std::string_view message) {
  return Reply{status, "application/json", core::dump(json{{"error", message}}) + "\n"};
}

namespace {

// The container resize body read in one pass over nlohmann's SAX events,
// straight into a ContainerResize: no tree of nodes, no set of keys per
// object. It takes only bodies that are well-formed and valid in every
// respect, and gives up (returns false) at the first thing that is not:
// a key it does not know or sees twice, a value of another type, a number
// (its text is nlohmann's dump, which only the tree keeps), a quantity or
// policy that does not parse, broken JSON. parse_container_resize then
// answers from the tree, so every error message, and which error a body
// with several gets, stays the tree's (the test compares both on a table
// of bodies; the fuzz target on whatever it finds). Building the tree was
// about a sixth of a status-API resize's instructions.
class FastContainerResize final : public nlohmann::json_sax<json> {
 public:
  FastContainerResize() { frames_.reserve(4); }  // push() never grows it: no frame moves
  core::ContainerResize r;
  bool ok = true;

  bool null() override {
    if (frames_.empty() || frames_.back().kind != Kind::Part) return give_up();
    // A null quantity removes it; the value stays unset (as the tree's reading).
    Frame& f = frames_.back();
    if (f.key == kCpu) (f.requests ? r.remove.cpu_request : r.remove.cpu_limit) = true;
    else (f.requests ? r.remove.memory_request : r.remove.memory_limit) = true;
    return true;
  }
  bool boolean(bool) override { return give_up(); }
  bool number_integer(number_integer_t) override { return give_up(); }
  bool number_unsigned(number_unsigned_t) override { return give_up(); }
  bool number_float(number_float_t, const string_t&) override { return give_up(); }
  bool binary(binary_t&) override { return give_up(); }
  bool string(string_t& v) override {
    if (frames_.empty()) return give_up();
    Frame& f = frames_.back();
    if (f.kind == Kind::Part) {
      const bool cpu = f.key == kCpu;
      auto q = cpu ? core::parse_cpu_milli(v) : core::parse_memory_bytes(v);
      if (!q) return give_up();
      auto& slot = cpu ? (f.requests ? r.resources.cpu_request_milli : r.resources.cpu_limit_milli)
                       : (f.requests ? r.resources.memory_request_bytes : r.resources.memory_limit_bytes);
      slot = *q;
      return true;
    }
    if (f.kind == Kind::PolicyItem) {
      (f.key == kName ? name_ : policy_) = std::move(v);
      return true;
    }
    return give_up();
  }
  bool start_object(std::size_t) override {
    if (frames_.empty()) return push(Kind::Top);
    const Frame& f = frames_.back();
    if (f.kind == Kind::Top && f.key == kResources) return push(Kind::Resources);
    if (f.kind == Kind::Resources) {
      const bool requests = f.key == kRequests;  // read before the push moves the frames
      if (!push(Kind::Part)) return false;
      frames_.back().requests = requests;
      return true;
    }
    if (f.kind == Kind::Policies) {
      name_.clear();
      policy_.clear();
      return push(Kind::PolicyItem);
    }
    return give_up();
  }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    int bit = -1;
    switch (f.kind) {
      case Kind::Top: bit = k == "resources" ? kResources : k == "resizePolicy" ? kPolicy : -1; break;
      case Kind::Resources: bit = k == "requests" ? kRequests : k == "limits" ? kLimits : -1; break;
      case Kind::Part: bit = k == "cpu" ? kCpu : k == "memory" ? kMemory : -1; break;
      case Kind::PolicyItem: bit = k == "resourceName" ? kName : k == "restartPolicy" ? kRestart : -1; break;
      case Kind::Policies: break;
    }
    if (bit < 0 || (f.seen & (1u << bit))) return give_up();
    f.seen |= 1u << bit;
    f.key = bit;
    return true;
  }
  bool end_object() override {
    const Frame f = frames_.back();
    frames_.pop_back();
    if (f.kind != Kind::PolicyItem) return true;
    if (!(f.seen & (1u << kName)) || !(f.seen & (1u << kRestart))) return give_up();
    auto p = core::parse_resize_policy(policy_);
    if (!p) return give_up();
    if (name_ == "cpu") r.cpu_policy = *p;
    else if (name_ == "memory") r.memory_policy = *p;
    else return give_up();
    return true;
  }
  bool start_array(std::size_t) override {
    if (frames_.empty() || frames_.back().kind != Kind::Top || frames_.back().key != kPolicy) return give_up();
    return push(Kind::Policies);
  }
  bool end_array() override {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return give_up();
  }

 private:
  enum class Kind { Top, Resources, Part, Policies, PolicyItem };
  // Key ids, one bit each in Frame::seen (one set per kind of object).
  static constexpr int kResources = 0, kPolicy = 1, kRequests = 0, kLimits = 1, kCpu = 0, kMemory = 1, kName = 0,
                       kRestart = 1;
  struct Frame {
    Kind kind;
    unsigned seen = 0;
    int key = -1;
    bool requests = false;  // Part: under "requests", else "limits"
  };
  // Only the object pushing may hold a reference into frames_ across this.
  bool push(Kind k) {
    if (frames_.size() == 4) return give_up();  // deeper than any body it takes (top, resources, part)
    frames_.push_back(Frame{k});
    return true;
  }
  bool give_up() {
    ok = false;
    return false;
  }
  std::vector<Frame> frames_;
  std::string name_, policy_;
};

}  // namespace

Result<core::ContainerResize> parse_container_resize_tree(std::string_view body) {
  auto j = parse_body(body);
  if (!j) return Unexpected(j.error());
  return container_resize_from(*j, "", false);
}

Result<core::ContainerResize> parse_container_resize(std::string_view body) {
  PODSHIM_TRY(one_json_text(body));
  FastContainerResize fast;
  if (json::sax_parse(body, &fast) && fast.ok) return std::move(fast.r);
  return parse_container_resize_tree(body);
}

Result<core::PodResize> parse_pod_resize(std::string_view body) {
  auto j = parse_body(body);
  if (!j) return Unexpected(j.error());
  PODSHIM_TRY(only_keys(*j, "", {"resources", "containers"}));
  core::PodResize r;
  if (auto it = j->find("resources"); it != j->end() && !it->is_null()) {
    core::K8sResources res;
    // Registered resources are per container: the pod's cgroup has no sum of them.
    PODSHIM_TRY(parse_resources(*it, "resources", &res, nullptr, /*extra=*/false));
    r.pod_resources = res;
  }
  if (auto it = j->find("containers"); it != j->end()) {
    if (!it->is_array()) return fail(EINVAL, "'containers' must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      auto c = container_resize_from((*it)[i], fmt::format("containers[{}]", i), true);
      if (!c) return Unexpected(c.error());
      r.containers.push_back(std::move(*c));
    }
  }
  if (!r.pod_resources && r.containers.empty()) return fail(EINVAL, "nothing to resize");
  return r;
}

Reply Api::handle(std::string_view method_in, std::string_view path, std::string_view body) {
  // HEAD is GET without the body (the server drops it).
  std::string_view method = method_in == "HEAD" ? std::string_view("GET") : method_in;
  if (path == "/healthz") return method == "GET" ? Reply{200, "text/plain", "ok\n"} : error_reply(405, "use GET");
  if (path == "/readyz") {
    if (method != "GET") return error_reply(405, "use GET");
    bool ready = !deps_.ready || deps_.ready();
    return ready ? Reply{200, "text/plain", "ok\n"} : Reply{503, "text/plain", "not ready\n"};
  }
  if (path == "/metrics") return method_in == "GET" ? metrics() : error_reply(405, "use GET");
  if (path == "/v1/watch") return error_reply(405, "use GET");
  if (!str::starts_with(path, "/v1/")) return error_reply(404, fmt::format("no such endpoint {}", path));
  auto parts = str::split(path.substr(4), '/');
  if (parts.empty()) return error_reply(404, "no such endpoint");
  const auto kind = parts[0];
  if (kind != "pods" && kind != "containers") return error_reply(404, fmt::format("no such endpoint {}", path));
  if (parts.size() >= 2 && !is_segment_ok(parts[1])) {
    return error_reply(400, fmt::format("invalid {} '{}'", kind == "pods" ? "pod uid" : "container id", parts[1]));
  }
  if (parts.size() == 1) {
    if (method == "GET") return kind == "pods" ? get_pods({}) : get_containers({});
    if (method == "POST" && kind == "containers") return register_container(body);
    return error_reply(405, fmt::format("{} is not supported on {}", method_in, path));
  }
  if (parts.size() == 2) {
    if (method == "GET") return kind == "pods" ? get_pods(parts[1]) : get_containers(parts[1]);
    if (method == "DELETE" && kind == "containers") return deregister_container(parts[1]);
    return error_reply(405, fmt::format("{} is not supported on {}", method_in, path));
  }
  if (parts.size() == 3 && parts[2] == "resize") {
    if (method != "POST") return error_reply(405, "use POST");
    return kind == "pods" ? resize_pod(parts[1], body) : resize_container(parts[1], body);
  }
  return error_reply(404, fmt::format("no such endpoint {}", path));
}

// The GET views write JSON straight into the reply from the store's objects,
// under its lock (Store::with_*/for_each_*): no copy of a container and no
// nlohmann tree per request, and the pod list walks the per-pod index rather
// than every container once per pod.
Reply Api::get_pods(std::string_view uid) {
  auto* s = deps_.store;
  std::string out;
  if (!uid.empty()) {
    bool found = s->with_pod(uid, [&](const core::Pod& p) { append_pod_view(out, *s, p, true); });
    if (!found) {
      // Hook-registered containers may name a pod podshim has no record of.
      core::Pod stub;
      stub.uid = std::string(uid);
      bool any = false;
      s->for_each_container_of(uid, [&](const core::Container& c) {
        if (!any) stub.source = c.source;
        any = true;
      });
      if (!any) return error_reply(404, fmt::format("no pod '{}'", uid));
      append_pod_view(out, *s, stub, true);
    }
    out += '\n';
    return raw_reply(200, std::move(out));
  }
  out = "{\"items\":[";
  bool first = true;
  s->for_each_pod([&](const core::Pod& p) {
    if (!first) out += ',';
    first = false;
    append_pod_view(out, *s, p, false);
  });
  out += "]}\n";
  return raw_reply(200, std::move(out));
}

Reply Api::get_containers(std::string_view id) {
  auto* s = deps_.store;
  std::string out;
  if (!id.empty()) {
    out.reserve(1024);
    if (!s->append_container_json(id, out)) {
      return error_reply(404, fmt::format("no container '{}'", id));
    }
    out += '\n';
    return raw_reply(200, std::move(out));
  }
  // Repeated lists of an unchanged store (a poller, podshimctl get) send the
  // last one again instead of writing every container's JSON: ~0.5 ms of
  // podshimd's CPU for 1000 containers. It is shared, not copied, with
  // every connection still sending it.
  const uint64_t seq = s->last_seq();
  if (list_valid_ && list_seq_ == seq) return Reply{200, "application/json", list_body_};
  out.reserve(s->container_count() * 600 + 16);
  out = "{\"items\":[";
  bool first = true;
  s->for_each_container([&](const core::Container& c) {
    if (!first) out += ',';
    first = false;
    core::append_json(out, c);
  });
  out += "]}\n";
  // Kept only when nothing changed while it was written (another thread may).
  list_valid_ = s->last_seq() == seq;
  auto body = std::make_shared<const std::string>(std::move(out));
  if (list_valid_) {
    list_seq_ = seq;
    list_body_ = body;
  }
  return Reply{200, "application/json", std::move(body)};
}

Reply Api::register_container(std::string_view body) {
  auto j = parse_body(body);
  if (!j) return error_reply(400, j.error().message);
  auto keys = only_keys(*j, "", {"id", "podUid", "name", "cgroupPath", "podCgroupPath", "podName",
                                 "podNamespace", "annotations", "pid", "state", "resources", "source"});
  if (!keys) return error_reply(400, keys.error().message);
  auto str_field = [&](const char* k, bool req) { return get_string(*j, k, "", req); };
  auto id = str_field("id", true);
  if (!id) return error_reply(400, id.error().message);
  if (auto v = core::validate_id("container id", *id); !v) return error_reply(400, v.error().message);
  core::Container c;
  if (auto old = deps_.store->container(*id)) c = *old;  // re-registration keeps resize state
  bool existed = !c.id.empty();
  c.id = *id;
  for (auto [key, dst] : {std::pair{"podUid", &c.pod_uid}, {"name", &c.name}, {"cgroupPath", &c.cgroup_path},
                          {"state", &c.state}}) {
    auto v = str_field(key, false);
    if (!v) return error_reply(400, v.error().message);
    if (v->empty()) continue;
    if (std::string_view(key) == "cgroupPath") {
      // Checked now, not at the first resize: a path that could never be
      // resized is refused while the hook can still report it.
      if (auto ok = check_cgroup_path(key, *v); !ok) return error_reply(400, ok.error().message);
    }
    *dst = *v;
  }
  if (!c.pod_uid.empty()) {
    if (auto v = core::validate_id("pod uid", c.pod_uid); !v) return error_reply(400, v.error().message);
  }
  if (auto it = j->find("pid"); it != j->end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      return error_reply(400, "field 'pid' must be a non-negative integer");
    }
    c.pid = static_cast<pid_t>(it->get<int64_t>());
  }
  if (auto it = j->find("annotations"); it != j->end()) {
    if (auto r = take_annotations(*it, &c); !r) return error_reply(400, r.error().message);
  }
  auto src = str_field("source", false);
  if (!src) return error_reply(400, src.error().message);
  auto source = core::parse_source(src->empty() ? "hook" : *src);
  if (!source) return error_reply(400, source.error().message);
  if (!existed) c.source = *source;
  if (auto it = j->find("resources"); it != j->end()) {
    // Checked on every registration, so that a body's answer does not depend
    // on whether the container was known; only a first registration sets
    // them: afterwards podshim's own allocation is the truth, not a replayed
    // hook payload.
    core::K8sResources r;
    auto pr = parse_resources(*it, "resources", &r, nullptr);
    if (!pr) return error_reply(400, pr.error().message);
    if (auto k = cgroup::check_kernel_limits(r, {}, "resources"); !k) return error_reply(400, k.error().message);
    if (!existed) c.desired = c.allocated = r;
  }
  if (!c.pod_uid.empty() && !deps_.store->pod(c.pod_uid)) {
    auto p = pod_of_registration(*j, c);
    if (!p) return error_reply(400, p.error().message);
    if (auto r = deps_.store->upsert_pod(*p); !r) return error_reply(500, r.error().message);
  }
  if (auto r = deps_.store->upsert_container(c); !r) return error_reply(500, r.error().message);
  derive_hook_pod_qos(c.pod_uid);
  return raw_reply(existed ? 200 : 201, core::json_string(c) + "\n");
}

// A registration's annotations, as Kubernetes would accept them.
Result<void> Api::take_annotations(const nlohmann::json& a, core::Container* c) {
  if (!a.is_object()) return fail(EINVAL, "field 'annotations' must be an object of strings");
  std::vector<std::pair<std::string_view, std::string_view>> kv;
  size_t total = 0;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!it->is_string()) return fail(EINVAL, "annotation '{}' must be a string", it.key());
    kv.emplace_back(it.key(), it->get_ref<const std::string&>());
    total += kv.back().first.size() + kv.back().second.size();
  }
  // Kubernetes refuses an object whose annotations (keys and values) pass
  // 256 KiB (apimachinery pkg/api/validation/objectmeta.go,
  // TotalAnnotationSizeLimitB), so a real pod never brings more; without
  // the bound each registration could hold a whole request body, kept
  // twice (model and JSON), for as long as the container lives.
  constexpr size_t kMaxAnnotationBytes = 256 << 10;
  if (total > kMaxAnnotationBytes)
    return fail(EINVAL, "field 'annotations' holds {} bytes; Kubernetes allows at most {}", total, kMaxAnnotationBytes);
  c->annotations.assign(kv.begin(), kv.end());
  return {};
}

// The pod a registration names and podshim has no record of (the hook
// registers containers of pods it was never told about).
Result<core::Pod> Api::pod_of_registration(const nlohmann::json& j, const core::Container& c) {
  core::Pod p;
  p.uid = c.pod_uid;
  p.source = c.source;
  auto name = get_string(j, "podName", "", false);
  auto ns = get_string(j, "podNamespace", "", false);
  auto pcg = get_string(j, "podCgroupPath", "", false);
  if (!name || !ns || !pcg) return fail(EINVAL, "podName, podNamespace and podCgroupPath must be strings");
  p.name = *name;
  p.namespace_ = *ns;
  if (!pcg->empty()) PODSHIM_TRY(check_cgroup_path("podCgroupPath", *pcg));
  p.cgroup_path = *pcg;
  return p;
}

// Hook-registered pods carry no QoS label: it is derived from what their
// containers have allocated, again at each registration.
void Api::derive_hook_pod_qos(const std::string& uid) {
  auto p = deps_.store->pod(uid);
  if (!p || p->source != core::Source::Hook) return;
  std::vector<core::K8sResources> rs;
  for (const auto& s : deps_.store->containers_of(p->uid)) rs.push_back(s.allocated);
  if (core::compute_qos(rs) == p->qos) return;
  p->qos = core::compute_qos(rs);
  // The container is stored, so the answer stands; the pod's class is
  // derived again at its next registration.
  if (auto r = deps_.store->upsert_pod(*p); !r)
    log::warn("pod {}: storing the QoS class {}: {}", p->uid, core::to_string(p->qos), r.error().message);
}

Result<std::string> Api::check_cgroup_path(std::string_view field, std::string_view path) {
  auto shown = [](std::string_view p) {
    std::string o;
    for (unsigned char ch : p.substr(0, 200)) o += ch < 0x20 || ch == 0x7f ? fmt::format("\\x{:02x}", ch) : std::string(1, ch);
    return o;
  };
  if (path.find('\0') != std::string_view::npos) {
    return fail(EINVAL, "field '{}': cgroup path '{}' contains a NUL byte", field, shown(path));
  }
  auto loc = cgroup::resolve_cgroup_path(path, deps_.cgroup_driver);
  if (!loc) return fail(EINVAL, "field '{}': {}", field, loc.error().message);
  if (deps_.cgroup_root.empty()) return loc->relpath;
  // The cgroup must exist now, as a real directory beneath the root, reached
  // without any symlink: openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or,
  // where openat2 is missing (kernels before 5.6, a seccomp filter that
  // refuses it), a component-by-component O_NOFOLLOW walk. There a symlink
  // shows as ENOTDIR rather than ELOOP, hence the wording of that case.
  UniqueFd root(open(deps_.cgroup_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return fail_errno("opening the cgroup root {}", deps_.cgroup_root);
  const int fd = fs::open_beneath_errno(root.get(), loc->relpath, O_PATH | O_DIRECTORY);
  if (fd < 0) {
    const int e = -fd;
    std::string_view why = e == ENOENT   ? "does not exist"
                           : e == ELOOP  ? "is or passes through a symlink"
                           : e == ENOTDIR ? "is not a directory, or is or passes through a symlink"
                           : e == EXDEV  ? "leaves the cgroup root"
                                         : strerror(e);
    return fail(EINVAL, "field '{}': cgroup '{}' ({} under {}) {}", field, shown(path), loc->relpath,
                deps_.cgroup_root, why);
  }
  close(fd);
  return loc->relpath;
}

Reply Api::deregister_container(std::string_view id) {
  auto old = deps_.store->container(id);
  auto r = deps_.store->remove_container(id);
  if (!r) return error_reply(status_for(r.error()), r.error().message);
  // A pod that only the hook knew about goes with its last container.
  if (old && !old->pod_uid.empty() && deps_.store->containers_of(old->pod_uid).empty()) {
    auto p = deps_.store->pod(old->pod_uid);
    // The container is removed, so the answer stands; the pod stays in the
    // store with no container.
    if (p && p->source == core::Source::Hook) {
      if (auto rp = deps_.store->remove_pod(p->uid); !rp)
        log::warn("removing pod {} with its last container: {}", p->uid, rp.error().message);
    }
  }
  if (*r && deps_.resize) deps_.resize->retry_deferred();
  return json_reply(200, json{{"id", id}, {"removed", *r}});
}

// What the engine saw while resizing: the pressure and growth a staged
// shrink watched, reclaimed bytes, memory.events deltas per cgroup.
json report_json(const cgroup::ResizeReport& rep) {
  json events = json::object();
  for (const auto& [id, e] : rep.events)
    events[id] = json{{"oom", e.oom}, {"oomKill", e.oom_kill}, {"high", e.high}, {"max", e.max}};
  return json{{"bytesReclaimed", rep.bytes_reclaimed},
              {"durationMs", rep.duration.count()},
              {"growthBytesPerSecond", rep.growth_bytes_per_sec},
              {"memoryEvents", std::move(events)},
              {"pressure", json{{"someAvg10", rep.psi_some_avg10}, {"fullAvg10", rep.psi_full_avg10}}}};
}

namespace {
// A double as nlohmann writes it: the shortest form that reads back the same,
// with ".0" on an integral value, null when not finite.
void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  const size_t at = out.size();
  fmt::format_to(std::back_inserter(out), "{}", v);
  if (out.find_first_of(".e", at) == std::string::npos) out += ".0";
}
}  // namespace

void append_report_json(std::string& out, const cgroup::ResizeReport& rep) {
  // Keys in nlohmann's (sorted) order, so both forms are byte-identical.
  fmt::format_to(std::back_inserter(out), "{{\"bytesReclaimed\":{},\"durationMs\":{},\"growthBytesPerSecond\":{},",
                 rep.bytes_reclaimed, rep.duration.count(), rep.growth_bytes_per_sec);
  out += "\"memoryEvents\":{";
  bool first = true;
  for (const auto& [id, e] : rep.events) {  // a std::map: sorted, as nlohmann's object
    if (!first) out += ',';
    first = false;
    core::append_json_string(out, id);
    fmt::format_to(std::back_inserter(out), ":{{\"high\":{},\"max\":{},\"oom\":{},\"oomKill\":{}}}", e.high, e.max,
                   e.oom, e.oom_kill);
  }
  out += "},\"pressure\":{\"fullAvg10\":";
  append_double(out, rep.psi_full_avg10);
  out += ",\"someAvg10\":";
  append_double(out, rep.psi_some_avg10);
  out += "}}";
}

Reply Api::resize_container(std::string_view id, std::string_view body) {
  if (!deps_.resize) return error_reply(503, "resizing is not available");
  auto req = parse_container_resize(body);
  if (!req) return error_reply(400, req.error().message);
  req->container_id = std::string(id);
  auto r = deps_.resize->resize_container(*req);
  if (!r) return error_reply(status_for(r.error()), r.error().message);
  // {"container":...,"generations":...,"message":...,"result":...}, keys in
  // the order nlohmann gives them.
  std::string out = "{";
  // The container as stored by this resize: in hooks-only mode the JSON its
  // journal record was given, not serialized a second time.
  out += "\"container\":";
  if (deps_.store->append_container_json(id, out)) out += ',';
  else out.resize(1);
  out += "\"generations\":{";
  bool first = true;
  for (const auto& [cid, g] : r->generations) {
    if (!first) out += ',';
    first = false;
    core::append_json_string(out, cid);
    out += fmt::format(":{}", g);
  }
  out += "},\"message\":";
  core::append_json_string(out, r->message);
  out += ",\"report\":";
  append_report_json(out, r->report);
  out += ",\"result\":";
  core::append_json_string(out, core::to_string(r->outcome));
  out += "}\n";
  return raw_reply(200, std::move(out));
}

Reply Api::resize_pod(std::string_view uid, std::string_view body) {
  if (!deps_.resize) return error_reply(503, "resizing is not available");
  auto req = parse_pod_resize(body);
  if (!req) return error_reply(400, req.error().message);
  req->pod_uid = std::string(uid);
  auto r = deps_.resize->resize_pod(*req);
  if (!r) return error_reply(status_for(r.error()), r.error().message);
  json j{{"result", core::to_string(r->outcome)},
         {"message", r->message},
         {"generations", r->generations},
         {"report", report_json(r->report)}};
  return json_reply(200, j);
}

Reply Api::metrics() {
  if (!deps_.metrics) return error_reply(404, "metrics are disabled");
  deps_.metrics->containers.set({}, static_cast<double>(deps_.store->container_count()));
  deps_.metrics->pods.set({}, static_cast<double>(deps_.store->pod_count()));
  if (deps_.before_metrics) deps_.before_metrics();
  std::string body = deps_.metrics->render();
  if (deps_.extra_metrics) deps_.extra_metrics(body);
  return Reply{200, "text/plain; version=0.0.4; charset=utf-8", std::move(body)};
}

}  // namespace podshim::status
