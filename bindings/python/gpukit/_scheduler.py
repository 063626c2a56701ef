"""Scheduler tasks over the C ABI (gk_task_*, ABI 1.3): QoS classes, admission against
reservations, the task state machine, task streams, events and pacing.
See docs/scheduling.md for the model.

    with gpukit.task("decode", qos="guaranteed", memory="2GiB", sm=0.5) as t:
        y = x @ w              # runs on t.stream, charged to the task
    print(t.state, t.info()["ops_launched"])
"""
from __future__ import annotations

import json
import math
import time

from . import errors
from ._lib import check, ffi, lib, take_string
from ._runtime import Device, Runtime, Stream, _enter_task_stream, _exit_task_stream, device_of
from ._runtime import runtime as _default_runtime
from ._units import parse_memory, sm_amount

__all__ = ["Task", "task", "scheduler_info", "set_pacing", "QOS_NAMES", "STATE_NAMES"]

# gk_qos by the names Python accepts (lower case, "_" and "-" ignored), and back.
_QOS_BY_NAME = {"guaranteed": lib.GK_QOS_GUARANTEED, "burstable": lib.GK_QOS_BURSTABLE,
                "besteffort": lib.GK_QOS_BEST_EFFORT}
QOS_NAMES = {lib.GK_QOS_BEST_EFFORT: "BestEffort", lib.GK_QOS_BURSTABLE: "Burstable",
             lib.GK_QOS_GUARANTEED: "Guaranteed"}
# gk_task_state → the names the C library uses in reasons, events and JSON.
STATE_NAMES = {lib.GK_TASK_PENDING: "Pending", lib.GK_TASK_ADMITTED: "Admitted",
               lib.GK_TASK_RUNNING: "Running", lib.GK_TASK_THROTTLED: "Throttled",
               lib.GK_TASK_COMPLETED: "Completed", lib.GK_TASK_FAILED: "Failed",
               lib.GK_TASK_CANCELLED: "Cancelled"}
_TERMINAL = {lib.GK_TASK_COMPLETED, lib.GK_TASK_FAILED, lib.GK_TASK_CANCELLED}
# Pacing defaults of a device nobody has configured (gk_pacing in gpukit.h).
_PACING_DEFAULTS = {"best_effort_inflight": 1, "guaranteed_idle_us": 200, "max_hold_us": 2000}
_WAIT_SLICE_MS = 100
_UINT32_MAX = 2**32 - 1
_INT32_MAX = 2**31 - 1


def _qos_code(qos) -> int:
    if not isinstance(qos, str):
        raise TypeError(f"qos: expected 'guaranteed', 'burstable' or 'best_effort', got "
                        f"{type(qos).__name__}")
    key = qos.lower().replace("_", "").replace("-", "")
    if key not in _QOS_BY_NAME:
        raise ValueError(f"qos: unknown class {qos!r}; use 'guaranteed', 'burstable' or "
                         f"'best_effort'")
    return _QOS_BY_NAME[key]


def _int32(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: expected an int, got {type(value).__name__}")
    if not -_INT32_MAX - 1 <= value <= _INT32_MAX:
        raise ValueError(f"{what}: {value} does not fit in 32 bits")
    return value


class _TaskStream(Stream):
    """A stream owned by a scheduler task (gk_task_stream_create): ops on it are charged to
    the task, paced and counted; on CUDA it has the class's priority and, where green
    contexts exist, runs on the task's SM partition. Freed when unreferenced; it holds the
    task handle, so the task is destroyed only after its last stream (the C rule)."""

    def __init__(self, device: Device, task_ptr):
        self.runtime = device.runtime
        self.device = device
        out = ffi.new("gk_stream**")
        check(lib.gk_task_stream_create(task_ptr, out))
        # The destructor closes over the task handle: it outlives the stream.
        self._ptr = ffi.gc(out[0], lambda s, _task=task_ptr: lib.gk_stream_destroy(s))


class Task:
    """A scheduler task (gk_task): a unit of work with a QoS class and memory/SM requests
    and limits, like a Kubernetes pod on a node (the device). Made by :func:`task`, which
    submits it at once; see there for the arguments and the ``with`` behaviour.

    The C task is destroyed (gk_task_destroy: cancelled if still active) when this object,
    its stream and every array an op made on that stream are gone; until then it is listed
    by :func:`scheduler_info`, and its state, reason, info() and events() stay readable."""

    def __init__(self, name: str, qos: str = "best_effort", memory=0, memory_limit=0, sm=None,
                 sm_limit=None, priority: int = 0, device=None, wait: bool = True,
                 timeout: float | None = None):
        if not isinstance(name, str):
            raise TypeError(f"name: expected a str, got {type(name).__name__}")
        if timeout is not None and (isinstance(timeout, bool) or
                                    not isinstance(timeout, (int, float)) or timeout < 0
                                    or math.isnan(timeout)):
            raise ValueError(f"timeout: expected None or seconds >= 0, got {timeout!r}")
        self._device = device_of(device)
        self._runtime: Runtime = self._device.runtime
        sm_count = self._device.props["sm_count"]
        self._name = name
        self._wait = bool(wait)
        self._timeout = timeout
        spec = ffi.new("gk_task_spec*")
        spec.struct_size = ffi.sizeof("gk_task_spec")
        name_c = ffi.new("char[]", name.encode())
        spec.name = name_c
        spec.device = self._device.id
        spec.qos = _qos_code(qos)
        spec.priority = _int32(priority, "priority")
        spec.flags = 0
        spec.memory_request = parse_memory(memory, "memory")
        spec.memory_limit = parse_memory(memory_limit, "memory_limit")
        spec.sm_request = _int32(sm_amount(sm, sm_count, "sm"), "sm")
        spec.sm_limit = _int32(sm_amount(sm_limit, sm_count, "sm_limit"), "sm_limit")
        self._qos = QOS_NAMES[spec.qos]
        out = ffi.new("gk_task**")
        check(lib.gk_task_create(self._runtime.ptr, spec, out))
        self._ptr = ffi.gc(out[0], lib.gk_task_destroy)
        self._stream = None
        self._token = None

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The name given at creation (it appears in events, snapshots and OOM messages)."""
        return self._name

    @property
    def qos(self) -> str:
        """"Guaranteed", "Burstable" or "BestEffort"."""
        return self._qos

    @property
    def device(self) -> Device:
        """The device the task runs on."""
        return self._device

    @property
    def ptr(self):
        """The gk_task* (a cffi pointer), for calls into the C ABI."""
        return self._ptr

    # -- state ------------------------------------------------------------------------------
    def _info(self):
        i = ffi.new("gk_task_info*")
        i.struct_size = ffi.sizeof("gk_task_info")
        check(lib.gk_task_get_info(self._ptr, i))
        return i

    @property
    def state(self) -> str:
        """The state now: "Pending", "Admitted", "Running", "Throttled", "Completed",
        "Failed" or "Cancelled"."""
        return STATE_NAMES[self._info().state]

    @property
    def reason(self) -> str:
        """Why the task is in its state, from the scheduler ("admitted: reserved …",
        "pending: …", "failed: ValueError('…')")."""
        return ffi.string(self._info().reason).decode("utf-8", "replace")

    def info(self) -> dict:
        """Every field of gk_task_info, read now, plus the name: state and qos as names,
        device, priority, stream_priority, sm_partition (SMs of its green-context partition,
        0 for none), memory_reserved, memory_in_use, memory_peak (bytes), ops_launched,
        throttle_count, throttled_ns, created_ns, admitted_ns, started_ns, finished_ns
        (the scheduler's monotonic clock, 0 until reached) and reason."""
        i = self._info()
        return {"name": self._name, "state": STATE_NAMES[i.state], "qos": QOS_NAMES[i.qos],
                "device": i.device, "priority": i.priority,
                "stream_priority": i.stream_priority, "sm_partition": i.sm_partition,
                "memory_reserved": i.memory_reserved, "memory_in_use": i.memory_in_use,
                "memory_peak": i.memory_peak, "ops_launched": i.ops_launched,
                "throttle_count": i.throttle_count, "throttled_ns": i.throttled_ns,
                "created_ns": i.created_ns, "admitted_ns": i.admitted_ns,
                "started_ns": i.started_ns, "finished_ns": i.finished_ns,
                "reason": ffi.string(i.reason).decode("utf-8", "replace")}

    def json(self) -> dict:
        """The parsed gk_task_events_json: the task as gk_scheduler_json lists it (name, qos,
        state, reason, memory, sm, stream_priority, pacing, times_ns …) with its events."""
        out = ffi.new("char**")
        check(lib.gk_task_events_json(self._ptr, out))
        return json.loads(take_string(out[0]))

    def events(self) -> list:
        """The task's latest events (at most 256), oldest first: dicts with t_ns, kind
        ("state", "eviction", "pacing" or "partition") and text."""
        return self.json()["events"]

    # -- moves of the state machine -----------------------------------------------------------
    def wait(self, timeout: float | None = None) -> str:
        """Blocks until the task leaves Pending or `timeout` seconds pass (None: no limit)
        and returns the state. Raises DeadlineExceeded (a TimeoutError) with the scheduler's
        reason when it is still pending; the task stays queued then."""
        if timeout is not None and (isinstance(timeout, bool) or timeout < 0):
            raise ValueError(f"timeout: expected None or seconds >= 0, got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        state = ffi.new("int32_t*")
        while True:
            # Slices of at most 100 ms, so Ctrl-C interrupts a long wait.
            slice_ms = _WAIT_SLICE_MS
            if deadline is not None:
                left = deadline - time.monotonic()
                slice_ms = max(0, min(_WAIT_SLICE_MS, int(math.ceil(left * 1000))))
            status = lib.gk_task_wait(self._ptr, slice_ms, state)
            if status == lib.GK_OK:
                return STATE_NAMES[state[0]]
            if status != lib.GK_DEADLINE_EXCEEDED:
                check(status)
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.DeadlineExceeded(
                    f"task {self._name!r} is still pending after {timeout:g} s "
                    f"({self.reason})", status)

    def run(self) -> None:
        """Admitted → Running without launching an op (the first op on its stream does this
        too). FailedPrecondition naming the state from any other state."""
        check(lib.gk_task_run(self._ptr))

    def complete(self) -> None:
        """Running → Completed after the work queued on its streams has finished; releases
        its reservations and SM partition. FailedPrecondition from any other state."""
        check(lib.gk_task_complete(self._ptr))

    def fail(self, reason: str) -> None:
        """Any non-terminal state → Failed with `reason`; releases as complete()."""
        check(lib.gk_task_fail(self._ptr, str(reason).encode("utf-8", "replace")))

    def cancel(self) -> None:
        """Any non-terminal state → Cancelled (a pending task leaves the queue); releases
        its reservations and partition and frees the buffers allocated for it.
        FailedPrecondition from a terminal state."""
        check(lib.gk_task_cancel(self._ptr))

    # -- stream -----------------------------------------------------------------------------------
    @property
    def stream(self) -> Stream:
        """The task's stream (made on first use; the task must be admitted): pass it as
        ``stream=`` to gpukit.call, or run ops inside ``with task`` where it is the current
        stream. Ops on it are charged to the task, paced, counted in ops_launched and, on
        CUDA, run with the class's stream priority on the task's SM partition if it has one.
        FailedPrecondition while the task is pending or after it finished."""
        if self._stream is None:
            self._stream = _TaskStream(self._device, self._ptr)
        return self._stream

    # -- with ---------------------------------------------------------------------------------
    def __enter__(self) -> "Task":
        if self._token is not None:
            raise RuntimeError(f"task {self._name!r} is already entered")
        if self._wait:
            timeout = self._timeout
        else:
            timeout = 0
        try:
            self.wait(timeout)
        except errors.DeadlineExceeded as e:
            # Leave the queue: a pending task holds its place and blocks those behind it.
            self.cancel()
            raise errors.DeadlineExceeded(f"{e.message}; the task was cancelled",
                                          e.status) from None
        stream = self.stream
        if self._device.is_cuda:
            # The task's stream is non-blocking: order it after the work already queued on
            # the device's default stream, which made this block's inputs.
            event = ffi.new("gk_event**")
            check(lib.gk_event_create(self._runtime.ptr, self._device.id, event))
            try:
                check(lib.gk_event_record(event[0], ffi.NULL))
                check(lib.gk_stream_wait_event(stream.ptr, event[0]))
            finally:
                lib.gk_event_destroy(event[0])
        self._token = _enter_task_stream(stream)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        _exit_task_stream(self._token)
        self._token = None
        if exc is None:
            try:
                self._stream.synchronize()
                code = self._info().state
                if code == lib.GK_TASK_ADMITTED:
                    self.run()  # the block finished without launching an op: it did run
                    code = lib.GK_TASK_RUNNING
                if code not in _TERMINAL:
                    self.complete()
            except BaseException as e:
                if self._info().state not in _TERMINAL:
                    self.fail(f"ending the task failed: {e!r}")
                raise
            return False
        reason = repr(exc)
        try:
            # Arrays made in the block may be used after it, on the default stream.
            self._stream.synchronize()
        except errors.GpukitError as e:
            reason += f"; waiting for its stream failed: {e}"
        if self._info().state not in _TERMINAL:
            self.fail(reason)
        return False

    def __repr__(self):
        try:
            state = self.state
        except errors.GpukitError:
            state = "?"
        return f"Task({self._name!r}, qos={self._qos}, device={self._device}, state={state})"


def task(name: str, qos: str = "best_effort", memory=0, memory_limit=0, sm=None, sm_limit=None,
         priority: int = 0, device=None, wait: bool = True,
         timeout: float | None = None) -> Task:
    """Submits a scheduler task (gk_task_create) and returns it; use it as a context
    manager::

        with gpukit.task("decode", qos="guaranteed", memory="2GiB", sm=0.5) as t:
            y = x @ w

    name: shown in events, scheduler_info() and out-of-memory messages.
    qos: "guaranteed" (requests = limits, reserved), "burstable" (requests reserved, may
        grow to its limits) or "best_effort" (the default, as in the C spec: no requests;
        admitted at once, spilled first). Case and "_"/"-" are ignored ("BestEffort").
    memory, memory_limit: bytes, or a size string: "2GiB", "512MiB", "1.5GB" (units in
        parse_memory). Guaranteed: limit 0 or equal to the request. Burstable: request <=
        limit, limit 0 = the device's capacity. BestEffort: request 0.
    sm, sm_limit: a fraction 0 < x <= 1 of the device's sm_count (float, rounded up) or an SM
        count (int >= 1); None or 0 for none. The same class rules as memory.
    priority: within the class and the pending queue, higher first.
    device: a Device, id or "cpu"/"cuda[:N]"; None for the default device.
    wait, timeout: how ``with`` waits for admission: wait=True blocks up to `timeout`
        seconds (None: no limit); wait=False does not block (the same as timeout=0).

    Submission happens here: the task is Admitted at once when its requests fit the
    device's unreserved capacity (the memory budget if set, else total memory; sm_count),
    else Pending (FIFO within class and priority). A spec that breaks the class rules
    raises InvalidArgument, a request larger than the device ResourceExhausted, both with
    the C message.

    ``with`` enters by waiting for admission (still pending at the timeout: the task is
    cancelled, leaving the queue, and DeadlineExceeded, a TimeoutError, is raised with the
    scheduler's reason), then makes the task's stream the current stream: ops whose inputs
    are on the task's device run on it, so their outputs are charged to the task and their
    launches counted and paced. On exit the stream is waited for; then a block that
    finished completes the task (gk_task_complete; a block that launched no op is run and
    completed: its work was host work), and a block that raised fails it with
    repr(exception) as the reason (gk_task_fail). Either way its reservations and SM
    partition are released at exit; the handle stays readable (state, info(), events())."""
    return Task(name, qos, memory, memory_limit, sm, sm_limit, priority, device, wait, timeout)


def scheduler_info(runtime: Runtime | None = None) -> dict:
    """The parsed gk_scheduler_json of a runtime (default: the default runtime): "devices"
    (capacity, reservations, SM partitions, stream priority range, pacing, pending ids) and
    "tasks" (every task not yet destroyed, with state, reason, memory and SM usage)."""
    rt = runtime if runtime is not None else _default_runtime()
    out = ffi.new("char**")
    check(lib.gk_scheduler_json(rt.ptr, out))
    return json.loads(take_string(out[0]))


def set_pacing(device=None, *, best_effort_inflight: int | None = None,
               guaranteed_idle_us: int | None = None, max_hold_us: int | None = None) -> dict:
    """Sets how `device`'s BestEffort launches are paced (gk_scheduler_set_pacing); takes
    effect at their next launch. While a Guaranteed task of the device is busy (ops in
    flight, or launched within guaranteed_idle_us microseconds), a BestEffort task launches
    only while it has fewer than best_effort_inflight ops in flight (0 turns pacing off); a
    launch held for max_hold_us goes anyway. A value left None keeps the device's current
    setting (defaults 1, 200, 2000). Returns the settings now in force."""
    dev = device_of(device)
    current = dict(_PACING_DEFAULTS)
    for d in scheduler_info(dev.runtime)["devices"]:
        if d["device"] == dev.id:
            current.update(d["pacing"])
    given = {"best_effort_inflight": best_effort_inflight,
             "guaranteed_idle_us": guaranteed_idle_us, "max_hold_us": max_hold_us}
    for key, value in given.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key}: expected an int, got {type(value).__name__}")
        limit = _INT32_MAX if key == "best_effort_inflight" else _UINT32_MAX
        if not 0 <= value <= limit:
            raise ValueError(f"{key}: {value} is outside 0..{limit}")
        current[key] = value
    p = ffi.new("gk_pacing*")
    p.struct_size = ffi.sizeof("gk_pacing")
    p.best_effort_inflight = current["best_effort_inflight"]
    p.guaranteed_idle_us = current["guaranteed_idle_us"]
    p.max_hold_us = current["max_hold_us"]
    check(lib.gk_scheduler_set_pacing(dev.runtime.ptr, dev.id, p))
    return current
