"""gpukit.task and the scheduler views, on the cpu device of a runtime of their own with a
64 MiB budget (so admission decisions are exact and other tests' runtimes are untouched)."""
import gc
import json
import math
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import gpukit
from gpukit import errors
from gpukit._units import sm_amount

MiB = 1 << 20


def device_view(dev):
    (d,) = [d for d in gpukit.scheduler_info(dev.runtime)["devices"] if d["device"] == dev.id]
    return d


def task_view(dev, name):
    (t,) = [t for t in gpukit.scheduler_info(dev.runtime)["tasks"] if t["name"] == name]
    return t


# ---- quantities --------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("2GiB", 2 * 1024**3), ("512MiB", 512 * MiB), ("1.5GB", 1_500_000_000),
    ("1.5 GiB", 3 * 512 * MiB), ("64Mi", 64 * MiB), ("1kb", 1000), ("4096", 4096),
    ("0.5KiB", 512), (" 3 B ", 3), (".25GiB", 256 * MiB), (4096, 4096), (2e3, 2000),
    (np.int64(7), 7), ("0", 0),
])
def test_memory_sizes_parse_to_exact_bytes(text, expected):
    assert gpukit.parse_memory(text) == expected


@pytest.mark.parametrize("value, error, words", [
    ("2 GiBs", ValueError, "unknown unit 'GiBs'"),
    ("2Gb/s", ValueError, "cannot read '2Gb/s' as a size"),
    ("lots", ValueError, "cannot read 'lots'"),
    ("-1GiB", ValueError, "cannot read '-1GiB'"),
    ("", ValueError, "cannot read ''"),
    (-5, ValueError, "is negative"),
    ("0.3KiB", ValueError, "not a whole number of bytes"),
    (1.5, ValueError, "not a whole number of bytes"),
    (float("inf"), ValueError, "not a whole number of bytes"),
    ("20000000TiB", ValueError, "does not fit in 64 bits"),
    (True, TypeError, "bool"),
    (None, TypeError, "NoneType"),
    ([1], TypeError, "list"),
])
def test_memory_values_that_are_not_sizes_are_refused_with_the_value(value, error, words):
    with pytest.raises(error, match="memory_limit") as info:
        gpukit.parse_memory(value, "memory_limit")
    assert words in str(info.value)


def test_sm_fractions_round_up_and_counts_pass_through():
    assert sm_amount(0.5, 132) == 66
    assert sm_amount(0.1, 10) == 1          # the decimal written, not the nearest float
    assert sm_amount(0.001, 132) == 1       # any fraction is at least one SM
    assert sm_amount(1.0, 132) == 132       # a float 1.0 is every SM …
    assert sm_amount(1, 132) == 1           # … an int 1 is one SM
    assert sm_amount(48, 132) == 48
    assert sm_amount(None, 132) == 0 and sm_amount(0, 132) == 0 and sm_amount(0.0, 132) == 0


@pytest.mark.parametrize("value, error, words", [
    (1.5, ValueError, "not a fraction in (0, 1]"),
    (-0.25, ValueError, "not a fraction in (0, 1]"),
    (-3, ValueError, "SM count -3 is negative"),
    (True, TypeError, "bool"),
    ("half", TypeError, "str"),
])
def test_sm_values_that_are_neither_fraction_nor_count_are_refused(value, error, words):
    with pytest.raises(error) as info:
        sm_amount(value, 132, "sm_limit")
    assert "sm_limit" in str(info.value) and words in str(info.value)


def test_sm_fraction_is_taken_of_the_device_sm_count(dev):
    sms = dev.props["sm_count"]
    half = gpukit.task("half", qos="burstable", sm=0.5, device=dev)
    one = gpukit.task("one", qos="burstable", sm=1, sm_limit=1.0, device=dev)
    assert task_view(dev, "half")["sm"]["request"] == math.ceil(sms / 2)
    assert task_view(dev, "one")["sm"]["request"] == 1
    assert task_view(dev, "one")["sm"]["limit"] == sms
    assert device_view(dev)["sms_reserved"] == math.ceil(sms / 2) + 1
    assert half.state == one.state == "Admitted"


# ---- class rules and admission -----------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, words", [
    (dict(qos="guaranteed", memory="8MiB", memory_limit="16MiB"), errors.InvalidArgument,
     "requests = limits"),
    (dict(qos="burstable", memory="8MiB", memory_limit="4MiB"), errors.InvalidArgument,
     "is below memory_request"),
    (dict(qos="best_effort", memory="1MiB"), errors.InvalidArgument,
     "BestEffort tasks request nothing"),
    (dict(qos="guaranteed"), errors.InvalidArgument, "requests nothing"),
    (dict(qos="guaranteed", memory="65MiB"), errors.ResourceExhausted, "can never fit"),
    (dict(qos="burstable", sm=1, sm_limit=10_000), errors.InvalidArgument,
     "sm_limit 10000 exceeds"),
])
def test_specs_that_break_the_class_rules_raise_the_c_message(dev, kwargs, error, words):
    with pytest.raises(error) as info:
        gpukit.task("rule", device=dev, **kwargs)
    assert words in str(info.value) and "rule" in str(info.value)
    assert info.value.message == str(info.value)
    assert gpukit.scheduler_info(dev.runtime)["tasks"] == []  # no task was created


def test_unknown_qos_and_bad_priority_are_refused_before_the_c_call(dev):
    with pytest.raises(ValueError, match="unknown class 'gold'"):
        gpukit.task("q", qos="gold", device=dev)
    with pytest.raises(TypeError, match="priority: expected an int"):
        gpukit.task("q", priority=1.5, device=dev)
    assert gpukit.task("q", qos="BestEffort", device=dev).qos == "BestEffort"


def test_admission_reserves_requests_and_a_task_that_does_not_fit_waits(dev):
    a = gpukit.task("a", qos="guaranteed", memory="40MiB", device=dev)
    b = gpukit.task("b", qos="burstable", memory="30MiB", memory_limit="60MiB", device=dev)
    assert a.state == "Admitted" and a.info()["memory_reserved"] == 40 * MiB
    assert device_view(dev)["memory_capacity"] == 64 * MiB
    assert device_view(dev)["memory_reserved"] == 40 * MiB
    assert task_view(dev, "a")["state"] == "Admitted"
    assert task_view(dev, "b")["state"] == "Pending"
    assert b.state == "Pending" and b.info()["memory_reserved"] == 0
    assert "exceeds the 24.0 MiB unreserved" in b.reason
    with pytest.raises(TimeoutError) as info:  # DeadlineExceeded is a TimeoutError
        b.wait(0.05)
    assert isinstance(info.value, errors.DeadlineExceeded)
    assert "still pending after 0.05 s" in str(info.value) and "24.0 MiB" in str(info.value)
    assert b.state == "Pending"  # wait() leaves it queued
    with pytest.raises(errors.FailedPrecondition, match="streams are made for admitted tasks"):
        b.stream

    def finish_a():
        time.sleep(0.2)
        a.run()
        a.complete()

    finisher = threading.Thread(target=finish_a)
    finisher.start()
    with b:  # waits (GIL released) until a's reservation goes
        assert b.state == "Admitted"
    finisher.join()
    assert "after 'a' released" in b.events()[-3]["text"]
    assert b.state == "Completed"
    assert device_view(dev)["memory_reserved"] == 0


def test_a_timeout_on_enter_cancels_the_pending_task_with_the_reason(dev):
    blocker = gpukit.task("blocker", qos="guaranteed", memory="48MiB", device=dev)
    late = gpukit.task("late", qos="guaranteed", memory="32MiB", device=dev, timeout=0.1)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        with late:
            pytest.fail("the body must not run")
    assert time.monotonic() - start < 5
    assert "pending: its memory request 32.0 MiB exceeds" in str(info.value)
    assert "the task was cancelled" in str(info.value)
    assert late.state == "Cancelled"
    assert device_view(dev)["pending"] == []  # it no longer blocks the queue
    # wait=False does not block at all.
    now = gpukit.task("now", qos="guaranteed", memory="32MiB", device=dev, wait=False)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        with now:
            pass
    assert time.monotonic() - start < 1 and now.state == "Cancelled"
    assert blocker.state == "Admitted"


# ---- the context manager -----------------------------------------------------------------

def test_a_block_that_finishes_completes_the_task_and_releases_it(dev):
    x = gpukit.full((64, 64), 2.0, np.float32, device=dev)
    with gpukit.task("ok", qos="guaranteed", memory="16MiB", sm=1, device=dev) as t:
        assert t.state == "Admitted"
        assert device_view(dev)["memory_reserved"] == 16 * MiB
        y = x * x
        assert t.state == "Running"
    assert t.state == "Completed" and t.reason == "completed"
    info = t.info()
    assert info["memory_reserved"] == 0 and info["finished_ns"] >= info["started_ns"] > 0
    assert device_view(dev)["memory_reserved"] == 0 and device_view(dev)["sms_reserved"] == 0
    np.testing.assert_array_equal(y.to_numpy(), np.full((64, 64), 4.0, np.float32))


def test_a_block_that_launches_nothing_is_run_then_completed(dev):
    with gpukit.task("host-only", qos="burstable", memory="1MiB", device=dev) as t:
        pass
    assert t.state == "Completed"
    texts = [e["text"] for e in t.events()]
    assert any("Admitted -> Running: running: gk_task_run" in s for s in texts)


def test_a_block_that_raises_fails_the_task_with_the_exception_text(dev):
    x = gpukit.ones((8,), device=dev)
    with pytest.raises(ValueError, match="boom"):
        with gpukit.task("bad", qos="burstable", memory="8MiB", device=dev) as t:
            x + x
            raise ValueError("boom")
    assert t.state == "Failed"
    assert t.reason == "failed: ValueError('boom')"
    assert t.info()["memory_reserved"] == 0
    assert any(e["text"].startswith("Running -> Failed: failed: ValueError('boom')")
               for e in t.events())
    assert gpukit.current_stream() is None


def test_a_task_cannot_be_entered_twice_or_completed_when_finished(dev):
    t = gpukit.task("twice", qos="burstable", memory="1MiB", device=dev)
    with t:
        with pytest.raises(RuntimeError, match="already entered"):
            t.__enter__()
    with pytest.raises(errors.FailedPrecondition, match="cannot go from Completed to Cancelled"):
        t.cancel()


def test_cancel_releases_the_reservation_and_admits_the_next(dev):
    first = gpukit.task("first", qos="guaranteed", memory="48MiB", device=dev)
    second = gpukit.task("second", qos="guaranteed", memory="32MiB", device=dev)
    assert second.state == "Pending"
    first.cancel()
    assert first.state == "Cancelled" and first.reason == "cancelled: gk_task_cancel"
    assert second.state == "Admitted"
    assert device_view(dev)["memory_reserved"] == 32 * MiB


# ---- ops on the task's stream ------------------------------------------------------------

def test_ops_inside_the_block_run_on_the_task_stream_and_are_charged_to_it(dev):
    x = gpukit.full((256, 256), 1.5, np.float32, device=dev)
    assert gpukit.current_stream() is None
    with gpukit.task("ops", qos="burstable", memory="8MiB", memory_limit="16MiB",
                     device=dev) as t:
        assert gpukit.current_stream() is t.stream
        y = x + x
        z = (y @ x).sum(axis=0)
        info = t.info()
    assert info["ops_launched"] == 3
    assert info["memory_in_use"] >= 256 * 256 * 4 + 256 * 4  # y and z, live
    assert info["memory_peak"] >= 2 * 256 * 256 * 4  # y and the matmul's temporary output
    assert task_view(dev, "ops")["memory"]["in_use"] == info["memory_in_use"]
    np.testing.assert_allclose(z.to_numpy(), np.full(256, 3.0 * 1.5 * 256 * 256, np.float32))
    # After the block, ops are back on the default stream: not counted for the task.
    assert gpukit.current_stream() is None
    x + x
    assert t.info()["ops_launched"] == 3


def test_a_context_copied_inside_the_block_sees_no_task_stream_once_no_block_is_open(dev):
    import contextvars
    x = gpukit.full((4,), 1.0, np.float32, device=dev)
    with gpukit.task("copied", qos="burstable", memory="1MiB", device=dev) as t:
        inside = contextvars.copy_context()  # as an asyncio task started in the block
        assert inside.run(gpukit.current_stream) is t.stream
        inside.run(lambda: x + x)
        assert t.info()["ops_launched"] == 1
    # The task is over: that context's ops go to the default stream like every other's.
    assert inside.run(gpukit.current_stream) is None
    inside.run(lambda: x + x)
    assert t.info()["ops_launched"] == 1


def test_an_explicit_task_stream_charges_without_the_block(dev):
    x = gpukit.full((128,), 1.0, np.float32, device=dev)
    t = gpukit.task("explicit", qos="best_effort", device=dev)
    out = gpukit.call("add", [x, x], stream=t.stream)
    info = t.info()
    assert info["state"] == "Running" and info["ops_launched"] == 1
    assert info["memory_in_use"] >= 128 * 4
    np.testing.assert_array_equal(out.to_numpy(), np.full(128, 2.0, np.float32))
    t.complete()
    with pytest.raises(errors.FailedPrecondition, match="is Completed"):
        gpukit.call("add", [x, x], stream=t.stream)


def test_a_task_is_destroyed_when_it_and_the_arrays_on_its_stream_are_gone(dev):
    x = gpukit.ones((16,), device=dev)
    with gpukit.task("short", qos="burstable", memory="1MiB", device=dev) as t:
        y = x + x
    del t
    gc.collect()
    assert [s["name"] for s in gpukit.scheduler_info(dev.runtime)["tasks"]] == ["short"]
    del y  # the output holds the task's stream, which holds the task
    gc.collect()
    assert gpukit.scheduler_info(dev.runtime)["tasks"] == []


def test_info_has_every_gk_task_info_field_and_events_are_ordered(dev):
    with gpukit.task("seen", qos="guaranteed", memory="4MiB", priority=3, device=dev) as t:
        gpukit.ones((4,), device=dev) * 2
    info = t.info()
    assert set(info) == {"name", "state", "qos", "device", "priority", "stream_priority",
                         "sm_partition", "memory_reserved", "memory_in_use", "memory_peak",
                         "ops_launched", "throttle_count", "throttled_ns", "created_ns",
                         "admitted_ns", "started_ns", "finished_ns", "reason"}
    assert (info["name"], info["qos"], info["priority"], info["device"]) == \
        ("seen", "Guaranteed", 3, dev.id)
    assert info["sm_partition"] == 0  # the cpu device has no SM partitions
    events = t.events()
    assert all(set(e) == {"t_ns", "kind", "text"} for e in events)
    assert [e["t_ns"] for e in events] == sorted(e["t_ns"] for e in events)
    texts = [e["text"] for e in events]
    assert texts[0].startswith("created: Guaranteed, priority 3")
    assert "Admitted -> Running: running: first op launched" in texts
    assert texts[-1] == "Running -> Completed: completed"
    doc = t.json()
    assert doc["name"] == "seen" and doc["state"] == "Completed" and doc["events"] == events


# ---- budget and pacing -------------------------------------------------------------------

def test_the_budget_is_the_capacity_tasks_are_admitted_against(dev):
    assert dev.memory_stats()["budget"] == 64 * MiB
    dev.set_memory_budget(32 * MiB)
    with pytest.raises(errors.ResourceExhausted, match="can never fit"):
        gpukit.task("big", qos="guaranteed", memory="40MiB", device=dev)
    assert device_view(dev)["memory_capacity"] == 32 * MiB
    assert gpukit.task("fits", qos="guaranteed", memory="32MiB", device=dev).state == "Admitted"
    with pytest.raises(ValueError, match="budget: unknown unit"):
        dev.set_memory_budget("1 parsec")


def test_set_pacing_changes_only_what_it_is_given(dev):
    assert gpukit.set_pacing(dev, best_effort_inflight=2) == \
        {"best_effort_inflight": 2, "guaranteed_idle_us": 200, "max_hold_us": 2000}
    gpukit.set_pacing(dev, max_hold_us=500)
    assert device_view(dev)["pacing"] == \
        {"best_effort_inflight": 2, "guaranteed_idle_us": 200, "max_hold_us": 500}
    gpukit.set_pacing(dev, best_effort_inflight=0)  # pacing off
    assert device_view(dev)["pacing"]["best_effort_inflight"] == 0
    with pytest.raises(ValueError, match="best_effort_inflight: -1 is outside"):
        gpukit.set_pacing(dev, best_effort_inflight=-1)
    with pytest.raises(TypeError, match="guaranteed_idle_us: expected an int"):
        gpukit.set_pacing(dev, guaranteed_idle_us=1.5)


# ---- the CLI's demo ----------------------------------------------------------------------

def _cli():
    exe = os.path.join(os.path.dirname(gpukit.LIBRARY_PATH), "..", "bin", "gpukit")
    return exe if os.path.isfile(exe) else None


@pytest.mark.skipif(_cli() is None, reason="no gpukit CLI beside the library (a wheel install)")
def test_cli_tasks_json_shows_one_task_of_each_class_and_a_pending_one():
    env = dict(os.environ, GPUKIT_DEVICE="cpu")
    done = subprocess.run([_cli(), "tasks", "--json"], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    doc = json.loads(done.stdout)
    states = {t["name"]: (t["qos"], t["state"]) for t in doc["tasks"]}
    assert set(states) == {"decode", "prefill", "batch-embed", "finetune"}
    assert states["decode"] == ("Guaranteed", "Running")
    assert states["prefill"] == ("Burstable", "Running")
    assert states["batch-embed"] == ("BestEffort", "Running")
    assert states["finetune"][1] == "Pending"
    (device,) = doc["devices"]
    assert device["memory_reserved"] > 0 and device["pending"]
    table = subprocess.run([_cli(), "tasks"], capture_output=True, text=True, env=env,
                           timeout=60, check=True).stdout
    assert "finetune" in table and "Pending" in table and "demo" in table
