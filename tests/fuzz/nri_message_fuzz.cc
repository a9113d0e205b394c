// Fuzzes NRI message handling: arbitrary bytes as the payload of each Plugin
// method, sent by our runtime simulator over a real socketpair into the
// plugin stub and on into podshimd's handlers (shim/adapter's NriAdapter, with
// a cgroup engine on a fake tree in a temp dir and a CDI registry with one
// spec). Every payload must get a reply — a result or a clean error — and the
// connection must stay up: a runtime drops a plugin that stops answering, and
// the containers it would have adjusted start without their adjustments.
//
// Input: byte 0 picks the method (see kMethods), the rest is the payload.
// The connection and the fake tree live for the whole run; the model (store,
// adapter) is new for every input so each input replays on its own.
#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "base/log.h"
#include "cdi/registry.h"
#include "cgroup/engine.h"
#include "shim/adapter/nri_adapter.h"
#include "shim/core/state.h"
#include "shim/nri/plugin.h"
#include "shim/nri/simulator.h"
#include "tests/cgroup/fake_tree.h"

using namespace podshim;
using namespace podshim::nri;

namespace {

constexpr const char* kMethods[] = {
    "Configure",        "Synchronize",         "StateChange",
    "Shutdown",         "CreateContainer",     "UpdateContainer",
    "StopContainer",    "UpdatePodSandbox",    "ValidateContainerAdjustment",
    "RunPodSandbox",    "StopPodSandbox",      "RemovePodSandbox",
    "PostUpdatePodSandbox", "PostCreateContainer", "StartContainer",
    "PostStartContainer",   "PostUpdateContainer", "RemoveContainer",
};
constexpr size_t kMethodCount = sizeof(kMethods) / sizeof(kMethods[0]);

// Forwards to an adapter that is replaced for every input: its event
// handlers are taken over with it (set_inner), so the plugin subscribes to
// and calls exactly what podshimd does.
class Forwarder : public Handlers {
 public:
  std::unique_ptr<adapter::NriAdapter> inner;
  void set_inner(std::unique_ptr<adapter::NriAdapter> a) {
    inner = std::move(a);
    events = inner->events;
  }
  Result<void> configure(const api::ConfigureRequest& r, const RuntimeInfo& rt) override {
    return inner->configure(r, rt);
  }
  bool synchronize_by_page() const override { return true; }
  Result<void> on_synchronize_page(const pb::SynchronizeView& page, bool first, api::SynchronizeResponse* o,
                                   std::function<void()>* after_reply) override {
    return inner->on_synchronize_page(page, first, o, after_reply);
  }
};

struct World {
  sd_event* loop = nullptr;
  cgroup::testing::FakeTree* tree = nullptr;
  std::unique_ptr<cgroup::Engine> engine;
  std::unique_ptr<cdi::Registry> registry;
  Forwarder handlers;
  std::unique_ptr<core::Store> store;
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<Plugin> plugin;
};

World* world = nullptr;

void run_until(const bool& done) {
  // Each step waits at most 100 ms; the simulator's call timeout (2 s)
  // guarantees the callback, so this loop ends.
  while (!done) {
    if (sd_event_run(world->loop, 100'000) < 0) __builtin_trap();
  }
}

void connect() {
  World& w = *world;
  w.plugin.reset();
  w.sim = std::make_unique<Simulator>(w.loop, SimOptions{});
  auto fd = w.sim->socketpair();
  if (!fd) __builtin_trap();
  PluginOptions po;
  po.socket_fd = fd->release();
  po.reconnect = false;
  w.store = core::Store::in_memory();
  w.handlers.set_inner(std::make_unique<adapter::NriAdapter>(*w.store, w.engine.get(), w.registry.get(), nullptr,
                                                            adapter::AdapterOptions{}));
  w.plugin = std::make_unique<Plugin>(w.loop, w.handlers, po);
  if (!w.plugin->start()) __builtin_trap();
  bool synced = false;
  w.sim->on_synchronized = [&](Status st) {
    if (!st.ok()) __builtin_trap();
    synced = true;
  };
  run_until(synced);
}

void setup() {
  log::init(log::Target::Null, log::Level::Err);
  world = new World();  // lives for the whole run
  if (sd_event_new(&world->loop) < 0) __builtin_trap();
  world->tree = new cgroup::testing::FakeTree();
  // The cgroup parents the captures and make_pod() use, both drivers.
  world->tree->add("kubepods");
  world->tree->add("kubepods/burstable");
  world->tree->add("kubepods.slice");
  world->tree->add("kubepods.slice/kubepods-burstable.slice");
  cgroup::EngineOptions eo;
  eo.cgroup_root = world->tree->cg_root();
  eo.state_dir = world->tree->state();
  eo.driver = cgroup::DriverKind::Cgroupfs;
  eo.shrink_timeout = std::chrono::milliseconds(1);  // the fake tree never reclaims
  auto e = cgroup::Engine::create(eo);
  if (!e) __builtin_trap();
  world->engine = std::move(*e);
  const std::string cdi_dir = world->tree->state() + "/cdi";
  ::mkdir(cdi_dir.c_str(), 0700);
  std::ofstream(cdi_dir + "/vendor.json")
      << R"({"cdiVersion":"0.6.0","kind":"vendor.com/gpu","devices":[{"name":"gpu0",)"
         R"("containerEdits":{"env":["GPU=0"],"deviceNodes":[{"path":"/dev/null"}]}}]})";
  cdi::RegistryOptions ro;
  ro.spec_dirs = {cdi_dir};
  ro.required_owner = std::nullopt;
  world->registry = std::make_unique<cdi::Registry>(ro);
  connect();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!world) setup();
  if (size == 0) return 0;
  const std::string method = kMethods[data[0] % kMethodCount];
  std::string payload(reinterpret_cast<const char*>(data) + 1, size - 1);

  World& w = *world;
  w.store = core::Store::in_memory();
  w.handlers.set_inner(std::make_unique<adapter::NriAdapter>(*w.store, w.engine.get(), w.registry.get(), nullptr,
                                                            adapter::AdapterOptions{}));
  bool done = false;
  CallResult got;
  w.sim->call(method, std::move(payload), [&](CallResult r) {
    got = std::move(r);
    done = true;
  });
  run_until(done);
  // A reply, never a timeout or a dropped connection.
  if (got.status.code == code::kDeadlineExceeded || got.status.code == code::kUnavailable) {
    __builtin_trap();
  }
  if (!got.status.ok() && got.status.message.empty()) __builtin_trap();
  // Observed-only events are always answered with success (an error would
  // fail pod or container start on old runtimes).
  if (method == "StateChange" && !got.status.ok()) __builtin_trap();
  // Let any deferred close run, then insist the plugin is still connected.
  sd_event_run(w.loop, 0);
  if (!w.sim->connected() || w.plugin->state() == PluginState::Stopped) __builtin_trap();
  return 0;
}
