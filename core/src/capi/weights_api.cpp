// The weights C API (ABI 1.4): gk_weights_* over weights/weight_set.h.
#include <algorithm>
#include <cstring>

#include "capi/capi_util.h"
#include "capi/weights_handle.h"

namespace {

gk::weights::WeightSet& set_of(const gk_weights* weights, const char* function) {
  gk::require_arg(weights, function, "weights");
  return *weights->set;
}

gk::weights::WeightTensors& tensors_of(gk_weights* weights, const char* function) {
  gk::require_arg(weights, function, "weights");
  return *weights->tensors;
}

}  // namespace

extern "C" {

GK_API gk_status gk_weights_open(gk_runtime* runtime, const char* path,
                                 const gk_weights_options* options, gk_weights** out) {
  return gk::c_guard([&] {
    gk::runtime_of(runtime, "gk_weights_open");
    gk::require_arg(path, "gk_weights_open", "path");
    gk::require_arg(out, "gk_weights_open", "out");
    gk_weights_options o{};
    if (options) {
      gk::require_struct(options->struct_size, GK_WEIGHTS_OPTIONS_SIZE, "gk_weights_open",
                         "gk_weights_options");
      std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
    }
    if (o.owner && o.owner->runtime != runtime->impl) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_weights_open: options->owner belongs to another runtime");
    }
    auto weights = std::make_unique<gk_weights>();
    weights->runtime = runtime->impl;
    weights->set = std::make_unique<gk::weights::WeightSet>(path);
    weights->tensors = std::make_unique<gk::weights::WeightTensors>(
        runtime->impl, *weights->set, o.owner, o.progress, o.progress_user_data);
    *out = weights.release();
  });
}

GK_API void gk_weights_close(gk_weights* weights) {
  delete weights;
}

GK_API const char* gk_weights_format(const gk_weights* weights) {
  return weights ? weights->set->format() : "";
}

GK_API int64_t gk_weights_count(const gk_weights* weights) {
  return weights ? int64_t(weights->set->tensors().size()) : 0;
}

GK_API gk_status gk_weights_info(const gk_weights* weights, int64_t index, gk_weight_info* out) {
  return gk::c_guard([&] {
    const auto& set = set_of(weights, "gk_weights_info");
    gk::require_arg(out, "gk_weights_info", "out");
    gk::require_struct(out->struct_size, GK_WEIGHT_INFO_SIZE, "gk_weights_info", "gk_weight_info");
    const auto& tensors = set.tensors();
    if (index < 0 || uint64_t(index) >= tensors.size()) {
      gk::fail(GK_OUT_OF_RANGE, "gk_weights_info: index " + std::to_string(index) +
                                    " is outside 0.." + std::to_string(tensors.size()) +
                                    " (the weight set's tensor count)");
    }
    const gk::weights::TensorEntry& e = tensors[size_t(index)];
    gk_weight_info info{};
    info.struct_size = out->struct_size;
    info.name = e.name.c_str();
    info.dtype = e.dtype;
    info.ndim = e.ndim;
    std::copy(e.shape, e.shape + e.ndim, info.shape);
    info.bytes = e.bytes;
    info.file = set.file_path(e.file).c_str();
    info.file_offset = e.offset;
    std::memcpy(out, &info, std::min(out->struct_size, sizeof(info)));
  });
}

GK_API gk_status gk_weights_find(const gk_weights* weights, const char* name, int64_t* out_index) {
  return gk::c_guard([&] {
    const auto& set = set_of(weights, "gk_weights_find");
    gk::require_arg(name, "gk_weights_find", "name");
    gk::require_arg(out_index, "gk_weights_find", "out_index");
    const int64_t index = set.find(name);
    if (index < 0) set.fail_not_found(name);
    *out_index = index;
  });
}

GK_API gk_status gk_weights_metadata_json(const gk_weights* weights, char** out_json) {
  return gk::c_guard([&] {
    const auto& set = set_of(weights, "gk_weights_metadata_json");
    gk::require_arg(out_json, "gk_weights_metadata_json", "out_json");
    *out_json = gk::c_string(set.metadata_json());
  });
}

GK_API gk_status gk_weights_get(gk_weights* weights, const char* name, int32_t device,
                                int32_t dtype, gk_stream* stream, gk_tensor** out) {
  return gk::c_guard([&] {
    auto& set = set_of(weights, "gk_weights_get");
    gk::require_arg(name, "gk_weights_get", "name");
    gk::require_arg(out, "gk_weights_get", "out");
    const int64_t index = set.find(name);
    if (index < 0) set.fail_not_found(name);
    *out = weights->tensors->get(size_t(index), device, dtype, stream);
  });
}

GK_API gk_status gk_weights_load(gk_weights* weights, int32_t device, int32_t dtype,
                                 gk_stream* stream) {
  return gk::c_guard([&] { tensors_of(weights, "gk_weights_load").load(device, dtype, stream); });
}

GK_API gk_status gk_weights_release(gk_weights* weights, int32_t device) {
  return gk::c_guard([&] { tensors_of(weights, "gk_weights_release").release(device); });
}

}  // extern "C"
