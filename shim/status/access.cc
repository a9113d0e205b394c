#include "shim/status/access.h"

#include <fnmatch.h>
#include <grp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "base/str.h"

namespace podshim::status {

Result<Peer> peer_of(int fd, bool with_groups) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return fail_errno("SO_PEERCRED");
  Peer p;
  p.pid = cred.pid;
  p.uid = cred.uid;
  p.gid = cred.gid;
  if (with_groups) load_groups(fd, p);
  return p;
}

void load_groups(int fd, Peer& p) {
  // SO_PEERGROUPS reports the groups the peer had at connect() time.
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
      groups.resize(glen / sizeof(gid_t));
      p.groups = std::move(groups);
      return;
    }
    if (errno != ERANGE) return;  // ENOPROTOOPT on old kernels: primary gid only
    groups.resize(glen / sizeof(gid_t) + 16);
  }
}

Result<gid_t> resolve_group(std::string_view name) {
  if (name.empty()) return fail(EINVAL, "empty group name");
  if (auto n = str::parse_u64(name)) {
    if (*n >= static_cast<uint64_t>(static_cast<gid_t>(-1))) return fail(ERANGE, "gid '{}' out of range", name);
    return static_cast<gid_t>(*n);
  }
  std::string nm(name);
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* out = nullptr;
  int rc = getgrnam_r(nm.c_str(), &gr, buf.data(), buf.size(), &out);
  if (rc != 0) return fail_code(rc, "looking up group '{}'", name);
  if (!out) return fail(ENOENT, "unknown group '{}'", name);
  return out->gr_gid;
}

Result<AccessPolicy> AccessPolicy::create(const std::vector<core::AccessRule>& rules,
                                          const std::string& socket_group,
                                          const std::string& admin_group) {
  AccessPolicy p;
  for (const auto& r : rules) {
    Rule out{r.path, r.methods, r.uids, {}};
    for (const auto& g : r.groups) {
      std::string name = g;
      if (g == "@socket") name = socket_group;
      else if (g == "@admin") name = admin_group;
      if (name.empty()) continue;  // placeholder for an unset group: matches nobody
      auto gid = resolve_group(name);
      if (!gid) return wrap(gid, "access rule");
      out.gids.push_back(*gid);
    }
    p.rules_.push_back(std::move(out));
  }
  return p;
}

const AccessPolicy::Rule* AccessPolicy::first_match(std::string_view method, std::string_view path) const {
  std::string m(method), pa(path);
  for (const auto& r : rules_) {
    bool mm = std::any_of(r.methods.begin(), r.methods.end(),
                          [&](const std::string& x) { return x == "*" || x == m; });
    if (mm && fnmatch(r.path.c_str(), pa.c_str(), 0) == 0) return &r;
  }
  return nullptr;
}

bool AccessPolicy::needs_groups(const Peer& peer, std::string_view method, std::string_view path) const {
  const Rule* r = first_match(method, path);
  if (!r || std::find(r->uids.begin(), r->uids.end(), peer.uid) != r->uids.end()) return false;
  return !r->gids.empty() && std::find(r->gids.begin(), r->gids.end(), peer.gid) == r->gids.end();
}

bool AccessPolicy::allowed(const Peer& peer, std::string_view method, std::string_view path) const {
  const Rule* r = first_match(method, path);  // the first matching rule decides
  if (!r) return false;
  if (std::find(r->uids.begin(), r->uids.end(), peer.uid) != r->uids.end()) return true;
  for (gid_t g : r->gids)
    if (peer.gid == g || std::find(peer.groups.begin(), peer.groups.end(), g) != peer.groups.end()) return true;
  return false;
}

}  // namespace podshim::status
