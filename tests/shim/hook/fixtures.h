// Test fixtures for podshim-hook: temp bundles and a fake podshimd that
// speaks just enough HTTP over a unix socket to record what the hook sent.
#pragma once

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testutil/files.h"

namespace podshim::hook::testing {

using TempDir = podshim::testutil::TempDir;


// A config.json with a cgroupsPath, the annotations given and linux.devices.
inline nlohmann::json make_config(const nlohmann::json& devices = nlohmann::json::array(),
                                  const nlohmann::json& annotations = nlohmann::json::object()) {
  return {{"ociVersion", "1.0.2"},
          {"process", {{"args", {"/bin/sh"}}, {"cwd", "/"}}},
          {"root", {{"path", "rootfs"}}},
          {"annotations", annotations},
          {"mounts",
           {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
            {{"destination", "/usr/lib/cdi-lib"},
             {"type", "bind"},
             {"source", "/opt/vendor/lib"},
             {"options", {"ro", "rbind"}}}}},
          {"linux",
           {{"cgroupsPath", "/kubepods/pod-uid-1/ctr1"},
            {"devices", devices},
            {"namespaces", {{{"type", "mount"}}}}}}};
}

inline nlohmann::json make_state(const std::string& bundle, const std::string& status = "creating",
                                 const nlohmann::json& annotations = nlohmann::json::object()) {
  return {{"ociVersion", "1.0.2"}, {"id", "ctr1"},        {"status", status},
          {"pid", 4242},           {"bundle", bundle},    {"annotations", annotations}};
}

// One recorded request.
struct Request {
  std::string method;
  std::string target;
  std::string body;
};

// A fake podshimd: accepts connections on a unix socket, records each
// request and answers with `status` (or never answers when `silent`).
class FakeServer {
 public:
  explicit FakeServer(std::string path, int status = 200, bool silent = false)
      : path_(std::move(path)), status_(status), silent_(silent) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 ||
        ::listen(fd_, 16) < 0)
      std::abort();
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
    for (int c : held_) ::close(c);
  }
  std::vector<Request> requests() {
    std::lock_guard lk(mu_);
    return requests_;
  }
  void set_status(int s) { status_ = s; }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string buf;
      char chunk[4096];
      size_t need = std::string::npos;
      while (buf.size() < need) {
        ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
        if (n <= 0) break;
        buf.append(chunk, static_cast<size_t>(n));
        size_t hdr = buf.find("\r\n\r\n");
        if (hdr != std::string::npos && need == std::string::npos) {
          size_t len = 0;
          auto cl = buf.find("Content-Length: ");
          if (cl != std::string::npos && cl < hdr) len = std::stoul(buf.substr(cl + 16));
          need = hdr + 4 + len;
        }
      }
      Request r;
      size_t sp1 = buf.find(' '), sp2 = buf.find(' ', sp1 + 1);
      if (sp1 != std::string::npos && sp2 != std::string::npos) {
        r.method = buf.substr(0, sp1);
        r.target = buf.substr(sp1 + 1, sp2 - sp1 - 1);
      }
      size_t hdr = buf.find("\r\n\r\n");
      if (hdr != std::string::npos) r.body = buf.substr(hdr + 4);
      {
        std::lock_guard lk(mu_);
        requests_.push_back(r);
      }
      if (silent_) {
        held_.push_back(c);  // never answer: the client must time out
        continue;
      }
      std::string body = "{}";
      std::string resp = "HTTP/1.1 " + std::to_string(status_.load()) +
                         " X\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      ssize_t n = ::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      (void)n;
      ::close(c);
    }
  }

  std::string path_;
  int fd_ = -1;
  std::atomic<int> status_;
  bool silent_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<Request> requests_;
  std::vector<int> held_;
};

}  // namespace podshim::hook::testing
