// Kubernetes quantities for the status API and config ("100m", "1.5Gi").
//
// Thin names over base/quantity.h (resource.Quantity semantics) plus the
// short forms podshimctl prints.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::core {

// CPU quantity → milliCPU, rounded up ("0.1" → 100, "1" → 1000, "250m" → 250).
Result<int64_t> parse_cpu_milli(std::string_view q);
// Memory quantity → bytes, rounded up ("1Gi", "128974848", "129e6", "1.5G").
Result<int64_t> parse_memory_bytes(std::string_view q);

// Canonical short forms for tables: "250m", "2", "128Mi", "1500000".
std::string format_cpu_milli(int64_t milli);
std::string format_memory_bytes(int64_t bytes);

}  // namespace podshim::core
