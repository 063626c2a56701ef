// Reading a whole file with plain POSIX calls: the JIT's warm-cache path reads several small
// files per compile, where iostreams cost more than the reads.
#pragma once

#include <string>

namespace gk {

// Reads the regular file `path` into `out`; false when it cannot be opened, is no regular
// file, or a read fails (`out` is then unspecified).
bool read_file(const std::string& path, std::string& out);

}  // namespace gk
