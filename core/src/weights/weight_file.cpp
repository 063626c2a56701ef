// Mapping weight files, and the checks every parser shares.
#include "weights/weight_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/limits.h"

namespace gk::weights {

namespace {

// Closes a descriptor on every path out of the constructor.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  Descriptor d{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (d.fd < 0) {
    const int error = errno;
    fail(error == ENOENT ? GK_NOT_FOUND : GK_INVALID_ARGUMENT,
         path_ + ": cannot open: " + std::strerror(error));
  }
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) {
    fail(GK_INVALID_ARGUMENT, path_ + ": cannot read its size: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) fail(GK_INVALID_ARGUMENT, path_ + ": is not a regular file");
  size_ = uint64_t(st.st_size);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_t(size_), PROT_READ, MAP_PRIVATE, d.fd, 0);
  if (p == MAP_FAILED) {
    fail(GK_INVALID_ARGUMENT,
         path_ + ": cannot map " + std::to_string(size_) + " bytes: " + std::strerror(errno));
  }
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_t(size_));
}

std::string tensor_context(const MappedFile& file, const std::string& name) {
  return file.path() + ": tensor '" + name + "'";
}

int json_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

void check_name(const MappedFile& file, const std::string& name) {
  if (name.empty()) fail(GK_INVALID_ARGUMENT, file.path() + ": a tensor has an empty name");
  if (name.find('\0') != std::string::npos) {
    fail(GK_INVALID_ARGUMENT, tensor_context(file, name.substr(0, name.find('\0'))) +
                                  ": its name holds a NUL byte at " +
                                  std::to_string(name.find('\0')));
  }
}

uint64_t checked_elements(const MappedFile& file, const std::string& name, int32_t ndim,
                          const int64_t* shape) {
  if (ndim < 0 || ndim > GK_MAX_DIMS) {
    fail(GK_INVALID_ARGUMENT, tensor_context(file, name) + ": " + std::to_string(ndim) +
                                  " dimensions; GPUkit holds at most " +
                                  std::to_string(GK_MAX_DIMS) + " (GK_MAX_DIMS)");
  }
  // A 0-size dimension counts as 1 here, as in the descriptor rule (check_layout): an empty
  // tensor still sets the strides and the element product of its other dimensions.
  uint64_t span = 1;
  bool over = false, empty = false;
  for (int32_t k = 0; k < ndim; ++k) {
    if (shape[k] < 0) {
      fail(GK_INVALID_ARGUMENT, tensor_context(file, name) + ": dimension " + std::to_string(k) +
                                    " is " + std::to_string(shape[k]));
    }
    empty |= shape[k] == 0;
    over |= __builtin_mul_overflow(span, uint64_t(std::max<int64_t>(shape[k], 1)), &span);
  }
  if (over || span > uint64_t(kMaxTensorBytes)) {
    std::string dims;
    for (int32_t k = 0; k < ndim; ++k) dims += (k ? ", " : "") + std::to_string(shape[k]);
    fail(GK_INVALID_ARGUMENT, tensor_context(file, name) + ": shape [" + dims +
                                  "] has more than 2^62 elements (kMaxTensorBytes, the " +
                                  "largest tensor)");
  }
  return empty ? 0 : span;
}

void check_spans(const MappedFile& file, const std::vector<TensorEntry>& tensors,
                 uint64_t data_begin, uint64_t data_end) {
  for (const TensorEntry& t : tensors) {
    uint64_t end = 0;
    if (t.offset < data_begin || __builtin_add_overflow(t.offset, t.bytes, &end) ||
        end > data_end) {
      fail(GK_INVALID_ARGUMENT, tensor_context(file, t.name) + ": its " + std::to_string(t.bytes) +
                                    " bytes at file offset " + std::to_string(t.offset) +
                                    " lie outside the data section " + "(bytes " +
                                    std::to_string(data_begin) + ".." + std::to_string(data_end) +
                                    " of " + std::to_string(file.size()) + ")");
    }
  }
  std::vector<const TensorEntry*> order;
  order.reserve(tensors.size());
  for (const TensorEntry& t : tensors) {
    if (t.bytes) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorEntry& a = *order[i - 1];
    const TensorEntry& b = *order[i];
    if (b.offset < a.offset + a.bytes) {
      fail(GK_INVALID_ARGUMENT,
           tensor_context(file, b.name) + ": its bytes " + std::to_string(b.offset) + ".." +
               std::to_string(b.offset + b.bytes) + " overlap tensor '" + a.name + "' (bytes " +
               std::to_string(a.offset) + ".." + std::to_string(a.offset + a.bytes) + ")");
    }
  }
}

}  // namespace gk::weights
