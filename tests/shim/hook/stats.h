// Median and p99 of a sample, for the podshim-hook benchmarks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace podshim::hook::testing {

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest-rank: the smallest value with at least p% of the sample at or below it.
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

inline void print_row(const std::string& name, const std::vector<double>& us) {
  std::printf("%-28s n=%-4zu median %9.1f us   p99 %9.1f us\n", name.c_str(), us.size(),
              percentile(us, 50), percentile(us, 99));
}

}  // namespace podshim::hook::testing
