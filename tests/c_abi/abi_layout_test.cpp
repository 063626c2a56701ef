// Pins the layout of every struct in gpukit.h, gpukit_plugin.h and gpukit_dlpack.h on 64-bit
// (LP64) targets, and the values of every enum and version macro. The ABI is append-only: when
// a struct grows, add lines for the new fields here and leave the old lines as they are.
// A failing static_assert here means an existing field moved — a major-version change.
#include <gpukit/gpukit.h>
#include <gpukit/gpukit_dlpack.h>
#include <gpukit/gpukit_plugin.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8, "layouts below are for LP64 targets");

#define GK_PIN(type, field, offset) \
  static_assert(offsetof(type, field) == (offset), #type "." #field " moved")
#define GK_PIN_SIZE(type, size) static_assert(sizeof(type) == (size), "sizeof(" #type ") changed")

// ---------------------------------------------------------------- gpukit.h (ABI 1.0)
GK_PIN(gk_runtime_options, struct_size, 0);
GK_PIN(gk_runtime_options, abi_version, 8);
GK_PIN(gk_runtime_options, flags, 12);
GK_PIN(gk_runtime_options, devices, 16);
GK_PIN(gk_runtime_options, plugin_path, 24);
GK_PIN(gk_runtime_options, plugins_disable, 32);
GK_PIN(gk_runtime_options, log_fn, 40);
GK_PIN(gk_runtime_options, log_user_data, 48);
GK_PIN(gk_runtime_options, log_level, 56);
static_assert(GK_RUNTIME_OPTIONS_SIZE == 60);

GK_PIN(gk_device_props, struct_size, 0);
GK_PIN(gk_device_props, kind, 8);
GK_PIN(gk_device_props, ordinal, 12);
GK_PIN(gk_device_props, name, 16);
static_assert(sizeof(gk_device_props::name) == 128);
GK_PIN(gk_device_props, sm_version, 144);
GK_PIN(gk_device_props, sm_count, 148);
GK_PIN(gk_device_props, total_memory, 152);
GK_PIN(gk_device_props, free_memory, 160);
GK_PIN(gk_device_props, driver_version, 168);
GK_PIN(gk_device_props, nvrtc_version, 172);
GK_PIN(gk_device_props, plugins_eligible, 176);
GK_PIN(gk_device_props, note, 180);
static_assert(sizeof(gk_device_props::note) == 256);
static_assert(GK_DEVICE_PROPS_SIZE == 436);

GK_PIN(gk_alloc_args, struct_size, 0);
GK_PIN(gk_alloc_args, device, 8);
GK_PIN(gk_alloc_args, size, 16);
GK_PIN(gk_alloc_args, stream, 24);
GK_PIN(gk_alloc_args, flags, 32);
static_assert(GK_ALLOC_ARGS_SIZE == 36);
GK_PIN(gk_alloc_args, owner, 40);  // ABI 1.1

GK_PIN(gk_tensor_desc, struct_size, 0);
GK_PIN(gk_tensor_desc, dtype, 8);
GK_PIN(gk_tensor_desc, ndim, 12);
GK_PIN(gk_tensor_desc, shape, 16);
GK_PIN(gk_tensor_desc, strides, 80);
GK_PIN(gk_tensor_desc, has_strides, 144);
GK_PIN(gk_tensor_desc, flags, 148);
static_assert(GK_TENSOR_DESC_SIZE == 152);

// gk_attr has no struct_size and travels in arrays: frozen for ABI major 1.
GK_PIN(gk_attr, name, 0);
GK_PIN(gk_attr, type, 8);
GK_PIN(gk_attr, count, 12);
GK_PIN(gk_attr, value, 16);
GK_PIN_SIZE(gk_attr, 24);

GK_PIN(gk_op_args, struct_size, 0);
GK_PIN(gk_op_args, inputs, 8);
GK_PIN(gk_op_args, num_inputs, 16);
GK_PIN(gk_op_args, outputs, 24);
GK_PIN(gk_op_args, num_outputs, 32);
GK_PIN(gk_op_args, attrs, 40);
GK_PIN(gk_op_args, num_attrs, 48);
GK_PIN(gk_op_args, stream, 56);
static_assert(GK_OP_ARGS_SIZE == 64);

// ABI 1.1
GK_PIN(gk_memory_stats, struct_size, 0);
GK_PIN(gk_memory_stats, bytes_in_use, 8);
GK_PIN(gk_memory_stats, bytes_requested, 16);
GK_PIN(gk_memory_stats, bytes_reserved, 24);
GK_PIN(gk_memory_stats, peak_bytes_in_use, 32);
GK_PIN(gk_memory_stats, peak_bytes_reserved, 40);
GK_PIN(gk_memory_stats, alloc_count, 48);
GK_PIN(gk_memory_stats, free_count, 56);
GK_PIN(gk_memory_stats, failure_count, 64);
GK_PIN(gk_memory_stats, segment_count, 72);
GK_PIN(gk_memory_stats, largest_free_block, 80);
GK_PIN(gk_memory_stats, fragmentation, 88);
GK_PIN(gk_memory_stats, budget, 96);
GK_PIN(gk_memory_stats, bytes_spilled, 104);
GK_PIN(gk_memory_stats, spill_count, 112);
GK_PIN(gk_memory_stats, restore_count, 120);
GK_PIN(gk_memory_stats, cross_stream_waits, 128);
static_assert(GK_MEMORY_STATS_SIZE == 136);

// ---------------------------------------------------------------- gpukit.h (ABI 1.3)
GK_PIN(gk_transfer_stats, struct_size, 0);
GK_PIN(gk_transfer_stats, to_device_copies, 8);
GK_PIN(gk_transfer_stats, to_device_bytes, 16);
GK_PIN(gk_transfer_stats, to_host_copies, 24);
GK_PIN(gk_transfer_stats, to_host_bytes, 32);
GK_PIN(gk_transfer_stats, device_copies, 40);
GK_PIN(gk_transfer_stats, device_bytes, 48);
GK_PIN(gk_transfer_stats, staged_copies, 56);
GK_PIN(gk_transfer_stats, staged_bytes, 64);
GK_PIN(gk_transfer_stats, staged_chunks, 72);
GK_PIN(gk_transfer_stats, staging_bytes, 80);
GK_PIN(gk_transfer_stats, staging_chunk_bytes, 88);
GK_PIN(gk_transfer_stats, host_bytes_in_use, 96);
GK_PIN(gk_transfer_stats, host_bytes_cached, 104);
static_assert(GK_TRANSFER_STATS_SIZE == 112);

// ---------------------------------------------------------------- gpukit.h (ABI 1.4)
GK_PIN(gk_weights_options, struct_size, 0);
GK_PIN(gk_weights_options, owner, 8);
GK_PIN(gk_weights_options, progress, 16);
GK_PIN(gk_weights_options, progress_user_data, 24);
static_assert(GK_WEIGHTS_OPTIONS_SIZE == 32);

GK_PIN(gk_weight_info, struct_size, 0);
GK_PIN(gk_weight_info, name, 8);
GK_PIN(gk_weight_info, dtype, 16);
GK_PIN(gk_weight_info, ndim, 20);
GK_PIN(gk_weight_info, shape, 24);
GK_PIN(gk_weight_info, bytes, 88);
GK_PIN(gk_weight_info, file, 96);
GK_PIN(gk_weight_info, file_offset, 104);
static_assert(GK_WEIGHT_INFO_SIZE == 112);

// ---------------------------------------------------------------- gpukit.h (ABI 1.5)
GK_PIN(gk_tokenizer_info, struct_size, 0);
GK_PIN(gk_tokenizer_info, vocab_size, 8);
GK_PIN(gk_tokenizer_info, bos_id, 12);
GK_PIN(gk_tokenizer_info, eos_id, 16);
GK_PIN(gk_tokenizer_info, eot_id, 20);
GK_PIN(gk_tokenizer_info, pad_id, 24);
GK_PIN(gk_tokenizer_info, unk_id, 28);
GK_PIN(gk_tokenizer_info, add_bos, 32);
GK_PIN(gk_tokenizer_info, add_eos, 36);
GK_PIN(gk_tokenizer_info, pre, 40);
static_assert(GK_TOKENIZER_INFO_SIZE == 48);

// ---------------------------------------------------------------- gpukit.h (ABI 1.6)
GK_PIN(gk_model_options, device, 8);
GK_PIN(gk_model_options, dtype, 12);
static_assert(GK_MODEL_OPTIONS_SIZE == 16);
GK_PIN(gk_model_info, architecture, 8);
GK_PIN(gk_model_info, plugin, 16);
GK_PIN(gk_model_info, vocab_size, 24);
GK_PIN(gk_model_info, context_length, 32);
GK_PIN(gk_model_info, num_layers, 40);
GK_PIN(gk_model_info, hidden_size, 44);
GK_PIN(gk_model_info, device, 48);
GK_PIN(gk_model_info, dtype, 52);
static_assert(GK_MODEL_INFO_SIZE == 56);
GK_PIN(gk_session_options, max_context, 8);
static_assert(GK_SESSION_OPTIONS_SIZE == 16);
GK_PIN(gk_generate_options, max_tokens, 8);
GK_PIN(gk_generate_options, top_k, 12);
GK_PIN(gk_generate_options, temperature, 16);
GK_PIN(gk_generate_options, top_p, 24);
GK_PIN(gk_generate_options, min_p, 32);
GK_PIN(gk_generate_options, repetition_penalty, 40);
GK_PIN(gk_generate_options, seed, 48);
GK_PIN(gk_generate_options, stop_tokens, 56);
GK_PIN(gk_generate_options, num_stop_tokens, 64);
GK_PIN(gk_generate_options, on_token, 72);
GK_PIN(gk_generate_options, user_data, 80);
static_assert(GK_GENERATE_OPTIONS_SIZE == 88);

GK_PIN(gk_plugin_info, struct_size, 0);
GK_PIN(gk_plugin_info, name, 8);
GK_PIN(gk_plugin_info, version, 16);
GK_PIN(gk_plugin_info, family, 24);
GK_PIN(gk_plugin_info, manifest_path, 32);
GK_PIN(gk_plugin_info, library_path, 40);
GK_PIN(gk_plugin_info, loaded, 48);
GK_PIN(gk_plugin_info, reason, 56);
GK_PIN(gk_plugin_info, priority, 64);
GK_PIN(gk_plugin_info, device_kind, 68);
GK_PIN(gk_plugin_info, sm_min, 72);
GK_PIN(gk_plugin_info, sm_max, 76);
static_assert(GK_PLUGIN_INFO_SIZE == 80);

// ---------------------------------------------------------- gpukit_plugin.h (ABI 1.0)
GK_PIN(gk_plugin_device, struct_size, 0);
GK_PIN(gk_plugin_device, id, 8);
GK_PIN(gk_plugin_device, kind, 12);
GK_PIN(gk_plugin_device, ordinal, 16);
GK_PIN(gk_plugin_device, sm_version, 20);
GK_PIN(gk_plugin_device, sm_count, 24);
GK_PIN(gk_plugin_device, total_memory, 32);
GK_PIN(gk_plugin_device, cuda_context, 40);
static_assert(GK_PLUGIN_DEVICE_SIZE == 48);

GK_PIN(gk_host_services, struct_size, 0);
GK_PIN(gk_host_services, abi_min, 8);
GK_PIN(gk_host_services, abi_max, 12);
GK_PIN(gk_host_services, host_context, 16);
GK_PIN(gk_host_services, plugin_name, 24);
GK_PIN(gk_host_services, log, 32);
GK_PIN(gk_host_services, report_error, 40);
GK_PIN(gk_host_services, alloc, 48);
GK_PIN(gk_host_services, free, 56);
GK_PIN(gk_host_services, cuda_driver_symbol, 64);
GK_PIN(gk_host_services, device_info, 72);
static_assert(GK_HOST_SERVICES_SIZE == 80);

// gk_plugin_tensor has no struct_size and travels in arrays: frozen for ABI major 1.
GK_PIN(gk_plugin_tensor, data, 0);
GK_PIN(gk_plugin_tensor, dtype, 8);
GK_PIN(gk_plugin_tensor, ndim, 12);
GK_PIN(gk_plugin_tensor, shape, 16);
GK_PIN(gk_plugin_tensor, strides, 24);
GK_PIN(gk_plugin_tensor, flags, 32);
GK_PIN_SIZE(gk_plugin_tensor, 40);

GK_PIN(gk_kernel_args, struct_size, 0);
GK_PIN(gk_kernel_args, op, 8);
GK_PIN(gk_kernel_args, device, 16);
GK_PIN(gk_kernel_args, stream, 24);
GK_PIN(gk_kernel_args, inputs, 32);
GK_PIN(gk_kernel_args, num_inputs, 40);
GK_PIN(gk_kernel_args, outputs, 48);
GK_PIN(gk_kernel_args, num_outputs, 56);
GK_PIN(gk_kernel_args, attrs, 64);
GK_PIN(gk_kernel_args, num_attrs, 72);
static_assert(GK_KERNEL_ARGS_SIZE == 76);

GK_PIN(gk_plugin_api, struct_size, 0);
GK_PIN(gk_plugin_api, abi_version, 8);
GK_PIN(gk_plugin_api, name, 16);
GK_PIN(gk_plugin_api, version, 24);
GK_PIN(gk_plugin_api, init, 32);
GK_PIN(gk_plugin_api, shutdown, 40);
GK_PIN(gk_plugin_api, supports, 48);
GK_PIN(gk_plugin_api, launch, 56);
static_assert(GK_PLUGIN_API_SIZE == 64);

// ---------------------------------------------------------- gpukit_plugin.h (ABI 1.1)
GK_PIN(gk_host_services, op_call, 80);
static_assert(GK_HOST_SERVICES_SIZE_1_1 == 88);
GK_PIN(gk_plugin_api, model, 64);
static_assert(GK_PLUGIN_API_SIZE_1_1 == 72);
// Plugin ABI 1.5: the graph services follow op_call.
GK_PIN(gk_host_services, graph_begin, 88);
GK_PIN(gk_host_services, graph_end, 96);
GK_PIN(gk_host_services, graph_launch, 104);
GK_PIN(gk_host_services, graph_release, 112);
static_assert(GK_HOST_SERVICES_SIZE_1_5 == 120);
GK_PIN(gk_plugin_weight, name, 0);
GK_PIN(gk_plugin_weight, tensor, 8);
GK_PIN_SIZE(gk_plugin_weight, 48);
GK_PIN(gk_model_create_args, architecture, 8);
GK_PIN(gk_model_create_args, config_json, 16);
GK_PIN(gk_model_create_args, device, 24);
GK_PIN(gk_model_create_args, dtype, 28);
GK_PIN(gk_model_create_args, weights, 32);
GK_PIN(gk_model_create_args, num_weights, 40);
static_assert(GK_MODEL_CREATE_ARGS_SIZE == 48);
GK_PIN(gk_plugin_model_info, vocab_size, 8);
GK_PIN(gk_plugin_model_info, context_length, 16);
GK_PIN(gk_plugin_model_info, num_layers, 24);
GK_PIN(gk_plugin_model_info, hidden_size, 28);
static_assert(GK_PLUGIN_MODEL_INFO_SIZE == 32);
GK_PIN(gk_model_step_args, stream, 8);
GK_PIN(gk_model_step_args, tokens, 16);
GK_PIN(gk_model_step_args, positions, 56);
GK_PIN(gk_model_step_args, logits, 96);
static_assert(GK_MODEL_STEP_ARGS_SIZE == 136);
GK_PIN(gk_model_api, model_create, 8);
GK_PIN(gk_model_api, model_destroy, 16);
GK_PIN(gk_model_api, model_info, 24);
GK_PIN(gk_model_api, session_create, 32);
GK_PIN(gk_model_api, session_destroy, 40);
GK_PIN(gk_model_api, session_step, 48);
static_assert(GK_MODEL_API_SIZE == 56);
// Plugin ABI 1.2 and 1.3.
GK_PIN(gk_model_api, batch_step, 56);
static_assert(GK_MODEL_API_SIZE_1_2 == 64);
GK_PIN(gk_model_api, session_encode, 64);
static_assert(GK_MODEL_API_SIZE_1_3 == 72);
GK_PIN(gk_plugin_model_info, encoder_channels, 32);
GK_PIN(gk_plugin_model_info, encoder_frames, 40);
static_assert(GK_PLUGIN_MODEL_INFO_SIZE_1_3 == 48);
GK_PIN(gk_model_encode_args, stream, 8);
GK_PIN(gk_model_encode_args, features, 16);
GK_PIN(gk_model_encode_args, output, 56);
static_assert(GK_MODEL_ENCODE_ARGS_SIZE == 96);

// ---------------------------------------------------------------- gpukit_asr.h (ABI 1.11)
GK_PIN(gk_encoder_info, n_mels, 8);
GK_PIN(gk_encoder_info, max_frames, 16);
static_assert(GK_ENCODER_INFO_SIZE == 24);
GK_PIN(gk_transcript_segment, start, 8);
GK_PIN(gk_transcript_segment, end, 16);
GK_PIN(gk_transcript_segment, text, 24);
GK_PIN(gk_transcript_segment, avg_logprob, 32);
GK_PIN(gk_transcript_segment, no_speech_prob, 40);
GK_PIN(gk_transcript_segment, tokens, 48);
GK_PIN(gk_transcript_segment, num_tokens, 56);
static_assert(GK_TRANSCRIPT_SEGMENT_SIZE == 60);
GK_PIN(gk_transcribe_options, language, 8);
GK_PIN(gk_transcribe_options, beam_size, 16);
GK_PIN(gk_transcribe_options, temperature, 20);
GK_PIN(gk_transcribe_options, without_timestamps, 24);
GK_PIN(gk_transcribe_options, no_speech_threshold, 28);
GK_PIN(gk_transcribe_options, logprob_threshold, 32);
GK_PIN(gk_transcribe_options, on_segment, 40);
GK_PIN(gk_transcribe_options, user_data, 48);
static_assert(GK_TRANSCRIBE_OPTIONS_SIZE == 56);
// ABI 1.12's decoding options follow user_data.
GK_PIN(gk_transcribe_options, best_of, 56);
GK_PIN(gk_transcribe_options, temperature_increment, 60);
GK_PIN(gk_transcribe_options, compression_ratio_threshold, 64);
GK_PIN(gk_transcribe_options, without_previous_text, 68);
GK_PIN(gk_transcribe_options, batch_size, 72);
GK_PIN(gk_transcribe_options, seed, 80);
static_assert(GK_TRANSCRIBE_OPTIONS_SIZE_1_12 == 88);

// ------------------------------------------- gpukit_dlpack.h (the DLPack 1.x spec layout)
GK_PIN(DLPackVersion, major, 0);
GK_PIN(DLPackVersion, minor, 4);
GK_PIN_SIZE(DLPackVersion, 8);
GK_PIN(DLDevice, device_type, 0);
GK_PIN(DLDevice, device_id, 4);
GK_PIN_SIZE(DLDevice, 8);
GK_PIN(DLDataType, code, 0);
GK_PIN(DLDataType, bits, 1);
GK_PIN(DLDataType, lanes, 2);
GK_PIN_SIZE(DLDataType, 4);
GK_PIN(DLTensor, data, 0);
GK_PIN(DLTensor, device, 8);
GK_PIN(DLTensor, ndim, 16);
GK_PIN(DLTensor, dtype, 20);
GK_PIN(DLTensor, shape, 24);
GK_PIN(DLTensor, strides, 32);
GK_PIN(DLTensor, byte_offset, 40);
GK_PIN_SIZE(DLTensor, 48);
GK_PIN(DLManagedTensor, dl_tensor, 0);
GK_PIN(DLManagedTensor, manager_ctx, 48);
GK_PIN(DLManagedTensor, deleter, 56);
GK_PIN_SIZE(DLManagedTensor, 64);
GK_PIN(DLManagedTensorVersioned, version, 0);
GK_PIN(DLManagedTensorVersioned, manager_ctx, 8);
GK_PIN(DLManagedTensorVersioned, deleter, 16);
GK_PIN(DLManagedTensorVersioned, flags, 24);
GK_PIN(DLManagedTensorVersioned, dl_tensor, 32);
GK_PIN_SIZE(DLManagedTensorVersioned, 80);
static_assert(kDLCPU == 1 && kDLCUDA == 2 && kDLCUDAHost == 3 && kDLCUDAManaged == 13);
static_assert(kDLInt == 0 && kDLUInt == 1 && kDLFloat == 2 && kDLBfloat == 4 && kDLBool == 6);

// ------------------------------------------------------------ gpukit_jit.h (ABI 1.8)
GK_PIN(gk_jit_options, struct_size, 0);
GK_PIN(gk_jit_options, options, 8);
GK_PIN(gk_jit_options, num_options, 16);
GK_PIN(gk_jit_options, include_paths, 24);
GK_PIN(gk_jit_options, num_include_paths, 32);
GK_PIN(gk_jit_options, name_expressions, 40);
GK_PIN(gk_jit_options, num_name_expressions, 48);
GK_PIN(gk_jit_options, sm_version, 52);
GK_PIN(gk_jit_options, program_name, 56);
GK_PIN(gk_jit_options, flags, 64);
static_assert(GK_JIT_OPTIONS_SIZE == 68);
GK_PIN(gk_jit_module_info, struct_size, 0);
GK_PIN(gk_jit_module_info, device, 8);
GK_PIN(gk_jit_module_info, sm_version, 12);
GK_PIN(gk_jit_module_info, origin, 16);
GK_PIN(gk_jit_module_info, loaded, 20);
GK_PIN(gk_jit_module_info, nvrtc_version, 24);
GK_PIN(gk_jit_module_info, key, 32);
GK_PIN(gk_jit_module_info, cubin, 40);
GK_PIN(gk_jit_module_info, cubin_size, 48);
GK_PIN(gk_jit_module_info, ptx, 56);
GK_PIN(gk_jit_module_info, ptx_size, 64);
GK_PIN(gk_jit_module_info, log, 72);
GK_PIN(gk_jit_module_info, cache_path, 80);
static_assert(GK_JIT_MODULE_INFO_SIZE == 88);
GK_PIN(gk_jit_arg, kind, 0);  // travels in arrays: frozen
GK_PIN(gk_jit_arg, size, 4);
GK_PIN(gk_jit_arg, value, 8);
GK_PIN_SIZE(gk_jit_arg, 16);
GK_PIN(gk_jit_launch_args, struct_size, 0);
GK_PIN(gk_jit_launch_args, grid, 8);
GK_PIN(gk_jit_launch_args, block, 20);
GK_PIN(gk_jit_launch_args, shared_mem_bytes, 32);
GK_PIN(gk_jit_launch_args, args, 40);
GK_PIN(gk_jit_launch_args, num_args, 48);
GK_PIN(gk_jit_launch_args, stream, 56);
static_assert(GK_JIT_LAUNCH_ARGS_SIZE == 64);
GK_PIN(gk_jit_cache_stats, struct_size, 0);
GK_PIN(gk_jit_cache_stats, dir, 8);
GK_PIN(gk_jit_cache_stats, entries, 16);
GK_PIN(gk_jit_cache_stats, bytes, 24);
GK_PIN(gk_jit_cache_stats, limit_bytes, 32);
static_assert(GK_JIT_CACHE_STATS_SIZE == 40);
static_assert(GK_JIT_NO_DISK_CACHE == 1 && GK_JIT_FORCE_COMPILE == 2);
static_assert(GK_JIT_ORIGIN_COMPILED == 1 && GK_JIT_ORIGIN_DISK_CACHE == 2 &&
              GK_JIT_ORIGIN_MEMORY == 3);
static_assert(GK_JIT_ARG_TENSOR == 1 && GK_JIT_ARG_I32 == 2 && GK_JIT_ARG_I64 == 3 &&
              GK_JIT_ARG_F32 == 4 && GK_JIT_ARG_F64 == 5 && GK_JIT_ARG_POINTER == 6 &&
              GK_JIT_ARG_BYTES == 7 && GK_JIT_ARG_U32 == 8 && GK_JIT_ARG_U64 == 9);

// ------------------------------------------------------------- values never renumbered
static_assert(GK_ABI_VERSION_MAJOR == 1);
static_assert(GK_PLUGIN_ABI_VERSION_MAJOR == 1);
static_assert(GK_MAKE_VERSION(1, 2) == 0x00010002u);
static_assert(GK_VERSION_MAJOR(0x00030004u) == 3 && GK_VERSION_MINOR(0x00030004u) == 4);
static_assert(GK_MAX_DIMS == 8);

static_assert(GK_OK == 0 && GK_CANCELLED == 1 && GK_UNKNOWN == 2 && GK_INVALID_ARGUMENT == 3 &&
              GK_DEADLINE_EXCEEDED == 4 && GK_NOT_FOUND == 5 && GK_ALREADY_EXISTS == 6 &&
              GK_PERMISSION_DENIED == 7 && GK_RESOURCE_EXHAUSTED == 8 &&
              GK_FAILED_PRECONDITION == 9 && GK_ABORTED == 10 && GK_OUT_OF_RANGE == 11 &&
              GK_UNIMPLEMENTED == 12 && GK_INTERNAL == 13 && GK_UNAVAILABLE == 14 &&
              GK_DATA_LOSS == 15 && GK_UNAUTHENTICATED == 16);
static_assert(GK_LOG_DEBUG == 0 && GK_LOG_INFO == 1 && GK_LOG_WARNING == 2 && GK_LOG_ERROR == 3 &&
              GK_LOG_OFF == 4);
static_assert(GK_RUNTIME_IGNORE_ENVIRONMENT == 1 && GK_RUNTIME_NO_DEFAULT_PLUGINS == 2);
static_assert(GK_DEVICE_KIND_CPU == 1 && GK_DEVICE_KIND_CUDA == 2);
static_assert(GK_DTYPE_F32 == 1 && GK_DTYPE_F64 == 2 && GK_DTYPE_F16 == 3 && GK_DTYPE_BF16 == 4 &&
              GK_DTYPE_I8 == 5 && GK_DTYPE_I16 == 6 && GK_DTYPE_I32 == 7 && GK_DTYPE_I64 == 8 &&
              GK_DTYPE_U8 == 9 && GK_DTYPE_BOOL == 10);
static_assert(GK_DTYPE_Q8_0 == 32 && GK_DTYPE_Q4_0 == 33 && GK_DTYPE_Q4_1 == 34 &&
              GK_DTYPE_Q4_K == 35 && GK_DTYPE_Q5_K == 36 && GK_DTYPE_Q6_K == 37);
static_assert(GK_TENSOR_READ_ONLY == 1);
static_assert(GK_BUFFER_EVICTABLE == 1);
static_assert(GK_ATTR_INT == 1 && GK_ATTR_FLOAT == 2 && GK_ATTR_STRING == 3 && GK_ATTR_INTS == 4);
static_assert(std::is_same_v<gk_status, int32_t>);

// The runtime-side checks that need the library.
TEST(AbiLayout, library_reports_the_header_major_version) {
  EXPECT_EQ(GK_VERSION_MAJOR(gk_abi_version()), GK_ABI_VERSION_MAJOR);
}

TEST(AbiLayout, current_struct_sizes_cover_the_last_field) {
  // sizeof may add tail padding; the *_SIZE macros of this version never exceed it.
  EXPECT_LE(GK_RUNTIME_OPTIONS_SIZE, sizeof(gk_runtime_options));
  EXPECT_LE(GK_DEVICE_PROPS_SIZE, sizeof(gk_device_props));
  EXPECT_LE(GK_ALLOC_ARGS_SIZE, sizeof(gk_alloc_args));
  EXPECT_LE(GK_TENSOR_DESC_SIZE, sizeof(gk_tensor_desc));
  EXPECT_LE(GK_OP_ARGS_SIZE, sizeof(gk_op_args));
  EXPECT_LE(GK_PLUGIN_INFO_SIZE, sizeof(gk_plugin_info));
  EXPECT_LE(GK_MEMORY_STATS_SIZE, sizeof(gk_memory_stats));
  EXPECT_LE(GK_TRANSFER_STATS_SIZE, sizeof(gk_transfer_stats));
  EXPECT_LE(GK_WEIGHTS_OPTIONS_SIZE, sizeof(gk_weights_options));
  EXPECT_LE(GK_WEIGHT_INFO_SIZE, sizeof(gk_weight_info));
  EXPECT_LE(GK_TOKENIZER_INFO_SIZE, sizeof(gk_tokenizer_info));
  EXPECT_LE(GK_PLUGIN_DEVICE_SIZE, sizeof(gk_plugin_device));
  EXPECT_LE(GK_HOST_SERVICES_SIZE, sizeof(gk_host_services));
  EXPECT_LE(GK_KERNEL_ARGS_SIZE, sizeof(gk_kernel_args));
  EXPECT_LE(GK_PLUGIN_API_SIZE, sizeof(gk_plugin_api));
}

TEST(AbiLayout, a_caller_of_another_major_version_is_refused) {
  gk_runtime_options options = GK_RUNTIME_OPTIONS_INIT;
  options.abi_version = GK_MAKE_VERSION(GK_ABI_VERSION_MAJOR + 1, 0);
  options.devices = "cpu";
  options.flags = GK_RUNTIME_IGNORE_ENVIRONMENT;
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&options, &rt), GK_FAILED_PRECONDITION);
  EXPECT_EQ(rt, nullptr);
  EXPECT_STRNE(gk_last_error(), "");
}

TEST(AbiLayout, a_caller_with_a_struct_of_the_first_version_is_accepted) {
  // A caller built against ABI 1.0 passes exactly GK_RUNTIME_OPTIONS_SIZE.
  gk_runtime_options options = GK_RUNTIME_OPTIONS_INIT;
  options.struct_size = GK_RUNTIME_OPTIONS_SIZE;
  options.devices = "cpu";
  options.flags = GK_RUNTIME_IGNORE_ENVIRONMENT;
  gk_runtime* rt = nullptr;
  ASSERT_EQ(gk_runtime_create(&options, &rt), GK_OK) << gk_last_error();
  gk_device_props props{};
  props.struct_size = GK_DEVICE_PROPS_SIZE;
  EXPECT_EQ(gk_device_get_props(rt, 0, &props), GK_OK) << gk_last_error();
  EXPECT_EQ(props.kind, GK_DEVICE_KIND_CPU);
  gk_runtime_destroy(rt);
}
