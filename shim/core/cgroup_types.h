// The cgroup engine's value types (K8sResources, PodResizeRequest, Actual,
// ResizeReport) as shim/core uses them: exactly cgroup/engine.h's facade.
#pragma once

#include "cgroup/engine.h"
