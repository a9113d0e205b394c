// Files for tests: a temporary directory removed with everything in it, and
// a file read whole. One copy for every test (they once had three TempDirs
// and seven slurps, each a little different).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace podshim::testutil {

class TempDir {
 public:
  // A new directory under the temporary directory ($TMPDIR or /tmp), named
  // `prefix` and six random characters; aborts when none can be made.
  explicit TempDir(const std::string& prefix = "podshim-test") {
    std::string t = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(t.data()) == nullptr) std::abort();
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `rel` inside it (nothing is made).
  std::string sub(const std::string& rel) const { return path_ + "/" + rel; }
  // The directory `rel` inside it, made with its parents.
  std::string dir(const std::string& rel) const {
    std::filesystem::create_directories(sub(rel));
    return sub(rel);
  }
  // Writes `data` to `rel`, making its parent directories.
  void write(const std::string& rel, const std::string& data) const {
    std::filesystem::create_directories(std::filesystem::path(sub(rel)).parent_path());
    std::ofstream(sub(rel), std::ios::binary | std::ios::trunc) << data;
  }

 private:
  std::string path_;
};

// The whole file, byte for byte; "" when it cannot be read.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace podshim::testutil
