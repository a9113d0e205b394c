#include "cdi/name.h"

namespace podshim::cdi {
namespace {

bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_letter(c) || is_digit(c); }

// Printable form of a byte for error messages (names may carry anything).
std::string show(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string(1, c);
  return fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
}

Result<void> validate_vendor_or_class(std::string_view what, std::string_view s) {
  if (s.empty()) return fail(EINVAL, "invalid {} name: empty", what);
  if (!is_letter(s.front()))
    return fail(EINVAL, "invalid {} name \"{}\": must start with a letter", what, s);
  // The reference parser slices s[1:len-1] and panics when len == 1
  // (container-device-interface, fixed only on main in e1a6596).
  if (s.size() < 2)
    return fail(EINVAL, "invalid {} name \"{}\": must be at least 2 characters", what, s);
  for (size_t i = 1; i + 1 < s.size(); i++) {
    char c = s[i];
    if (!is_alnum(c) && c != '_' && c != '-' && c != '.')
      return fail(EINVAL, "invalid {} name \"{}\": invalid character '{}'", what, s, show(c));
  }
  if (!is_alnum(s.back()))
    return fail(EINVAL, "invalid {} name \"{}\": must end with a letter or digit", what, s);
  return {};
}

}  // namespace

Result<void> validate_vendor_name(std::string_view vendor) {
  return validate_vendor_or_class("vendor", vendor);
}

Result<void> validate_class_name(std::string_view cls) {
  return validate_vendor_or_class("class", cls);
}

Result<void> validate_device_name(std::string_view name) {
  if (name.empty()) return fail(EINVAL, "invalid device name: empty");
  if (!is_alnum(name.front()))
    return fail(EINVAL, "invalid device name \"{}\": must start with a letter or digit", name);
  for (size_t i = 1; i + 1 < name.size(); i++) {
    char c = name[i];
    if (!is_alnum(c) && c != '_' && c != '-' && c != '.' && c != ':')
      return fail(EINVAL, "invalid device name \"{}\": invalid character '{}'", name, show(c));
  }
  if (!is_alnum(name.back()))
    return fail(EINVAL, "invalid device name \"{}\": must end with a letter or digit", name);
  return {};
}

Result<std::pair<std::string, std::string>> parse_kind(std::string_view kind) {
  size_t slash = kind.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == kind.size())
    return fail(EINVAL, "invalid kind \"{}\": expected \"vendor/class\"", kind);
  std::string_view vendor = kind.substr(0, slash), cls = kind.substr(slash + 1);
  if (auto r = validate_vendor_name(vendor); !r) return wrap(r, fmt::format("kind \"{}\"", kind));
  if (auto r = validate_class_name(cls); !r) return wrap(r, fmt::format("kind \"{}\"", kind));
  return std::pair<std::string, std::string>{std::string(vendor), std::string(cls)};
}

Result<QualifiedName> parse_qualified_name(std::string_view device) {
  auto bad = [&](std::string_view why) {
    return fail(EINVAL, "invalid CDI device \"{}\": {}", device, why);
  };
  if (device.empty()) return bad("empty name");
  // A leading '/' is a device path, not a CDI name (pkg/parser ParseDevice).
  if (device.front() == '/') return bad("a path, not a qualified name (vendor/class=name)");
  size_t eq = device.find('=');
  if (eq == std::string_view::npos) return bad("missing '=' (expected vendor/class=name)");
  std::string_view qualifier = device.substr(0, eq), name = device.substr(eq + 1);
  size_t slash = qualifier.find('/');
  if (slash == std::string_view::npos || slash == 0)
    return bad("missing vendor (expected vendor/class=name)");
  if (slash + 1 == qualifier.size()) return bad("missing class (expected vendor/class=name)");
  if (name.empty()) return bad("missing device name");
  QualifiedName q{std::string(qualifier.substr(0, slash)), std::string(qualifier.substr(slash + 1)),
                  std::string(name)};
  if (auto r = validate_vendor_name(q.vendor); !r) return bad(r.error().message);
  if (auto r = validate_class_name(q.cls); !r) return bad(r.error().message);
  if (auto r = validate_device_name(q.name); !r) return bad(r.error().message);
  return q;
}

}  // namespace podshim::cdi
