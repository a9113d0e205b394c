// The hooks-only Actuator (--nri=off): podshim's own cgroup engine writes
// every value (WriteMode::All), asynchronously on the loop when the engine
// has a scheduler; and reads back what the kernel holds.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "cgroup/engine.h"
#include "shim/core/config.h"
#include "shim/core/resize.h"

namespace podshim::core {

// The engine's options from the configuration. `formulas` (may be null) is
// where weight_formula: auto keeps what it learned about the runtime.
// `schedule` (may be empty) runs work on the daemon's loop after a delay,
// so the engine's shrink never blocks it. `event` (may be null) is that
// loop: the systemd driver's D-Bus calls wait on it (EngineOptions::event).
using Scheduler = std::function<void(std::chrono::milliseconds, std::function<void()>)>;
cgroup::EngineOptions engine_options(const Config& cfg,
                                     std::shared_ptr<const cgroup::WeightFormulaTracker> formulas = nullptr,
                                     Scheduler schedule = {}, sd_event* event = nullptr);

class EngineActuator : public Actuator {
 public:
  // Also creates the weight-formula tracker for cfg.weight_formula.
  static Result<std::unique_ptr<EngineActuator>> create(const Config& cfg, Scheduler schedule = {},
                                                        sd_event* event = nullptr);
  explicit EngineActuator(std::unique_ptr<cgroup::Engine> engine,
                          std::shared_ptr<cgroup::WeightFormulaTracker> formulas = nullptr)
      : engine_(std::move(engine)), formulas_(std::move(formulas)) {}

  void apply(const Actuation& a, Done done) override;
  Result<cgroup::Actual> read_actual(const std::string& cgroup_path) override;
  cgroup::Engine& engine() { return *engine_; }
  // The container formula in use (shared with the NRI handlers that feed it).
  const std::shared_ptr<cgroup::WeightFormulaTracker>& formulas() const { return formulas_; }
  // Where the read-back records memory.current for the engine's shrinks
  // (ReadBackOptions::usage_history).
  const std::shared_ptr<cgroup::UsageHistory>& usage_history() const { return usage_history_; }

 private:
  std::unique_ptr<cgroup::Engine> engine_;
  std::shared_ptr<cgroup::WeightFormulaTracker> formulas_;
  std::shared_ptr<cgroup::UsageHistory> usage_history_;
};

}  // namespace podshim::core
