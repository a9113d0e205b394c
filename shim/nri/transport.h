// One NRI socket on an sd-event loop: the multiplexer plus a ttrpc server or
// client on each mux connection. Used by both ends: the plugin serves conn 1
// and calls on conn 2; the simulator (runtime side) does the opposite.
//
// Calls are asynchronous: call() returns at once and the callback runs from
// the loop when the response, a timeout or the end of the connection
// arrives. A blocking call would have to run the loop recursively, which
// sd-event refuses from inside a callback (sd_event_run → -EBUSY), and every
// NRI event handler runs inside one.
//
// Failure model: a protocol violation (unknown mux conn id, unknown ttrpc
// message type, a request where we serve nothing) or an I/O error closes the
// whole socket; the close handler gets the reason once, from a deferred
// event source, so it may destroy the Transport.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"
#include "shim/nri/pbview.h"
#include "shim/nri/ttrpc.pb.h"
#include "shim/nri/wire.h"

namespace podshim::nri {

// How outgoing messages are cut into mux frames. Everything but Chunked
// exists only so the simulator can reproduce real runtimes' framing.
enum class Framing {
  Chunked,  // every mux frame ≤ max_frame_payload (what a plugin must do)
  GoStyle,  // first frame 4096 bytes, the rest in one frame (Go mux ≥ v0.7)
  Whole,    // one frame per message (Go mux < v0.7)
};

struct TransportOptions {
  size_t max_recv_message = kTtrpcMaxMessage;  // larger incoming → ResourceExhausted
  size_t max_send_message = kTtrpcMaxMessage;  // larger outgoing → ResourceExhausted locally
  size_t max_frame_payload = kMaxMuxPayloadOut;
  Framing framing = Framing::Chunked;
};

// The outcome of a ttrpc call, or the reply of a served method: a gRPC code
// (0 = OK), a message for errors, and the marshalled reply.
struct Status {
  int32_t code = code::kOk;
  std::string message;
  bool ok() const { return code == code::kOk; }
};

struct CallResult {
  Status status;
  std::string payload;
};

struct TransportStats {
  uint64_t frames_out = 0;
  uint64_t bytes_out = 0;
  uint64_t max_frame_payload_out = 0;
  uint64_t frames_in = 0;
  uint64_t max_frame_payload_in = 0;
  uint64_t messages_in = 0;
};

class Transport {
 public:
  // The request is a view into the received frame (pbview.h), valid only
  // during the handler's call: no copy of the payload is ever made.
  using Handler = std::function<CallResult(const pb::RequestView& req)>;
  // Answers a request, now or later: ttrpc matches a response to its request
  // by stream id, not by order (ttrpc server.go), so a handler may keep the
  // responder and call it once from the loop when its work completes. A
  // response for a connection that has closed since is dropped.
  using Responder = std::function<void(CallResult result)>;
  using AsyncHandler = std::function<void(const pb::RequestView& req, Responder respond)>;
  using Callback = std::function<void(CallResult result)>;
  using CloseHandler = std::function<void(const Error& why)>;
  // Sees every mux frame as it is read or written (tests, captures).
  using FrameTap = std::function<void(bool outgoing, uint32_t conn, std::string_view payload)>;

  // Takes ownership of a connected stream socket (made non-blocking here).
  static Result<std::unique_ptr<Transport>> create(sd_event* loop, UniqueFd fd,
                                                   TransportOptions opts = {});
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Serve ttrpc requests arriving on `conn` with `handler` (synchronously).
  void serve(uint32_t conn, Handler handler);
  // The same with replies that may complete later (see Responder).
  void serve_async(uint32_t conn, AsyncHandler handler);
  // Calls service/method on `conn`. A timeout of 0 means none. The callback
  // runs exactly once, never before call() returns.
  void call(uint32_t conn, std::string_view service, std::string_view method,
            std::string payload, uint64_t timeout_usec, Callback cb);

  void set_close_handler(CloseHandler h) { on_close_ = std::move(h); }
  void set_frame_tap(FrameTap tap) { tap_ = std::move(tap); }

  // Closes the socket now; pending calls fail with Unavailable and the close
  // handler is told `why` (deferred).
  void close(Error why);
  bool closed() const { return !fd_.valid(); }
  // Writes raw bytes to the socket, bypassing the framing (garbage tests).
  void write_raw(std::string_view bytes);

  const TransportStats& stats() const { return stats_; }
  int fd() const { return fd_.get(); }

 private:
  Transport(sd_event* loop, UniqueFd fd, TransportOptions opts);
  struct Pending {
    Callback cb;
    sd_event_source* timer = nullptr;
  };
  struct Conn {
    AsyncHandler handler;            // set when we serve this conn
    uint32_t last_stream_id = 0;     // server: highest id seen
    uint32_t next_stream_id = 1;     // client: Go starts at 1, +2 per call
    std::map<uint32_t, Pending> pending;
    std::unique_ptr<TtrpcDecoder> decoder;
  };

  Result<void> start();
  static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_timer(sd_event_source* s, uint64_t usec, void* userdata);
  static int on_deferred_close(sd_event_source* s, void* userdata);
  Result<void> read_some();
  Result<void> on_message(uint32_t conn, TtrpcMessage&& msg);
  Result<void> on_request(uint32_t conn, Conn& c, TtrpcMessage&& msg);
  Result<void> on_response(uint32_t conn, Conn& c, TtrpcMessage&& msg);
  void send_message(uint32_t conn, uint32_t stream_id, MsgType type, std::string_view data);
  void send_status(uint32_t conn, uint32_t stream_id, const Status& st);
  void send_result(uint32_t conn, uint32_t stream_id, CallResult res);
  void flush();
  void update_events();
  void fail_pending(Conn& c, const Status& st);
  Conn& conn(uint32_t id);

  sd_event* loop_;
  UniqueFd fd_;
  TransportOptions opts_;
  sd_event_source* io_ = nullptr;
  sd_event_source* defer_ = nullptr;
  MuxDecoder mux_;
  std::map<uint32_t, Conn> conns_;
  std::string out_;
  size_t out_off_ = 0;
  CloseHandler on_close_;
  FrameTap tap_;
  std::optional<Error> close_reason_;
  TransportStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace podshim::nri
