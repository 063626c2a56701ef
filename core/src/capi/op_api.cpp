// Ops: validation against the op's rules, dispatch to a plugin, explanation.
#include <nlohmann/json.hpp>
#include <span>

#include "capi/capi_util.h"
#include "common/dtype.h"
#include "dispatch/dispatcher.h"
#include "dispatch/op_schema.h"

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
template <typename T>
class CallArray {
 public:
  static constexpr size_t kInline = 8;
  explicit CallArray(size_t size) : size_(size) {
    if (size > kInline) heap_.resize(size);
  }
  T* data() { return size_ > kInline ? heap_.data() : inline_; }
  const T* data() const { return size_ > kInline ? heap_.data() : inline_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data()[i]; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  T inline_[kInline] = {};
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

}  // namespace
}  // namespace gk

extern "C" {

GK_API gk_status gk_op_call(gk_runtime* runtime, const char* name, const gk_op_args* args) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_op_call");
    gk::require_arg(name, "gk_op_call", "name");
    gk::require_counts(args, "gk_op_call");
    const gk::OpSchema& schema = gk::OpRegistry::instance().get(name);

    const size_t num_inputs = size_t(args->num_inputs), num_outputs = size_t(args->num_outputs);
    gk::CallArray<gk_tensor_desc> input_descs(num_inputs), output_descs(num_outputs);
    gk::CallArray<const gk_tensor*> input_tensors(num_inputs), output_tensors(num_outputs);
    // Every tensor must be on the device of the first one: input 0, or output 0 when the
    // call has no inputs.
    const gk::Device* device = nullptr;
    auto collect = [&](gk_tensor* const* list, size_t count, bool output) {
      auto& descs = output ? output_descs : input_descs;
      auto& tensors = output ? output_tensors : input_tensors;
      for (size_t i = 0; i < count; ++i) {
        const gk_tensor& t = gk::tensor_arg(schema, list, int32_t(i), output);
        if (!device) {
          device = t.device;
        } else if (t.device != device) {
          std::string who = std::string(output ? "output " : "input ") + std::to_string(i);
          std::string owner = num_inputs > 0 ? "input 0" : "output 0";
          gk::fail(GK_INVALID_ARGUMENT, schema.name + ": " + who + " is on " + t.device->label() +
                                            " but " + owner + " is on " + device->label() +
                                            "; copy it first");
        }
        descs[i] = gk::desc_of(t);
        tensors[i] = &t;
      }
    };
    collect(args->inputs, num_inputs, false);
    collect(args->outputs, num_outputs, true);
    gk::OpRegistry::instance().validate(schema, input_descs.span(), output_descs.span(),
                                        args->attrs, args->num_attrs);
    if (!device) device = &rt.devices().at(0);
    gk_stream& stream = gk::stream_for(rt, args->stream, *device, schema.name.c_str());

    // Evictable memory is restored and stays put until the launch is queued.
    gk::TensorPins pins(stream.native);
    gk::CallArray<gk_plugin_tensor> plugin_inputs(num_inputs), plugin_outputs(num_outputs);
    auto to_plugin = [&](const gk_tensor_desc& d, const gk_tensor& t) {
      return gk_plugin_tensor{pins.data(t), d.dtype, d.ndim, d.shape, d.strides, d.flags};
    };
    for (size_t i = 0; i < num_inputs; ++i) {
      plugin_inputs[i] = to_plugin(input_descs[i], *input_tensors[i]);
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      plugin_outputs[i] = to_plugin(output_descs[i], *output_tensors[i]);
    }
    gk_kernel_args kargs{sizeof(gk_kernel_args), schema.name.c_str(), device->id,
                         stream.native,          plugin_inputs.data(), int32_t(num_inputs),
                         plugin_outputs.data(),  int32_t(num_outputs), args->attrs,
                         args->num_attrs};
    gk::DispatchDecision decision = gk::decide(rt.plugins(), *device, kargs, false);
    if (!decision.chosen) gk::fail(GK_UNIMPLEMENTED, decision.refusal_text(schema.name, *device));
    const gk::PluginRecord& plugin = *decision.chosen;
    gk::take_plugin_error();
    gk_status status = plugin.api->launch(plugin.state, &kargs);
    if (status != GK_OK) {
      std::string why = gk::take_plugin_error();
      gk::fail(status, schema.name + " on " + device->label() + " by plugin " + plugin.name +
                           " failed (" + gk_status_name(status) + ")" +
                           (why.empty() ? "" : ": " + why));
    }
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
    for (int32_t i = 0; i < num_inputs; ++i) {
      gk_tensor_desc d = inputs[i];
      if (!d.has_strides) gk::fill_contiguous_strides(&d);
      kt.inputs.push_back(d);
    }
    // Without outputs, explain the outputs the op would produce.
    if (num_outputs > 0) {
      gk::require_arg(outputs, "gk_explain", "outputs");
      for (int32_t i = 0; i < num_outputs; ++i) {
        gk_tensor_desc d = outputs[i];
        if (!d.has_strides) gk::fill_contiguous_strides(&d);
        kt.outputs.push_back(d);
      }
      gk::OpRegistry::instance().validate(schema, kt.inputs, kt.outputs, attrs, num_attrs);
    } else {
      kt.outputs = gk::OpRegistry::instance().infer(schema, kt.inputs, attrs, num_attrs);
    }
    kt.finish({}, {});
    gk_kernel_args kargs = kt.args(schema.name.c_str(), dev.id, nullptr, attrs, num_attrs);
    gk::DispatchDecision decision = gk::decide(rt.plugins(), dev, kargs, true);

    nlohmann::json j;
    j["op"] = schema.name;
    j["device"] = dev.label();
    j["device_id"] = dev.id;
    j["dtype"] = num_inputs ? gk::dtype_name(kt.inputs[0].dtype) : "";
    j["chosen"] = decision.chosen ? nlohmann::json(decision.chosen->name) : nlohmann::json();
    j["candidates"] = nlohmann::json::array();
    for (const auto& c : decision.candidates) {
      j["candidates"].push_back({{"plugin", c.plugin->name},
                                 {"priority", c.plugin->manifest.priority},
                                 {"accepted", c.accepted},
                                 {"reason", c.reason}});
    }
    *out_json = gk::c_string(j.dump(2));
  });
}

}  // extern "C"
