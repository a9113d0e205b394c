#include "shim/nri/transport.h"
#include "base/guard.h"
#include "base/log.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace podshim::nri {

namespace {

// Runs `fn` on the next loop iteration, detached from any object, so a
// callback is never invoked from inside the call that registered it.
void post(sd_event* loop, std::function<void()> fn) {
  auto* heap = new std::function<void()>(std::move(fn));
  sd_event_source* s = nullptr;
  const int r = sd_event_add_defer(
      loop, &s,
      [](sd_event_source* src, void* ud) -> int {
        std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(ud));
        sd_event_source_unref(src);
        contain("NRI: deferred work", *f);
        return 0;
      },
      heap);
  if (r < 0) {
    // Out of memory in sd-event: run it now rather than lose it.
    std::unique_ptr<std::function<void()>> f(heap);
    (*f)();
  }
}

struct TimerCtx {
  Transport* self;
  uint32_t conn;
  uint32_t stream_id;
};

}  // namespace

Result<std::unique_ptr<Transport>> Transport::create(sd_event* loop, UniqueFd fd,
                                                     TransportOptions opts) {
  if (!fd.valid()) return fail(EBADF, "NRI transport: no socket");
  const int fl = fcntl(fd.get(), F_GETFL);
  if (fl < 0 || fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) < 0) {
    return fail_errno("making NRI socket non-blocking");
  }
  if (opts.max_frame_payload == 0 || opts.max_frame_payload > kMaxMuxPayloadOut) {
    if (opts.framing == Framing::Chunked) opts.max_frame_payload = kMaxMuxPayloadOut;
  }
  std::unique_ptr<Transport> t(new Transport(loop, std::move(fd), opts));
  PODSHIM_TRY(t->start());
  return t;
}

Transport::Transport(sd_event* loop, UniqueFd fd, TransportOptions opts)
    : loop_(loop), fd_(std::move(fd)), opts_(opts) {
  mux_.set_frame_tap([this](uint32_t, uint32_t len) {
    stats_.frames_in++;
    stats_.max_frame_payload_in = std::max<uint64_t>(stats_.max_frame_payload_in, len);
  });
}

Transport::~Transport() {
  *alive_ = false;
  for (auto& [id, c] : conns_) {
    for (auto& [sid, p] : c.pending) {
      if (p.timer) {
        delete static_cast<TimerCtx*>(sd_event_source_get_userdata(p.timer));
        sd_event_source_disable_unref(p.timer);
      }
    }
  }
  if (io_) sd_event_source_disable_unref(io_);
  if (defer_) sd_event_source_disable_unref(defer_);
}

Result<void> Transport::start() {
  const int r = sd_event_add_io(loop_, &io_, fd_.get(), EPOLLIN, &Transport::on_io, this);
  if (r < 0) return fail_code(-r, "watching NRI socket");
  return {};
}

Transport::Conn& Transport::conn(uint32_t id) {
  Conn& c = conns_[id];
  if (!c.decoder) c.decoder = std::make_unique<TtrpcDecoder>(opts_.max_recv_message);
  return c;
}

void Transport::serve(uint32_t id, Handler handler) {
  conn(id).handler = [h = std::move(handler)](const pb::RequestView& req, Responder respond) {
    respond(h(req));
  };
}

void Transport::serve_async(uint32_t id, AsyncHandler handler) { conn(id).handler = std::move(handler); }

void Transport::call(uint32_t id, std::string_view service, std::string_view method,
                     std::string payload, uint64_t timeout_usec, Callback cb) {
  if (closed()) {
    post(loop_, [cb = std::move(cb)] { cb({{code::kUnavailable, "ttrpc: closed"}, {}}); });
    return;
  }
  Conn& c = conn(id);
  const uint32_t sid = c.next_stream_id;
  c.next_stream_id += 2;

  ttrpc::Request req;
  req.set_service(std::string(service));
  req.set_method(std::string(method));
  req.set_payload(std::move(payload));
  if (timeout_usec > 0) req.set_timeout_nano(static_cast<int64_t>(timeout_usec) * 1000);
  std::string data;
  req.SerializeToString(&data);
  if (data.size() > opts_.max_send_message) {
    // ttrpc ≥ v1.2.6 refuses to send an oversized message with the same
    // status the receiver would give; NRI's Synchronize paging relies on it.
    Status st{code::kResourceExhausted, oversize_message(data.size(), opts_.max_send_message)};
    post(loop_, [cb = std::move(cb), st] { cb({st, {}}); });
    return;
  }

  Pending p;
  p.cb = std::move(cb);
  if (timeout_usec > 0) {
    auto* ctx = new TimerCtx{this, id, sid};
    // 1 ms accuracy (0 means sd-event's default slack of 250 ms).
    const int r = sd_event_add_time_relative(loop_, &p.timer, CLOCK_MONOTONIC, timeout_usec, 1000,
                                             &Transport::on_timer, ctx);
    if (r < 0) {
      delete ctx;
      p.timer = nullptr;
    }
  }
  c.pending.emplace(sid, std::move(p));
  send_message(id, sid, MsgType::Request, data);
}

int Transport::on_timer(sd_event_source* s, uint64_t, void* userdata) {
  std::unique_ptr<TimerCtx> ctx(static_cast<TimerCtx*>(userdata));
  Transport* self = ctx->self;
  auto& c = self->conns_[ctx->conn];
  auto it = c.pending.find(ctx->stream_id);
  sd_event_source_disable_unref(s);
  if (it == c.pending.end()) return 0;
  Callback cb = std::move(it->second.cb);
  c.pending.erase(it);
  contain("NRI: a call's deadline", [&] { cb({{code::kDeadlineExceeded, "context deadline exceeded"}, {}}); });
  return 0;
}

void Transport::send_message(uint32_t id, uint32_t stream_id, MsgType type, std::string_view data) {
  if (closed()) return;
  std::string frame;
  frame.reserve(kTtrpcHeaderLen + data.size());
  append_ttrpc_frame(frame, stream_id, type, 0, data);

  std::string_view rest = frame;
  bool first = true;
  while (first || !rest.empty()) {
    size_t n = rest.size();
    switch (opts_.framing) {
      case Framing::Chunked: n = std::min(n, opts_.max_frame_payload); break;
      case Framing::GoStyle: n = first ? std::min(n, kMaxMuxPayloadOut) : n; break;
      case Framing::Whole: break;
    }
    const std::string_view piece = rest.substr(0, n);
    put_u32be(out_, id);
    put_u32be(out_, static_cast<uint32_t>(piece.size()));
    out_.append(piece);
    stats_.frames_out++;
    stats_.bytes_out += kMuxHeaderLen + piece.size();
    stats_.max_frame_payload_out = std::max<uint64_t>(stats_.max_frame_payload_out, piece.size());
    if (tap_) tap_(true, id, piece);
    rest.remove_prefix(n);
    first = false;
  }
  flush();
}

void Transport::send_status(uint32_t id, uint32_t stream_id, const Status& st) {
  ttrpc::Response resp;
  resp.mutable_status()->set_code(st.code);
  resp.mutable_status()->set_message(st.message);
  std::string data;
  resp.SerializeToString(&data);
  send_message(id, stream_id, MsgType::Response, data);
}

void Transport::write_raw(std::string_view bytes) {
  if (closed()) return;
  out_.append(bytes);
  flush();
}

void Transport::flush() {
  while (!closed() && out_off_ < out_.size()) {
    const ssize_t n = ::send(fd_.get(), out_.data() + out_off_, out_.size() - out_off_,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      close(Error{errno, fmt::format("writing to NRI socket: {}", errno_string(errno))});
      return;
    }
    out_off_ += static_cast<size_t>(n);
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  } else if (out_off_ > (1u << 20)) {
    out_.erase(0, out_off_);
    out_off_ = 0;
  }
  update_events();
}

void Transport::update_events() {
  if (!io_) return;
  sd_event_source_set_io_events(io_, EPOLLIN | (out_off_ < out_.size() ? uint32_t{EPOLLOUT} : 0u));
}

int Transport::on_io(sd_event_source*, int, uint32_t revents, void* userdata) {
  auto* self = static_cast<Transport*>(userdata);
  auto alive = self->alive_;
  const bool ok = contain("NRI connection", [&] {
    if (revents & EPOLLOUT) self->flush();
    if (!*alive || self->closed()) return;
    if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      auto r = self->read_some();
      if (!*alive) return;
      if (!r) self->close(std::move(r).error());
    }
  });
  // A frame half-read when something threw leaves the stream where no one
  // can tell: close it; the plugin reconnects and synchronizes again.
  if (!ok && *alive && !self->closed()) self->close(Error{EPROTO, "internal error while reading from the runtime"});
  return 0;
}

Result<void> Transport::read_some() {
  auto alive = alive_;
  char buf[64 * 1024];
  // Bounded per wakeup so one busy peer cannot starve the rest of the loop.
  for (int i = 0; i < 64 && !closed(); ++i) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return {};
      return fail_errno("reading from NRI socket");
    }
    if (n == 0) {
      if (!mux_.at_boundary()) return fail(EPROTO, "connection closed by peer in mid-frame");
      return fail(ECONNRESET, "connection closed by peer");
    }
    auto r = mux_.feed(std::string_view(buf, static_cast<size_t>(n)),
                       [&](uint32_t id, std::string_view piece) -> Result<void> {
                         return conn(id).decoder->feed(
                             piece, [&, id](TtrpcMessage&& msg) -> Result<void> {
                               stats_.messages_in++;
                               auto rr = on_message(id, std::move(msg));
                               if (!*alive || closed()) return fail(ECANCELED, "closed");
                               return rr;
                             });
                       });
    if (!*alive) return {};
    if (closed()) return {};
    if (!r) return r;
    // A short read took all there was: the io source is level-triggered, so
    // the loop wakes us again for more; reading on to EAGAIN would cost one
    // failed read() per message.
    if (static_cast<size_t>(n) < sizeof buf) return {};
  }
  return {};
}

Result<void> Transport::on_message(uint32_t id, TtrpcMessage&& msg) {
  Conn& c = conn(id);
  switch (static_cast<MsgType>(msg.header.type)) {
    case MsgType::Request:
      if (!c.handler) {
        return fail(EPROTO, "ttrpc request (stream {}) on mux connection {}, which this side does "
                    "not serve", msg.header.stream_id, id);
      }
      return on_request(id, c, std::move(msg));
    case MsgType::Response:
      if (c.handler) {
        return fail(EPROTO, "ttrpc response (stream {}) on mux connection {}, where this side is "
                    "the server", msg.header.stream_id, id);
      }
      return on_response(id, c, std::move(msg));
    case MsgType::Data:
      // Streaming data; NRI has no streaming RPCs, so there is no stream it
      // could belong to. The Go server drops such frames too.
      return {};
  }
  return {};
}

Result<void> Transport::on_request(uint32_t id, Conn& c, TtrpcMessage&& msg) {
  const uint32_t sid = msg.header.stream_id;
  // The checks and wording of ttrpc server.go.
  if (sid % 2 == 0) {
    send_status(id, sid, {code::kInvalidArgument, "StreamID must be odd for client initiated streams"});
    return {};
  }
  if (sid <= c.last_stream_id) {
    send_status(id, sid, {code::kInvalidArgument, "StreamID cannot be re-used and must increment"});
    return {};
  }
  c.last_stream_id = sid;
  if (msg.oversized) {
    send_status(id, sid, {code::kResourceExhausted,
                          oversize_message(msg.header.length, opts_.max_recv_message)});
    return {};
  }
  // The envelope is read in place: service, method and payload are views
  // into msg.body, which the decoder reuses once the handler returns.
  pb::RequestView req;
  if (auto d = pb::decode_request(msg.body, &req); !d) {
    send_status(id, sid, {code::kInvalidArgument, "unmarshal request error: " + d.error().message});
    return {};
  }
  std::weak_ptr<bool> alive = alive_;
  auto answered = std::make_shared<bool>(false);
  // The boundary of an NRI handler: a throw answers this request with
  // INTERNAL (unless it was answered already) and the connection goes on.
  try {
    c.handler(req, [this, alive, answered, id, sid](CallResult res) {
      *answered = true;
      // The transport may be gone (a reconnect) or closed by now.
      auto a = alive.lock();
      if (!a || !*a || closed()) return;
      send_result(id, sid, std::move(res));
    });
  } catch (const std::exception& e) {
    log::err("NRI: handling {}.{} failed: {}", req.service, req.method, e.what());
    if (!*answered) send_status(id, sid, {code::kInternal, fmt::format("podshim: internal error: {}", e.what())});
  }
  return {};
}

void Transport::send_result(uint32_t id, uint32_t sid, CallResult res) {
  if (!res.status.ok()) {
    send_status(id, sid, res.status);
    return;
  }
  // Success: status unset, payload = the reply (an empty reply makes a
  // zero-length Response, exactly as the Go server sends it).
  ttrpc::Response resp;
  resp.set_payload(std::move(res.payload));
  std::string data;
  resp.SerializeToString(&data);
  send_message(id, sid, MsgType::Response, data);
}

Result<void> Transport::on_response(uint32_t, Conn& c, TtrpcMessage&& msg) {
  auto it = c.pending.find(msg.header.stream_id);
  if (it == c.pending.end()) return {};  // late reply to a call that timed out
  Pending p = std::move(it->second);
  c.pending.erase(it);
  if (p.timer) {
    delete static_cast<TimerCtx*>(sd_event_source_get_userdata(p.timer));
    sd_event_source_disable_unref(p.timer);
  }
  CallResult res;
  if (msg.oversized) {
    res.status = {code::kResourceExhausted, oversize_message(msg.header.length, opts_.max_recv_message)};
  } else {
    ttrpc::Response resp;
    if (!resp.ParseFromString(msg.body)) {
      res.status = {code::kInternal, "unmarshal response error: invalid protobuf"};
    } else if (resp.has_status() && resp.status().code() != code::kOk) {
      res.status = {resp.status().code(), resp.status().message()};
    } else {
      res.payload = std::move(*resp.mutable_payload());
    }
  }
  p.cb(std::move(res));
  return {};
}

void Transport::fail_pending(Conn& c, const Status& st) {
  auto pending = std::move(c.pending);
  c.pending.clear();
  for (auto& [sid, p] : pending) {
    if (p.timer) {
      delete static_cast<TimerCtx*>(sd_event_source_get_userdata(p.timer));
      sd_event_source_disable_unref(p.timer);
    }
  }
  for (auto& [sid, p] : pending) p.cb({st, {}});
}

void Transport::close(Error why) {
  if (closed()) return;
  if (io_) io_ = sd_event_source_disable_unref(io_);
  fd_.reset();
  out_.clear();
  out_off_ = 0;
  close_reason_ = std::move(why);
  const int r = sd_event_add_defer(loop_, &defer_, &Transport::on_deferred_close, this);
  if (r < 0) defer_ = nullptr;
  auto alive = alive_;
  for (auto& [id, c] : conns_) {
    fail_pending(c, {code::kUnavailable, "ttrpc: closed"});
    if (!*alive) return;
  }
}

int Transport::on_deferred_close(sd_event_source* s, void* userdata) {
  auto* self = static_cast<Transport*>(userdata);
  sd_event_source_disable_unref(s);
  self->defer_ = nullptr;
  CloseHandler h = self->on_close_;
  Error why = self->close_reason_.value_or(Error{0, "closed"});
  if (h) contain("NRI: closing a connection", [&] { h(why); });  // may destroy *self
  return 0;
}

}  // namespace podshim::nri
