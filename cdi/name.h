// CDI qualified device names: "vendor/class=name" (CDI SPEC.md, "Fully
// qualified device name"; the syntax of tags.cncf.io/container-device-interface
// pkg/parser).
//
// The Go parser panics on a one-character vendor or class ("slice bounds out of
// range [1:0]", every release through v1.1.0 and Debian's v0.5.2); here every
// malformed input is an error that names the input.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "base/result.h"

namespace podshim::cdi {

struct QualifiedName {
  std::string vendor;  // "k8s.gpu.example.com"
  std::string cls;     // "gpu"
  std::string name;    // "0f3c-gpu-0"

  // "vendor/class", the spec's `kind`.
  std::string kind() const { return vendor + "/" + cls; }
  // "vendor/class=name".
  std::string str() const { return kind() + "=" + name; }
};

// Vendor: letters, digits, '_', '-', '.'; starts with a letter, ends with a
// letter or digit, and has at least two characters (a one-character vendor
// crashes the reference parser, so no producer can rely on it).
Result<void> validate_vendor_name(std::string_view vendor);
// Class: same alphabet and rules as the vendor. Dots need cdiVersion 0.6.0,
// which the version check enforces, not this function.
Result<void> validate_class_name(std::string_view cls);
// Device name: letters, digits, '_', '-', '.', ':'; starts and ends with a
// letter or digit (a leading digit needs cdiVersion 0.5.0).
Result<void> validate_device_name(std::string_view name);

// Splits and validates a `kind` ("vendor/class") on the first '/'.
Result<std::pair<std::string, std::string>> parse_kind(std::string_view kind);

// Parses "vendor/class=name": split on the first '=', then the qualifier on the
// first '/'; each part validated. Errors say which part is wrong and quote the
// input.
Result<QualifiedName> parse_qualified_name(std::string_view device);

inline bool is_qualified_name(std::string_view device) {
  return parse_qualified_name(device).has_value();
}

}  // namespace podshim::cdi
