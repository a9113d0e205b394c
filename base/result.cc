#include "base/result.h"

#include <cstring>

namespace podshim {

std::string errno_string(int code) {
  char buf[256];
  // GNU strerror_r returns a pointer that may or may not be buf.
  const char* s = strerror_r(code, buf, sizeof buf);
  return s ? std::string(s) : fmt::format("errno {}", code);
}

}  // namespace podshim
