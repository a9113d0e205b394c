// Fuzzes the NRI socket's two framing layers (shim/nri/wire.h): any byte
// string read from the runtime's socket, cut into reads of any size, must
// give messages or one clean protocol error, never a crash, UB, a hang or an
// allocation of what a header claims beyond ttrpc's 4 MiB message limit
// (up to it the buffer is sized from the header, as the Go receiver does).
//
// Input: byte 0 picks the read size (1..63 bytes; 0 means 7) and the
// ttrpc receive cap (the default 4 MiB, or 64 bytes so the oversized-skip
// path runs); the rest is the trunk as it would come off the socket.
//
// Invariants checked:
//  - streaming: reads of any size give exactly what one big read gives
//    (the same messages, then the same error or none);
//  - a message's body is as long as its header says, or it is marked
//    oversized with an empty body (the ttrpc ResourceExhausted rule);
//  - a partial message never holds more buffer than the bytes that arrived,
//    or than a claim of at most TtrpcDecoder::kExactReserveMax;
//  - every complete message re-encodes (append_ttrpc_frame +
//    append_mux_frames) to a trunk that decodes to the same messages.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shim/nri/ttrpc.pb.h"
#include "shim/nri/wire.h"

using namespace podshim;
using namespace podshim::nri;

namespace {

struct Seen {
  uint32_t conn = 0;
  TtrpcHeader header;
  std::string body;
  bool oversized = false;
  bool operator==(const Seen& o) const {
    return conn == o.conn && header.length == o.header.length &&
           header.stream_id == o.header.stream_id && header.type == o.header.type &&
           header.flags == o.header.flags && body == o.body && oversized == o.oversized;
  }
};

struct Outcome {
  std::vector<Seen> messages;
  bool failed = false;
};

// Decodes `trunk` in reads of `step` bytes (0 = one read).
Outcome decode(std::string_view trunk, size_t step, size_t max_message) {
  Outcome out;
  MuxDecoder mux;
  std::map<uint32_t, std::unique_ptr<TtrpcDecoder>> conns;
  size_t fed = 0;
  auto sink = [&](uint32_t conn, std::string_view piece) -> Result<void> {
    auto& d = conns[conn];
    if (!d) d = std::make_unique<TtrpcDecoder>(max_message);
    auto r = d->feed(piece, [&](TtrpcMessage&& m) -> Result<void> {
      if (m.oversized) {
        if (m.header.length <= max_message || !m.body.empty()) __builtin_trap();
      } else if (m.body.size() != m.header.length) {
        __builtin_trap();
      }
      out.messages.push_back(Seen{conn, m.header, std::move(m.body), m.oversized});
      return {};
    });
    // Beyond kExactReserveMax, what is buffered for a partial message came
    // off the wire (growth may double, but never towards a length only
    // claimed by a header).
    if (d->buffered_capacity() > std::max(2 * fed + 64, TtrpcDecoder::kExactReserveMax)) __builtin_trap();
    return r;
  };
  while (fed < trunk.size()) {
    const size_t n = step == 0 ? trunk.size() : std::min(step, trunk.size() - fed);
    std::string_view chunk = trunk.substr(fed, n);
    fed += n;
    if (auto r = mux.feed(chunk, sink); !r) {
      if (r.error().message.empty()) __builtin_trap();
      out.failed = true;
      break;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const size_t step = (mode & 0x3f) == 0 ? 0 : (mode & 0x3f);
  const size_t max_message = (mode & 0x40) ? 64 : kTtrpcMaxMessage;
  std::string_view trunk(reinterpret_cast<const char*>(data) + 1, size - 1);

  Outcome whole = decode(trunk, 0, max_message);
  Outcome pieces = decode(trunk, step == 0 ? 7 : step, max_message);
  if (whole.failed != pieces.failed || whole.messages.size() != pieces.messages.size()) {
    __builtin_trap();
  }
  for (size_t i = 0; i < whole.messages.size(); i++) {
    if (!(whole.messages[i] == pieces.messages[i])) __builtin_trap();
  }

  // What the Transport does next with a complete message: a protobuf
  // Request or Response. Either may fail; neither may crash.
  std::string again;
  for (const auto& m : whole.messages) {
    if (m.oversized) continue;
    if (m.header.type == static_cast<uint8_t>(MsgType::Request)) {
      ttrpc::Request req;
      (void)req.ParseFromString(m.body);
    } else if (m.header.type == static_cast<uint8_t>(MsgType::Response)) {
      ttrpc::Response resp;
      (void)resp.ParseFromString(m.body);
    }
    std::string frame;
    append_ttrpc_frame(frame, m.header.stream_id, static_cast<MsgType>(m.header.type),
                       m.header.flags, m.body);
    append_mux_frames(again, m.conn, frame, 1 + (mode % 4096));
  }
  // Round trip: our own encoding of what we decoded decodes to the same.
  Outcome re = decode(again, 0, max_message);
  size_t expect = 0;
  for (const auto& m : whole.messages) expect += m.oversized ? 0 : 1;
  if (re.failed || re.messages.size() != expect) __builtin_trap();
  size_t k = 0;
  for (const auto& m : whole.messages) {
    if (m.oversized) continue;
    if (!(re.messages[k++] == m)) __builtin_trap();
  }
  return 0;
}
