// The CDI spec model (specs-go/config.go at cdiVersion 1.1.0), strict parsing
// of JSON and YAML spec files, the cdiVersion rules and spec validation.
//
// Parsing is strict in the way upstream's yaml.UnmarshalStrict is: an unknown
// field at any level, a duplicate key or a value of the wrong type is an error
// naming the field path ("devices[0].containerEdits.mounts[1]: unknown field
// \"foo\""). Exceptions from nlohmann::json are caught here; YAML is read
// with libyaml.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/boxed.h"
#include "base/result.h"

namespace podshim::cdi {

struct DeviceNode {
  std::string path;       // in the container
  std::string host_path;  // empty: same as path (cdiVersion 0.5.0)
  std::string type;       // "", "b", "c", "u" or "p"
  int64_t major = 0;      // 0: unset (Go int64 without a pointer)
  int64_t minor = 0;
  std::optional<uint32_t> file_mode;  // permission bits
  std::string permissions;            // subset of "rwm", or "none"
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
};

struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;
  std::string type;  // cdiVersion 0.4.0
};

struct Hook {
  std::string hook_name;  // an OCI hook stage
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int64_t> timeout;
};

struct IntelRdt {  // cdiVersion 0.7.0; schemata and enableMonitoring 1.1.0
  std::string clos_id;
  std::string l3_cache_schema;
  std::string mem_bw_schema;
  std::optional<std::vector<std::string>> schemata;
  bool enable_monitoring = false;
};

// A list that is usually empty, kept on the heap: a pointer's size when
// empty instead of std::vector's 24 bytes, in each of a registry's thousands
// of ContainerEdits (netDevices and additionalGids are rare). Reads and
// grows like the std::vector it holds; copies are deep.
template <typename T>
class ThinVec {
 public:
  ThinVec() = default;
  ThinVec(std::initializer_list<T> l) { *this = std::vector<T>(l); }
  ThinVec(const ThinVec& o) : p_(o.p_ ? std::make_unique<std::vector<T>>(*o.p_) : nullptr) {}
  ThinVec(ThinVec&&) noexcept = default;
  ThinVec& operator=(const ThinVec& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<std::vector<T>>(*o.p_) : nullptr;
    return *this;
  }
  ThinVec& operator=(ThinVec&&) noexcept = default;
  ThinVec& operator=(std::vector<T> v) {
    p_ = v.empty() ? nullptr : std::make_unique<std::vector<T>>(std::move(v));
    return *this;
  }
  ThinVec& operator=(std::initializer_list<T> l) { return *this = std::vector<T>(l); }
  size_t size() const { return p_ ? p_->size() : 0; }
  bool empty() const { return !p_ || p_->empty(); }
  const T* begin() const { return p_ ? p_->data() : nullptr; }
  const T* end() const { return p_ ? p_->data() + p_->size() : nullptr; }
  const T& operator[](size_t i) const { return (*p_)[i]; }
  void push_back(T v) { grow().push_back(std::move(v)); }
  void append(const ThinVec& o) {
    if (o.empty()) return;
    std::vector<T>& v = grow();
    v.insert(v.end(), o.begin(), o.end());
  }
  friend bool operator==(const ThinVec& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::vector<T>& grow() {
    if (!p_) p_ = std::make_unique<std::vector<T>>();
    return *p_;
  }
  std::unique_ptr<std::vector<T>> p_;
};

struct NetDevice {  // cdiVersion 1.1.0
  std::string host_interface_name;
  std::string name;
};

struct ContainerEdits {
  std::vector<std::string> env;
  std::vector<DeviceNode> device_nodes;
  ThinVec<NetDevice> net_devices;  // rare: a pointer when empty
  std::vector<Hook> hooks;
  std::vector<Mount> mounts;
  Boxed<IntelRdt> intel_rdt;
  ThinVec<uint32_t> additional_gids;  // rare: a pointer when empty

  bool empty() const;
  // Concatenates `o`'s lists after ours; a later intelRdt replaces ours
  // (pkg/cdi ContainerEdits.Append).
  void append(const ContainerEdits& o);
};

// Annotations (cdiVersion 0.6.0) are rare in spec files; boxed, an absent
// map costs a pointer instead of an empty std::map's 48 bytes in each of a
// registry's thousands of devices. Absent and empty mean the same.
using Annotations = Boxed<std::map<std::string, std::string>>;

struct Device {
  std::string name;
  Annotations annotations;  // cdiVersion 0.6.0
  ContainerEdits edits;
};

struct Spec {
  std::string version;  // cdiVersion as written ("1.0.0" or "v1.0.0")
  std::string kind;     // "vendor/class"
  Annotations annotations;
  std::vector<Device> devices;
  ContainerEdits edits;  // applied once per spec when any of its devices is injected
};

enum class Format { Json, Yaml };

// .json → Json, .yaml → Yaml; anything else (".yml" included, as upstream) is
// not a spec file.
std::optional<Format> format_for_path(std::string_view path);

// Parses spec data strictly; does not validate the content.
Result<Spec> parse_spec(std::string_view data, Format format);

// A released cdiVersion, comparable.
struct Version {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const Version&) const = default;
  std::string str() const;  // "1.1.0"
};

inline constexpr Version kEarliestVersion{0, 3, 0};
inline constexpr Version kCurrentVersion{1, 1, 0};

// Parses a cdiVersion against the known versions (0.1.0 … 0.8.0, 1.0.0,
// 1.1.0); one leading 'v' is accepted, as HEAD's newVersion strips it.
Result<Version> parse_version(std::string_view v);

// The oldest cdiVersion that has every feature the spec uses
// (specs-go/version.go MinimumRequiredVersion).
Version minimum_required_version(const Spec& spec);

// Every validation rule of the reference library at v1.x, plus podshim's
// stricter ones (container paths absolute and free of ".."). Returns the first
// problem found.
Result<void> validate_spec(const Spec& spec);

// Validates one set of edits (spec-level or device-level).
Result<void> validate_edits(const ContainerEdits& edits);

// parse_spec + validate_spec.
Result<Spec> load_spec(std::string_view data, Format format);

}  // namespace podshim::cdi
