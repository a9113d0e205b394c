#include "cgroup/path.h"

#include "base/str.h"

namespace podshim::cgroup {
namespace {

// Characters seen in real cgroup names: container ids (hex), pod uids
// ("-" or "_"), unit names (".", "@", "\x2d" escapes use '\\'). Anything
// else — control characters, spaces, '/', ':' — has no business in one
// component and is refused rather than interpreted.
constexpr bool component_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '@' || c == '\\' || c == '+';
}
constexpr str::ByteSet kComponentChars = str::byte_set(component_char_ok);

Result<void> check_component(std::string_view c, std::string_view whole) {
  if (c.empty()) return fail(EINVAL, "cgroup path '{}' has an empty component", whole);
  if (c == "." || c == "..")
    return fail(EINVAL, "cgroup path '{}' contains '{}', refusing to leave the cgroup root", whole, c);
  if (c.size() > 255) return fail(ENAMETOOLONG, "cgroup path '{}' has a component over 255 bytes", whole);
  if (const size_t at = str::find_not_in(c, kComponentChars); at != std::string_view::npos)
    return fail(EINVAL, "cgroup path '{}' contains a disallowed character (0x{:02x})", whole,
                static_cast<unsigned char>(c[at]));
  return {};
}

Result<void> check_unit_name(std::string_view name, std::string_view suffix, std::string_view whole) {
  PODSHIM_TRY(check_component(name, whole));
  if (!str::ends_with(name, suffix) || name.size() == suffix.size())
    return fail(EINVAL, "systemd cgroup path '{}': '{}' is not a {} unit name", whole, name, suffix);
  return {};
}

}  // namespace

Result<DriverKind> parse_driver(std::string_view s) {
  if (s == "cgroupfs") return DriverKind::Cgroupfs;
  if (s == "systemd") return DriverKind::Systemd;
  if (s == "auto") return DriverKind::Auto;
  return fail(EINVAL, "unknown cgroup driver '{}' (expected cgroupfs, systemd or auto)", s);
}

Result<DriverKind> detect_driver(std::string_view p) {
  if (p.empty()) return fail(EINVAL, "empty cgroup path");
  if (p.front() == '/') return DriverKind::Cgroupfs;
  if (p.find(':') != std::string_view::npos || str::ends_with(p, ".slice")) return DriverKind::Systemd;
  return fail(EINVAL, "cgroup path '{}' is neither an absolute cgroupfs path nor a systemd "
                      "'slice:prefix:name'", p);
}

Result<std::string> expand_slice(std::string_view slice) {
  if (!str::ends_with(slice, ".slice") || slice.size() == 6)
    return fail(EINVAL, "'{}' is not a slice name", slice);
  if (slice == "-.slice") return std::string();
  if (slice.find('/') != std::string_view::npos)
    return fail(EINVAL, "slice name '{}' contains '/'", slice);
  std::string_view stem = slice.substr(0, slice.size() - 6);
  // systemd's unit_name_to_path rules: no leading/trailing '-', no "--".
  if (stem.front() == '-' || stem.back() == '-' || stem.find("--") != std::string_view::npos)
    return fail(EINVAL, "invalid slice name '{}'", slice);
  std::string out, prefix;
  for (std::string_view part : str::split(stem, '-')) {
    if (!prefix.empty()) prefix += '-';
    prefix += part;
    if (!out.empty()) out += '/';
    out += prefix + ".slice";
  }
  return out;
}

Result<CgroupLocation> resolve_cgroup_path(std::string_view p, DriverKind driver) {
  if (p.find('\0') != std::string_view::npos) return fail(EINVAL, "cgroup path contains NUL");
  if (driver == DriverKind::Auto) {
    auto d = detect_driver(p);
    if (!d) return Unexpected(d.error());
    driver = *d;
  }
  CgroupLocation loc;
  loc.driver = driver;
  if (driver == DriverKind::Cgroupfs) {
    if (p.empty() || p.front() != '/')
      return fail(EINVAL, "cgroupfs path '{}' must be absolute (relative to the cgroup root)", p);
    std::string_view rel = p.substr(1);
    if (rel.empty()) return fail(EINVAL, "cgroup path '{}' names the cgroup root itself", p);
    Result<void> bad;
    str::each_component(rel, [&](std::string_view c) { return static_cast<bool>(bad = check_component(c, p)); });
    if (!bad) return Unexpected(std::move(bad).error());
    loc.relpath = std::string(rel);
    return loc;
  }

  // systemd: "slice:prefix:name" (a container scope) or a bare "x.slice".
  if (p.find(':') == std::string_view::npos) {
    PODSHIM_TRY(check_unit_name(p, ".slice", p));
    auto path = expand_slice(p);
    if (!path) return wrap(path, fmt::format("systemd cgroup path '{}'", p));
    if (path->empty()) return fail(EINVAL, "cgroup path '{}' names the cgroup root itself", p);
    loc.relpath = *path;
    loc.unit = std::string(p);
    return loc;
  }
  auto parts = str::split(p, ':');
  if (parts.size() != 3)
    return fail(EINVAL, "systemd cgroup path '{}' must have the form slice:prefix:name", p);
  std::string_view slice = parts[0], prefix = parts[1], name = parts[2];
  // runc puts a scope in system.slice when the slice is empty (runc docs/systemd.md).
  if (slice.empty()) slice = "system.slice";
  PODSHIM_TRY(check_unit_name(slice, ".slice", p));
  PODSHIM_TRY(check_component(name, p));
  auto parent = expand_slice(slice);
  if (!parent) return wrap(parent, fmt::format("systemd cgroup path '{}'", p));
  std::string unit;
  if (str::ends_with(name, ".slice")) {
    // runc getUnitName: a name that is itself a slice is used as is.
    unit = std::string(name);
  } else {
    if (prefix.empty()) return fail(EINVAL, "systemd cgroup path '{}' has an empty prefix", p);
    PODSHIM_TRY(check_component(prefix, p));
    unit = fmt::format("{}-{}.scope", prefix, name);
  }
  loc.relpath = parent->empty() ? unit : *parent + "/" + unit;
  loc.unit = unit;
  return loc;
}

}  // namespace podshim::cgroup
