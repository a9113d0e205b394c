// Fuzzes the zero-copy NRI request reader (shim/nri/pbview.h) against
// libprotobuf. Arbitrary bytes as the payload of each request shape the
// reader decodes: it must never crash or read out of bounds (ASan), every
// error must name where, and whenever both the reader and libprotobuf accept
// the bytes, every field the views expose must agree. The reader may accept
// what libprotobuf refuses, never the reverse for what it reads: it skips
// the fields it does not read without looking inside (a malformed
// sub-message there, invalid UTF-8 in a string there), where libprotobuf
// checks the whole tree; found by this target (an OptionalInt holding wire
// type 7 inside LinuxContainer.oom_score_adj).
//
// UpdateContainer is also read with decode_update_container (podshimd's
// reader: ids and resources only), which must accept whatever the full
// reader accepts and read the same values.
//
// Input: byte 0 picks the request shape, the rest is the payload.
#include <cstddef>
#include <cstdint>
#include <string>

#include "shim/nri/pbview.h"
#include "tests/shim/nri/pbview_compare.h"

using namespace podshim;
using namespace podshim::nri;
namespace api = ::nri::pkg::api::v1alpha1;

namespace {

// Both verdicts on `bytes` as M: compared only when both accept.
template <typename M>
bool lib_parse(const std::string& bytes, M* m) {
  return m->ParseFromString(bytes);
}

template <typename M>
void check_pod_container(const std::string& bytes, const char* what) {
  pb::PodContainerRequestView v;
  auto r = pb::decode_pod_container_request(bytes, &v, what);
  M m;
  const bool lib = lib_parse(bytes, &m);
  if (!r) {
    if (r.error().message.empty()) __builtin_trap();
    return;
  }
  if (lib && !test::compare_pod_container(v, m).empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: check_pod_container<api::CreateContainerRequest>(bytes, "CreateContainerRequest"); break;
    case 1: {
      check_pod_container<api::UpdateContainerRequest>(bytes, "UpdateContainerRequest");
      // podshimd's reader of the same request (ids and resources only): it
      // accepts whatever the full reader accepts and reads the same values;
      // an error names where.
      pb::PodContainerRequestView part, full;
      auto p = pb::decode_update_container(bytes, &part);
      auto f = pb::decode_pod_container_request(bytes, &full, "UpdateContainerRequest");
      if (!p && p.error().message.empty()) __builtin_trap();
      if (f && !p) __builtin_trap();
      if (f && (part.pod.uid != full.pod.uid || part.pod.id != full.pod.id ||
                part.container.id != full.container.id || part.container.state != full.container.state ||
                part.container.pid != full.container.pid || part.has_linux_resources != full.has_linux_resources ||
                part.linux_resources.memory_limit.value != full.linux_resources.memory_limit.value ||
                part.linux_resources.cpu_quota.value != full.linux_resources.cpu_quota.value ||
                part.linux_resources.cpu_shares.value != full.linux_resources.cpu_shares.value))
        __builtin_trap();
      break;
    }
    case 2: {
      pb::PodContainerRequestView v;
      auto r = pb::decode_pod_sandbox_update(bytes, &v);
      api::UpdatePodSandboxRequest m;
      const bool lib = lib_parse(bytes, &m);
      if (r && lib && !test::compare_pod_container(v, m).empty()) __builtin_trap();
      break;
    }
    case 3: {
      pb::SynchronizeView v;
      auto r = pb::decode_synchronize(bytes, &v);
      api::SynchronizeRequest m;
      const bool lib = lib_parse(bytes, &m);
      if (r && lib && !test::compare(v, m).empty()) __builtin_trap();
      break;
    }
    case 4: {
      pb::StateChangeView v;
      auto r = pb::decode_state_change(bytes, &v);
      api::StateChangeEvent m;
      const bool lib = lib_parse(bytes, &m);
      if (r && lib && (v.event != static_cast<int32_t>(m.event()) ||
                !test::compare(v.pod, m.pod(), "").empty() ||
                !test::compare(v.container, m.container(), "").empty()))
        __builtin_trap();
      break;
    }
    default: {
      pb::RequestView v;
      auto r = pb::decode_request(bytes, &v);
      ::ttrpc::Request m;
      const bool lib = lib_parse(bytes, &m);
      if (r && lib && !test::compare(v, m).empty()) __builtin_trap();
      break;
    }
  }
  return 0;
}
