#include "common/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace gk {

bool read_file(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok) {
    // One byte past the size, so that the read which finds the end needs no growth; the
    // size is a hint: a file that grows or shrinks meanwhile is read to its end.
    out.resize(size_t(st.st_size) + 1);
    size_t done = 0;
    while (ok) {
      if (done == out.size()) out.resize(out.size() + 4096);
      const ssize_t n = ::read(fd, &out[done], out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = n == 0;
        break;
      }
      done += size_t(n);
    }
    out.resize(done);
  }
  ::close(fd);
  return ok;
}

}  // namespace gk
