// Fuzz target: tensor descriptors through gk_explain, gk_tensor_create, gk_op_output_desc and
// gk_op_call_alloc on the cpu device.
//
// Input (fuzz_input.h): op selector, device selector, input count (0..3), that many
// descriptors, attributes, output-descriptor index, output count, then fill bytes for the
// tensors. Every call must return a status, never crash, hang or leak; a call that reports
// GK_OK must have produced its result.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "gpukit/gpukit.h"

namespace gk::fuzz {
namespace {

constexpr const char* kOps[] = {
    "add",       "mul",     "div",         "neg",    "relu",       "gelu",    "swiglu",
    "cast",      "sum",     "mean",        "max",    "argmax",     "softmax", "log_softmax",
    "layernorm", "rmsnorm", "add_rmsnorm", "matmul", "no_such_op", "",
};

constexpr int32_t kMaxInputs = 3;

// Device ids: mostly the cpu device, sometimes ids no runtime has.
int32_t decode_device(Input& in) {
  static constexpr int32_t kOthers[] = {1, -1, 7, INT32_MAX, INT32_MIN};
  uint8_t s = in.byte();
  return (s & 7) != 7 ? 0 : kOthers[(s >> 3) % std::size(kOthers)];
}

void explain(gk_runtime* rt, const char* op, int32_t device, const gk_tensor_desc* inputs,
             int32_t num_inputs, const gk_tensor_desc* outputs, int32_t num_outputs,
             const Attrs& attrs) {
  char* json = nullptr;
  gk_status s = gk_explain(rt, op, device, inputs, num_inputs, outputs, num_outputs, attrs.attrs,
                           attrs.count, &json);
  if (s == GK_OK && !json) contract_broken("gk_explain returned GK_OK without JSON");
  gk_string_free(json);
}

// Writes bytes of the input, repeated, into a contiguous tensor of `numel` elements.
void fill(gk_tensor* t, const gk_tensor_desc& d, int64_t numel, Input& in) {
  std::vector<uint8_t> bytes(size_t(numel) * gk_dtype_size(d.dtype));
  for (uint8_t& b : bytes) b = in.byte();
  gk_copy_from_host(t, bytes.data(), bytes.size(), nullptr);
}

void run_one(const uint8_t* data, size_t size) {
  gk_runtime* rt = shared_runtime();
  Input in(data, size);
  const char* op = kOps[in.byte() % std::size(kOps)];
  int32_t device = decode_device(in);
  int32_t num_inputs = in.byte() % (kMaxInputs + 1);
  DescBox boxes[kMaxInputs];
  gk_tensor_desc descs[kMaxInputs];
  for (int32_t i = 0; i < num_inputs; ++i) {
    decode_desc(in, boxes[i]);
    descs[i] = boxes[i].desc;
  }
  Attrs attrs;
  attrs.decode(in);
  int32_t output_index = int32_t(in.byte() % 4) - 1;  // -1..2
  int32_t num_outputs = 1 + in.byte() % 2;

  explain(rt, op, device, descs, num_inputs, nullptr, 0, attrs);

  gk_tensor* tensors[kMaxInputs] = {};
  bool created = true;
  bool cheap = true;
  for (int32_t i = 0; i < num_inputs; ++i) {
    gk_status s = gk_tensor_create(rt, device, &boxes[i].desc, nullptr, &tensors[i]);
    if (s != GK_OK) {
      created = false;
      break;
    }
    if (!tensors[i]) contract_broken("gk_tensor_create returned GK_OK without a tensor");
    int64_t numel = small_numel(boxes[i].desc, kOpElements);
    if (numel < 0) {
      cheap = false;
    } else {
      fill(tensors[i], boxes[i].desc, numel, in);
    }
  }

  if (created) {
    gk_op_args args{};
    args.struct_size = sizeof(args);
    args.inputs = tensors;
    args.num_inputs = num_inputs;
    args.attrs = attrs.attrs;
    args.num_attrs = attrs.count;
    DescBox out_box;
    std::memset(&out_box, 0, sizeof(out_box));
    out_box.desc.struct_size = sizeof(gk_tensor_desc);
    if (gk_op_output_desc(rt, op, &args, output_index, &out_box.desc) == GK_OK) {
      explain(rt, op, device, descs, num_inputs, &out_box.desc, 1, attrs);
    }
    if (cheap) {
      gk_tensor* outputs[2] = {};
      gk_tensor_desc out_descs[2] = {};
      out_descs[0].struct_size = sizeof(gk_tensor_desc);
      if (gk_op_call_alloc(rt, op, &args, num_outputs, outputs, out_descs) == GK_OK) {
        for (int32_t k = 0; k < num_outputs; ++k) {
          if (!outputs[k]) contract_broken("gk_op_call_alloc returned GK_OK without an output");
          gk_tensor_release(outputs[k]);
        }
      }
    }
  }
  for (gk_tensor* t : tensors) gk_tensor_release(t);
}

}  // namespace
}  // namespace gk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gk::fuzz::run_one(data, size);
  return 0;
}
