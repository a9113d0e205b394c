// Relabelling bind-mount sources.
//
// A bind mount cannot be relabelled with context=: mount(2) ignores the data
// argument for MS_BIND, so the source's files must carry the label
// themselves (go-selinux label.Relabel → Chcon, an lsetxattr walk). podshim
// does the same walk, but on file descriptors so that nothing in the tree can
// redirect it:
//
// - the source path itself is resolved once (symlinks in it are followed,
//   as runc follows them when it bind-mounts the source), and the resolved
//   path is checked against the system paths below; everything after that
//   works on the fd that was checked, so swapping a path component later
//   changes nothing;
// - beneath the source, every entry is opened with openat(O_PATH|O_NOFOLLOW)
//   relative to its parent directory's fd, and labelled through that fd
//   (fsetfilecon_raw, which on an O_PATH fd sets the xattr through
//   /proc/self/fd/N — libselinux ≥ 3.4 — and that magic link lands on the
//   opened inode itself, never on what a symlink points at);
// - symlinks: the link itself is relabelled and never followed or descended
//   through. Relabelling the link is what go-selinux Chcon does (lsetxattr on
//   every walked path), and the container needs `read` on the link's own
//   label to resolve it (lnk_file class);
// - directories are read through openat(fd, ".") of the very O_PATH fd that
//   was labelled, so a directory swapped for a symlink between the two steps
//   cannot be entered;
// - other filesystems mounted beneath the source are not entered (their
//   mount points are skipped and counted): a source can have /proc or a
//   host filesystem bind-mounted under it;
// - a file already carrying the label is left alone (no write, no mtime-like
//   churn, and a read-only file system is fine when nothing needs changing).
//
// The `_raw` libselinux calls are used because podshim's labels are raw
// contexts it built itself: the translated variants would pass them through
// mcstrans (setrans.conf), which may rewrite or reject the MCS part.
//
// Known limit, shared with go-selinux and chcon -R: a hard link to a file
// outside the source (same file system) is relabelled too, because it is the
// same inode. Sources are directories a privileged driver prepared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "selinux/label.h"

namespace podshim::selinux {

// The paths go-selinux Relabel refuses (label_linux.go, exclude_paths), which
// podshim refuses too, compared after resolving symlinks: relabelling one of
// them would relabel the host.
inline constexpr std::string_view kSystemPaths[] = {
    "/",     "/bin",  "/boot", "/dev", "/etc",  "/home", "/lib",     "/lib64",   "/media", "/opt",
    "/proc", "/root", "/run",  "/sbin", "/srv", "/sys",  "/tmp",     "/usr",     "/var",   "/var/lib",
    "/var/log",
};

// Trees refused entirely, not only at their top: pseudo file systems whose
// labels belong to the kernel's policy (genfscon), and the host's device
// nodes, which many domains share. Device nodes are handed to containers by
// the runtime (mknod in the container's own /dev), not relabelled in place.
inline constexpr std::string_view kSystemTrees[] = {"/proc", "/sys", "/dev"};

// Checks an absolute, already-resolved path: an error (EPERM) naming it when
// it is a system path or lies in a system tree.
Result<void> check_relabel_allowed(std::string_view resolved_path);

struct RelabelOptions {
  bool recursive = true;
  // Directory nesting allowed beneath the source. Each level holds one fd
  // open, so this also bounds the fds the walk uses.
  uint32_t max_depth = 256;
  // Walk and compare, count what would change, write nothing.
  bool dry_run = false;
};

struct RelabelStats {
  uint64_t visited = 0;     // entries looked at, the source included
  uint64_t relabelled = 0;  // entries whose label was written (or would be, dry_run)
  uint64_t unchanged = 0;   // entries that already had the label
  uint64_t symlinks = 0;    // symlinks (relabelled or unchanged; never followed)
  uint64_t mount_points_skipped = 0;  // other file systems beneath the source
};

// Relabels `path` (absolute) and, when recursive, everything beneath it on
// the same file system. The resolved path is returned in the error messages.
// Errors carry the errno of the failing call (ENOTSUP: no xattr support,
// EROFS, EPERM for a refused path, ELOOP for a tree deeper than max_depth).
Result<RelabelStats> relabel(const std::string& path, const Label& label,
                             const RelabelOptions& options = {});

// Resolves an absolute path the way relabel() does (open O_PATH following
// symlinks, then /proc/self/fd), for callers that report or check it.
Result<std::string> resolve_path(const std::string& path);

// The raw label of a file, not following a final symlink; std::nullopt when
// it has none (ENODATA).
Result<std::optional<std::string>> get_label(const std::string& path);

}  // namespace podshim::selinux
