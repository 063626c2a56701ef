// Fuzz target: strided views. gk_tensor_from_buffer over a small buffer with a fuzzed byte
// offset, shape and strides; a view the library accepts must keep every element it can reach
// inside the buffer, so an op then run on it (reading or, in place, writing) stays in bounds
// under AddressSanitizer.
//
// Input (fuzz_input.h): buffer size (16 bits, at most kMaxBuffer), buffer flags, byte offset
// selector, a descriptor, whether the caller frees the buffer before using the view, an
// action, attributes, then bytes that fill the buffer.
#include <cstdint>
#include <cstring>
#include <iterator>

#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "gpukit/gpukit.h"

namespace gk::fuzz {
namespace {

constexpr uint64_t kMaxBuffer = 4096;

// Byte offsets: mostly inside or just past the buffer (odd ones misalign), else edge values.
uint64_t decode_offset(Input& in, uint64_t buffer_size) {
  static constexpr uint64_t kEdges[] = {
      UINT64_MAX,        UINT64_MAX - 7,    uint64_t(1) << 63, (uint64_t(1) << 63) - 1,
      uint64_t(1) << 62, uint64_t(1) << 32, kMaxBuffer,        kMaxBuffer + 1,
  };
  uint8_t s = in.byte();
  switch (s & 3) {
    case 0:
      return 0;
    case 1:
      return in.raw<uint16_t>() % (buffer_size + 17);
    case 2:
      return kEdges[(s >> 2) % std::size(kEdges)];
    default:
      return in.raw<uint64_t>();
  }
}

// Runs `op` on `inputs`, into new outputs.
void call_alloc(gk_runtime* rt, const char* op, gk_tensor* const* inputs, int32_t num_inputs,
                const Attrs* attrs) {
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = inputs;
  args.num_inputs = num_inputs;
  if (attrs) {
    args.attrs = attrs->attrs;
    args.num_attrs = attrs->count;
  }
  gk_tensor* out = nullptr;
  if (gk_op_call_alloc(rt, op, &args, 1, &out, nullptr) == GK_OK) {
    if (!out) contract_broken("gk_op_call_alloc returned GK_OK without an output");
    gk_tensor_release(out);
  }
}

// One action on an accepted view of at most kOpElements elements.
void use_view(gk_runtime* rt, gk_tensor* view, const gk_tensor_desc& d, uint8_t action, Input& in) {
  Attrs attrs;
  attrs.decode(in);
  gk_tensor* inputs[2] = {view, view};
  switch (action % 8) {
    case 0:
      call_alloc(rt, "neg", inputs, 1, nullptr);
      break;
    case 1:
      call_alloc(rt, "sum", inputs, 1, &attrs);
      break;
    case 2:
      call_alloc(rt, "softmax", inputs, 1, &attrs);
      break;
    case 3:
      call_alloc(rt, "add", inputs, 2, nullptr);
      break;
    case 4:
      call_alloc(rt, "cast", inputs, 1, &attrs);
      break;
    case 5: {
      // In place: the view is both input and output; a read-only view must be refused.
      gk_op_args args{};
      args.struct_size = sizeof(args);
      args.inputs = inputs;
      args.num_inputs = 1;
      args.outputs = inputs;
      args.num_outputs = 1;
      gk_status s = gk_op_call(rt, "abs", &args);
      if (s == GK_OK && (d.flags & GK_TENSOR_READ_ONLY)) {
        contract_broken("an op wrote into a read-only view");
      }
      break;
    }
    case 6: {
      int64_t numel = small_numel(d, kOpElements);
      uint64_t bytes = uint64_t(numel) * gk_dtype_size(d.dtype);
      unsigned char host[kOpElements * 8];
      gk_copy_to_host(view, host, bytes, nullptr);  // refused unless contiguous
      break;
    }
    default: {
      gk_tensor_desc back{};
      back.struct_size = sizeof(back);
      if (gk_tensor_get_desc(view, &back) != GK_OK) contract_broken("gk_tensor_get_desc failed");
      call_alloc(rt, "max", inputs, 1, &attrs);
      break;
    }
  }
}

void run_one(const uint8_t* data, size_t size) {
  gk_runtime* rt = shared_runtime();
  Input in(data, size);
  gk_alloc_args alloc{};
  alloc.struct_size = sizeof(alloc);
  alloc.device = 0;
  alloc.size = in.raw<uint16_t>() % (kMaxBuffer + 1);
  alloc.flags = in.byte() & 1 ? GK_BUFFER_EVICTABLE : 0;
  uint64_t offset = decode_offset(in, alloc.size);
  DescBox box;
  decode_desc(in, box);
  uint8_t order = in.byte();
  uint8_t action = in.byte();

  gk_buffer* buffer = nullptr;
  if (gk_buffer_alloc(rt, &alloc, &buffer) != GK_OK) return;
  void* mapped = nullptr;
  if (alloc.size > 0 && gk_buffer_map(buffer, &mapped) == GK_OK) {
    auto* bytes = static_cast<uint8_t*>(mapped);
    for (uint64_t i = 0; i < alloc.size; ++i) bytes[i] = uint8_t(in.byte() + i);
    gk_buffer_unmap(buffer);
  }

  gk_tensor* view = nullptr;
  gk_status s = gk_tensor_from_buffer(buffer, offset, &box.desc, &view);
  // The view holds its own reference to the buffer: the caller may free it first.
  if (order & 1) gk_buffer_free(buffer, nullptr);
  if (s == GK_OK) {
    if (!view) contract_broken("gk_tensor_from_buffer returned GK_OK without a tensor");
    // A view may rightly reach few bytes yet hold many elements (stride 0): run ops only on
    // small ones.
    if (small_numel(box.desc, kOpElements) >= 0) use_view(rt, view, box.desc, action, in);
    gk_tensor_release(view);
  }
  if (!(order & 1)) gk_buffer_free(buffer, nullptr);
}

}  // namespace
}  // namespace gk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gk::fuzz::run_one(data, size);
  return 0;
}
