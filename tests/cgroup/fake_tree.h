// A fake cgroup tree in a temporary directory: plain files where the kernel
// has attributes. Unit tests only; the kernel suite uses a real cgroup v2.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace podshim::cgroup::testing {

class FakeTree {
 public:
  FakeTree() {
    char tmpl[] = "/tmp/podshim-cgroup-test.XXXXXX";
    root_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(root_ + "/cg");
    std::filesystem::create_directories(root_ + "/state");
  }
  ~FakeTree() { std::filesystem::remove_all(root_); }

  std::string cg_root() const { return root_ + "/cg"; }
  std::string state() const { return root_ + "/state"; }

  // Creates a cgroup directory with the attributes podshim reads and writes.
  void add(const std::string& rel, const std::string& mem_max = "max",
           const std::string& cpu_max = "max 100000", const std::string& weight = "100",
           uint64_t current = 1 << 20, uint64_t anon = 1 << 20, uint64_t file = 0) {
    std::filesystem::create_directories(cg_root() + "/" + rel);
    set(rel, "memory.max", mem_max + "\n");
    set(rel, "memory.high", "max\n");
    set(rel, "cpu.max", cpu_max + "\n");
    set(rel, "cpu.weight", weight + "\n");
    set(rel, "memory.current", std::to_string(current) + "\n");
    set(rel, "memory.reclaim", "");
    set_stat(rel, anon, file, 0);
    set(rel, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
    set_pressure(rel, 0, 0);
  }
  // memory.pressure with the given stall totals (µs), averages zero.
  void set_pressure(const std::string& rel, uint64_t some_total_us, uint64_t full_total_us,
                    double some_avg10 = 0, double full_avg10 = 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "some avg10=%.2f avg60=0.00 avg300=0.00 total=%llu\n"
                  "full avg10=%.2f avg60=0.00 avg300=0.00 total=%llu\n",
                  some_avg10, static_cast<unsigned long long>(some_total_us), full_avg10,
                  static_cast<unsigned long long>(full_total_us));
    set(rel, "memory.pressure", buf);
  }
  void set_stat(const std::string& rel, uint64_t anon, uint64_t file, uint64_t shmem) {
    std::ostringstream s;
    s << "anon " << anon << "\nfile " << file << "\nkernel 0\nshmem " << shmem
      << "\nslab_reclaimable 0\n";
    set(rel, "memory.stat", s.str());
  }
  void set(const std::string& rel, const std::string& file, const std::string& v) {
    std::ofstream(cg_root() + "/" + rel + "/" + file, std::ios::trunc) << v;
  }
  std::string get(const std::string& rel, const std::string& file) const {
    std::ifstream in(cg_root() + "/" + rel + "/" + file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

 private:
  std::string root_;
};

}  // namespace podshim::cgroup::testing
