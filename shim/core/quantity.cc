#include "shim/core/quantity.h"

#include <fmt/format.h>

#include "base/quantity.h"

namespace podshim::core {

// Parsing is base/quantity.h's (resource.Quantity semantics, rounding up).
Result<int64_t> parse_cpu_milli(std::string_view q) { return quantity::parse_cpu_milli(q); }
Result<int64_t> parse_memory_bytes(std::string_view q) { return quantity::parse_memory_bytes(q); }

std::string format_cpu_milli(int64_t milli) {
  if (milli % 1000 == 0) return fmt::format("{}", milli / 1000);
  return fmt::format("{}m", milli);
}

std::string format_memory_bytes(int64_t bytes) {
  static constexpr struct {
    const char* suffix;
    int shift;
  } units[] = {{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
  if (bytes > 0) {
    for (const auto& u : units) {
      int64_t unit = int64_t{1} << u.shift;
      if (bytes % unit == 0) return fmt::format("{}{}", bytes / unit, u.suffix);
    }
  }
  return fmt::format("{}", bytes);
}

}  // namespace podshim::core
