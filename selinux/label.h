// SELinux labels for the mounts podshim injects: the label model.
//
// A label is `user:role:type:level`. Container runtimes give every container
// (every pod, in Kubernetes: the sandbox's level is reused by its containers)
// an MCS level `s0:cA,cB` with A < B < 1024 (opencontainers/selinux
// `uniqMcs`), and label its files `system_u:object_r:container_file_t:<level>`
// (container-selinux `container_contexts`, `file=`). A file shared between
// containers gets level `s0` instead, which every MCS level dominates: the
// `:z` (shared) versus `:Z` (private) distinction of podman and
// go-selinux `label.Relabel`.
//
// Labels are parsed and built with libselinux's context_* API, so podshim
// splits them exactly as the kernel's userspace does, and every component is
// additionally checked against a conservative character set: a label ends up
// inside a quoted `context="…"` mount option, where a quote or a comma outside
// the MCS part would change the meaning of the whole option string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshim::selinux {

// container-selinux's file type for container content (virt.te; alias
// svirt_sandbox_file_t).
inline constexpr std::string_view kDefaultFileType = "container_file_t";
// The user and role of file labels (container_contexts `file=`).
inline constexpr std::string_view kFileUser = "system_u";
inline constexpr std::string_view kFileRole = "object_r";
// The level of shared content (`:z`): dominated by every container level.
inline constexpr std::string_view kSharedLevel = "s0";
// MCS categories run c0..c1023 (opencontainers/selinux CategoryRange).
inline constexpr uint32_t kMaxCategory = 1023;

// A container MCS level: sensitivity s0 plus zero, one or two categories in
// strictly ascending order ("s0", "s0:c5", "s0:c5,c700"). Ranges
// ("s0-s0:c0.c1023") and category spans ("c0.c3") are not container levels
// and are refused: a private label must isolate exactly one container.
class McsLevel {
 public:
  static Result<McsLevel> parse(std::string_view s);
  // Builds a level from categories; fails unless 0–2 strictly ascending ≤ 1023.
  static Result<McsLevel> from_categories(std::vector<uint32_t> categories);
  static McsLevel shared() { return McsLevel{}; }

  const std::vector<uint32_t>& categories() const { return categories_; }
  bool is_shared() const { return categories_.empty(); }
  std::string str() const;
  bool operator==(const McsLevel&) const = default;

 private:
  std::vector<uint32_t> categories_;
};

// A full SELinux context, `user:role:type:level`. The level is required:
// podshim only labels for MCS/MLS policies, where a label without a level is
// rejected by the kernel anyway.
class Label {
 public:
  // Parses with libselinux context_new(); fails, naming the input, on a
  // missing level, an empty component, or characters outside the safe set.
  static Result<Label> parse(std::string_view s);
  // Builds from parts (each validated) with context_new()/context_*_set().
  static Result<Label> make(std::string_view user, std::string_view role, std::string_view type,
                            std::string_view level);

  const std::string& user() const { return user_; }
  const std::string& role() const { return role_; }
  const std::string& type() const { return type_; }
  const std::string& level() const { return level_; }

  // The same label with another type or level (context_type_set /
  // context_range_set), validated.
  Result<Label> with_type(std::string_view type) const;
  Result<Label> with_level(std::string_view level) const;

  // The level as a container MCS level, or an error naming the label.
  Result<McsLevel> mcs_level() const;

  // "user:role:type:level", as context_str() renders it.
  const std::string& str() const { return str_; }
  bool operator==(const Label& o) const { return str_ == o.str_; }

 private:
  std::string user_, role_, type_, level_, str_;
};

// `:z` or `:Z`.
enum class Sharing { Shared, Private };

// How podshim builds file labels. The type is configurable because some
// policies use another one (e.g. container_ro_file_t for read-only content).
struct FileLabelConfig {
  std::string file_type{kDefaultFileType};
};

// The label for files mounted into a container whose process (or mount)
// label is `container_label`: system_u:object_r:<file_type>:<level>, where
// level is the container's MCS level (Private) or s0 (Shared).
Result<Label> file_label_for(const Label& container_label, Sharing sharing,
                             const FileLabelConfig& config = {});

// Checks a type, user or role identifier: [A-Za-z0-9_.-]+, at most 255
// bytes (policy identifiers; no quotes, commas, colons or spaces).
Result<void> check_identifier(std::string_view what, std::string_view id);

// Checks an MLS/MCS level or range: non-empty, [a-z0-9:,.-] only.
Result<void> check_level(std::string_view level);

// Whether SELinux is enabled on this host: is_selinux_enabled() == 1, unless
// a test override is set. When it is not, podshim applies no labels and adds
// no context= options (runc and go-selinux do the same: InitLabels returns
// empty labels on a disabled host).
bool selinux_enabled();
// Test seam: force selinux_enabled() to a value, or std::nullopt for the host.
void set_enabled_override_for_testing(std::optional<bool> value);

}  // namespace podshim::selinux
