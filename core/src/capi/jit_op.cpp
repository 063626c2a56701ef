// JIT kernels serving named ops (gpukit_jit.h, ABI 1.10): registration, the record's
// supports() (the geometry's rules) and launch() (one thread per output element).
#include "capi/jit_op.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "capi/capi_util.h"
#include "capi/jit_handles.h"
#include "common/dtype.h"
#include "dispatch/dispatcher.h"
#include "dispatch/op_schema.h"
#include "runtime/runtime.h"

namespace gk::jit {
namespace {

constexpr int64_t kMaxGridX = 2147483647;  // the driver's limit on gridDim.x

int64_t element_count(const gk_plugin_tensor& t) {
  int64_t n = 1;
  for (int32_t k = 0; k < t.ndim; ++k) n *= t.shape[k];
  return n;
}

bool is_contiguous(const gk_plugin_tensor& t) {
  int64_t expected = 1;
  for (int32_t k = t.ndim - 1; k >= 0; --k) {
    if (t.shape[k] != 1 && t.strides[k] != expected) return false;
    expected *= t.shape[k];
  }
  return true;
}

std::string shape_text(const gk_plugin_tensor& t) {
  std::string s = "[";
  for (int32_t k = 0; k < t.ndim; ++k) s += (k ? ", " : "") + std::to_string(t.shape[k]);
  return s + "]";
}

// The first attribute that asks for something: one other than the value the op's rules hand
// plugins when the caller gives none (plugins receive those always), or nullptr.
const gk_attr* carried_attr(const gk_kernel_args& args) {
  const OpSchema* schema = OpRegistry::instance().find(args.op);
  for (int32_t i = 0; i < args.num_attrs; ++i) {
    const gk_attr& a = args.attrs[i];
    const AttrSpec* spec = nullptr;
    for (size_t k = 0; schema && a.name && k < schema->attrs.size(); ++k) {
      if (std::strcmp(schema->attrs[k].name, a.name) == 0) spec = &schema->attrs[k];
    }
    const bool is_fallback =
        spec &&
        ((a.type == GK_ATTR_INT && spec->fallback && double(a.value.i) == *spec->fallback) ||
         (a.type == GK_ATTR_FLOAT && spec->fallback && a.value.f == *spec->fallback) ||
         (a.type == GK_ATTR_STRING && spec->text_fallback && a.value.s &&
          std::strcmp(a.value.s, spec->text_fallback) == 0));
    if (!is_fallback) return &a;
  }
  return nullptr;
}

// Why the elementwise geometry cannot serve the call, or "" when it can.
std::string elementwise_refusal(const JitOp& op, const gk_jit_kernel& kernel,
                                const gk_kernel_args& args) {
  if (args.device != op.device_id) {
    return "the kernel is loaded on device " + std::to_string(op.device_id) + ", not device " +
           std::to_string(args.device);
  }
  if (const gk_attr* a = carried_attr(args)) {
    return std::string("the elementwise geometry passes no attributes; the call has '") +
           (a->name ? a->name : "?") + "'";
  }
  if (args.num_outputs < 1) return "the elementwise geometry needs an output";
  const size_t params = size_t(args.num_inputs) + size_t(args.num_outputs) + 1;
  if (kernel.params_known && kernel.param_sizes.size() != params) {
    return "kernel '" + kernel.name + "' takes " + std::to_string(kernel.param_sizes.size()) +
           " parameters; " + std::to_string(args.num_inputs) + " inputs, " +
           std::to_string(args.num_outputs) + " outputs and the count make " +
           std::to_string(params);
  }
  const int64_t n = element_count(args.outputs[0]);
  auto check = [&](const gk_plugin_tensor& t, const char* kind, int32_t i) -> std::string {
    const std::string who = std::string(kind) + " " + std::to_string(i);
    if (element_count(t) != n) {
      return who + " has shape " + shape_text(t) + " and output 0 " + shape_text(args.outputs[0]) +
             ": the elementwise geometry serves equal element counts (no broadcasting)";
    }
    if (!is_contiguous(t)) return who + " is not contiguous";
    return "";
  };
  for (int32_t i = 0; i < args.num_inputs; ++i) {
    if (auto why = check(args.inputs[i], "input", i); !why.empty()) return why;
  }
  for (int32_t i = 0; i < args.num_outputs; ++i) {
    if (auto why = check(args.outputs[i], "output", i); !why.empty()) return why;
  }
  if ((n + op.block_size - 1) / op.block_size > kMaxGridX) {
    return std::to_string(n) + " elements need more than 2^31-1 blocks of " +
           std::to_string(op.block_size);
  }
  return "";
}

void write_reason(char* reason, size_t capacity, const std::string& text) {
  if (!reason || capacity == 0) return;
  const size_t n = std::min(capacity - 1, text.size());
  std::memcpy(reason, text.data(), n);
  reason[n] = '\0';
}

gk_status op_supports(void* state, const gk_kernel_args* args, char* reason, size_t capacity) {
  const JitOp& op = *static_cast<const JitOp*>(state);
  std::shared_lock<std::shared_mutex> lock(op.mutex);
  std::string why = op.kernel ? elementwise_refusal(op, *op.kernel, *args) : "unregistered";
  if (!why.empty()) {
    write_reason(reason, capacity, why);
    return GK_UNIMPLEMENTED;
  }
  write_reason(reason, capacity,
               "one thread per element, blocks of " + std::to_string(op.block_size));
  return GK_OK;
}

// Called by dispatch after op_supports() accepted the call; inside the C entry point's
// guard, so a failure throws with its message.
gk_status op_launch(void* state, const gk_kernel_args* args) {
  const JitOp& op = *static_cast<const JitOp*>(state);
  std::shared_lock<std::shared_mutex> lock(op.mutex);
  if (!op.kernel) {
    fail(GK_UNAVAILABLE, std::string(args->op) + ": " + op.record.name +
                             " was unregistered while the call was dispatched; call again");
  }
  const gk_jit_kernel& kernel = *op.kernel;
  const LoadedModule& m = *kernel.loaded;
  const size_t count = size_t(args->num_inputs) + size_t(args->num_outputs);
  // On the stack for up to 15 tensors (every op has fewer).
  void* inline_data[16];
  void* inline_params[16];
  std::vector<void*> heap_data, heap_params;
  if (count + 1 > 16) {
    heap_data.resize(count + 1);
    heap_params.resize(count + 1);
  }
  void** data = count + 1 > 16 ? heap_data.data() : inline_data;
  void** params = count + 1 > 16 ? heap_params.data() : inline_params;
  for (int32_t i = 0; i < args->num_inputs; ++i) data[i] = args->inputs[i].data;
  for (int32_t i = 0; i < args->num_outputs; ++i) {
    data[args->num_inputs + i] = args->outputs[i].data;
  }
  long long n = element_count(args->outputs[0]);
  for (size_t i = 0; i < count; ++i) params[i] = &data[i];
  params[count] = &n;
  const unsigned blocks = unsigned((n + op.block_size - 1) / op.block_size);
  const cuda::Driver& driver = *op.runtime->devices().driver();
  LaunchContext guard(driver, m.device->context);
  const cuda::CUresult r =
      m.api->cuLaunchKernel(kernel.function, blocks, 1, 1, op.block_size, 1, 1, 0,
                            static_cast<cuda::CUstream>(args->stream), params, nullptr);
  if (r != cuda::kSuccess) {
    fail(GK_INTERNAL, std::string(args->op) + " by " + op.record.name + ": cuLaunchKernel (" +
                          std::to_string(blocks) + " blocks of " + std::to_string(op.block_size) +
                          ") returned " + driver.error_text(r));
  }
  return GK_OK;
}

const gk_plugin_api kJitOpApi = {.struct_size = sizeof(gk_plugin_api),
                                 .abi_version = GK_PLUGIN_ABI_VERSION,
                                 .name = "jit",
                                 .version = "1",
                                 .init = nullptr,
                                 .shutdown = nullptr,
                                 .supports = op_supports,
                                 .launch = op_launch,
                                 .model = nullptr};

// Registrations unregistered: kept until exit, since a call may still hold the record it
// found in the dispatch cache (a few hundred bytes each).
std::mutex& retired_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::vector<JitOp*>& retired() {
  static auto* list = new std::vector<JitOp*>();
  return *list;
}

}  // namespace

JitOp* register_op(Runtime& rt, const char* op_name, gk_jit_kernel* kernel,
                   const gk_jit_op_options& o) {
  const char* fn = "gk_jit_op_register";
  require_arg(op_name, fn, "op");
  require_arg(kernel, fn, "kernel");
  const OpSchema& schema = OpRegistry::instance().get(op_name);
  const LoadedModule& m = *kernel->loaded;
  if (m.runtime.get() != &rt) {
    fail(GK_INVALID_ARGUMENT,
         std::string(fn) + ": kernel '" + kernel->name + "' was compiled in another runtime");
  }
  if (o.num_dtypes < 1 || !o.dtypes) {
    fail(GK_INVALID_ARGUMENT, std::string(fn) + ": " + schema.name + " by kernel '" + kernel->name +
                                  "': no dtypes given (num_dtypes " + std::to_string(o.num_dtypes) +
                                  ")");
  }
  ManifestOp served{schema.name, {}};
  for (int32_t i = 0; i < o.num_dtypes; ++i) {
    if (!dtype_is_known(o.dtypes[i])) {
      fail(GK_INVALID_ARGUMENT, std::string(fn) + ": dtypes[" + std::to_string(i) + "] is " +
                                    std::to_string(o.dtypes[i]) +
                                    ", no gk_dtype (known: " + all_dtype_names() + ")");
    }
    served.dtypes.push_back(o.dtypes[i]);
  }
  if (o.geometry != GK_JIT_OP_ELEMENTWISE) {
    fail(GK_INVALID_ARGUMENT, std::string(fn) + ": geometry " + std::to_string(o.geometry) +
                                  " is no gk_jit_op_geometry (GK_JIT_OP_ELEMENTWISE is 1)");
  }
  if (o.block_size > 1024) {
    fail(GK_INVALID_ARGUMENT, std::string(fn) + ": block_size " + std::to_string(o.block_size) +
                                  " is past CUDA's 1024 threads per block");
  }
  if (kernel->params_known) {
    // Pointers and a 64-bit count: every parameter is 8 bytes.
    for (size_t i = 0; i < kernel->param_sizes.size(); ++i) {
      if (kernel->param_sizes[i] != 8) {
        fail(GK_INVALID_ARGUMENT, std::string(fn) + ": parameter " + std::to_string(i) +
                                      " of kernel '" + kernel->name + "' takes " +
                                      std::to_string(kernel->param_sizes[i]) +
                                      " bytes; the elementwise geometry passes tensor pointers "
                                      "and a 64-bit element count (8 bytes each)");
      }
    }
  }
  auto op = std::make_unique<JitOp>();
  op->runtime = rt.shared_from_this();
  op->device_id = m.device->id;
  op->block_size = o.block_size ? o.block_size : 256;
  PluginRecord& r = op->record;
  r.name = "jit:" + kernel->name;
  r.manifest.name = r.name;
  r.manifest.family = "jit";
  r.manifest.device = m.device->kind;
  r.manifest.sm_min = r.manifest.sm_max = m.device->sm_version;
  r.manifest.priority = o.priority;
  r.manifest.ops.push_back(std::move(served));
  r.manifest_ok = true;
  r.loaded = true;
  r.api = &kJitOpApi;
  r.state = op.get();
  kernel->refs.fetch_add(1, std::memory_order_relaxed);
  op->kernel = kernel;
  RuntimeRecords::add(rt.plugins(), &r);
  rt.dispatch_cache().clear();  // calls seen before may now pick the kernel
  rt.logger().info("jit: kernel '" + kernel->name + "' serves " + schema.name + " on " +
                   m.device->label() + " at priority " + std::to_string(o.priority));
  return op.release();
}

void unregister_op(JitOp& op) {
  gk_jit_kernel* kernel = nullptr;
  std::shared_ptr<Runtime> rt;
  {
    std::unique_lock<std::shared_mutex> lock(op.mutex);
    RuntimeRecords::remove(op.runtime->plugins(), &op.record);
    op.runtime->dispatch_cache().clear();
    kernel = op.kernel;
    op.kernel = nullptr;
    rt = std::move(op.runtime);
  }
  gk_jit_kernel_release(kernel);
  std::lock_guard<std::mutex> lock(retired_mutex());
  retired().push_back(&op);
}

}  // namespace gk::jit

extern "C" {

GK_API gk_status gk_jit_op_register(gk_runtime* runtime, const char* op, gk_jit_kernel* kernel,
                                    const gk_jit_op_options* options, gk_jit_op** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_jit_op_register";
    auto& rt = gk::runtime_of(runtime, fn);
    gk::require_arg(out, fn, "out");
    gk::require_arg(options, fn, "options");
    gk::require_struct(options->struct_size, GK_JIT_OP_OPTIONS_SIZE, fn, "gk_jit_op_options");
    gk::require_arg(kernel, fn, "kernel");
    if (!kernel->loaded || !kernel->loaded->native) {
      gk::fail(GK_INVALID_ARGUMENT,
               std::string(fn) + ": kernel '" + kernel->name + "' is not loaded on a CUDA device");
    }
    gk_jit_op_options o = GK_JIT_OP_OPTIONS_INIT;
    std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
    *out = new gk_jit_op{gk::jit::register_op(rt, op, kernel, o)};
  });
}

GK_API void gk_jit_op_release(gk_jit_op* op) {
  if (!op) return;
  gk::jit::unregister_op(*op->op);
  delete op;
}

}  // extern "C"
