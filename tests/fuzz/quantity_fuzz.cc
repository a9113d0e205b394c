// Fuzzes the Kubernetes quantity parser: any byte string must give a value or
// a clean error, never a crash, overflow (UBSan) or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  auto cpu = podshim::quantity::parse_cpu_milli(s);
  auto mem = podshim::quantity::parse_memory_bytes(s);
  // Invariants that hold for every accepted input.
  if (cpu && *cpu < 0) __builtin_trap();
  if (mem && *mem < 0) __builtin_trap();
  if (!cpu && cpu.error().message.empty()) __builtin_trap();
  return 0;
}
