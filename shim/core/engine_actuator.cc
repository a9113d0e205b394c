#include "shim/core/engine_actuator.h"

namespace podshim::core {

cgroup::EngineOptions engine_options(const Config& cfg) {
  cgroup::EngineOptions o;
  o.cgroup_root = cfg.cgroup_root;
  o.driver = cfg.cgroup_driver;
  o.formula = cfg.weight_formula;
  o.state_dir = cfg.state_dir;
  o.shrink_timeout = cfg.shrink_timeout;
  o.shrink_headroom_bytes = cfg.shrink_headroom_bytes;
  return o;
}

Result<std::unique_ptr<EngineActuator>> EngineActuator::create(const Config& cfg) {
  auto e = cgroup::Engine::create(engine_options(cfg));
  if (!e) return wrap(e, "creating the cgroup engine");
  return std::make_unique<EngineActuator>(std::move(*e));
}

Result<cgroup::ResizeReport> EngineActuator::apply(const cgroup::PodResizeRequest& req) {
  return engine_->resize(req);
}

Result<cgroup::Actual> EngineActuator::read_actual(const std::string& cgroup_path) {
  return engine_->read_actual(cgroup_path);
}

}  // namespace podshim::core
