// Kubernetes resource quantities ("100m", "0.5", "1e3", "123Mi", "1.5Gi"),
// parsed as k8s.io/apimachinery resource.ParseQuantity does and converted the
// way the kubelet reads them: cpu with MilliValue() and memory with Value(),
// both of which round up (ceil) any precision finer than the unit.
//
// Lives in base/ because the CLI, the status socket and cgroup/ all need it.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace podshim::quantity {

// Parses a cpu quantity into milliCPU, rounding up: "100m" → 100, "0.5" → 500,
// "2" → 2000, "1e3" → 1000000, "0.0001" → 1. Negative values, garbage and
// values beyond int64 are errors that name the input.
Result<int64_t> parse_cpu_milli(std::string_view q);

// Parses a memory quantity into bytes, rounding up: "123Mi" → 128974848,
// "129e6" → 129000000, "1G" → 1000000000, "1.5Gi" → 1610612736.
Result<int64_t> parse_memory_bytes(std::string_view q);

// The exact value of `q` multiplied by 10^scale10, rounded up to an integer
// (scale10 = 3 gives milli-units). The primitive both functions above use.
Result<int64_t> parse_scaled(std::string_view q, int scale10);

}  // namespace podshim::quantity
