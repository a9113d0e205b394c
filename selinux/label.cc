#include "selinux/label.h"

#include <selinux/context.h>
#include <selinux/selinux.h>

#include <atomic>
#include <cerrno>
#include <memory>

#include "base/str.h"

namespace podshim::selinux {
namespace {

// -1: no override; 0/1: forced value.
std::atomic<int> g_enabled_override{-1};

struct ContextDeleter {
  void operator()(context_s_t* c) const { context_free(c); }
};
using ContextPtr = std::unique_ptr<context_s_t, ContextDeleter>;

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool is_level_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == ',' || c == '.' ||
         c == '-';
}

// Parses "cN" with N in 0..kMaxCategory, no leading zeros (the kernel prints
// categories without them, and "c01" vs "c1" must not compare unequal).
Result<uint32_t> parse_category(std::string_view level, std::string_view c) {
  if (c.size() < 2 || c[0] != 'c')
    return fail(EINVAL, "invalid MCS category '{}' in level '{}'", c, level);
  std::string_view digits = c.substr(1);
  for (char d : digits)
    if (d < '0' || d > '9') return fail(EINVAL, "invalid MCS category '{}' in level '{}'", c, level);
  if (digits.size() > 1 && digits[0] == '0')
    return fail(EINVAL, "MCS category '{}' in level '{}' has a leading zero", c, level);
  auto n = str::parse_u64(digits);
  if (!n || *n > kMaxCategory)
    return fail(ERANGE, "MCS category '{}' in level '{}' is outside c0..c{}", c, level,
                kMaxCategory);
  return static_cast<uint32_t>(*n);
}

// Renders the parts through libselinux so the string is exactly what
// context_str() produces.
Result<std::string> render(std::string_view user, std::string_view role, std::string_view type,
                           std::string_view level) {
  // context_new needs some valid starting context; set every part afterwards.
  ContextPtr ctx(context_new("u:r:t:s0"));
  if (!ctx) return fail_errno("context_new");
  std::string u(user), r(role), t(type), l(level);
  if (context_user_set(ctx.get(), u.c_str()) || context_role_set(ctx.get(), r.c_str()) ||
      context_type_set(ctx.get(), t.c_str()) || context_range_set(ctx.get(), l.c_str()))
    return fail_errno("building SELinux context '{}:{}:{}:{}'", user, role, type, level);
  const char* s = context_str(ctx.get());
  if (!s) return fail_errno("context_str");
  return std::string(s);
}

}  // namespace

Result<void> check_identifier(std::string_view what, std::string_view id) {
  if (id.empty()) return fail(EINVAL, "empty SELinux {}", what);
  if (id.size() > 255) return fail(EINVAL, "SELinux {} '{}…' is longer than 255 bytes", what, id.substr(0, 32));
  for (char c : id)
    if (!is_identifier_char(c))
      return fail(EINVAL, "SELinux {} '{}' contains an invalid character (allowed: A-Z a-z 0-9 _ . -)",
                  what, id);
  return {};
}

Result<void> check_level(std::string_view level) {
  if (level.empty()) return fail(EINVAL, "empty SELinux level");
  if (level.size() > 1024) return fail(EINVAL, "SELinux level is longer than 1024 bytes");
  for (char c : level)
    if (!is_level_char(c))
      return fail(EINVAL, "SELinux level '{}' contains an invalid character (allowed: a-z 0-9 : , . -)",
                  level);
  // Each range end must start with a sensitivity ("s0", "s15").
  for (std::string_view end : str::split(level, '-')) {
    if (end.size() < 2 || end[0] != 's')
      return fail(EINVAL, "SELinux level '{}' does not start with a sensitivity (s0)", level);
  }
  return {};
}

Result<McsLevel> McsLevel::parse(std::string_view s) {
  if (s == kSharedLevel) return McsLevel{};
  if (!str::starts_with(s, "s0:")) {
    if (s.find('-') != std::string_view::npos)
      return fail(EINVAL, "SELinux level '{}' is a range, not a container MCS level (s0:cA,cB)", s);
    return fail(EINVAL, "SELinux level '{}' is not a container MCS level (s0 or s0:cA,cB)", s);
  }
  auto cats = str::split(s.substr(3), ',');
  std::vector<uint32_t> out;
  for (std::string_view c : cats) {
    if (c.find('.') != std::string_view::npos)
      return fail(EINVAL, "SELinux level '{}' uses a category span '{}', not a container MCS level",
                  s, c);
    auto n = parse_category(s, c);
    if (!n) return Unexpected(n.error());
    out.push_back(*n);
  }
  auto r = from_categories(std::move(out));
  if (!r) return wrap(r, fmt::format("SELinux level '{}'", s));
  return r;
}

Result<McsLevel> McsLevel::from_categories(std::vector<uint32_t> categories) {
  if (categories.size() > 2)
    return fail(EINVAL, "a container MCS level has at most 2 categories, got {}", categories.size());
  for (uint32_t c : categories)
    if (c > kMaxCategory) return fail(ERANGE, "MCS category c{} is outside c0..c{}", c, kMaxCategory);
  // A < B as opencontainers/selinux uniqMcs generates them; "c5,c5" or
  // "c7,c3" would be a different (or non-canonical) level than it looks.
  if (categories.size() == 2 && categories[0] >= categories[1])
    return fail(EINVAL, "MCS categories c{},c{} are not strictly ascending", categories[0],
                categories[1]);
  McsLevel l;
  l.categories_ = std::move(categories);
  return l;
}

std::string McsLevel::str() const {
  std::string s(kSharedLevel);
  for (size_t i = 0; i < categories_.size(); ++i) s += fmt::format("{}c{}", i == 0 ? ":" : ",", categories_[i]);
  return s;
}

Result<Label> Label::make(std::string_view user, std::string_view role, std::string_view type,
                          std::string_view level) {
  PODSHIM_TRY(check_identifier("user", user));
  PODSHIM_TRY(check_identifier("role", role));
  PODSHIM_TRY(check_identifier("type", type));
  PODSHIM_TRY(check_level(level));
  auto s = render(user, role, type, level);
  if (!s) return Unexpected(s.error());
  Label l;
  l.user_ = std::string(user);
  l.role_ = std::string(role);
  l.type_ = std::string(type);
  l.level_ = std::string(level);
  l.str_ = std::move(*s);
  return l;
}

Result<Label> Label::parse(std::string_view s) {
  if (s.find('\0') != std::string_view::npos)
    return fail(EINVAL, "SELinux label contains a NUL byte");
  std::string in(s);
  ContextPtr ctx(context_new(in.c_str()));
  if (!ctx) return fail(EINVAL, "invalid SELinux label '{}': expected user:role:type:level", s);
  const char* user = context_user_get(ctx.get());
  const char* role = context_role_get(ctx.get());
  const char* type = context_type_get(ctx.get());
  const char* range = context_range_get(ctx.get());
  if (!range || !*range)
    return fail(EINVAL, "invalid SELinux label '{}': no level (expected user:role:type:level)", s);
  auto l = make(user ? user : "", role ? role : "", type ? type : "", range);
  if (!l) return wrap(l, fmt::format("invalid SELinux label '{}'", s));
  // context_new accepts what it can split; insist that the rendering is the
  // input, so nothing was silently dropped or normalised.
  if (l->str() != s)
    return fail(EINVAL, "invalid SELinux label '{}': it renders as '{}'", s, l->str());
  return l;
}

Result<Label> Label::with_type(std::string_view type) const {
  return make(user_, role_, type, level_);
}

Result<Label> Label::with_level(std::string_view level) const {
  return make(user_, role_, type_, level);
}

Result<McsLevel> Label::mcs_level() const {
  auto l = McsLevel::parse(level_);
  if (!l) return wrap(l, fmt::format("label '{}'", str_));
  return l;
}

Result<Label> file_label_for(const Label& container_label, Sharing sharing,
                             const FileLabelConfig& config) {
  std::string level(kSharedLevel);
  if (sharing == Sharing::Private) {
    auto mcs = container_label.mcs_level();
    if (!mcs) return wrap(mcs, "private file label");
    level = mcs->str();
  }
  return Label::make(kFileUser, kFileRole, config.file_type, level);
}

bool selinux_enabled() {
  int o = g_enabled_override.load();
  if (o >= 0) return o == 1;
  return is_selinux_enabled() == 1;
}

void set_enabled_override_for_testing(std::optional<bool> value) {
  g_enabled_override.store(value ? (*value ? 1 : 0) : -1);
}

}  // namespace podshim::selinux
