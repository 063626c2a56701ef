// Fuzz target: weight files. The input is written as a file (GGUF when it opens with the GGUF
// magic, else SafeTensors, as gk_weights_open decides) and opened through the C ABI. A file
// that opens is listed whole, its metadata described, and each small tensor fetched on the
// cpu device as stored (mapped) and as f32 (converted or dequantized) and read back. Any
// status is fine; a crash, a leak, or a success without its result is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_runtime.h"
#include "gpukit/gpukit.h"

namespace gk::fuzz {
namespace {

namespace fs = std::filesystem;

// The file the input is written to: in memory where /dev/shm exists (rewriting a file on
// disk per input would dominate the run).
const std::string& file_path(bool gguf) {
  static const std::string base = [] {
    const fs::path dir = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    return (dir / ("gk_fuzz_weights_" + std::to_string(::getpid()))).string();
  }();
  static const std::string gguf_path = base + ".gguf", safetensors_path = base + ".safetensors";
  return gguf ? gguf_path : safetensors_path;
}

void read_tensor(gk_weights* weights, const gk_weight_info& info, int32_t dtype) {
  gk_tensor* t = nullptr;
  if (gk_weights_get(weights, info.name, 0, dtype, nullptr, &t) != GK_OK) return;
  if (!t) contract_broken("gk_weights_get returned OK without a tensor");
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  if (gk_tensor_get_desc(t, &d) != GK_OK) contract_broken("gk_tensor_get_desc of a weight");
  if (!(d.flags & GK_TENSOR_READ_ONLY)) contract_broken("a weight tensor is writable");
  uint32_t block_bytes = 0;
  const uint32_t block = gk_dtype_block(d.dtype, &block_bytes);
  uint64_t elements = 1;
  for (int32_t k = 0; k < d.ndim; ++k) elements *= uint64_t(d.shape[k]);
  if (block == 0) contract_broken("a weight tensor of an unknown dtype");
  std::vector<unsigned char> host(size_t(elements / block * block_bytes));
  // Copies need a contiguous tensor, which every weight is.
  if (gk_copy_to_host(t, host.data(), host.size(), nullptr) != GK_OK) {
    std::fprintf(stderr, "fuzz: %s\n", gk_last_error());
    contract_broken("gk_copy_to_host of a weight tensor failed");
  }
  gk_tensor_release(t);
}

void exercise(gk_weights* weights) {
  (void)gk_weights_format(weights);
  char* json = nullptr;
  if (gk_weights_metadata_json(weights, &json) == GK_OK) {
    if (!json) contract_broken("gk_weights_metadata_json returned OK without a string");
    gk_string_free(json);
  }
  const int64_t count = gk_weights_count(weights);
  for (int64_t i = 0; i < count; ++i) {
    gk_weight_info info{};
    info.struct_size = sizeof(info);
    if (gk_weights_info(weights, i, &info) != GK_OK || !info.name) {
      contract_broken("gk_weights_info of a listed tensor failed");
    }
    int64_t found = -1;
    if (gk_weights_find(weights, info.name, &found) != GK_OK || found < 0) {
      contract_broken("gk_weights_find of a listed name failed");
    }
    if (info.bytes > kMemoryBudget / 4) continue;  // the budget would refuse it anyway
    read_tensor(weights, info, 0);
    read_tensor(weights, info, GK_DTYPE_F32);
  }
  gk_weights_release(weights, -1);
}

}  // namespace
}  // namespace gk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gk::fuzz;
  gk_runtime* rt = shared_runtime();
  const bool gguf = size >= 4 && data[0] == 'G' && data[1] == 'G' && data[2] == 'U' &&
                    data[3] == 'F';
  const std::string& path = file_path(gguf);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) setup_failed("cannot write the weight file");
  if (size && std::fwrite(data, 1, size, f) != size) setup_failed("cannot write the weight file");
  std::fclose(f);
  gk_weights* weights = nullptr;
  if (gk_weights_open(rt, path.c_str(), nullptr, &weights) == GK_OK) {
    if (!weights) contract_broken("gk_weights_open returned OK without weights");
    exercise(weights);
    gk_weights_close(weights);
  }
  return 0;
}
