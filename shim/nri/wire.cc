#include "shim/nri/wire.h"

#include <algorithm>

#include <fmt/format.h>

namespace podshim::nri {

void put_u32be(std::string& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(b, 4);
}

uint32_t get_u32be(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

TtrpcHeader parse_ttrpc_header(const char* p) {
  TtrpcHeader h;
  h.length = get_u32be(p);
  h.stream_id = get_u32be(p + 4);
  h.type = static_cast<uint8_t>(p[8]);
  h.flags = static_cast<uint8_t>(p[9]);
  return h;
}

void append_ttrpc_frame(std::string& out, uint32_t stream_id, MsgType type, uint8_t flags,
                        std::string_view data) {
  put_u32be(out, static_cast<uint32_t>(data.size()));
  put_u32be(out, stream_id);
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  out.append(data);
}

void append_mux_frames(std::string& out, uint32_t conn, std::string_view payload,
                       size_t max_chunk) {
  if (max_chunk == 0) max_chunk = kMaxMuxPayloadOut;
  do {
    const size_t n = std::min(payload.size(), max_chunk);
    put_u32be(out, conn);
    put_u32be(out, static_cast<uint32_t>(n));
    out.append(payload.substr(0, n));
    payload.remove_prefix(n);
  } while (!payload.empty());
}

namespace {

// Moves the front of `bytes` into a frame header being collected (`len`
// bytes, `*fill` of them so far): true once it is whole, with *fill back at
// 0 for the next frame's.
bool collect_header(std::string_view& bytes, char* header, size_t len, size_t* fill) {
  const size_t n = std::min(bytes.size(), len - *fill);
  std::copy_n(bytes.data(), n, header + *fill);
  *fill += n;
  bytes.remove_prefix(n);
  if (*fill < len) return false;
  *fill = 0;
  return true;
}

}  // namespace

std::string oversize_message(size_t length, size_t max) {
  return fmt::format("message length {} exceed maximum message size of {}", length, max);
}

Result<void> MuxDecoder::feed(std::string_view bytes, const Sink& sink) {
  while (!bytes.empty()) {
    if (remaining_ == 0) {
      if (!collect_header(bytes, header_, kMuxHeaderLen, &header_fill_)) break;
      conn_ = get_u32be(header_);
      remaining_ = get_u32be(header_ + 4);
      // Only conns 1 and 2 exist in NRI; anything else means the stream is
      // not an NRI trunk (or lost sync), and nothing after it can be trusted.
      if (conn_ != kPluginServiceConn && conn_ != kRuntimeServiceConn) {
        return fail(EPROTO, "mux frame for unknown connection id {} (length {})", conn_,
                    remaining_);
      }
      if (tap_) tap_(conn_, static_cast<uint32_t>(remaining_));
      continue;
    }
    const size_t n = std::min(bytes.size(), remaining_);
    remaining_ -= n;
    PODSHIM_TRY(sink(conn_, bytes.substr(0, n)));
    bytes.remove_prefix(n);
  }
  return {};
}

Result<void> TtrpcDecoder::feed(std::string_view bytes, const Sink& sink) {
  while (!bytes.empty()) {
    if (!in_body_) {
      if (!collect_header(bytes, header_, kTtrpcHeaderLen, &header_fill_)) break;
      hdr_ = parse_ttrpc_header(header_);
      if (hdr_.type < 1 || hdr_.type > 3) {
        return fail(EPROTO, "ttrpc frame with unknown message type {} (stream {})", hdr_.type,
                    hdr_.stream_id);
      }
      in_body_ = true;
      body_.clear();
      skip_ = hdr_.length > max_ ? hdr_.length : 0;
      // Up to ttrpc's own 4 MiB limit the buffer is sized from the header
      // at once, as the Go receiver does (ttrpc channel.go recv allocates
      // the declared length): one allocation, no doubling by append. A
      // bigger claim (old runtimes' unpaged Synchronize) only grows with
      // the bytes that really arrive.
      if (skip_ == 0 && hdr_.length <= kExactReserveMax && hdr_.length > body_.capacity()) {
        std::string fresh;  // exactly the claim (see the growth below)
        fresh.reserve(hdr_.length);
        body_.swap(fresh);
      }
    } else if (skip_ > 0) {
      const size_t n = std::min(bytes.size(), skip_);
      skip_ -= n;
      bytes.remove_prefix(n);
    } else {
      const size_t want = hdr_.length - body_.size();
      const size_t n = std::min(bytes.size(), want);
      // Past kExactReserveMax: grows with the bytes that really arrived,
      // doubling but never past the claimed size, so the last step lands
      // on it exactly.
      if (body_.size() + n > body_.capacity()) {
        // Into a fresh string: libstdc++'s reserve() on a grown string
        // would round up to twice the old capacity, past the claim.
        std::string grown;
        grown.reserve(std::min<size_t>(hdr_.length, std::max(2 * body_.capacity(), body_.size() + n)));
        grown.append(body_);
        body_.swap(grown);
      }
      body_.append(bytes.data(), n);
      bytes.remove_prefix(n);
    }
    if (in_body_ && skip_ == 0 && (hdr_.length > max_ || body_.size() == hdr_.length)) {
      TtrpcMessage msg;
      msg.header = hdr_;
      msg.oversized = hdr_.length > max_;
      if (!msg.oversized) msg.body = std::move(body_);
      in_body_ = false;
      auto r = sink(std::move(msg));
      // A failed sink may have destroyed this decoder with its owner (a
      // transport whose handler closed the connection): touch nothing.
      if (!r) return r;
      // The buffer comes back unless the sink kept it: reused for the next
      // message, or released after a large one (one big Synchronize page
      // must not pin megabytes for the life of the connection).
      body_ = std::move(msg.body);
      body_.clear();
      // swap, not assignment: move-assigning a short string keeps the
      // destination's buffer in libstdc++.
      if (body_.capacity() > kRetainCapacity) std::string().swap(body_);
    }
  }
  return {};
}

}  // namespace podshim::nri
