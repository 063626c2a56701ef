/*
 * gpukit_weights.h — weight sets: SafeTensors and GGUF
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_WEIGHTS_H_
#define GPUKIT_GPUKIT_WEIGHTS_H_

#include "gpukit_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Weights, ABI 1.4. A weight set is a model's tensors as stored in a file: SafeTensors
 * (one `.safetensors` file, a sharded checkpoint's `model.safetensors.index.json`, or a
 * folder holding either) or GGUF (one `.gguf` file). Opening one reads and checks every
 * header (names, dtypes, shapes, byte spans) and maps the files; no tensor data is read
 * until a tensor is asked for. Tensors handed out are read-only: an op refuses them as
 * outputs and gk_copy/gk_copy_from_host refuse them as destinations. See docs/weights.md.
 *
 * GGUF's block-quantized types are dtypes too. A tensor of one is packed: its shape counts
 * elements, its innermost dimension is a multiple of the block's element count, it is
 * always contiguous, and it holds (elements / block elements) * block bytes bytes.
 * gk_dtype_size() is 0 for them; gk_dtype_block() gives the block. Plugins may declare
 * them in their manifests ("q4_k") to read packed weights directly.
 * ------------------------------------------------------------------------------- */

enum {
  GK_DTYPE_Q8_0 = 32, /* blocks of 32: f16 scale, 32 x i8 (34 bytes) */
  GK_DTYPE_Q4_0 = 33, /* blocks of 32: f16 scale, 32 x 4 bits (18 bytes) */
  GK_DTYPE_Q4_1 = 34, /* blocks of 32: f16 scale, f16 min, 32 x 4 bits (20 bytes) */
  GK_DTYPE_Q4_K = 35, /* super-blocks of 256 (144 bytes), as llama.cpp's block_q4_K */
  GK_DTYPE_Q5_K = 36, /* super-blocks of 256 (176 bytes), as llama.cpp's block_q5_K */
  GK_DTYPE_Q6_K = 37  /* super-blocks of 256 (210 bytes), as llama.cpp's block_q6_K */
};

/* The elements per block of `dtype` (1 for a plain dtype, 32 or 256 for a block-quantized
 * one, 0 for an unknown value) and, through `out_block_bytes` (may be NULL), the bytes
 * per block. Any thread. */
GK_API uint32_t gk_dtype_block(int32_t dtype, uint32_t* out_block_bytes);

typedef struct gk_weights gk_weights;

typedef struct gk_weights_options {
  size_t struct_size;        /* sizeof(gk_weights_options) */
  /* Owner charged for the copies of this weight set's tensors on the owner's device (those
   * on other devices are charged as if it were NULL); NULL: the task of the stream given to
   * gk_weights_get, else an owner the weight set creates per device, named "weights <file
   * name>" (it shows in gk_memory_snapshot_json). Must outlive the weights. */
  gk_memory_owner* owner;
  /* Called during gk_weights_load with the stored bytes done and the total, on the thread
   * that called gk_weights_load, last with done == total on success; NULL for none. The
   * struct is copied by gk_weights_open; the callback and its user data must stay valid
   * until gk_weights_close. */
  void (*progress)(void* user_data, uint64_t done_bytes, uint64_t total_bytes);
  void* progress_user_data;
} gk_weights_options;

#define GK_WEIGHTS_OPTIONS_SIZE GK_STRUCT_SIZE(gk_weights_options, progress_user_data)

/* Opens a weight set (see above) and checks it whole. `options` may be NULL. `path` is a
 * file (GGUF when it ends in ".gguf" or opens with the GGUF magic, an index when it ends in
 * ".json", else SafeTensors) or a folder: its model.safetensors.index.json (or its only
 * *.safetensors.index.json), else every *.safetensors file in name order, else its only
 * *.gguf file. A malformed file fails with INVALID_ARGUMENT naming the file, the tensor and
 * the offending bytes (nothing stays open); so does a tensor name found twice, also across
 * files. NOT_FOUND when the path or a shard it names is missing. The weights hold the
 * runtime alive; free them with gk_weights_close. Any thread. */
GK_API gk_status gk_weights_open(gk_runtime* runtime, const char* path,
                                 const gk_weights_options* options, gk_weights** out);

/* Closes the weight set: the handle must not be used again. Tensors handed out stay
 * valid (each keeps what it reads: its file mapping or its device copy). NULL is a no-op.
 * No other call on the weights may be in flight. */
GK_API void gk_weights_close(gk_weights* weights);

/* The format: "safetensors" or "gguf" ("" for NULL). Valid while the weights live. */
GK_API const char* gk_weights_format(const gk_weights* weights);

/* The number of tensors (0 for NULL). Tensors are in file order, shard by shard. */
GK_API int64_t gk_weights_count(const gk_weights* weights);

typedef struct gk_weight_info {
  size_t struct_size;        /* sizeof(gk_weight_info), set by the caller */
  const char* name;          /* valid while the weights live */
  /* As stored: a gk_dtype, or a block-quantized one; 0 when GPUkit has no dtype for the
   * file's type (SafeTensors U16, U32, U64, F8_*, F6_*, F4, C64; GGUF Q5_0, Q2_K, IQ*, …):
   * such a tensor is listed, and gk_weights_get refuses it with UNIMPLEMENTED naming the
   * type. */
  int32_t dtype;
  int32_t ndim;
  int64_t shape[GK_MAX_DIMS];  /* row-major, innermost last (GGUF's order reversed) */
  uint64_t bytes;            /* stored bytes */
  const char* file;          /* the file holding it; valid while the weights live */
  uint64_t file_offset;      /* where its bytes start in that file */
} gk_weight_info;

#define GK_WEIGHT_INFO_SIZE GK_STRUCT_SIZE(gk_weight_info, file_offset)

/* Describes tensor `index` (0 .. count-1; OUT_OF_RANGE otherwise). Any thread. */
GK_API gk_status gk_weights_info(const gk_weights* weights, int64_t index, gk_weight_info* out);

/* The index of the tensor named `name`; NOT_FOUND (with the closest name) otherwise. */
GK_API gk_status gk_weights_find(const gk_weights* weights, const char* name, int64_t* out_index);

/* The metadata as a JSON object: SafeTensors' "__metadata__" (strings), or every GGUF
 * key/value with its value (numbers, strings, booleans and arrays, the tokenizer's
 * included). The caller frees *out_json with gk_string_free. Any thread. */
GK_API gk_status gk_weights_metadata_json(const gk_weights* weights, char** out_json);

/* Tensor `name` on `device`, read-only, as `dtype` (0: as stored). On the cpu device and
 * as stored, the tensor is the file's bytes, mapped without a copy (a private read-only
 * mapping: do not change the file while it is in use), unless they are not aligned to the
 * dtype (2 bytes for a block-quantized one), when they are copied. Otherwise its data is
 * converted on the host (f32/f16/bf16/f64 to each other, narrowing rounded to nearest
 * even; block-quantized dequantized to f32/f16/bf16 as llama.cpp does; other changes are
 * INVALID_ARGUMENT) into pool memory and, on a GPU, uploaded once through the transfer
 * engine on `stream` (NULL: the device's default stream), charged as the options' owner
 * says; the call returns when the copy is complete. The result is cached per device and
 * dtype: a second call returns the same tensor (a new reference), also from another thread
 * at the same time. The caller releases the reference with gk_tensor_release. Errors name
 * the weight set and the tensor, out-of-memory ones included. Any thread. */
GK_API gk_status gk_weights_get(gk_weights* weights, const char* name, int32_t device,
                                int32_t dtype, gk_stream* stream, gk_tensor** out);

/* Makes every tensor available on `device` as `dtype`, as gk_weights_get would, reading
 * several files in parallel and keeping several chunks in flight, and reports progress
 * through the options' callback. A tensor that does not convert to `dtype` (an integer or
 * bool one) is made available as stored; one whose type GPUkit has no dtype for fails the
 * call with UNIMPLEMENTED (the tensors done so far stay cached). Returns when every copy is
 * complete. Any thread. */
GK_API gk_status gk_weights_load(gk_weights* weights, int32_t device, int32_t dtype,
                                 gk_stream* stream);

/* Drops the weight set's cached tensors of `device` (every device for -1; OUT_OF_RANGE for
 * an unknown id). Tensors handed out stay valid until released; the memory goes back when
 * the last of them is. */
GK_API gk_status gk_weights_release(gk_weights* weights, int32_t device);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_WEIGHTS_H_ */
