#include "shim/security/caps.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace podshim::security {
namespace {

struct CapFree {
  void operator()(void* p) const { cap_free(p); }
};
using CapPtr = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

std::string cap_to_lower_name(cap_value_t c) {
  char* n = cap_to_name(c);
  std::string s = n ? n : fmt::format("cap_{}", c);
  cap_free(n);
  return s;
}

}  // namespace

Result<void> restrict_capabilities(const std::vector<cap_value_t>& keep) {
  CapPtr cur(cap_get_proc());
  if (!cur) return fail_errno("reading the process capabilities");
  for (cap_value_t c : keep) {
    cap_flag_value_t v = CAP_CLEAR;
    if (cap_get_flag(cur.get(), c, CAP_PERMITTED, &v) != 0 || v != CAP_SET)
      return fail(EPERM, "capability {} is required but not held by this process",
                  cap_to_lower_name(c));
  }
  // The bounding set first: dropping from it needs CAP_SETPCAP in the
  // effective set, which the final cap_set_proc below may remove.
  const bool may_drop_bound = CAP_IS_SUPPORTED(CAP_SETPCAP) && [&] {
    cap_flag_value_t v = CAP_CLEAR;
    return cap_get_flag(cur.get(), CAP_SETPCAP, CAP_EFFECTIVE, &v) == 0 && v == CAP_SET;
  }();
  if (may_drop_bound) {
    for (cap_value_t c = 0; c <= cap_max_bits() - 1; ++c) {
      if (std::find(keep.begin(), keep.end(), c) != keep.end()) continue;
      if (cap_get_bound(c) <= 0) continue;
      if (cap_drop_bound(c) != 0)
        return fail_errno("dropping {} from the bounding set", cap_to_lower_name(c));
    }
  }
  if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() != 0)
    return fail_errno("clearing the ambient capability set");

  CapPtr want(cap_init());
  if (!want) return fail_errno("allocating a capability set");
  if (!keep.empty()) {
    if (cap_set_flag(want.get(), CAP_PERMITTED, static_cast<int>(keep.size()), keep.data(),
                     CAP_SET) != 0 ||
        cap_set_flag(want.get(), CAP_EFFECTIVE, static_cast<int>(keep.size()), keep.data(),
                     CAP_SET) != 0)
      return fail_errno("building the kept capability set");
  }
  if (cap_set_proc(want.get()) != 0) return fail_errno("setting the process capabilities");
  // Keep capabilities across a setuid() to a non-root uid only if asked:
  // podshim never changes uid, so make sure nothing would be kept.
  prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  return {};
}

Result<void> restrict_capabilities_if_held(const std::vector<cap_value_t>& wanted) {
  CapPtr cur(cap_get_proc());
  if (!cur) return fail_errno("reading the process capabilities");
  std::vector<cap_value_t> keep;
  for (cap_value_t c : wanted) {
    cap_flag_value_t v = CAP_CLEAR;
    if (cap_get_flag(cur.get(), c, CAP_PERMITTED, &v) == 0 && v == CAP_SET) keep.push_back(c);
  }
  return restrict_capabilities(keep);
}

Result<std::vector<std::string>> capability_names(cap_flag_t set) {
  CapPtr cur(cap_get_proc());
  if (!cur) return fail_errno("reading the process capabilities");
  std::vector<std::string> out;
  for (cap_value_t c = 0; c <= cap_max_bits() - 1; ++c) {
    cap_flag_value_t v = CAP_CLEAR;
    if (cap_get_flag(cur.get(), c, set, &v) == 0 && v == CAP_SET) out.push_back(cap_to_lower_name(c));
  }
  return out;
}

bool in_bounding_set(cap_value_t cap) { return cap_get_bound(cap) > 0; }

Result<cap_value_t> parse_capability(const std::string& name) {
  std::string n;
  for (char ch : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (n.rfind("cap_", 0) != 0) n = "cap_" + n;
  cap_value_t v{};
  if (cap_from_name(n.c_str(), &v) != 0) return fail(EINVAL, "unknown capability '{}'", name);
  return v;
}

}  // namespace podshim::security
