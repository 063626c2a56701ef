import sys, time, statistics
sys.path.insert(0, "/work/main/bindings/python"); sys.path.insert(0, "/work/main/perf/python")
import numpy as np, gpukit
from gpukit import ffi, lib
from gpukit import _array as A
from bench_call_overhead import raw_call
x = gpukit.asarray(np.ones((1, 8), np.float32), device="cpu"); y = gpukit.asarray(np.ones((1, 8), np.float32), device="cpu"); o = gpukit.asarray(np.ones((1, 8), np.float32), device="cpu")
def t(f, n=20000, r=15):
    v = []
    for _ in range(r):
        t0 = time.perf_counter_ns()
        for _ in range(n): f()
        v.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(v)
raw = raw_call("add", [x, y], [o], {})
s = A._Scratch(); args, keep = s.args_for(2, 1, {}, None); tens = s.tensors; rtp = x._rt._ptr; call = lib.gk_op_call
def f1():
    tens[0] = x._t; tens[1] = y._t; tens[2] = o._t
    call(rtp, b"add", args)
def f2():
    for i, a in enumerate([x, y]): tens[i] = a._t
    for i, a in enumerate([o], 2): tens[i] = a._t
    call(rtp, "add".encode(), args)
ins, outs = [x, y], [o]
print("raw capi      %.0f ns" % t(raw))
print("f1 minimal    %.0f ns" % t(f1))
print("f2 loops      %.0f ns" % t(f2))
print("_call         %.0f ns" % t(lambda: A._call("add", ins, {}, outs)))
print("gpukit.call   %.0f ns" % t(lambda: gpukit.call("add", ins, attrs={}, out=outs)))
print("lambda only   %.0f ns" % t(lambda: None))
print("stream get    %.0f ns" % t(A._current_stream_get))
print("tls get       %.0f ns" % t(lambda: getattr(A._tls, "scratch", None)))
import threading
class L(threading.local):
    scratch = None
l = L(); l.scratch = s
print("tls attr      %.0f ns" % t(lambda: l.scratch))
print("tls attr+set2 %.0f ns" % t(lambda: (l.scratch, setattr(l, "scratch", None), setattr(l, "scratch", s))))
def g1():
    for i, a in enumerate(ins): tens[i] = a._t
def g2():
    tens[0:2] = [a._t for a in ins]
def g3():
    i = 0
    for a in ins:
        tens[i] = a._t; i += 1
print("enum loop     %.0f ns" % t(g1))
print("slice listcmp %.0f ns" % t(g2))
print("manual loop   %.0f ns" % t(g3))
d = {(2, 1, None): 1}
print("dict tuple    %.0f ns" % t(lambda: d.get((2, 1, None))))
print("encode        %.0f ns" % t(lambda: "add".encode()))
