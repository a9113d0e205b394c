#include "shim/hook/oci.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <climits>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/str.h"
#include "base/unique_fd.h"

namespace podshim::hook {
namespace {

using nlohmann::json;

// runtime-spec runtime.md §State lists these four; runc, crun and podman use
// exactly these strings ("paused" is a runc extension seen by `runc state`).
bool known_status(std::string_view s) {
  return s == "creating" || s == "created" || s == "running" || s == "stopped" || s == "paused";
}

Result<json> parse_json(std::string_view text, std::string_view what) {
  // nlohmann throws on malformed input; the exception stays inside this file.
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(EINVAL, "{} is not valid JSON", what);
  if (!doc.is_object()) return fail(EINVAL, "{} is not a JSON object", what);
  return doc;
}

// Optional string member: absent → "", present but not a string → error.
Result<std::string> opt_string(const json& obj, const char* key, std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return fail(EINVAL, "{}: '{}' is not a string", where, key);
  return it->get<std::string>();
}

Result<int64_t> opt_int(const json& obj, const char* key, std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return int64_t{0};
  if (!it->is_number_integer()) return fail(EINVAL, "{}: '{}' is not an integer", where, key);
  return it->get<int64_t>();
}

// Optional integer member that may be absent or null (unset); `out` keeps
// nullopt then. Refused when it is not an integer or is below `min`.
Result<void> opt_int_into(const json& obj, const char* key, std::string_view where, int64_t min,
                          std::optional<int64_t>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX) ||
      it->get<int64_t>() < min)
    return fail(EINVAL, "{}: '{}' is not an integer of at least {}", where, key, min);
  *out = it->get<int64_t>();
  return {};
}

// linux.resources.cpu {shares, quota, period} and .memory {limit}; the rest
// of linux.resources is the runtime's.
Result<OciResources> parse_resources(const json& r) {
  OciResources out;
  if (!r.is_object()) return fail(EINVAL, "config.json: linux.resources is not an object");
  if (auto c = r.find("cpu"); c != r.end() && !c->is_null()) {
    if (!c->is_object()) return fail(EINVAL, "config.json: linux.resources.cpu is not an object");
    std::optional<int64_t> shares, period;
    PODSHIM_TRY(opt_int_into(*c, "shares", "config.json linux.resources.cpu", 0, &shares));
    PODSHIM_TRY(opt_int_into(*c, "period", "config.json linux.resources.cpu", 0, &period));
    PODSHIM_TRY(opt_int_into(*c, "quota", "config.json linux.resources.cpu", -1, &out.cpu_quota));
    if (shares) out.cpu_shares = static_cast<uint64_t>(*shares);
    if (period) out.cpu_period = static_cast<uint64_t>(*period);
  }
  if (auto m = r.find("memory"); m != r.end() && !m->is_null()) {
    if (!m->is_object()) return fail(EINVAL, "config.json: linux.resources.memory is not an object");
    PODSHIM_TRY(opt_int_into(*m, "limit", "config.json linux.resources.memory", -1, &out.memory_limit));
  }
  return out;
}

Result<std::map<std::string, std::string>> opt_string_map(const json& obj, const char* key,
                                                          std::string_view where) {
  std::map<std::string, std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_object()) return fail(EINVAL, "{}: '{}' is not an object", where, key);
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string())
      return fail(EINVAL, "{}: {}['{}'] is not a string", where, key, k);
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

bool has_dot_component(std::string_view p) {
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    if (c == "." || c == "..") return true;
    i = j + 1;
  }
  return false;
}

Result<void> check_abs_path(std::string_view what, std::string_view p) {
  if (p.empty()) return fail(EINVAL, "{} is empty", what);
  if (p.find('\0') != std::string_view::npos) return fail(EINVAL, "{} contains NUL", what);
  if (p.front() != '/') return fail(EINVAL, "{} '{}' is not an absolute path", what, p);
  if (p.size() > PATH_MAX) return fail(ENAMETOOLONG, "{} is longer than {} bytes", what, PATH_MAX);
  if (has_dot_component(p)) return fail(EINVAL, "{} '{}' contains a '.' or '..' component", what, p);
  return {};
}

}  // namespace

Result<void> check_token(std::string_view what, std::string_view value, size_t max) {
  if (value.empty()) return fail(EINVAL, "{} is empty", what);
  if (value.size() > max) return fail(EINVAL, "{} is longer than {} bytes", what, max);
  for (unsigned char c : value) {
    // Printable ASCII minus space and '/': ids end up in file names, log
    // fields and URL paths (DELETE /v1/containers/{id}).
    if (c <= 0x20 || c >= 0x7f || c == '/')
      return fail(EINVAL, "{} '{}' contains a character that is not allowed (0x{:02x})", what,
                  value.size() <= 80 ? value : value.substr(0, 80), c);
  }
  return {};
}

Result<void> check_id(std::string_view what, std::string_view value) {
  if (value.empty()) return fail(EINVAL, "{} is empty", what);
  std::string_view shown = value.size() <= 80 ? value : value.substr(0, 80);
  if (value.size() > kMaxIdBytes) {
    return fail(EINVAL, "{} '{}...' is longer than {} characters ({})", what, value.substr(0, 32), kMaxIdBytes,
                value.size());
  }
  if (value.front() == '.') return fail(EINVAL, "{} '{}' must not start with '.'", what, shown);
  for (unsigned char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    if (!ok) {
      return fail(EINVAL, "{} '{}' contains a character outside [A-Za-z0-9_.-] (0x{:02x})", what, shown, c);
    }
  }
  return {};
}

namespace {

// A string member the OCI state must have ("OCI state has no 'KEY'"), checked
// by `check` (check_id, check_abs_path) as "OCI state 'KEY'".
Result<std::string> required_state_string(const json& doc, const char* key,
                                          Result<void> (*check)(std::string_view, std::string_view)) {
  if (!doc.contains(key)) return fail(EINVAL, "OCI state has no '{}'", key);
  auto s = opt_string(doc, key, "OCI state");
  if (!s) return s;
  if (auto r = check("OCI state '" + std::string(key) + "'", *s); !r) return Unexpected(r.error());
  return s;
}

// A member as read into *to, or the error reading it.
template <typename T, typename To>
Result<void> read_into(Result<T> r, To* to) {
  if (!r) return Unexpected(r.error());
  *to = std::move(*r);
  return {};
}

// Every element of `array`, parsed by `parse` (told where it is:
// "WHERE[i]") and appended to *out; the first error otherwise.
template <typename T, typename Parse>
Result<void> parse_each(const json& array, std::string_view where, Parse parse, std::vector<T>* out) {
  size_t i = 0;
  for (const json& e : array) {
    auto x = parse(e, fmt::format("{}[{}]", where, i++));
    if (!x) return Unexpected(x.error());
    out->push_back(std::move(*x));
  }
  return {};
}

}  // namespace

Result<OciState> parse_state(std::string_view text) {
  if (text.size() > kMaxStateBytes)
    return fail(EFBIG, "OCI state is larger than {} bytes", kMaxStateBytes);
  if (str::trim(text).empty()) return fail(EINVAL, "OCI state on stdin is empty");
  auto doc = parse_json(text, "OCI state on stdin");
  if (!doc) return Unexpected(doc.error());
  constexpr std::string_view where = "OCI state";
  OciState st;

  PODSHIM_TRY(read_into(opt_string(*doc, "ociVersion", where), &st.oci_version));

  // podshimd's id rule (runc's own allows '+' and any length; CRI-O and
  // podman ids are 64 hex digits).
  PODSHIM_TRY(read_into(required_state_string(*doc, "id", check_id), &st.id));

  auto status = opt_string(*doc, "status", where);
  if (!status) return Unexpected(status.error());
  if (status->empty()) return fail(EINVAL, "OCI state has no 'status'");
  if (!known_status(*status))
    return fail(EINVAL, "OCI state 'status' '{}' is not a runtime-spec status", *status);
  st.status = std::move(*status);

  auto pid = opt_int(*doc, "pid", where);
  if (!pid) return Unexpected(pid.error());
  if (*pid < 0 || *pid > INT32_MAX) return fail(EINVAL, "OCI state 'pid' {} is out of range", *pid);
  st.pid = *pid;

  PODSHIM_TRY(read_into(required_state_string(*doc, "bundle", check_abs_path), &st.bundle));
  PODSHIM_TRY(read_into(opt_string_map(*doc, "annotations", where), &st.annotations));
  return st;
}

namespace {

// One entry of linux.devices; `where` names it in errors.
Result<OciDevice> parse_device(const json& e, const std::string& where) {
  if (!e.is_object()) return fail(EINVAL, "{} is not an object", where);
  OciDevice dev;
  auto p = opt_string(e, "path", where);
  if (!p) return Unexpected(p.error());
  if (auto r = check_abs_path(where + " path", *p); !r) return Unexpected(r.error());
  dev.path = std::move(*p);
  auto t = opt_string(e, "type", where);
  if (!t) return Unexpected(t.error());
  if (*t != "c" && *t != "b" && *t != "u" && *t != "p")
    return fail(EINVAL, "{} ('{}') has type '{}', expected c, b, u or p", where, dev.path, *t);
  dev.type = std::move(*t);
  auto ma = opt_int(e, "major", where);
  if (!ma) return Unexpected(ma.error());
  auto mi = opt_int(e, "minor", where);
  if (!mi) return Unexpected(mi.error());
  // Linux dev_t: 12-bit major in the old encoding, 32 bits in the new one.
  if (*ma < 0 || *ma > UINT32_MAX || *mi < 0 || *mi > UINT32_MAX)
    return fail(EINVAL, "{} ('{}') has an out-of-range major/minor", where, dev.path);
  dev.major = *ma;
  dev.minor = *mi;
  return dev;
}

// One entry of mounts; `where` names it in errors.
Result<OciMount> parse_mount(const json& e, const std::string& where) {
  if (!e.is_object()) return fail(EINVAL, "{} is not an object", where);
  OciMount mnt;
  auto dst = opt_string(e, "destination", where);
  if (!dst) return Unexpected(dst.error());
  if (dst->empty()) return fail(EINVAL, "{} has no 'destination'", where);
  mnt.destination = std::move(*dst);
  auto src = opt_string(e, "source", where);
  if (!src) return Unexpected(src.error());
  mnt.source = std::move(*src);
  auto ty = opt_string(e, "type", where);
  if (!ty) return Unexpected(ty.error());
  mnt.type = std::move(*ty);
  if (auto o = e.find("options"); o != e.end() && !o->is_null()) {
    if (!o->is_array()) return fail(EINVAL, "{}: 'options' is not an array", where);
    for (const json& opt : *o) {
      if (!opt.is_string()) return fail(EINVAL, "{}: an option is not a string", where);
      mnt.options.push_back(opt.get<std::string>());
    }
  }
  return mnt;
}

}  // namespace

Result<OciConfig> parse_config(std::string_view text) {
  auto doc = parse_json(text, "config.json");
  if (!doc) return Unexpected(doc.error());
  OciConfig cfg;

  auto ann = opt_string_map(*doc, "annotations", "config.json");
  if (!ann) return Unexpected(ann.error());
  cfg.annotations = std::move(*ann);

  if (auto it = doc->find("process"); it != doc->end() && !it->is_null()) {
    if (!it->is_object()) return fail(EINVAL, "config.json: 'process' is not an object");
    auto l = opt_string(*it, "selinuxLabel", "config.json process");
    if (!l) return Unexpected(l.error());
    cfg.process_label = std::move(*l);
  }

  if (auto it = doc->find("linux"); it != doc->end() && !it->is_null()) {
    const json& linux = *it;
    if (!linux.is_object()) return fail(EINVAL, "config.json: 'linux' is not an object");
    auto cg = opt_string(linux, "cgroupsPath", "config.json linux");
    if (!cg) return Unexpected(cg.error());
    if (cg->size() > PATH_MAX || cg->find('\0') != std::string::npos)
      return fail(EINVAL, "config.json: linux.cgroupsPath is not a usable path");
    cfg.cgroups_path = std::move(*cg);
    auto ml = opt_string(linux, "mountLabel", "config.json linux");
    if (!ml) return Unexpected(ml.error());
    cfg.mount_label = std::move(*ml);
    if (auto r = linux.find("resources"); r != linux.end() && !r->is_null()) {
      auto res = parse_resources(*r);
      if (!res) return Unexpected(res.error());
      cfg.resources = *res;
    }

    if (auto d = linux.find("devices"); d != linux.end() && !d->is_null()) {
      if (!d->is_array()) return fail(EINVAL, "config.json: linux.devices is not an array");
      PODSHIM_TRY(parse_each(*d, "config.json linux.devices", parse_device, &cfg.devices));
    }
  }

  if (auto m = doc->find("mounts"); m != doc->end() && !m->is_null()) {
    if (!m->is_array()) return fail(EINVAL, "config.json: 'mounts' is not an array");
    PODSHIM_TRY(parse_each(*m, "config.json mounts", parse_mount, &cfg.mounts));
  }
  return cfg;
}

Result<std::string> read_bundle_config(const std::string& bundle) {
  PODSHIM_TRY(check_abs_path("bundle", bundle));
  auto dir = fs::open_dir(bundle);
  if (!dir) return wrap(dir, "opening bundle");
  // open_beneath refuses a symlinked config.json (ELOOP); O_NONBLOCK keeps a
  // FIFO planted there from blocking the open, and fstat rejects it after.
  auto fd = fs::open_beneath(dir->get(), "config.json", O_RDONLY | O_NONBLOCK);
  if (!fd) {
    if (fd.error().code == ELOOP)
      return fail(ELOOP, "'{}/config.json' is a symlink, refusing it", bundle);
    return wrap(fd, fmt::format("opening '{}/config.json'", bundle));
  }
  struct stat sb {};
  if (::fstat(fd->get(), &sb) < 0) return fail_errno("stat '{}/config.json'", bundle);
  if (!S_ISREG(sb.st_mode))
    return fail(EINVAL, "'{}/config.json' is not a regular file", bundle);
  if (static_cast<uint64_t>(sb.st_size) > kMaxConfigBytes)
    return fail(EFBIG, "'{}/config.json' is larger than {} bytes", bundle, kMaxConfigBytes);
  auto data = fs::read_fd(fd->get(), kMaxConfigBytes);
  if (!data) return wrap(data, fmt::format("reading '{}/config.json'", bundle));
  return data;
}

}  // namespace podshim::hook
