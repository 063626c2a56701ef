"""DLPack devices and stream hand-over: the DLPack device types, the GPUkit device of a DLPack
device, and making a consumer's stream wait for an exported array's producer. The capsules
themselves: _capsule.py; export: GPUArray.__dlpack__ (_array.py); import: from_dlpack
(_creation.py).
"""
from __future__ import annotations

import enum

from ._lib import check, ffi, lib
from ._runtime import Device, Runtime


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


_T_GK_EVENT = ffi.typeof("gk_event**")
_T_GK_STREAM = ffi.typeof("gk_stream**")


def _device_from_dl(rt: Runtime, dl_device) -> Device:
    kind, dev_id = int(dl_device[0]), int(dl_device[1])
    if kind in (1, 3):
        return rt.device("cpu")
    if kind in (2, 13):
        return rt.device(f"cuda:{dev_id}")
    raise BufferError(f"unsupported DLPack device type {_dl_name(kind)}; supported: kDLCPU, "
                      "kDLCUDAHost, kDLCUDA, kDLCUDAManaged")


def _dl_name(kind: int) -> str:
    try:
        return f"{DLDeviceType(kind).name} ({kind})"
    except ValueError:
        return f"unknown ({kind})"



def _sync_for_consumer(x, stream) -> None:
    """Makes the consumer's CUDA `stream` (DLPack's stream argument) wait for the work of
    the stream GPUArray `x` was produced on."""
    if stream is None:
        stream = 1
    if stream == 0:
        raise BufferError("stream=0 is ambiguous for CUDA and refused by the DLPack protocol; "
                          "pass 1 (legacy default), 2 (per-thread default) or a stream handle")
    if stream == -1:
        return
    producer = x._stream
    if producer is None and stream == 1:
        return  # same stream: our default stream is the legacy default stream
    rt, dev = x._rt, x._device
    ev = ffi.new(_T_GK_EVENT)
    check(lib.gk_event_create(rt.ptr, dev.id, ev))
    consumer = ffi.new(_T_GK_STREAM)
    try:
        check(lib.gk_event_record(ev[0], producer.ptr if producer is not None else ffi.NULL))
        # A wrapper of the consumer's stream, freed right after: destroying a wrapped
        # stream neither waits on nor destroys the consumer's stream.
        check(lib.gk_stream_wrap(rt.ptr, dev.id, ffi.cast("void*", int(stream)), consumer))
        check(lib.gk_stream_wait_event(consumer[0], ev[0]))
    finally:
        if consumer[0] != ffi.NULL:
            lib.gk_stream_destroy(consumer[0])
        lib.gk_event_destroy(ev[0])
