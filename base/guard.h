// The exception boundary of an event-loop callback.
//
// podshimd is one sd-event loop: an exception that leaves a callback leaves
// sd_event_dispatch, and std::terminate ends the node agent, and with it the
// guard on every memory shrink of the node. Every callback the loop calls
// (I/O, timers, signals, deferred work, NRI dispatch) runs its body through
// contain(): whatever it throws (std::bad_alloc included) is logged once,
// naming where, and the loop goes on. The callback's own cleanup (unref of
// a one-shot source, delete of its closure) stays outside the boundary so it
// runs either way.
#pragma once

#include <exception>
#include <string_view>

#include "base/log.h"

namespace podshim {

// Runs f(); returns true when it returned, false when it threw (then the
// exception has been logged with `where`).
template <typename F>
bool contain(std::string_view where, F&& f) noexcept {
  try {
    f();
    return true;
  } catch (const std::exception& e) {
    try {
      log::err("{}: {}; the event is dropped, podshimd goes on", where, e.what());
    } catch (...) {  // no memory left even for the message
    }
  } catch (...) {
    try {
      log::err("{}: an unknown exception; the event is dropped, podshimd goes on", where);
    } catch (...) {
    }
  }
  return false;
}

}  // namespace podshim
