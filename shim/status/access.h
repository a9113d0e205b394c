// Who may use the status socket: the peer's credentials from SO_PEERCRED
// (uid, gid, pid) and SO_PEERGROUPS (supplementary groups, Linux 4.13+),
// checked per path and verb against configured rules, in the spirit of the
// kubelet's fine-grained API authorization (read vs. write endpoints).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "shim/core/config.h"

namespace podshim::status {

struct Peer {
  pid_t pid = 0;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;  // supplementary, when the kernel reports them
};

// Credentials of the process on the other end of a connected unix socket:
// uid, gid and pid (SO_PEERCRED), and the supplementary groups
// (SO_PEERGROUPS) only when `with_groups`; load_groups() adds them later.
Result<Peer> peer_of(int fd, bool with_groups = true);
// The supplementary groups the peer of `fd` had at connect() time; on a
// kernel without SO_PEERGROUPS, none (the primary gid still counts).
void load_groups(int fd, Peer& p);

// Resolves a group name (or a decimal gid) to a gid; ENOENT names the group.
Result<gid_t> resolve_group(std::string_view name);

class AccessPolicy {
 public:
  // Resolves every group name now, so a typo is a configuration error and
  // not a silent denial later. "@socket"/"@admin" resolve to the configured
  // socket.group/socket.admin_group (and match nobody when those are empty).
  static Result<AccessPolicy> create(const std::vector<core::AccessRule>& rules,
                                     const std::string& socket_group,
                                     const std::string& admin_group);

  // True when the first rule matching method and path admits the peer.
  bool allowed(const Peer& p, std::string_view method, std::string_view path) const;
  // Whether allowed() would look at the peer's supplementary groups: the
  // first matching rule names neither its uid nor its primary gid but does
  // name groups. Most requests come from root, which the rules name by uid,
  // so the server fetches groups (one getsockopt) only when this says so.
  bool needs_groups(const Peer& p, std::string_view method, std::string_view path) const;

 private:
  struct Rule {
    std::string path;
    std::vector<std::string> methods;
    std::vector<uid_t> uids;
    std::vector<gid_t> gids;
  };
  // The first rule whose methods and path match, or none.
  const Rule* first_match(std::string_view method, std::string_view path) const;
  std::vector<Rule> rules_;
};

}  // namespace podshim::status
