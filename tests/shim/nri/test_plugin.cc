// A minimal pre-installed NRI plugin on our library, for the tests and the
// RSS benchmark: takes its socket from NRI_PLUGIN_SOCKET, reports through
// CreateContainer annotations what it saw, exits 0 when the runtime closes
// the connection. Runs with no PATH and stdio on /dev/null, as launched by
// the runtime.
#include <stdlib.h>

#include <systemd/sd-event.h>

#include "shim/nri/plugin.h"

using namespace podshim::nri;

namespace {

struct TestPlugin : Handlers {
  sd_event* loop;
  size_t synced = 0;
  explicit TestPlugin(sd_event* l) : loop(l) {
    // The one event it handles, so the one it subscribes to.
    events.on<api::CREATE_CONTAINER>() = [this](const pb::PodSandboxView&, const pb::ContainerView&,
                                                api::CreateContainerResponse* r) -> podshim::Result<void> {
      auto& ann = *r->mutable_adjust()->mutable_annotations();
      ann["podshim.test/path"] = getenv("PATH") ? "set" : "unset";
      ann["podshim.test/synced"] = std::to_string(synced);
      return {};
    };
  }
  podshim::Result<void> synchronize(const api::SynchronizeRequest& all, api::SynchronizeResponse*) override {
    synced = static_cast<size_t>(all.containers_size());
    return {};
  }
  void on_connection_error(const podshim::Error&, bool will_retry) override {
    if (!will_retry) sd_event_exit(loop, 0);
  }
};

}  // namespace

int main() {
  sd_event* loop = nullptr;
  if (sd_event_default(&loop) < 0) return 2;
  PluginOptions opts;
  auto pre = apply_preinstalled_environment(&opts, [](const char* k) { return getenv(k); });
  if (!pre || !*pre) return 3;
  TestPlugin h(loop);
  Plugin plugin(loop, h, opts);
  if (!plugin.start()) return 4;
  const int r = sd_event_loop(loop);
  sd_event_unref(loop);
  return r < 0 ? 5 : 0;
}
