#include "shim/core/engine_actuator.h"

namespace podshim::core {

cgroup::EngineOptions engine_options(const Config& cfg,
                                     std::shared_ptr<const cgroup::WeightFormulaTracker> formulas,
                                     Scheduler schedule, sd_event* event) {
  cgroup::EngineOptions o;
  o.cgroup_root = cfg.cgroup_root;
  o.driver = cfg.cgroup_driver;
  o.formula = cfg.weight_formula == cgroup::WeightFormulaSetting::Linear ? cgroup::WeightFormula::Linear
                                                                         : cgroup::WeightFormula::Quadratic;
  o.formulas = std::move(formulas);
  o.state_dir = cfg.state_dir;
  o.shrink_timeout = cfg.shrink_timeout;
  o.shrink_headroom_bytes = cfg.shrink_headroom_bytes;
  o.schedule = std::move(schedule);
  o.event = event;
  o.settle = cfg.shrink_settle;
  o.shrink_growth_window = cfg.shrink_growth_window;
  o.shrink_pressure_threshold = cfg.shrink_pressure_threshold;
  o.unit_call_timeout = cfg.systemd_call_timeout;
  o.test_pause_after_clamp = cfg.test_pause_after_clamp;
  o.test_pause_after_step = cfg.test_pause_after_step;
  return o;
}

Result<std::unique_ptr<EngineActuator>> EngineActuator::create(const Config& cfg, Scheduler schedule,
                                                               sd_event* event) {
  auto formulas = std::make_shared<cgroup::WeightFormulaTracker>(cfg.weight_formula);
  auto history = std::make_shared<cgroup::UsageHistory>();
  auto o = engine_options(cfg, formulas, std::move(schedule), event);
  o.usage_history = history;
  auto e = cgroup::Engine::create(std::move(o));
  if (!e) return wrap(e, "creating the cgroup engine");
  auto a = std::make_unique<EngineActuator>(std::move(*e), std::move(formulas));
  a->usage_history_ = std::move(history);
  return a;
}

void EngineActuator::apply(const Actuation& a, Done done) {
  cgroup::PodResizeRequest req = a.plan;
  req.mode = cgroup::WriteMode::All;  // no runtime writes in hooks-only mode
  engine_->resize(req, std::move(done));
}

Result<cgroup::Actual> EngineActuator::read_actual(const std::string& cgroup_path) {
  return engine_->read_limits(cgroup_path);
}

}  // namespace podshim::core
