/*
 * gpukit_scheduler.h — the scheduler: tasks, QoS classes, pacing
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_SCHEDULER_H_
#define GPUKIT_GPUKIT_SCHEDULER_H_

#include "gpukit_memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Scheduler: tasks, ABI 1.3. A task is a unit of work with a QoS class, memory and SM
 * requests and limits, like a Kubernetes pod on a node (the device). Admission reserves
 * requests; memory allocated for a task is charged to it; under memory pressure
 * BestEffort buffers are spilled first, then Burstable memory above its request; a task's
 * streams get a CUDA stream priority from its class and, where the driver offers green
 * contexts, an SM partition; BestEffort launches are paced while Guaranteed work is queued.
 * Every decision is recorded with its reason. See docs/scheduling.md.
 * ------------------------------------------------------------------------------- */

typedef struct gk_task gk_task;

/* gk_task_spec.qos */
typedef enum gk_qos {
  GK_QOS_BEST_EFFORT = 0, /* no requests: admitted at once, uses what is left, spilled first */
  GK_QOS_BURSTABLE = 1,   /* requests reserved; may grow to its limits while capacity is free */
  GK_QOS_GUARANTEED = 2   /* requests = limits, reserved at admission */
} gk_qos;

/* gk_task_info.state */
typedef enum gk_task_state {
  GK_TASK_PENDING = 0,   /* waiting for its requests to fit (FIFO within priority) */
  GK_TASK_ADMITTED = 1,  /* requests reserved; no work launched yet */
  GK_TASK_RUNNING = 2,   /* launched work (first op on one of its streams, or gk_task_run) */
  GK_TASK_THROTTLED = 3, /* a BestEffort launch held back by pacing; back to RUNNING after */
  GK_TASK_COMPLETED = 4, /* terminal states: reservations and memory released */
  GK_TASK_FAILED = 5,
  GK_TASK_CANCELLED = 6
} gk_task_state;

typedef struct gk_task_spec {
  size_t struct_size;       /* sizeof(gk_task_spec), set by the caller */
  const char* name;         /* copied; appears in events, snapshots and OOM messages */
  int32_t device;
  int32_t qos;              /* gk_qos */
  int32_t priority;         /* within the class and the pending queue: higher first */
  uint32_t flags;           /* 0 */
  /* Memory in bytes. Guaranteed: limit 0 or equal to request. Burstable: request <= limit,
   * limit 0 = the device's capacity. BestEffort: request 0, limit 0 = none. */
  uint64_t memory_request;
  uint64_t memory_limit;
  /* SMs (see gk_device_props.sm_count), the same rules as memory. Guaranteed and
   * Burstable requests are reserved and, where green contexts are available, get an
   * exclusive partition of sm_request SMs rounded up to the device's granularity; a
   * BestEffort task (or one without an SM request) gets a shared partition of at most
   * sm_limit SMs, or of every SM not held exclusively once an exclusive partition exists.
   * Without green contexts: stream priorities only. */
  int32_t sm_request;
  int32_t sm_limit;
} gk_task_spec;

#define GK_TASK_SPEC_SIZE GK_STRUCT_SIZE(gk_task_spec, sm_limit)

/* Submits a task. It is admitted at once when its requests fit the device's unreserved
 * capacity (memory: the device budget if set, else its total memory; SMs: sm_count),
 * else it waits PENDING until they do (gk_task_wait). A request that can never fit
 * (larger than the device) fails with RESOURCE_EXHAUSTED naming it, and a spec that breaks
 * the rules above with INVALID_ARGUMENT; no task is created then. The caller owns *out
 * (gk_task_destroy). Any thread. */
GK_API gk_status gk_task_create(gk_runtime* runtime, const gk_task_spec* spec, gk_task** out);

/* Cancels the task unless it is in a terminal state, waits for the work queued on its
 * streams, releases its reservations, partition and memory owner, and frees the handle.
 * Buffers and tensors still allocated for it stay valid (charged to its closed owner) until
 * freed. Streams of the task must be destroyed first. NULL is a no-op. Any thread. */
GK_API void gk_task_destroy(gk_task* task);

/* Blocks until the task leaves PENDING or `timeout_ms` passes (negative: no limit).
 * *out_state (may be NULL) receives the state then. DEADLINE_EXCEEDED when still pending.
 * Any thread. */
GK_API gk_status gk_task_wait(gk_task* task, int64_t timeout_ms, int32_t* out_state);

/* ADMITTED → RUNNING (also done by the task's first op). FAILED_PRECONDITION names the
 * current state when the transition is not legal. Any thread. */
GK_API gk_status gk_task_run(gk_task* task);

/* RUNNING → COMPLETED, waiting for the work queued on the task's streams first; releases
 * its reservations and partition. FAILED_PRECONDITION from any other state. */
GK_API gk_status gk_task_complete(gk_task* task);

/* Any non-terminal state → FAILED with `reason` (copied); releases as gk_task_complete. */
GK_API gk_status gk_task_fail(gk_task* task, const char* reason);

/* Any non-terminal state → CANCELLED; a pending task leaves the queue; releases as
 * gk_task_complete. FAILED_PRECONDITION from a terminal state. */
GK_API gk_status gk_task_cancel(gk_task* task);

/* Creates a stream owned by the task: its CUDA priority comes from the task's class (and
 * `priority` within it is ignored), it runs on the task's SM partition when it has one,
 * ops on it are charged to the task and paced, and buffers allocated on it with no owner
 * are charged to the task. The task must be ADMITTED or later and not terminal. The caller
 * frees it with gk_stream_destroy before gk_task_destroy. Any thread. */
GK_API gk_status gk_task_stream_create(gk_task* task, gk_stream** out);

/* The task's memory owner, for gk_alloc_args.owner; borrowed, valid until gk_task_destroy. */
GK_API gk_status gk_task_memory_owner(gk_task* task, gk_memory_owner** out);

typedef struct gk_task_info {
  size_t struct_size;           /* sizeof(gk_task_info), set by the caller */
  int32_t state;                /* gk_task_state */
  int32_t qos;                  /* gk_qos */
  int32_t device;
  int32_t priority;             /* as given in the spec */
  int32_t stream_priority;      /* the CUDA priority of its streams */
  int32_t sm_partition;         /* SMs of its green-context partition, 0 for none */
  uint64_t memory_reserved;     /* bytes reserved at admission (its request) */
  uint64_t memory_in_use;       /* bytes charged to it now */
  uint64_t memory_peak;
  uint64_t ops_launched;
  uint64_t throttle_count;      /* launches held back by pacing */
  uint64_t throttled_ns;        /* total time held back */
  /* Nanoseconds on the scheduler's clock (monotonic), 0 until the state is reached. */
  uint64_t created_ns;
  uint64_t admitted_ns;
  uint64_t started_ns;
  uint64_t finished_ns;
  /* Why the task is in its state ("admitted: 2.00 GiB of 8.00 GiB unreserved", "pending:
   * …"), owned by the task, valid until the next call on it or its destruction. */
  const char* reason;
} gk_task_info;

#define GK_TASK_INFO_SIZE GK_STRUCT_SIZE(gk_task_info, reason)

/* Fills *out (the caller sets out->struct_size). Any thread. */
GK_API gk_status gk_task_get_info(gk_task* task, gk_task_info* out);

/* The task's events as JSON: {"name":…, "state":…, …, "events":[{"t_ns":…, "kind":
 * "state"|"eviction"|"pacing"|"partition", "text":…}, …]} (the latest 256). The caller
 * frees *out_json with gk_string_free. Any thread. */
GK_API gk_status gk_task_events_json(gk_task* task, char** out_json);

/* Every device's capacity, reservations, pacing state and tasks (with state, reason and
 * usage) as JSON; `gpukit tasks` prints it. The caller frees *out_json with gk_string_free.
 * Any thread. */
GK_API gk_status gk_scheduler_json(gk_runtime* runtime, char** out_json);

typedef struct gk_pacing {
  size_t struct_size;                /* sizeof(gk_pacing), set by the caller */
  /* While a Guaranteed task of the device is busy, a BestEffort task launches only while
   * it has fewer than this many ops in flight (0 turns pacing off). Default 1. */
  int32_t best_effort_inflight;
  /* A Guaranteed task counts as busy while it has ops in flight and for this long after
   * its last op was launched. Default 200. */
  uint32_t guaranteed_idle_us;
  /* A held BestEffort launch goes ahead after this long anyway, so it keeps making
   * progress. Default 2000. */
  uint32_t max_hold_us;
} gk_pacing;

#define GK_PACING_SIZE GK_STRUCT_SIZE(gk_pacing, max_hold_us)

/* Sets the pacing of `device`'s BestEffort tasks; takes effect at their next launch. Any
 * thread. */
GK_API gk_status gk_scheduler_set_pacing(gk_runtime* runtime, int32_t device,
                                         const gk_pacing* pacing);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_SCHEDULER_H_ */
