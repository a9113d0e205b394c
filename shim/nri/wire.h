// The two framing layers of an NRI socket, as pure functions and streaming
// parsers without I/O, so that each byte rule is unit-testable.
//
//   trunk  := { mux frame }                         containerd/nri pkg/net/multiplex/mux.go
//   mux    := u32 BE conn_id | u32 BE length | payload
//   per conn, the payloads concatenate into a ttrpc byte stream:
//   ttrpc  := u32 BE length | u32 BE stream_id | u8 type | u8 flags | data
//                                                    containerd/ttrpc channel.go
//
// Receiving allocates what a header claims only up to ttrpc's 4 MiB message
// limit (as the Go receiver does); a bigger claim grows with the bytes that
// arrive, and a message above the receive cap is skipped byte by byte and
// reported as oversized (the ttrpc receiver's ResourceExhausted rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::nri {

// Mux connection ids (multiplex/ttrpc.go): on conn 1 the runtime calls the
// plugin's Plugin service, on conn 2 the plugin calls the Runtime service.
inline constexpr uint32_t kPluginServiceConn = 1;
inline constexpr uint32_t kRuntimeServiceConn = 2;

inline constexpr size_t kMuxHeaderLen = 8;
// Largest mux payload we ever write. Go's ttrpc reads the trunk through a
// 4096-byte bufio.Reader and a bigger frame from a non-Go peer fails the Go
// side with ENOMEM and drops the plugin (verified on the v0.4 and v0.8
// runtimes: 4096 passes, 4106 fails). So every outgoing frame is chunked.
inline constexpr size_t kMaxMuxPayloadOut = 4096;

inline constexpr size_t kTtrpcHeaderLen = 10;
// ttrpc's messageLengthMax (channel.go).
inline constexpr size_t kTtrpcMaxMessage = 4u << 20;
// What we accept by default from a runtime. NRI v0.4 runtimes (containerd
// ≤ 1.7.25, ttrpc ≤ v1.2.5 had the send-side check commented out) send a
// Synchronize of every pod and container as one message: 8.8 MB for 3000
// containers was measured. Refusing it would get the plugin closed, so the
// plugin side accepts up to this cap; the ttrpc 4 MiB rule still applies to
// everything we send.
inline constexpr size_t kDefaultMaxRecvMessage = 64u << 20;

enum class MsgType : uint8_t { Request = 1, Response = 2, Data = 3 };

// gRPC status codes used by ttrpc.
namespace code {
inline constexpr int32_t kOk = 0;
inline constexpr int32_t kUnknown = 2;
inline constexpr int32_t kInvalidArgument = 3;
inline constexpr int32_t kDeadlineExceeded = 4;
inline constexpr int32_t kResourceExhausted = 8;
inline constexpr int32_t kUnimplemented = 12;
inline constexpr int32_t kInternal = 13;
inline constexpr int32_t kUnavailable = 14;
}  // namespace code

struct TtrpcHeader {
  uint32_t length = 0;
  uint32_t stream_id = 0;
  uint8_t type = 0;
  uint8_t flags = 0;
};

void put_u32be(std::string& out, uint32_t v);
uint32_t get_u32be(const char* p);

// Appends one ttrpc frame (header + data) to `out`.
void append_ttrpc_frame(std::string& out, uint32_t stream_id, MsgType type, uint8_t flags,
                        std::string_view data);

// Appends `payload` as mux frames on `conn`, none with more than `max_chunk`
// payload bytes (an empty payload still becomes one empty frame).
void append_mux_frames(std::string& out, uint32_t conn, std::string_view payload,
                       size_t max_chunk = kMaxMuxPayloadOut);

// Streaming trunk parser: splits the byte stream into (conn, piece) calls,
// where the pieces of one mux frame are handed on as they arrive.
class MuxDecoder {
 public:
  using Sink = std::function<Result<void>(uint32_t conn, std::string_view piece)>;
  // Frame-level observer (conn, declared length), e.g. to check peer framing.
  using FrameTap = std::function<void(uint32_t conn, uint32_t length)>;

  Result<void> feed(std::string_view bytes, const Sink& sink);
  void set_frame_tap(FrameTap tap) { tap_ = std::move(tap); }
  // True between frames (no partial header or payload pending).
  bool at_boundary() const { return header_fill_ == 0 && remaining_ == 0; }

 private:
  char header_[kMuxHeaderLen] = {};
  size_t header_fill_ = 0;
  uint32_t conn_ = 0;
  size_t remaining_ = 0;
  FrameTap tap_;
};

// One reassembled ttrpc message. `oversized` means the body was longer than
// the receive cap and was discarded; `body` is then empty.
struct TtrpcMessage {
  TtrpcHeader header;
  std::string body;
  bool oversized = false;
};

// Per-conn ttrpc reassembly. The body buffer is lent to the sink: one the
// sink leaves in the message is reused for the next one, unless it is
// larger than kRetainCapacity.
class TtrpcDecoder {
 public:
  static constexpr size_t kExactReserveMax = kTtrpcMaxMessage;
  static constexpr size_t kRetainCapacity = 64u << 10;
  using Sink = std::function<Result<void>(TtrpcMessage&& msg)>;
  explicit TtrpcDecoder(size_t max_message = kTtrpcMaxMessage) : max_(max_message) {}

  Result<void> feed(std::string_view bytes, const Sink& sink);
  size_t max_message() const { return max_; }
  // Bytes currently buffered for a partial message (for tests of the
  // "no allocation on claim" rule).
  size_t buffered_capacity() const { return body_.capacity(); }

 private:
  size_t max_;
  char header_[kTtrpcHeaderLen] = {};
  size_t header_fill_ = 0;
  bool in_body_ = false;
  TtrpcHeader hdr_;
  std::string body_;
  size_t skip_ = 0;  // bytes left to discard of an oversized body
};

// Parses a 10-byte ttrpc header.
TtrpcHeader parse_ttrpc_header(const char* p);

// "message length N exceed maximum message size of M" (ttrpc channel.go wording).
std::string oversize_message(size_t length, size_t max);

}  // namespace podshim::nri
