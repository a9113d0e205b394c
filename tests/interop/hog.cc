// A static memory hog for containers built from the busybox image (no libc
// inside): charges MiB of one kind of memory to its cgroup, says "ready" on
// stdout, then sleeps until killed.
//   hog anon MiB          anonymous memory (malloc + touch)
//   hog shm MiB           a file in /dev/shm (shmem: not reclaimable without swap)
//   hog file PATH MiB     a file written through the page cache (reclaimable)
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool write_file(const char* path, size_t mib) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(path);
    return false;
  }
  std::vector<char> buf(1 << 20, 'x');
  for (size_t i = 0; i < mib; ++i) {
    if (write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
      std::perror("write");
      return false;
    }
  }
  close(fd);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hog anon|shm MiB | hog file PATH MiB\n");
    return 2;
  }
  const char* kind = argv[1];
  if (std::strcmp(kind, "anon") == 0) {
    size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
    char* p = static_cast<char*>(std::malloc(bytes));
    if (!p) return 1;
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  } else if (std::strcmp(kind, "shm") == 0) {
    if (!write_file("/dev/shm/hog", std::strtoull(argv[2], nullptr, 10))) return 1;
  } else if (std::strcmp(kind, "file") == 0 && argc >= 4) {
    if (!write_file(argv[2], std::strtoull(argv[3], nullptr, 10))) return 1;
  } else {
    std::fprintf(stderr, "hog: unknown kind '%s'\n", kind);
    return 2;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}
