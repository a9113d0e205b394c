// Loads the wire captures in captures/ (one JSON object per mux frame, see
// captures/README.md) and reassembles them into ttrpc messages with our own
// decoder, so tests can check our protos and our plugin against real peers.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <string>
#include <vector>

#include "base/result.h"
#include <google/protobuf/message.h>

#include "shim/nri/nri_api.pb.h"
#include "shim/nri/ttrpc.pb.h"
#include "shim/nri/wire.h"

namespace podshim::nri::test {

struct CaptureFrame {
  int seq = 0;
  bool from_runtime = false;  // "runtime->plugin"
  uint32_t conn = 0;
  std::string payload;
};

struct CaptureMessage {
  bool from_runtime = false;
  uint32_t conn = 0;
  TtrpcHeader header;
  std::string body;
};

// Directory holding the capture files (compiled in from meson).
std::string capture_dir();

// Reads a .jsonl or .jsonl.gz capture.
Result<std::vector<CaptureFrame>> load_capture(const std::string& file);

// Reassembles frames into messages, per direction and conn, in arrival order.
Result<std::vector<CaptureMessage>> reassemble(const std::vector<CaptureFrame>& frames);

// True when `m` and all its sub-messages have no unknown fields, i.e. our
// .proto knows every field the peer sent. `path` names the first offender.
bool fully_known(const google::protobuf::Message& m, std::string* path);

// The reflection copy of nri_api.proto (podshimd's own is lite): its types
// are named kReflectPackagePrefix + the NRI name.
inline constexpr std::string_view kReflectPackagePrefix = "podshim_reflect.";
const google::protobuf::Descriptor* reflect_descriptor(std::string_view nri_full_name);
std::unique_ptr<google::protobuf::Message> reflect_message(const google::protobuf::Descriptor* d);

// Field-by-field equality of two NRI messages of one type (through the
// reflection copy); `diff` says what differs.
bool same_message(const google::protobuf::MessageLite& a, const google::protobuf::MessageLite& b, std::string* diff);

}  // namespace podshim::nri::test
