// The default Actuator: applies resizes with podshim's own cgroup engine
// (hooks-only mode, --nri=off), and reads back what the kernel holds.
#pragma once

#include <memory>

#include "cgroup/engine.h"
#include "shim/core/config.h"
#include "shim/core/resize.h"

namespace podshim::core {

cgroup::EngineOptions engine_options(const Config& cfg);

class EngineActuator : public Actuator {
 public:
  static Result<std::unique_ptr<EngineActuator>> create(const Config& cfg);
  explicit EngineActuator(std::unique_ptr<cgroup::Engine> engine) : engine_(std::move(engine)) {}

  Result<cgroup::ResizeReport> apply(const cgroup::PodResizeRequest& req) override;
  Result<cgroup::Actual> read_actual(const std::string& cgroup_path) override;
  cgroup::Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<cgroup::Engine> engine_;
};

}  // namespace podshim::core
