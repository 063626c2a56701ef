/*
 * gpukit_memory.h — buffers, the stream-ordered memory pool and its owners, host memory and transfers
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_MEMORY_H_
#define GPUKIT_GPUKIT_MEMORY_H_

#include "gpukit_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Buffers: device memory owned by GPUkit. Allocation and free are stream-ordered.
 * A gk_buffer* is a checked handle: using it after gk_buffer_free returns
 * INVALID_ARGUMENT naming the stale handle instead of touching freed memory.
 * ------------------------------------------------------------------------------- */

typedef struct gk_buffer gk_buffer;
typedef struct gk_memory_owner gk_memory_owner; /* see "Memory" below */

typedef struct gk_alloc_args {
  size_t struct_size;   /* sizeof(gk_alloc_args) */
  int32_t device;
  uint64_t size;        /* bytes; 0 is allowed and yields a valid, empty buffer */
  gk_stream* stream;    /* the allocation is usable in this stream's order; NULL default */
  uint32_t flags;       /* GK_BUFFER_* (ABI 1.1; 0 before) */
  /* ABI 1.1: the owner charged (quota and accounting), NULL for none. Read only when
   * struct_size covers it. */
  gk_memory_owner* owner;
} gk_alloc_args;

#define GK_ALLOC_ARGS_SIZE GK_STRUCT_SIZE(gk_alloc_args, flags)

/* Allocates at least args->size bytes, 256-byte aligned. RESOURCE_EXHAUSTED names the
 * request, the device's total and free memory. The caller owns *out (gk_buffer_free).
 * Any thread. */
GK_API gk_status gk_buffer_alloc(gk_runtime* runtime, const gk_alloc_args* args,
                                 gk_buffer** out);

/* Releases the caller's reference in `stream`'s order (NULL: the buffer's allocation
 * stream). Memory is returned once tensors viewing the buffer are released too. A
 * second free of the same handle fails with INVALID_ARGUMENT. */
GK_API gk_status gk_buffer_free(gk_buffer* buffer, gk_stream* stream);

/* Size in bytes and device id of a live buffer. */
GK_API gk_status gk_buffer_size(const gk_buffer* buffer, uint64_t* out);
GK_API gk_status gk_buffer_device(const gk_buffer* buffer, int32_t* out);

/* The raw address of the buffer's memory (a CUdeviceptr for CUDA, a host pointer for
 * the cpu device), valid until the matching gk_buffer_unmap. While mapped, the buffer
 * stays at this address. Map and unmap nest. */
GK_API gk_status gk_buffer_map(gk_buffer* buffer, void** out);
GK_API gk_status gk_buffer_unmap(gk_buffer* buffer);

/* ---------------------------------------------------------------------------------
 * Memory (ABI 1.1): each device has a stream-ordered pool that serves every allocation
 * (buffers, tensors, plugin scratch). Owners carry a quota on one device; a device may
 * have a budget; evictable buffers are spilled to (pinned) host memory, least recently
 * used first, when a quota, the budget or the device would be exceeded, and restored on
 * their next use. See docs/memory.md.
 * ------------------------------------------------------------------------------- */

/* gk_alloc_args.flags */
enum {
  /* The buffer may be spilled to host memory while it is neither mapped nor in use by a
   * call, and is restored on gk_buffer_map or the next op or copy that uses it, possibly
   * at a new device address. Round trips are bit-exact. */
  GK_BUFFER_EVICTABLE = 1u << 0
};

/* Creates an owner on `device`: allocations made with it (gk_alloc_args.owner) are
 * charged to it and fail with RESOURCE_EXHAUSTED (after spilling the owner's evictable
 * buffers) past `quota_bytes` in use (0: no quota). `name` is copied and appears in
 * statistics, snapshots and out-of-memory messages. The caller owns *out and frees it with
 * gk_memory_owner_destroy. Any thread. */
GK_API gk_status gk_memory_owner_create(gk_runtime* runtime, int32_t device, const char* name,
                                        uint64_t quota_bytes, gk_memory_owner** out);

/* Frees the handle; the handle must not be used again. Memory still allocated with it
 * stays charged to its name until freed. NULL is a no-op. Any thread. */
GK_API void gk_memory_owner_destroy(gk_memory_owner* owner);

/* Bytes the owner has in use now and at most so far (pool block sizes). Either out
 * pointer may be NULL. Any thread. */
GK_API gk_status gk_memory_owner_usage(const gk_memory_owner* owner, uint64_t* in_use,
                                       uint64_t* peak);

/* Limits the bytes in use on `device` (0: no limit, the default). An allocation that
 * would pass it first spills evictable buffers, then fails with RESOURCE_EXHAUSTED.
 * Memory already in use is not affected. Any thread. */
GK_API gk_status gk_memory_set_budget(gk_runtime* runtime, int32_t device, uint64_t bytes);

/* Returns every free pool segment of `device` to the driver (waiting for the streams
 * that freed into them). *out_released (may be NULL) receives the bytes released. The
 * pool also does this by itself before failing an allocation. Any thread. */
GK_API gk_status gk_memory_trim(gk_runtime* runtime, int32_t device, uint64_t* out_released);

typedef struct gk_memory_stats {
  size_t struct_size;           /* sizeof(gk_memory_stats), set by the caller */
  uint64_t bytes_in_use;        /* live blocks (request rounded to the pool's sizes) */
  uint64_t bytes_requested;     /* live blocks as requested */
  uint64_t bytes_reserved;      /* segments held from the driver */
  uint64_t peak_bytes_in_use;
  uint64_t peak_bytes_reserved;
  uint64_t alloc_count;         /* successful allocations so far */
  uint64_t free_count;
  uint64_t failure_count;       /* RESOURCE_EXHAUSTED answers */
  uint64_t segment_count;
  uint64_t largest_free_block;  /* bytes */
  double fragmentation;         /* 1 - largest free block / free reserved bytes; 0 if none */
  uint64_t budget;              /* gk_memory_set_budget, 0 for none */
  uint64_t bytes_spilled;       /* evictable bytes now in host memory */
  uint64_t spill_count;
  uint64_t restore_count;
  uint64_t cross_stream_waits;  /* reuses across streams ordered by a stream wait */
} gk_memory_stats;

#define GK_MEMORY_STATS_SIZE GK_STRUCT_SIZE(gk_memory_stats, cross_stream_waits)

/* Fills *out (the caller sets out->struct_size; fields past it are not written) with the
 * pool statistics of `device`, read at the call. Any thread. */
GK_API gk_status gk_memory_stats_get(gk_runtime* runtime, int32_t device, gk_memory_stats* out);

/* A JSON snapshot of `device`'s pool: totals, owners (name, quota, in_use, peak, allocs,
 * failures), every segment (address, size, kind) with every block (address, size, state
 * "allocated"/"free"/"free_pending", stream, and for allocated blocks requested size,
 * owner, evictable, kind "handle"/"plugin"), and the spilled buffers. The caller frees
 * *out_json with gk_string_free. Any thread. */
GK_API gk_status gk_memory_snapshot_json(gk_runtime* runtime, int32_t device, char** out_json);

/* 1 when the evictable buffer is spilled to host memory now, else 0. */
GK_API gk_status gk_buffer_is_spilled(const gk_buffer* buffer, int32_t* out);

/* ---------------------------------------------------------------------------------
 * Transfers, ABI 1.3. Copies between host memory and a GPU (gk_copy_from_host,
 * gk_copy_to_host, gk_copy with a cpu side) run on dedicated copy streams, one per
 * direction, ordered with the caller's stream by events: the copy starts after the work
 * queued on the caller's stream, and later work on the caller's stream waits for it.
 *
 * Pinned host memory (from gk_host_alloc, cudaMallocHost, cudaHostRegister, …) is copied
 * by DMA directly and the calls return at once, as documented under "Copies". Pageable
 * host memory (malloc, new, numpy, …) goes through pinned staging chunks, pipelined:
 *   - gk_copy_from_host returns once every byte of `src` is read (so `src` may be reused
 *     or freed on return); the DMAs may still run, in the stream's order.
 *   - gk_copy_to_host returns once `dst` is written, which includes waiting for the work
 *     queued on the stream before the copy.
 * On the cpu device every copy is a plain memcpy. See docs/memory.md, "Transfers".
 * ------------------------------------------------------------------------------- */

/* Allocates at least `bytes` of host memory, 4096-byte aligned, for fast copies: pinned
 * (page-locked and usable by every CUDA device of the process) when the runtime has a CUDA
 * device, plain host memory otherwise. Served from a pool that keeps freed blocks for reuse,
 * so allocating again after gk_host_free costs no new pinning. bytes == 0 sets *out to NULL.
 * RESOURCE_EXHAUSTED names the request when the host cannot pin it. The caller owns the
 * memory and frees it with gk_host_free before gk_runtime_destroy; memory still allocated
 * then is released with the runtime (when its last stream, event, buffer or tensor goes), so
 * it must not be used after gk_runtime_destroy. Any thread. */
GK_API gk_status gk_host_alloc(gk_runtime* runtime, uint64_t bytes, void** out);

/* Gives back memory from gk_host_alloc of the same runtime. No copy may still use it: a copy
 * queued on a stream reads or writes it until the stream reaches the copy, so synchronize
 * that stream (or an event after the copy) first. NULL is a no-op. INVALID_ARGUMENT for any
 * other pointer, or a second free. Any thread. */
GK_API gk_status gk_host_free(gk_runtime* runtime, void* ptr);

/* Returns the freed blocks that gk_host_alloc keeps for reuse to the system (unpinning
 * them). *out_released (may be NULL) receives the bytes released. Any thread. */
GK_API gk_status gk_host_trim(gk_runtime* runtime, uint64_t* out_released);

typedef struct gk_transfer_stats {
  size_t struct_size;            /* sizeof(gk_transfer_stats), set by the caller */
  /* Copies of the device so far (calls with bytes > 0), and their bytes. "to device":
   * gk_copy_from_host, and gk_copy from a cpu tensor; "to host": gk_copy_to_host, and
   * gk_copy to a cpu tensor; "device": gk_copy between tensors of GPUs (counted on the
   * destination) or of the cpu device. */
  uint64_t to_device_copies;
  uint64_t to_device_bytes;
  uint64_t to_host_copies;
  uint64_t to_host_bytes;
  uint64_t device_copies;
  uint64_t device_bytes;
  /* Copies of pageable host memory that went through the staging chunks, their bytes, and
   * the chunks used. Copies of pinned memory are not counted here. */
  uint64_t staged_copies;
  uint64_t staged_bytes;
  uint64_t staged_chunks;
  uint64_t staging_bytes;        /* pinned staging memory the device holds (0 until used) */
  uint64_t staging_chunk_bytes;  /* the size of one staging chunk */
  /* gk_host_alloc memory of the runtime (the same for every device): block sizes of live
   * allocations, and freed blocks kept for reuse. */
  uint64_t host_bytes_in_use;
  uint64_t host_bytes_cached;
} gk_transfer_stats;

#define GK_TRANSFER_STATS_SIZE GK_STRUCT_SIZE(gk_transfer_stats, host_bytes_cached)

/* Fills *out (the caller sets out->struct_size, at least GK_TRANSFER_STATS_SIZE; fields past
 * it are not written) with the transfer counters of `device`, read at the call. OUT_OF_RANGE
 * for an unknown device. Any thread. */
GK_API gk_status gk_transfer_stats_get(gk_runtime* runtime, int32_t device,
                                       gk_transfer_stats* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_MEMORY_H_ */
