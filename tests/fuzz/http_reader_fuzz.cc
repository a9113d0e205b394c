// Segmentation independence of the HTTP/1.1 request reader
// (shim/status/http.cc), in process and without sockets, so libFuzzer can
// try far more inputs per second than the black-box socket fuzzer.
//
// Input: bytes 0 and 1 pick two cut points; the rest is what a client sends
// on one connection (a request, or several pipelined). It is read three
// ways: whole, in the three pieces the cut points make, and one byte at a
// time (for inputs up to 2 KiB). Each way yields the sequence a server acts
// on: for every request, either the body it read or the refusal (status and
// message) that closes the connection, and whether a request was left
// unfinished. The three sequences must be equal; a difference is a crash
// (__builtin_trap), as is any exception. Small limits (1 KiB head, 4 KiB
// body) put both limits within reach of short inputs.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "shim/status/http.h"

using podshim::status::HttpLimits;
using podshim::status::HttpRequestReader;

namespace {

struct Verdict {
  int status = 0;  // 0: read whole; else the refusal's status
  std::string message, body;
  bool operator==(const Verdict&) const = default;
};

struct Reading {
  std::vector<Verdict> requests;
  bool unfinished = false;  // bytes of a request that never completed
  bool operator==(const Reading&) const = default;
};

// Feeds the pieces in order, as podshimd's server does: on Head it goes on
// to the body, after Done the next pipelined request starts, a refusal ends
// the connection.
Reading read_pieces(const std::vector<std::string_view>& pieces) {
  HttpRequestReader r(HttpLimits{1024, 4096});
  Reading out;
  std::string in;
  for (auto piece : pieces) {
    in.append(piece);
    for (;;) {
      const auto step = r.feed(in);
      if (step == HttpRequestReader::Step::Head) continue;
      if (step == HttpRequestReader::Step::Refused) {
        out.requests.push_back({r.refusal().status, r.refusal().message, {}});
        return out;
      }
      if (step == HttpRequestReader::Step::Done) {
        out.requests.push_back({0, {}, r.request().body});
        r.reset();
        if (in.empty()) break;
        continue;
      }
      break;  // More
    }
  }
  out.unfinished = r.started();
  return out;
}

// What a crash report needs: the three readings, side by side.
void show(const char* how, const Reading& r) {
  std::fprintf(stderr, "%s: %zu request(s)%s\n", how, r.requests.size(), r.unfinished ? ", then one unfinished" : "");
  for (const auto& v : r.requests) {
    std::fprintf(stderr, "  %d %s (body %zu bytes)\n", v.status, podshim::status::shown(v.message).c_str(), v.body.size());
  }
}

void differ(const Reading& whole, const char* how, const Reading& other) {
  show("whole", whole);
  show(how, other);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  podshim::log::init(podshim::log::Target::Null, podshim::log::Level::Err);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  size_t a = bytes.empty() ? 0 : data[0] * bytes.size() / 256;
  size_t b = bytes.empty() ? 0 : data[1] * bytes.size() / 256;
  if (a > b) std::swap(a, b);
  try {
    const Reading whole = read_pieces({bytes});
    const Reading cut = read_pieces({bytes.substr(0, a), bytes.substr(a, b - a), bytes.substr(b)});
    if (!(cut == whole)) differ(whole, "cut", cut);
    if (bytes.size() <= 2048) {
      std::vector<std::string_view> singles;
      singles.reserve(bytes.size());
      for (size_t i = 0; i < bytes.size(); ++i) singles.push_back(bytes.substr(i, 1));
      if (const Reading one = read_pieces(singles); !(one == whole)) differ(whole, "a byte at a time", one);
    }
  } catch (...) {
    __builtin_trap();
  }
  return 0;
}
