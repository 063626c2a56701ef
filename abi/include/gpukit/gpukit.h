/*
 * gpukit.h — the GPUkit runtime C ABI.
 *
 * C99, no C++ types. Every fallible call returns a gk_status (GK_OK == 0) and, on
 * failure, leaves a message for the calling thread that gk_last_error() returns.
 *
 * Versioning: GK_ABI_VERSION_MAJOR changes only when an existing declaration changes
 * meaning or layout; GK_ABI_VERSION_MINOR grows when declarations are appended.
 * gk_runtime_create() refuses a caller built against another major version.
 *
 * Argument and option structs open with `size_t struct_size` (set it to sizeof) and
 * only ever grow at the end; the library reads no field past the caller's struct_size.
 *
 * Threading: unless a call says otherwise, calls on one runtime may be made from any
 * thread concurrently. Handles are not reference-counted unless the call says so.
 *
 * The declarations live in one header per concept, included here in order:
 *   gpukit_runtime.h    versions, status, logging, runtime, devices, streams, events
 *   gpukit_memory.h     buffers, the memory pool and its owners, host memory, transfers
 *   gpukit_tensor.h     tensors, dtypes, copies
 *   gpukit_ops.h        ops, output descriptors, plugins, gk_explain
 *   gpukit_scheduler.h  tasks, QoS, pacing
 *   gpukit_weights.h    SafeTensors / GGUF weight sets
 *   gpukit_tokenizer.h  tokenizers
 *   gpukit_model.h      models, sessions, batches
 *   gpukit_audio.h, gpukit_jit.h, gpukit_asr.h (and gpukit_dlpack.h, included separately)
 *
 * See docs/abi.md for the full ownership, threading and versioning rules.
 */
#ifndef GPUKIT_GPUKIT_H_
#define GPUKIT_GPUKIT_H_

#include "gpukit_runtime.h"
#include "gpukit_memory.h"
#include "gpukit_tensor.h"
#include "gpukit_ops.h"
#include "gpukit_scheduler.h"
#include "gpukit_weights.h"
#include "gpukit_tokenizer.h"
#include "gpukit_model.h"


/* Audio in (ABI 1.9): gk_audio_load, gk_audio_from_samples. */
#include "gpukit_audio.h"

/* Custom GPU kernels compiled at run time by NVRTC (ABI 1.8): gk_jit_*. */
#include "gpukit_jit.h"

/* Speech recognition (ABI 1.11): gk_session_encode, gk_asr_transcribe, gk_transcript_*. */
#include "gpukit_asr.h"

#endif /* GPUKIT_GPUKIT_H_ */
