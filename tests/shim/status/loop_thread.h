// An sd-event loop on a thread of its own, ended through a pipe: what the
// status tests run podshimd's listeners on.
#pragma once

#include <fcntl.h>
#include <sys/epoll.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <string>
#include <thread>

namespace podshim::status::testing {

class LoopThread {
 public:
  // What runs on the thread, given a new loop that stop() ends: it sets up
  // what the loop serves, calls `started` with "" or why it could not, runs
  // the loop when it could (sd_event_loop) and releases what it set up.
  using Body = std::function<void(sd_event* loop, const std::function<void(std::string)>& started)>;

  LoopThread() = default;
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;
  ~LoopThread() { stop(); }

  // Starts `body` on a new thread and returns what it passed to `started`
  // (or why the thread could not start). Not while running.
  std::string start(Body body) {
    if (::pipe2(stop_pipe_, O_CLOEXEC) != 0) return "pipe2 failed";
    std::promise<std::string> started;
    auto fut = started.get_future();
    thread_ = std::thread([this, body = std::move(body), &started] {
      sd_event* loop = nullptr;
      sd_event_new(&loop);
      sd_event_add_io(loop, nullptr, stop_pipe_[0], EPOLLIN,
                      [](sd_event_source* s, int, uint32_t, void*) {
                        return sd_event_exit(sd_event_source_get_event(s), 0);
                      },
                      nullptr);
      body(loop, [&started](std::string err) { started.set_value(std::move(err)); });
      sd_event_unref(loop);
    });
    running_ = true;
    return fut.get();
  }

  // Ends the loop and joins the thread; nothing when it is not running.
  void stop() {
    if (!running_) return;
    (void)!::write(stop_pipe_[1], "x", 1);
    thread_.join();
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
    running_ = false;
  }

 private:
  std::thread thread_;
  int stop_pipe_[2] = {-1, -1};
  bool running_ = false;
};

}  // namespace podshim::status::testing
