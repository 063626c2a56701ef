// Ops: validation against the op's rules, dispatch to a plugin, explanation.
#include <nlohmann/json.hpp>
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>

#include "common/json_text.h"
#include "capi/capi_util.h"
#include "common/dtype.h"
#include "dispatch/dispatcher.h"
#include "memory/charge_scope.h"
#include "dispatch/op_schema.h"
#include "capi/op_call.h"

namespace gk {
namespace {

// A call's tensors as plugins see them. Points into the descriptors it holds.
struct KernelTensors {
  std::vector<gk_tensor_desc> inputs;
  std::vector<gk_tensor_desc> outputs;
  std::vector<gk_plugin_tensor> plugin_inputs;
  std::vector<gk_plugin_tensor> plugin_outputs;

  void finish(const std::vector<void*>& input_data, const std::vector<void*>& output_data) {
    auto convert = [](const std::vector<gk_tensor_desc>& descs, const std::vector<void*>& data,
                      std::vector<gk_plugin_tensor>& out) {
      out.resize(descs.size());
      for (size_t i = 0; i < descs.size(); ++i) {
        out[i] = gk_plugin_tensor{data.empty() ? nullptr : data[i], descs[i].dtype, descs[i].ndim,
                                  descs[i].shape, descs[i].strides, descs[i].flags};
      }
    };
    convert(inputs, input_data, plugin_inputs);
    convert(outputs, output_data, plugin_outputs);
  }

  gk_kernel_args args(const char* op, int32_t device, void* stream, const gk_attr* attrs,
                      int32_t num_attrs) const {
    return gk_kernel_args{sizeof(gk_kernel_args),
                          op,
                          device,
                          stream,
                          plugin_inputs.data(),
                          int32_t(plugin_inputs.size()),
                          plugin_outputs.data(),
                          int32_t(plugin_outputs.size()),
                          attrs,
                          num_attrs};
  }
};

// A call's per-tensor arrays: on the stack up to kInline entries (every op in docs/ops.md
// has fewer), on the heap past that, so a well-formed call allocates nothing for them.
// The `size` entries in use start value-initialised (zero); the unused rest of the inline
// storage is left as it is (a descriptor is 152 bytes: zeroing all eight on every call
// showed in profiles).
template <typename T>
class CallArray {
 public:
  static constexpr size_t kInline = 8;
  explicit CallArray(size_t size) : size_(size) {
    if (size > kInline) {
      heap_.resize(size);
    } else {
      std::fill_n(inline_, size, T{});
    }
  }
  T* data() { return size_ > kInline ? heap_.data() : inline_; }
  const T* data() const { return size_ > kInline ? heap_.data() : inline_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data()[i]; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  T inline_[kInline];
  std::vector<T> heap_;
  size_t size_;
};

const gk_tensor& tensor_arg(const OpSchema& schema, gk_tensor* const* list, int32_t i,
                            bool output) {
  if (!list || !list[i]) {
    const auto& names = output ? schema.output_names : schema.input_names;
    std::string name = size_t(i) < names.size() ? "'" + names[size_t(i)] + "'" : std::to_string(i);
    fail(GK_INVALID_ARGUMENT, schema.name + ": " + (output ? "output " : "input ") + name + " is NULL");
  }
  return *list[i];
}

void require_counts(const gk_op_args* args, const char* function) {
  require_arg(args, function, "args");
  require_struct(args->struct_size, GK_OP_ARGS_SIZE, function, "gk_op_args");
  if (args->num_inputs < 0 || args->num_outputs < 0 || args->num_attrs < 0 ||
      (args->num_attrs > 0 && !args->attrs)) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": negative counts or NULL attrs in gk_op_args");
  }
}


// Collects `count` tensors of a call into `descs` and `tensors`, checking that each is on
// `*device` (set from the first tensor seen when NULL).
void collect_tensors(const OpSchema& schema, gk_tensor* const* list, size_t count, bool output,
                     bool has_inputs, CallArray<gk_tensor_desc>& descs,
                     CallArray<const gk_tensor*>& tensors, const Device*& device) {
  for (size_t i = 0; i < count; ++i) {
    const gk_tensor& t = tensor_arg(schema, list, int32_t(i), output);
    if (!device) {
      device = t.device;
    } else if (t.device != device) {
      std::string who = std::string(output ? "output " : "input ") + std::to_string(i);
      std::string owner = has_inputs ? "input 0" : "output 0";
      fail(GK_INVALID_ARGUMENT, schema.name + ": " + who + " is on " + t.device->label() +
                                    " but " + owner + " is on " + device->label() +
                                    "; copy it first");
    }
    descs[i] = desc_of(t);
    tensors[i] = &t;
  }
}

// The bytes a tensor's elements span, in the address space of its memory: offsets within
// its allocation (pool memory can move when spilled), or addresses for external memory.
struct MemorySpan {
  const void* space;  // the allocation, or nullptr for external memory
  __int128 first, end;

  MemorySpan(const gk_tensor& t, const gk_tensor_desc& d) {
    auto [lo, hi] = byte_extent(d);
    space = t.allocation.get();
    const __int128 base = space ? __int128(t.data_offset) : __int128(uintptr_t(t.data));
    first = base + lo;
    end = base + hi;
  }
  bool overlaps(const MemorySpan& o) const {
    return space == o.space && first < o.end && o.first < end && first < end && o.first < o.end;
  }
};

[[noreturn, gnu::cold, gnu::noinline]] void fail_overlap(const OpSchema& schema, size_t out,
                                                         const char* other_kind, size_t other,
                                                         bool exact) {
  auto name = [](const std::vector<std::string>& names, size_t i) {
    return i < names.size() ? "'" + names[i] + "'" : std::to_string(i);
  };
  const std::vector<std::string>& other_names =
      other_kind[0] == 'i' ? schema.input_names : schema.output_names;
  fail(GK_INVALID_ARGUMENT,
       schema.name + ": output " + name(schema.output_names, out) + " " +
           (exact ? "is " : "overlaps ") + other_kind + " " + name(other_names, other) +
           (exact ? ", and " + schema.name + " cannot write in place"
                  : " in memory, so results would depend on the order elements are written") +
           "; write to a separate tensor");
}

// Refuses outputs whose memory overlaps an input's or another output's. An elementwise op
// (OpSchema::in_place) may write an output over an input of the same layout exactly; an op
// that updates an input (OpSchema::updates_input) must.
void check_outputs_apart(const OpSchema& schema, const CallArray<gk_tensor_desc>& input_descs,
                         const CallArray<const gk_tensor*>& input_tensors,
                         const CallArray<gk_tensor_desc>& output_descs,
                         const CallArray<const gk_tensor*>& output_tensors) {
  auto same_layout = [](const gk_tensor_desc& a, const gk_tensor_desc& b) {
    return a.dtype == b.dtype && same_shape(a, b) &&
           std::equal(a.strides, a.strides + a.ndim, b.strides);
  };
  if (schema.updates_input >= 0 && output_descs.size() > 0 &&
      size_t(schema.updates_input) < input_descs.size()) {
    const size_t i = size_t(schema.updates_input);
    const MemorySpan in(*input_tensors.span()[i], input_descs.span()[i]);
    const MemorySpan out(*output_tensors.span()[0], output_descs.span()[0]);
    if (in.space != out.space || in.first != out.first ||
        !same_layout(input_descs.span()[i], output_descs.span()[0])) {
      fail(GK_INVALID_ARGUMENT, schema.name + ": output '" + schema.output_names[0] +
                                    "' must be input '" + schema.input_names[i] + "' itself (" +
                                    schema.name + " changes it in place)");
    }
  }
  for (size_t o = 0; o < output_descs.size(); ++o) {
    const gk_tensor_desc& od = output_descs.span()[o];
    const MemorySpan out(*output_tensors.span()[o], od);
    for (size_t i = 0; i < input_descs.size(); ++i) {
      const gk_tensor_desc& id = input_descs.span()[i];
      const MemorySpan in(*input_tensors.span()[i], id);
      if (!out.overlaps(in)) continue;
      const bool exact = in.first == out.first && same_layout(id, od);
      if (!(exact && schema.in_place)) fail_overlap(schema, o, "input", i, exact);
    }
    for (size_t p = 0; p < o; ++p) {
      if (out.overlaps(MemorySpan(*output_tensors.span()[p], output_descs.span()[p]))) {
        fail_overlap(schema, o, "output", p, false);
      }
    }
  }
}

// The DispatchCache key of a call whose tensors collect_tensors accepted: false when the
// call is not to be cached (an evictable tensor, whose address can change when it is
// restored; an attribute the op's rules will refuse; a key too long).
bool dispatch_key(const OpSchema& schema, const Device& device,
                  const CallArray<gk_tensor_desc>& input_descs,
                  const CallArray<const gk_tensor*>& input_tensors,
                  const CallArray<gk_tensor_desc>& output_descs,
                  const CallArray<const gk_tensor*>& output_tensors, const gk_attr* attrs,
                  int32_t num_attrs, DispatchCache::Key& key) {
  key.add(&schema);
  key.add(device.id);
  key.add(input_descs.size());
  key.add(output_descs.size());
  auto add_tensors = [&](const CallArray<gk_tensor_desc>& descs,
                         const CallArray<const gk_tensor*>& tensors) {
    for (size_t i = 0; i < descs.size(); ++i) {
      const gk_tensor_desc& d = descs.span()[i];
      const gk_tensor& t = *tensors.span()[i];
      if (t.allocation && t.allocation->evictable()) return false;
      // A plugin may look at the data's alignment (cuBLASLt does, up to 256 bytes).
      const auto address = reinterpret_cast<uintptr_t>(t.data);
      const int32_t align_bits = address ? std::min(std::countr_zero(address), 8) : -1;
      const int32_t head[4] = {d.dtype, d.ndim, int32_t(d.flags), align_bits};
      key.add(head, sizeof(head));
      if (d.ndim < 0 || d.ndim > GK_MAX_DIMS) return false;
      key.add(d.shape, sizeof(int64_t) * size_t(d.ndim));
      key.add(d.strides, sizeof(int64_t) * size_t(d.ndim));
    }
    return true;
  };
  if (!add_tensors(input_descs, input_tensors) || !add_tensors(output_descs, output_tensors)) {
    return false;
  }
  key.add(num_attrs);
  for (int32_t i = 0; i < num_attrs; ++i) {
    const gk_attr& a = attrs[i];
    if (!a.name) return false;
    key.add(a.name, std::strlen(a.name) + 1);
    key.add(a.type);
    switch (a.type) {
      case GK_ATTR_STRING:
        if (!a.value.s) return false;
        key.add(a.value.s, std::strlen(a.value.s) + 1);
        break;
      case GK_ATTR_INTS:
        if (a.count < 0 || (a.count > 0 && !a.value.ints)) return false;
        key.add(a.count);
        if (a.count > 0) key.add(a.value.ints, sizeof(int64_t) * size_t(a.count));
        break;
      default:  // GK_ATTR_INT, GK_ATTR_FLOAT (and types the rules refuse): the value's bits
        key.add(&a.value, sizeof(a.value));
    }
  }
  return !key.full();
}

// Dispatches a validated call to the plugin that accepts it and launches it on `stream`:
// `cached`, when the dispatch cache knows the call, else the plugin decide() picks, which
// is then added to the cache under `key` (when the call has one). Plugins receive `attrs`,
// the call's attributes as the op's rules normalised them.
void launch_op(Runtime& rt, const OpSchema& schema, const Device& device, gk_stream& stream,
               const CallArray<gk_tensor_desc>& input_descs,
               const CallArray<const gk_tensor*>& input_tensors,
               const CallArray<gk_tensor_desc>& output_descs,
               const CallArray<const gk_tensor*>& output_tensors, const NormalAttrs& attrs,
               const PluginRecord* cached, const DispatchCache::Key* key) {
  const size_t num_inputs = input_descs.size(), num_outputs = output_descs.size();
  // Evictable memory is restored and stays put until the launch is queued.
  TensorPins pins(stream.native);
  CallArray<gk_plugin_tensor> plugin_inputs(num_inputs), plugin_outputs(num_outputs);
  auto to_plugin = [&](const gk_tensor_desc& d, const gk_tensor& t) {
    return gk_plugin_tensor{pins.data(t), d.dtype, d.ndim, d.shape, d.strides, d.flags};
  };
  for (size_t i = 0; i < num_inputs; ++i) {
    plugin_inputs[i] = to_plugin(input_descs.span()[i], *input_tensors.span()[i]);
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    plugin_outputs[i] = to_plugin(output_descs.span()[i], *output_tensors.span()[i]);
  }
  gk_kernel_args kargs{sizeof(gk_kernel_args), schema.name.c_str(), device.id,
                       stream.native,          plugin_inputs.data(), int32_t(num_inputs),
                       plugin_outputs.data(),  int32_t(num_outputs), attrs.data(),
                       attrs.size()};
  if (!cached) {
    DispatchDecision decision = decide(rt.plugins(), device, kargs, false);
    if (!decision.chosen) fail(GK_UNIMPLEMENTED, decision.refusal_text(schema.name, device));
    cached = decision.chosen;
    if (key) rt.dispatch_cache().add(*key, cached, attrs);
  }
  // Every output empty: nothing to write, so nothing to launch (the plugin was still chosen,
  // so an op no plugin serves is refused alike). Kernels would otherwise walk the rows of an
  // input such as [2^40, 0] doing nothing.
  bool empty = true;
  for (size_t i = 0; i < num_outputs && empty; ++i) empty = numel(output_descs.span()[i]) == 0;
  if (empty && num_outputs > 0) return;
  const PluginRecord& plugin = *cached;
  take_plugin_error();
  gk_status status = plugin.api->launch(plugin.state, &kargs);
  if (status != GK_OK) {
    std::string why = take_plugin_error();
    fail(status, schema.name + " on " + device.label() + " by plugin " + plugin.name +
                     " failed (" + gk_status_name(status) + ")" +
                     (why.empty() ? "" : ": " + why));
  }
}

}  // namespace
void call_op(Runtime& rt, const char* name, const gk_op_args* args) {
  gk::require_arg(name, "gk_op_call", "name");
  gk::require_counts(args, "gk_op_call");
  const gk::OpSchema& schema = gk::OpRegistry::instance().get(name);

  const size_t num_inputs = size_t(args->num_inputs), num_outputs = size_t(args->num_outputs);
  gk::CallArray<gk_tensor_desc> input_descs(num_inputs), output_descs(num_outputs);
  gk::CallArray<const gk_tensor*> input_tensors(num_inputs), output_tensors(num_outputs);
  // Every tensor must be on the device of the first one: input 0, or output 0 when the
  // call has no inputs.
  const gk::Device* device = nullptr;
  gk::collect_tensors(schema, args->inputs, num_inputs, false, num_inputs > 0, input_descs,
                      input_tensors, device);
  gk::collect_tensors(schema, args->outputs, num_outputs, true, num_inputs > 0, output_descs,
                      output_tensors, device);
  if (!device) device = &rt.devices().at(0);
  gk::check_outputs_apart(schema, input_descs, input_tensors, output_descs, output_tensors);
  // A call seen before passed the op's rules then: its plugin and its normalised
  // attributes are known.
  gk::DispatchCache::Key key;
  const bool has_key = gk::dispatch_key(schema, *device, input_descs, input_tensors, output_descs,
                                        output_tensors, args->attrs, args->num_attrs, key);
  gk::NormalAttrs attrs;
  const gk::PluginRecord* cached = has_key ? rt.dispatch_cache().find(key, &attrs) : nullptr;
  if (!cached) {
    gk::OpRegistry::instance().validate(schema, input_descs.span(), output_descs.span(),
                                        args->attrs, args->num_attrs, &attrs);
  }
  gk_stream& stream = gk::stream_for(rt, args->stream, *device, schema.name.c_str());
  gk::TaskLaunch task_launch(rt, stream);
  gk::launch_op(rt, schema, *device, stream, input_descs, input_tensors, output_descs,
                output_tensors, attrs, cached, has_key ? &key : nullptr);
  task_launch.launched();
}

gk_status op_call_service(void* host_context, const gk_kernel_args* args) {
  return c_guard(
      [&] { host_op_call(*static_cast<Runtime*>(op_call_context(host_context)), args); });
}

void host_op_call(Runtime& rt, const gk_kernel_args* args) {
  require_arg(args, "host.op_call", "args");
  require_struct(args->struct_size, GK_KERNEL_ARGS_SIZE, "host.op_call", "gk_kernel_args");
  require_arg(args->op, "host.op_call", "args->op");
  const Device& device = rt.devices().at(args->device);
  if (args->num_inputs < 0 || args->num_outputs < 0 ||
      (args->num_inputs && !args->inputs) || (args->num_outputs && !args->outputs)) {
    fail(GK_INVALID_ARGUMENT, std::string("host.op_call: ") + args->op + ": bad tensor counts");
  }
  // The plugin's views become tensors of the runtime for the length of the call, so the op
  // takes gk_op_call's path: the same rules, the same dispatch, the same task charging.
  struct Views {
    std::vector<gk_tensor*> list;
    ~Views() {
      for (gk_tensor* t : list) gk_tensor_release(t);
    }
  } inputs, outputs;
  auto wrap = [&](const gk_plugin_tensor* given, int32_t count, const char* kind,
                  std::vector<gk_tensor*>& out) {
    for (int32_t i = 0; i < count; ++i) {
      const gk_plugin_tensor& p = given[i];
      gk_tensor_desc d{};
      d.struct_size = sizeof(d);
      d.dtype = p.dtype;
      d.ndim = p.ndim;
      d.has_strides = 1;
      d.flags = p.flags;
      if (p.ndim < 0 || p.ndim > GK_MAX_DIMS || (p.ndim && (!p.shape || !p.strides))) {
        fail(GK_INVALID_ARGUMENT, std::string("host.op_call: ") + args->op + ": " + kind + " " +
                                      std::to_string(i) + " has a bad shape");
      }
      for (int32_t k = 0; k < p.ndim; ++k) {
        d.shape[k] = p.shape[k];
        d.strides[k] = p.strides[k];
      }
      check_desc(d, std::string("host.op_call: ") + args->op + " " + kind + " " + std::to_string(i));
      out.push_back(new_tensor(rt, {}, device, d, p.data));
    }
  };
  wrap(args->inputs, args->num_inputs, "input", inputs.list);
  wrap(args->outputs, args->num_outputs, "output", outputs.list);
  gk_stream stream{&rt, {}, &device, static_cast<cuda::CUstream>(args->stream), false};
  gk_stream* on = args->stream ? &stream : nullptr;
  // A model plugin's op on the task stream the core gave it is the task's launch.
  if (gk_stream* task_stream = PluginTaskStream::find(rt, device, args->stream)) {
    on = task_stream;
  }
  gk_op_args call{sizeof(gk_op_args),  inputs.list.data(),  int32_t(inputs.list.size()),
                  outputs.list.data(), int32_t(outputs.list.size()), args->attrs,
                  args->num_attrs,     on};
  call_op(rt, args->op, &call);
}

namespace {
thread_local gk_stream* t_plugin_task_stream = nullptr;
}  // namespace

PluginTaskStream::PluginTaskStream(gk_stream* stream) : hidden_(t_plugin_task_stream) {
  t_plugin_task_stream = stream && stream->task ? stream : nullptr;
}

PluginTaskStream::~PluginTaskStream() { t_plugin_task_stream = hidden_; }

gk_stream* PluginTaskStream::find(const Runtime& runtime, const Device& device, void* native) {
  gk_stream* s = t_plugin_task_stream;
  if (!s || s->runtime != &runtime || s->device != &device) return nullptr;
  return static_cast<void*>(s->native) == native ? s : nullptr;
}

}  // namespace gk

extern "C" {

GK_API gk_status gk_op_call(gk_runtime* runtime, const char* name, const gk_op_args* args) {
  return gk::c_guard([&] {
    gk::call_op(gk::runtime_of(runtime, "gk_op_call"), name, args);
  });
}


GK_API gk_status gk_op_output_desc(gk_runtime* runtime, const char* name, const gk_op_args* args,
                                   int32_t index, gk_tensor_desc* out) {
  return gk::c_guard([&] {
    gk::runtime_of(runtime, "gk_op_output_desc");
    gk::require_arg(name, "gk_op_output_desc", "name");
    gk::require_counts(args, "gk_op_output_desc");
    gk::require_arg(out, "gk_op_output_desc", "out");
    gk::require_struct(out->struct_size, GK_TENSOR_DESC_SIZE, "gk_op_output_desc", "gk_tensor_desc");
    const gk::OpSchema& schema = gk::OpRegistry::instance().get(name);
    gk::CallArray<gk_tensor_desc> inputs(size_t(args->num_inputs));
    for (int32_t i = 0; i < args->num_inputs; ++i) {
      inputs[size_t(i)] = gk::desc_of(gk::tensor_arg(schema, args->inputs, i, false));
    }
    auto outputs =
        gk::OpRegistry::instance().infer(schema, inputs.span(), args->attrs, args->num_attrs);
    if (index < 0 || index >= int32_t(outputs.size())) {
      gk::fail(GK_OUT_OF_RANGE, schema.name + ": output index " + std::to_string(index) +
                                    " is out of range (the op has " +
                                    std::to_string(outputs.size()) + " outputs)");
    }
    size_t size = out->struct_size;
    std::memcpy(out, &outputs[size_t(index)], std::min(size, sizeof(gk_tensor_desc)));
    out->struct_size = size;
  });
}

GK_API int32_t gk_op_count(const gk_runtime*) {
  return int32_t(gk::OpRegistry::instance().all().size());
}

GK_API const char* gk_op_name(const gk_runtime*, int32_t index) {
  const auto& all = gk::OpRegistry::instance().all();
  if (index < 0 || index >= int32_t(all.size())) return nullptr;
  return all[size_t(index)].name.c_str();
}

GK_API gk_status gk_explain(gk_runtime* runtime, const char* name, int32_t device,
                            const gk_tensor_desc* inputs, int32_t num_inputs,
                            const gk_tensor_desc* outputs, int32_t num_outputs,
                            const gk_attr* attrs, int32_t num_attrs, char** out_json) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_explain");
    gk::require_arg(name, "gk_explain", "name");
    gk::require_arg(out_json, "gk_explain", "out_json");
    if (num_inputs < 0 || num_outputs < 0 || num_attrs < 0) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_explain: negative counts");
    }
    if (num_inputs) gk::require_arg(inputs, "gk_explain", "inputs");
    if (num_attrs) gk::require_arg(attrs, "gk_explain", "attrs");
    const gk::OpSchema& schema = gk::OpRegistry::instance().get(name);
    const gk::Device& dev = rt.devices().at(device);
    gk::KernelTensors kt;
    // The caller's descriptors, checked as gk_tensor_create checks them.
    auto checked = [&](const gk_tensor_desc& given, const char* which, int32_t i) {
      gk_tensor_desc d = given;
      gk::check_desc(d, "gk_explain: " + schema.name + " " + which + " " + std::to_string(i));
      if (!d.has_strides) gk::fill_contiguous_strides(&d);
      return d;
    };
    for (int32_t i = 0; i < num_inputs; ++i) kt.inputs.push_back(checked(inputs[i], "input", i));
    // Without outputs, explain the outputs the op would produce. Plugins are asked with the
    // attributes normalised, as a call hands them.
    gk::NormalAttrs normal;
    if (num_outputs > 0) {
      gk::require_arg(outputs, "gk_explain", "outputs");
      for (int32_t i = 0; i < num_outputs; ++i) {
        kt.outputs.push_back(checked(outputs[i], "output", i));
      }
      gk::OpRegistry::instance().validate(schema, kt.inputs, kt.outputs, attrs, num_attrs, &normal);
    } else {
      kt.outputs = gk::OpRegistry::instance().infer(schema, kt.inputs, attrs, num_attrs, &normal);
    }
    kt.finish({}, {});
    gk_kernel_args kargs =
        kt.args(schema.name.c_str(), dev.id, nullptr, normal.data(), normal.size());
    gk::DispatchDecision decision = gk::decide(rt.plugins(), dev, kargs, true);

    nlohmann::json j;
    j["op"] = schema.name;
    j["device"] = dev.label();
    j["device_id"] = dev.id;
    j["dtype"] = num_inputs ? gk::dtype_name(kt.inputs[0].dtype) : "";
    // The descriptors as dispatch saw them: outputs inferred when none were given.
    auto descs_json = [](const std::vector<gk_tensor_desc>& descs) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& d : descs) {
        list.push_back({{"dtype", gk::dtype_name(d.dtype)},
                        {"shape", std::vector<int64_t>(d.shape, d.shape + d.ndim)},
                        {"strides", std::vector<int64_t>(d.strides, d.strides + d.ndim)}});
      }
      return list;
    };
    j["inputs"] = descs_json(kt.inputs);
    j["outputs"] = descs_json(kt.outputs);
    j["chosen"] = decision.chosen ? nlohmann::json(decision.chosen->name) : nlohmann::json();
    j["candidates"] = nlohmann::json::array();
    for (const auto& c : decision.candidates) {
      j["candidates"].push_back({{"plugin", c.plugin->name},
                                 {"priority", c.plugin->manifest.priority},
                                 {"accepted", c.accepted},
                                 {"reason", c.reason}});
    }
    *out_json = gk::c_string(gk::json_text(j, 2));
  });
}


GK_API gk_status gk_op_call_alloc(gk_runtime* runtime, const char* name, const gk_op_args* args,
                                  int32_t num_outputs, gk_tensor** out_tensors,
                                  gk_tensor_desc* out_descs) {
  return gk::c_guard([&] {
    const char* fn = "gk_op_call_alloc";
    auto& rt = gk::runtime_of(runtime, fn);
    gk::require_arg(name, fn, "name");
    gk::require_counts(args, fn);
    if (num_outputs < 0) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": num_outputs " +
                                        std::to_string(num_outputs) + " is negative");
    }
    if (num_outputs > 0) gk::require_arg(out_tensors, fn, "out_tensors");
    // Descriptors are out_descs[0].struct_size bytes apart: the caller's sizeof.
    size_t desc_stride = 0;
    if (out_descs && num_outputs > 0) {
      desc_stride = out_descs->struct_size;
      gk::require_struct(desc_stride, GK_TENSOR_DESC_SIZE, fn, "gk_tensor_desc");
    }
    const gk::OpSchema& schema = gk::OpRegistry::instance().get(name);

    const size_t num_inputs = size_t(args->num_inputs);
    gk::CallArray<gk_tensor_desc> input_descs(num_inputs);
    gk::CallArray<const gk_tensor*> input_tensors(num_inputs);
    const gk::Device* device = nullptr;
    gk::collect_tensors(schema, args->inputs, num_inputs, false, true, input_descs,
                        input_tensors, device);
    gk::NormalAttrs attrs;
    auto inferred = gk::OpRegistry::instance().infer(schema, input_descs.span(), args->attrs,
                                                     args->num_attrs, &attrs);
    if (size_t(num_outputs) != inferred.size()) {
      gk::fail(GK_INVALID_ARGUMENT, schema.name + ": " + std::to_string(num_outputs) +
                                        " outputs asked; the op has " +
                                        std::to_string(inferred.size()));
    }
    if (!device) device = &rt.devices().at(0);
    gk_stream& stream = gk::stream_for(rt, args->stream, *device, schema.name.c_str());
    gk::TaskLaunch task_launch(rt, stream);

    // The outputs are released again unless the call succeeds.
    struct Created {
      gk::CallArray<gk_tensor*> tensors;
      ~Created() {
        for (size_t i = 0; i < tensors.size(); ++i) gk::release_tensor(tensors[i]);
      }
    } created{gk::CallArray<gk_tensor*>(inferred.size())};
    gk::CallArray<gk_tensor_desc> output_descs(inferred.size());
    gk::CallArray<const gk_tensor*> output_tensors(inferred.size());
    for (size_t i = 0; i < inferred.size(); ++i) {
      gk_tensor_desc d = inferred[i];
      d.flags = 0;  // new outputs are writable
      gk::fill_contiguous_strides(&d);
      created.tensors[i] = gk::create_tensor(runtime->impl, *device, d, stream.native);
      output_descs[i] = d;
      output_tensors[i] = created.tensors[i];
    }
    // The op's rules ran (infer); the cache spares decide() for a call seen before.
    gk::DispatchCache::Key key;
    const bool has_key = gk::dispatch_key(schema, *device, input_descs, input_tensors, output_descs,
                                          output_tensors, args->attrs, args->num_attrs, key);
    const gk::PluginRecord* cached = has_key ? rt.dispatch_cache().find(key) : nullptr;
    gk::launch_op(rt, schema, *device, stream, input_descs, input_tensors, output_descs,
                  output_tensors, attrs, cached, has_key ? &key : nullptr);
    task_launch.launched();
    for (size_t i = 0; i < inferred.size(); ++i) {
      if (desc_stride) {
        auto* d = reinterpret_cast<gk_tensor_desc*>(reinterpret_cast<char*>(out_descs) +
                                                    i * desc_stride);
        std::memcpy(d, &output_descs[i], std::min(desc_stride, sizeof(gk_tensor_desc)));
        d->struct_size = desc_stride;
      }
      out_tensors[i] = created.tensors[i];
      created.tensors[i] = nullptr;
    }
  });
}

}  // extern "C"
