// A request to podshimd's status socket from another uid: a forked child
// drops to uid 65534 (nobody) with the groups given, asks, and reports the
// HTTP status it saw, so access control is tested with real peer credentials
// (SO_PEERCRED). Needs root to drop ids.
#pragma once

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <vector>

#include "shim/status/client.h"

namespace podshim::testutil {

// The HTTP status of `method path` with `body` as uid 65534, primary group
// `gid` and supplementary `groups`; -2 when the request failed, -1 when the
// child could not drop its ids or gave no answer.
inline int request_as_nobody(const std::string& sock, std::string_view method, std::string_view path,
                             std::string_view body = {}, gid_t gid = 65534, const std::vector<gid_t>& groups = {}) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::close(p[0]);
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(65534) != 0) ::_exit(1);
    status::ClientOptions co;
    co.socket_path = sock;
    auto r = status::http_request(co, method, path, body);
    const int status = r ? r->status : -2;
    (void)!::write(p[1], &status, sizeof(status));
    ::_exit(0);
  }
  ::close(p[1]);
  int status = -1;
  if (::read(p[0], &status, sizeof(status)) != sizeof(status)) status = -1;
  ::close(p[0]);
  ::waitpid(pid, nullptr, 0);
  return status;
}

}  // namespace podshim::testutil
