// The one default of each setting that both the configuration (config.h,
// documented in docs/config.md) and a component's option struct carry. The
// option structs take their defaults from here, so a component built without
// a Config (tests, tools) behaves as the documented default. Dependency-free:
// shim/nri includes it too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string_view>

namespace podshim::core {

// socket: / http:
inline constexpr std::string_view kDefaultSocketPath = "/run/podshim/podshim.sock";
inline constexpr mode_t kDefaultSocketMode = 0660;
inline constexpr std::chrono::seconds kDefaultHttpTimeout{10};
inline constexpr size_t kDefaultMaxBodyBytes = 1 << 20;
inline constexpr unsigned kDefaultMaxConnections = 256;
// /v1/watch: what one watcher may have queued (lines not yet written to its
// socket), and all watchers together; over either a watcher is disconnected.
inline constexpr size_t kDefaultMaxWatchBacklogBytes = 1 << 20;
inline constexpr size_t kDefaultMaxWatchTotalBytes = 8 << 20;

// nri: (the index orders plugins: containerd/nri pkg/adaptation sorts by it)
inline constexpr std::string_view kDefaultNriSocket = "/var/run/nri/nri.sock";
inline constexpr std::string_view kDefaultNriPluginName = "podshim";
inline constexpr std::string_view kDefaultNriPluginIndex = "10";

}  // namespace podshim::core
