// gk_jit_launch's body: checks a launch's arguments against the kernel's parameters and
// queues it on the stream as gk_op_call queues an op (the task's stream, counted and paced).
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "capi/jit_handles.h"
#include "capi/op_call.h"

namespace gk::jit {
namespace {

const char* kind_name(int32_t kind) {
  switch (kind) {
    case GK_JIT_ARG_TENSOR: return "tensor";
    case GK_JIT_ARG_I32: return "i32";
    case GK_JIT_ARG_U32: return "u32";
    case GK_JIT_ARG_I64: return "i64";
    case GK_JIT_ARG_U64: return "u64";
    case GK_JIT_ARG_F32: return "f32";
    case GK_JIT_ARG_F64: return "f64";
    case GK_JIT_ARG_POINTER: return "pointer";
    case GK_JIT_ARG_BYTES: return "bytes";
    default: return nullptr;
  }
}

}  // namespace

void launch(gk_jit_kernel& kernel, const gk_jit_launch_args* args) {
  const char* fn = "gk_jit_launch";
  require_arg(args, fn, "args");
  require_struct(args->struct_size, GK_JIT_LAUNCH_ARGS_SIZE, fn, "gk_jit_launch_args");
  const LoadedModule& m = *kernel.loaded;
  Runtime& rt = *m.runtime;
  // Messages only: made when a check fails, not on every launch.
  auto who = [&] { return std::string(fn) + ": kernel '" + kernel.name + "'"; };
  for (int i = 0; i < 3; ++i) {
    if (args->grid[i] == 0 || args->block[i] == 0) {
      fail(GK_INVALID_ARGUMENT, who() + ": grid (" + std::to_string(args->grid[0]) + ", " +
                                    std::to_string(args->grid[1]) + ", " +
                                    std::to_string(args->grid[2]) + ") and block (" +
                                    std::to_string(args->block[0]) + ", " +
                                    std::to_string(args->block[1]) + ", " +
                                    std::to_string(args->block[2]) + ") need every extent >= 1");
    }
  }
  if (args->num_args < 0 || (args->num_args > 0 && !args->args)) {
    fail(GK_INVALID_ARGUMENT, who() + ": num_args " + std::to_string(args->num_args) +
                                  " with args " + (args->args ? "set" : "NULL"));
  }
  const size_t count = size_t(args->num_args);
  if (kernel.params_known && count != kernel.param_sizes.size()) {
    fail(GK_INVALID_ARGUMENT, who() + " takes " + std::to_string(kernel.param_sizes.size()) +
                                  " parameters; " + std::to_string(count) + " arguments given");
  }
  gk_stream& stream = stream_for(rt, args->stream, *m.device, fn);
  TensorPins pins(stream.native);
  // On the stack for up to kInlineArgs arguments, so a launch allocates nothing for them.
  constexpr size_t kInlineArgs = 32;
  uint64_t inline_words[kInlineArgs];
  void* inline_params[kInlineArgs];
  std::vector<uint64_t> heap_words;
  std::vector<void*> heap_params;
  if (count > kInlineArgs) {
    heap_words.resize(count);
    heap_params.resize(count);
  }
  uint64_t* words = count > kInlineArgs ? heap_words.data() : inline_words;
  void** params = count > kInlineArgs ? heap_params.data() : inline_params;
  for (size_t i = 0; i < count; ++i) {
    const gk_jit_arg& a = args->args[i];
    const char* kind = kind_name(a.kind);
    auto arg_name = [i] { return "argument " + std::to_string(i); };
    words[i] = 0;
    if (!kind) {
      fail(GK_INVALID_ARGUMENT, who() + ": " + arg_name() + " has kind " + std::to_string(a.kind) +
                                    ", which is no gk_jit_arg_kind");
    }
    size_t size = 8;
    void* at = &words[i];
    switch (a.kind) {
      case GK_JIT_ARG_TENSOR: {
        if (!a.value.tensor) {
          fail(GK_INVALID_ARGUMENT, who() + ": " + arg_name() + " is a NULL tensor");
        }
        const gk_tensor& t = *a.value.tensor;
        if (t.device != m.device) {
          fail(GK_INVALID_ARGUMENT, who() + ": " + arg_name() + " is a tensor on " +
                                        t.device->label() + " but the kernel runs on " +
                                        m.device->label() + "; copy it first");
        }
        words[i] = reinterpret_cast<uintptr_t>(pins.data(t));
        break;
      }
      case GK_JIT_ARG_I32: case GK_JIT_ARG_U32: case GK_JIT_ARG_F32:
        size = 4;
        std::memcpy(&words[i], &a.value, 4);
        break;
      case GK_JIT_ARG_BYTES:
        if (a.size <= 0 || !a.value.bytes) {
          fail(GK_INVALID_ARGUMENT, who() + ": " + arg_name() + " is bytes of size " +
                                        std::to_string(a.size) + (a.value.bytes ? "" : " at NULL"));
        }
        size = size_t(a.size);
        at = const_cast<void*>(a.value.bytes);
        break;
      default:  // the 8-byte kinds
        std::memcpy(&words[i], &a.value, 8);
    }
    if (kernel.params_known && kernel.param_sizes[i] != size) {
      fail(GK_INVALID_ARGUMENT, who() + ": " + arg_name() + " is " + kind + " (" +
                                    std::to_string(size) + " bytes) but parameter " +
                                    std::to_string(i) + " takes " +
                                    std::to_string(kernel.param_sizes[i]) + " bytes");
    }
    params[i] = at;
  }
  TaskLaunch task_launch(rt, stream);
  const cuda::Driver& driver = *rt.devices().driver();
  LaunchContext guard(driver, m.device->context);
  cuda::CUresult r = m.api->cuLaunchKernel(
      kernel.function, args->grid[0], args->grid[1], args->grid[2], args->block[0],
      args->block[1], args->block[2], args->shared_mem_bytes, stream.native,
      count ? params : nullptr, nullptr);
  if (r == cuda::kErrorInvalidValue || r == cuda::kErrorLaunchOutOfResources) {
    fail(GK_INVALID_ARGUMENT, who() + " refused by the driver (block " +
                                  std::to_string(args->block[0]) + "x" +
                                  std::to_string(args->block[1]) + "x" +
                                  std::to_string(args->block[2]) + ", " +
                                  std::to_string(args->shared_mem_bytes) +
                                  " bytes of dynamic shared memory): " + driver.error_text(r));
  }
  if (r != cuda::kSuccess) {
    fail(GK_INTERNAL, who() + ": cuLaunchKernel returned " + driver.error_text(r));
  }
  task_launch.launched();
}


}  // namespace gk::jit
