// The scheduler's C API: tasks, their streams and owners, states and events.
#include <cstring>

#include "capi/capi_util.h"
#include "scheduler/scheduler.h"

namespace {

gk::Task& task_of(gk_task* task, const char* function) {
  gk::require_arg(task, function, "task");
  return *task->task;
}

gk::Scheduler& scheduler_of(gk_task* task) { return task->runtime->scheduler(); }

}  // namespace

extern "C" {

GK_API gk_status gk_task_create(gk_runtime* runtime, const gk_task_spec* spec, gk_task** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_task_create";
    gk::Runtime& rt = gk::runtime_of(runtime, fn);
    gk::require_arg(spec, fn, "spec");
    gk::require_arg(out, fn, "out");
    gk::require_struct(spec->struct_size, GK_TASK_SPEC_SIZE, fn, "gk_task_spec");
    gk::require_arg(spec->name, fn, "spec->name");
    if (spec->flags != 0) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": spec->flags must be 0, got " +
                                        std::to_string(spec->flags));
    }
    if (spec->qos < GK_QOS_BEST_EFFORT || spec->qos > GK_QOS_GUARANTEED) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": spec->qos " + std::to_string(spec->qos) +
                                        " is not a gk_qos value (0 BestEffort, 1 Burstable, "
                                        "2 Guaranteed)");
    }
    gk::TaskSpec s;
    s.name = spec->name;
    s.device = spec->device;
    s.qos = static_cast<gk::Qos>(spec->qos);
    s.priority = spec->priority;
    s.memory_request = spec->memory_request;
    s.memory_limit = spec->memory_limit;
    s.sm_request = spec->sm_request;
    s.sm_limit = spec->sm_limit;
    auto task = rt.scheduler().submit(s);
    auto* handle = new gk_task{runtime->impl, task, {runtime->impl, task->device, task->owner}};
    handle->owner.task = task.get();
    *out = handle;
  });
}

GK_API void gk_task_destroy(gk_task* task) {
  if (!task) return;
  try {
    scheduler_of(task).retire(*task->task);
  } catch (const std::exception&) {
    // Destruction goes on: the task's work could not be waited for (a failed device).
  }
  delete task;
}

GK_API gk_status gk_task_wait(gk_task* task, int64_t timeout_ms, int32_t* out_state) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_wait");
    int32_t state = scheduler_of(task).wait(t, timeout_ms);
    if (out_state) *out_state = state;
    if (state == GK_TASK_PENDING) {
      gk::fail(GK_DEADLINE_EXCEEDED, "gk_task_wait: task '" + t.spec.name + "' is still pending after " +
                                         std::to_string(timeout_ms) + " ms (" + t.reason + ")");
    }
  });
}

GK_API gk_status gk_task_run(gk_task* task) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_run");  // checks `task` before scheduler_of reads it
    scheduler_of(task).transition(t, GK_TASK_RUNNING, "running: gk_task_run");
  });
}

GK_API gk_status gk_task_complete(gk_task* task) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_complete");
    scheduler_of(task).complete(t);
  });
}

GK_API gk_status gk_task_fail(gk_task* task, const char* reason) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_fail");
    scheduler_of(task).transition(t, GK_TASK_FAILED,
                                  std::string("failed: ") + (reason ? reason : "no reason given"));
  });
}

GK_API gk_status gk_task_cancel(gk_task* task) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_cancel");
    scheduler_of(task).transition(t, GK_TASK_CANCELLED, "cancelled: gk_task_cancel");
  });
}

GK_API gk_status gk_task_stream_create(gk_task* task, gk_stream** out) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_stream_create");
    gk::require_arg(out, "gk_task_stream_create", "out");
    gk::Runtime& rt = *task->runtime;
    gk::cuda::CUstream native = rt.scheduler().create_stream(t);
    *out = new gk_stream{&rt, task->runtime, t.device, native, t.device->is_cuda(), task->task};
  });
}

GK_API gk_status gk_task_memory_owner(gk_task* task, gk_memory_owner** out) {
  return gk::c_guard([&] {
    task_of(task, "gk_task_memory_owner");
    gk::require_arg(out, "gk_task_memory_owner", "out");
    *out = &task->owner;
  });
}

GK_API gk_status gk_task_get_info(gk_task* task, gk_task_info* out) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_get_info");
    gk::require_arg(out, "gk_task_get_info", "out");
    gk::require_struct(out->struct_size, GK_TASK_INFO_SIZE, "gk_task_get_info", "gk_task_info");
    gk_task_info info = scheduler_of(task).info(t);
    info.struct_size = out->struct_size;
    std::memcpy(out, &info, std::min(out->struct_size, sizeof(info)));
  });
}

GK_API gk_status gk_task_events_json(gk_task* task, char** out_json) {
  return gk::c_guard([&] {
    gk::Task& t = task_of(task, "gk_task_events_json");
    gk::require_arg(out_json, "gk_task_events_json", "out_json");
    *out_json = gk::c_string(scheduler_of(task).events_json(t));
  });
}

GK_API gk_status gk_scheduler_json(gk_runtime* runtime, char** out_json) {
  return gk::c_guard([&] {
    gk::Runtime& rt = gk::runtime_of(runtime, "gk_scheduler_json");
    gk::require_arg(out_json, "gk_scheduler_json", "out_json");
    *out_json = gk::c_string(rt.scheduler().json());
  });
}

GK_API gk_status gk_scheduler_set_pacing(gk_runtime* runtime, int32_t device,
                                         const gk_pacing* pacing) {
  return gk::c_guard([&] {
    const char* fn = "gk_scheduler_set_pacing";
    gk::Runtime& rt = gk::runtime_of(runtime, fn);
    gk::require_arg(pacing, fn, "pacing");
    gk::require_struct(pacing->struct_size, GK_PACING_SIZE, fn, "gk_pacing");
    gk::PacingConfig config;
    config.best_effort_inflight = pacing->best_effort_inflight;
    config.guaranteed_idle_us = pacing->guaranteed_idle_us;
    config.max_hold_us = pacing->max_hold_us;
    rt.scheduler().set_pacing(rt.devices().at(device), config);
  });
}

}  // extern "C"
