"""gpukit.RawModule / RawKernel / ElementwiseKernel (NVRTC, C ABI 1.8). Compiling and the
caches run anywhere NVRTC is installed (compiling for an explicit SM needs no GPU); launches
skip without a CUDA device, and the peer checks without PyTorch or CuPy."""
import os
import sys
import threading
import uuid

import numpy as np
import pytest

import gpukit
from gpukit import _jit_args, _jit_elementwise, _jit_module, jit

SCALE = r'''
extern "C" __global__ void scale(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
'''


def _nvrtc_missing():
    """Why NVRTC cannot compile here, or "" when it can."""
    try:
        gpukit.RawModule(SCALE, device="cpu", sm_version=80, disk_cache=False)
    except gpukit.Unavailable as e:
        return str(e)
    return ""


def _cuda_device():
    for d in gpukit.devices():
        if d.is_cuda:
            return d
    return None


CUDA = _cuda_device()
NVRTC_MISSING = _nvrtc_missing()
needs_nvrtc = pytest.mark.skipif(bool(NVRTC_MISSING), reason=f"no NVRTC: {NVRTC_MISSING}")
needs_cuda = pytest.mark.skipif(CUDA is None, reason="no CUDA device visible to GPUkit (no "
                                "driver, no GPU, or GPUKIT_DEVICE=cpu): launches need one")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUKIT_CACHE_DIR", str(tmp_path / "jit"))
    return tmp_path / "jit"


def _unique(source):
    return source + f"// {uuid.uuid4()}\n"


@needs_nvrtc
def test_raw_module_compiles_for_an_sm_without_a_gpu_and_caches_on_disk(cache_dir):
    src = _unique(SCALE)
    m = gpukit.RawModule(src, ("-std=c++17",), device="cpu", sm_version=80)
    assert m.origin == "compiled" and m.sm_version == 80 and not m.loaded
    assert m.cubin[:4] == b"\x7fELF" and ".target sm_80" in m.ptx
    assert os.path.isfile(m.cache_path) and os.path.dirname(m.cache_path) == str(cache_dir)
    again = gpukit.RawModule(src, ("-std=c++17",), device="cpu", sm_version=80)
    assert again.origin == "memory" and again.key == m.key
    info = jit.cache_info()
    assert info["dir"] == str(cache_dir) and info["entries"] == 1 and info["bytes"] > 0
    assert jit.clear_cache() == 1 and jit.cache_info()["entries"] == 0


@needs_nvrtc
def test_name_expressions_give_lowered_names(cache_dir):
    src = "template <typename T> __global__ void fill(T* x, T v) { x[threadIdx.x] = v; }\n"
    m = gpukit.RawModule(src, name_expressions=("fill<float>", "fill<int>"), device="cpu",
                         sm_version=90)
    assert m.lowered_name("fill<float>") == "_Z4fillIfEvPT_S0_"
    assert m.lowered_name("fill<int>") == "_Z4fillIiEvPT_S0_"
    with pytest.raises(gpukit.NotFound, match="fill<float>"):
        m.lowered_name("fill<double>")


@needs_nvrtc
def test_a_compile_error_quotes_the_source_line(cache_dir):
    src = "extern \"C\" __global__ void k(float* x) {\n  x[0] = nope;\n}\n"
    with pytest.raises(gpukit.InvalidArgument) as e:
        gpukit.RawModule(src, device="cpu", sm_version=80)
    assert "gpukit_jit.cu(2): error" in str(e.value)
    assert ">     2 |   x[0] = nope;" in str(e.value)


@needs_nvrtc
def test_the_cpu_device_cannot_launch(cache_dir):
    with pytest.raises(gpukit.Unavailable, match="cpu runs no JIT kernels"):
        gpukit.RawModule(SCALE, device="cpu")
    m = gpukit.RawModule(SCALE, device="cpu", sm_version=80)
    with pytest.raises(gpukit.Unavailable, match="not loaded on cpu"):
        m.get_function("scale")
    cpu_array = gpukit.zeros(4, device="cpu")
    k = gpukit.RawKernel(SCALE, "scale")
    with pytest.raises(gpukit.Unavailable):
        k((1,), (4,), (cpu_array, np.float32(2), np.int32(4)))


def test_bad_arguments_are_refused_before_compiling():
    with pytest.raises(ValueError, match="grid must be 1 to 3 extents"):
        _jit_args._dims((0,), "grid")
    with pytest.raises(ValueError, match="not 'type name'"):
        gpukit.ElementwiseKernel("float32", "float32 z", "z = 1", "k")
    with pytest.raises(ValueError, match="neither a dtype"):
        gpukit.ElementwiseKernel("floaty x", "float32 z", "z = x", "k")
    with pytest.raises(ValueError, match="names no output"):
        gpukit.ElementwiseKernel("T x", "", "x", "k")
    with pytest.raises(ValueError, match="do not broadcast"):
        _jit_elementwise._broadcast_shape([(3, 4), (5,)])
    assert _jit_elementwise._broadcast_shape([(3, 1), (4,), ()]) == (3, 4)


@needs_nvrtc
def test_elementwise_source_for_broadcast_operands_indexes_by_strides():
    k = gpukit.ElementwiseKernel("T x, T y, float32 a", "T z", "z = a * x + y", "axpy_t")
    src = k._source({"T": 1, "float32": 1}, ["array", "array", "scalar", "array"], 2, False)
    assert "typedef float T;" in src and "axpy_t_index index" in src
    assert "float a" in src and "T& z" not in src  # T is spelled out as float
    # The generated source compiles (for sm_80, no GPU needed).
    gpukit.RawModule(src, device="cpu", sm_version=80, disk_cache=False)
    index = np.frombuffer(k._index_bytes((3, 4), [gpukit.zeros((3, 1)), gpukit.zeros(4),
                                                  gpukit.zeros((3, 4))]), dtype=np.int64)
    # shape (3, 4); x [3,1] broadcast along axis 1, y [4] along axis 0, z contiguous.
    assert index.tolist() == [3, 4, 1, 0, 0, 1, 4, 1]


@needs_cuda
def test_raw_kernel_on_gpuarrays_and_streams():
    k = gpukit.RawKernel(SCALE, "scale")
    x = gpukit.asarray(np.arange(1000, dtype=np.float32), device=CUDA)
    k(((1000 + 255) // 256,), (256,), (x, np.float32(3), 1000))
    np.testing.assert_array_equal(x.to_numpy(), np.arange(1000, dtype=np.float32) * 3)
    s = gpukit.Stream(CUDA)
    k((4,), (256,), (x, 0.5, 1000), stream=s)
    s.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(1000, dtype=np.float32) * 1.5)
    with pytest.raises(gpukit.InvalidArgument, match="takes 3 parameters"):
        k((1,), (1,), (x,))


@needs_cuda
def test_raw_module_templates_on_torch_and_cupy():
    src = r'''
template <typename T, int K> __global__ void times(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * T(K);
}'''
    m = gpukit.RawModule(src, ("-std=c++17",), ("times<float, 3>", "times<double, 4>"),
                         device=CUDA)
    f32, f64 = m.get_function("times<float, 3>"), m.get_function("times<double, 4>")
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    x = torch.arange(100, dtype=torch.float32, device=f"cuda:{CUDA.ordinal}")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    f32((1,), (128,), (x, y, 100))
    torch.cuda.synchronize()
    assert torch.equal(y, x * 3)
    cp = pytest.importorskip("cupy", reason="CuPy not installed")
    with cp.cuda.Device(CUDA.ordinal):
        a = cp.arange(50, dtype=cp.float64)
        b = cp.empty_like(a)
        f64((1,), (64,), (a, b, 50))
        cp.cuda.runtime.deviceSynchronize()
        assert bool((b == a * 4).all())


@needs_cuda
def test_elementwise_kernel_broadcasts_and_follows_dtypes():
    k = gpukit.ElementwiseKernel("T x, T y", "T z", "z = x * y + T(1)", "mul_add1")
    x = gpukit.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), device=CUDA)
    y = gpukit.asarray(np.array([1, 2, 3, 4], dtype=np.float32), device=CUDA)
    z = k(x, y)
    np.testing.assert_array_equal(z.to_numpy(), x.to_numpy() * y.to_numpy() + 1)
    xd = gpukit.asarray(np.arange(6, dtype=np.float64).reshape(2, 3)[:, ::-1].copy(), device=CUDA)
    zd = k(xd, xd)
    np.testing.assert_array_equal(zd.to_numpy(), xd.to_numpy() ** 2 + 1)
    assert zd.dtype == np.float64
    # Strided (transposed) inputs and a given output.
    out = gpukit.empty((4, 3), device=CUDA)
    k(x.T, x.T, out)
    np.testing.assert_array_equal(out.to_numpy(), x.to_numpy().T ** 2 + 1)
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    t = torch.ones(5, device=f"cuda:{CUDA.ordinal}")
    np.testing.assert_array_equal(k(t, t).to_numpy(), np.full(5, 2, np.float32))


def test_arguments_become_the_kernel_parameter_kinds():
    x = gpukit.zeros(4, device="cpu")
    args = (x, np.float32(1.5), np.int32(4), np.int64(-5), np.float64(2.5), 3, 2.5, True,
            b"abcd", np.float16(1), None)
    array, n, keep = _jit_args._pack(args)
    assert n == len(args)
    kinds = [array[i].kind for i in range(n)]
    a = _jit_args
    assert kinds == [a._ARG_TENSOR, a._ARG_F32, a._ARG_I32, a._ARG_I64, a._ARG_F64, a._ARG_I32,
                     a._ARG_F32, a._ARG_I32, a._ARG_BYTES, a._ARG_BYTES, a._ARG_POINTER]
    assert array[1].value.f32 == 1.5 and array[3].value.i64 == -5 and array[5].value.i32 == 3
    assert array[8].size == 4 and array[9].size == 2 and array[10].value.u64 == 0
    with pytest.raises(OverflowError, match="does not fit a 32-bit int"):
        _jit_args._pack((2 ** 40,))
    with pytest.raises(TypeError, match="is no kernel argument"):
        _jit_args._pack((object(),))
    assert _jit_args._dims(4, "grid") == (4, 1, 1) and _jit_args._dims((2, 3), "grid") == (2, 3, 1)


_FRESH_PROCESS_HIT = r'''
import sys
import gpukit
m = gpukit.RawModule(open(sys.argv[1]).read(), device="cpu", sm_version=80)
with open("/proc/self/maps") as maps:
    nvrtc_open = any("libnvrtc.so" in line for line in maps)
print(m.origin, nvrtc_open)
'''


@needs_nvrtc
def test_a_warm_cache_hit_in_a_fresh_process_opens_no_nvrtc(cache_dir, tmp_path):
    import subprocess
    import sys
    source = tmp_path / "kernel.cu"
    source.write_text(_unique(SCALE))
    def run(**extra_env):
        # The child imports the gpukit this process imported (conftest put it on sys.path,
        # not on PYTHONPATH).
        package_root = os.path.dirname(os.path.dirname(gpukit.__file__))
        env = dict(os.environ, **extra_env, PYTHONPATH=os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p))
        done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS_HIT, str(source)],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, f"the fresh process failed:\n{done.stderr[-4000:]}"
        return done.stdout.split()
    # The first process compiles (NVRTC open) and leaves NVRTC's facts beside the entry.
    assert run() == ["compiled", "True"]
    assert (cache_dir / "nvrtc.facts").is_file()
    # The next one reads the entry, and NVRTC's version from the facts: no dlopen.
    assert run() == ["disk_cache", "False"]
    # Pointing at another NVRTC library makes the facts stale: NVRTC is opened again.
    assert run(GPUKIT_NVRTC_LIBRARY="libnvrtc.so") == ["disk_cache", "True"]
    # Clearing the cache forgets the facts too.
    jit.clear_cache()
    assert not (cache_dir / "nvrtc.facts").exists()


class _RecordingLib:
    """gpukit's cffi library with gk_jit_launch recording what it was given."""

    def __init__(self, real):
        self._real = real
        self.launches = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def gk_jit_launch(self, kernel, l):
        args = [(l.args[i].kind, l.args[i].value.u64) for i in range(l.num_args)]
        self.launches.append((tuple(l.grid), tuple(l.block), l.shared_mem_bytes, args,
                              l.stream))
        return 0


class _Module:
    def __init__(self, device):
        self.device = device
        self.runtime = device.runtime


def test_a_launch_packs_its_arguments_into_the_kernels_reused_array(monkeypatch):
    recording = _RecordingLib(_jit_module.lib)
    monkeypatch.setattr(_jit_module, "lib", recording)
    dev = gpukit.runtime().device("cpu")
    x = gpukit.zeros(4, device=dev)
    f = _jit_module.Function(_Module(dev), "k", jit.ffi.NULL)
    array = f._state().args
    tensor = int(jit.ffi.cast("uintptr_t", x._t))
    f((4,), (256,), (x, np.float32(1.5), np.int32(7)))
    f(2, (32, 2), (x, np.int64(-1), 9, 2.0), shared_mem=64)
    f(2, (32, 2), (x, np.int64(-1), 9, 2.0))
    assert f._state().args is array, "the argument array is reused"
    (g0, b0, s0, a0, _), (g1, b1, s1, a1, _), (g2, b2, s2, _, st2) = recording.launches
    assert (g0, b0, s0) == ((4, 1, 1), (256, 1, 1), 0)
    assert a0[0] == (_jit_args._ARG_TENSOR, tensor) and a0[2] == (_jit_args._ARG_I32, 7)
    assert a0[1][0] == _jit_args._ARG_F32 and len(a0) == 3
    assert (g1, b1, s1) == ((2, 1, 1), (32, 2, 1), 64) and s2 == 0
    assert [k for k, _ in a1] == [_jit_args._ARG_TENSOR, _jit_args._ARG_I64, _jit_args._ARG_I32,
                                  _jit_args._ARG_F32]
    assert a1[1][1] == 2 ** 64 - 1 and a1[2][1] & 0xFFFFFFFF == 9
    assert st2 == jit.ffi.NULL
    # More arguments than the array holds: a bigger one, the same values.
    f(1, 1, tuple(np.int32(i) for i in range(12)))
    assert len(f._state().args) >= 12 and [v & 0xFFFFFFFF for _, v in recording.launches[-1][3]] == \
        list(range(12))
    with pytest.raises(ValueError, match="grid must be 1 to 3 extents"):
        f((0,), 1, ())
    with pytest.raises(TypeError, match="args must be a tuple or list"):
        f(1, 1, x)


class _Pointer:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


class _FakeCupyArray:
    """What a launch reads of a CuPy ndarray: .data.ptr and .data.device_id."""

    def __init__(self, ptr, device_id):
        self.data = _Pointer(ptr, device_id)

    def __dlpack_device__(self):
        return (2, self.data.device_id)


_FakeCupyArray.__module__, _FakeCupyArray.__name__ = "cupy._core.core", "ndarray"


class _FakeCudaDevice:
    def __init__(self, runtime, ordinal):
        self.runtime, self.id, self.ordinal, self.is_cuda = runtime, 100 + ordinal, ordinal, True


def test_a_launch_on_cupy_arrays_finds_its_kernel_by_the_arrays_ordinal(monkeypatch):
    # Without a GPU: the device lookup is replaced and counted, the C launch recorded.
    kernels = []

    class Recording(_RecordingLib):
        def gk_jit_launch(self, kernel, l):
            kernels.append(int(jit.ffi.cast("uintptr_t", kernel)))
            return super().gk_jit_launch(kernel, l)

    recording = Recording(_jit_module.lib)
    monkeypatch.setattr(_jit_module, "lib", recording)
    rt = gpukit.runtime()
    looked_up = []

    def device_of_args(args, runtime):
        looked_up.append(args[0].data.device_id)
        return _FakeCudaDevice(rt, args[0].data.device_id)

    monkeypatch.setattr(jit, "_device_of_args", device_of_args)
    kernel = jit.RawKernel("", "k", runtime=rt)
    for ordinal in (0, 1):
        fn = _jit_module.Function(_Module(rt.device("cpu")), f"k{ordinal}",
                                  jit.ffi.cast("gk_jit_kernel*", 16 + ordinal))
        kernel._by_device[(id(rt), 100 + ordinal)] = fn
    on0, on1 = _FakeCupyArray(0x1000, 0), _FakeCupyArray(0x2000, 1)
    kernel(1, 32, (on0, np.int32(3)))
    kernel(1, 32, (on0, np.int32(3)))
    assert looked_up == [0], "the second call on the same ordinal looks up no device"
    kernel(1, 32, (on1, np.int32(3)))
    kernel(1, 32, (on0, np.int32(3)))
    assert looked_up == [0, 1, 0], "another ordinal is looked up"
    assert kernels == [16, 16, 17, 16], "each ordinal's own kernel"
    pointers = [launch[3][0] for launch in recording.launches]
    assert pointers == [(_jit_args._ARG_POINTER, p) for p in (0x1000, 0x1000, 0x2000, 0x1000)]
    assert _jit_args._ordinal_reader(_FakeCupyArray) is _jit_args._cupy_ordinal
    assert _jit_args._ordinal_reader(int) is None


def test_threads_launching_one_function_each_write_their_own_arguments(monkeypatch):
    # Thread switches forced every microsecond: a launch struct shared without a lock would
    # send one thread's arguments with another's call.
    seen = []  # (thread, argument values), one append per launch

    class Recording(_RecordingLib):
        def gk_jit_launch(self, kernel, l):
            seen.append((threading.get_ident(),
                         [l.args[i].value.u64 & 0xFFFFFFFF for i in range(l.num_args)]))
            return 0

    monkeypatch.setattr(_jit_module, "lib", Recording(_jit_module.lib))
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    dev = gpukit.runtime().device("cpu")
    f = _jit_module.Function(_Module(dev), "k", jit.ffi.NULL)
    sent = {}
    # All alive at once: a finished thread's identifier may be given to the next one.
    started, finished = threading.Barrier(3), threading.Barrier(3)

    def launch_many(value):
        sent[threading.get_ident()] = value
        started.wait()
        for _ in range(300):
            f(1, 32, (np.int32(value), np.int32(value)))
        finished.wait()

    try:
        threads = [threading.Thread(target=launch_many, args=(v,)) for v in (11, 22, 33)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert len(seen) == 900
    for ident, values in seen:
        assert values == [sent[ident]] * 2


def _meaningful(kind, bits):
    """(kind, the value's bits the kernel reads): 4 bytes for the 32-bit kinds."""
    narrow = (_jit_args._ARG_I32, _jit_args._ARG_U32, _jit_args._ARG_F32)
    return kind, bits & 0xFFFFFFFF if kind in narrow else bits


def test_the_generated_packer_writes_what_the_general_path_writes(monkeypatch):
    recording = _RecordingLib(_jit_module.lib)
    monkeypatch.setattr(_jit_module, "lib", recording)
    dev = gpukit.runtime().device("cpu")
    x, y = gpukit.zeros(4, device=dev), gpukit.ones(3, device=dev)
    f = _jit_module.Function(_Module(dev), "k", jit.ffi.NULL)
    cases = [(x, y, np.float32(1.5), np.int32(-7)),
             (x, np.int64(-(2 ** 40)), np.uint64(2 ** 63 + 5), np.float64(-2.25), np.uint32(9)),
             (y, 3, -2.5, True, False),
             (),
             (x, np.float32(2.5), np.int32(7))]  # after others: the packer follows the types
    for args in cases:
        f(1, 1, args)  # the first launch with these types packs argument by argument
        f(1, 1, args)  # the second generates the packer (unless another launch did)
        first, second = ([_meaningful(*a) for a in launch[3]] for launch in recording.launches[-2:])
        general, n, keep = _jit_args._pack(args)
        assert [_meaningful(general[i].kind, general[i].value.u64) for i in range(n)] == \
            first == second, args
    assert f._state().packer is _jit_args._packer_for((gpukit.GPUArray, np.float32, np.int32))
    # A value the packed layout cannot hold goes to the general path, which names it.
    with pytest.raises(OverflowError, match="argument 1: .* does not fit a 32-bit int"):
        f(1, 1, (x, 2 ** 40, np.int32(1)))
    # Types without a fixed layout (bytes, None) take the general path every time.
    f(1, 1, (x, b"abcd", None))
    assert [k for k, _ in recording.launches[-1][3]] == \
        [_jit_args._ARG_TENSOR, _jit_args._ARG_BYTES, _jit_args._ARG_POINTER]
    assert _jit_args._packer_for((gpukit.GPUArray, bytes, type(None))) is None


def test_register_op_refuses_what_is_no_kernel():
    with pytest.raises(TypeError, match="kernel must be a gpukit.RawKernel"):
        gpukit.register_op("add", "not a kernel", dtypes=("f32",))


ADD_PLUS_ONE = r'''
extern "C" __global__ void add_plus_one(const float* a, const float* b, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + 1.0f;
}
'''


@needs_cuda
def test_a_registered_kernel_serves_add_and_explain_names_it():
    k = gpukit.RawKernel(ADD_PLUS_ONE, "add_plus_one")
    a = gpukit.asarray(np.arange(1000, dtype=np.float32), device=CUDA)
    b = gpukit.asarray(np.full(1000, 0.5, dtype=np.float32), device=CUDA)
    with k.register_op("add", dtypes=("f32",), priority=1000, block_size=128, device=CUDA) as reg:
        assert reg.name == "jit:add_plus_one"
        np.testing.assert_array_equal((a + b).to_numpy(), np.arange(1000) + 1.5)
        e = gpukit.explain("add", a, b)
        assert e["chosen"] == "jit:add_plus_one"
        mine = [c for c in e["candidates"] if c["plugin"] == "jit:add_plus_one"][0]
        assert mine["priority"] == 1000 and "blocks of 128" in mine["reason"]
        # f64 is not registered: a plugin serves it.
        a64 = gpukit.asarray(np.arange(4, dtype=np.float64), device=CUDA)
        assert gpukit.explain("add", a64, a64)["chosen"] != "jit:add_plus_one"
    np.testing.assert_array_equal((a + b).to_numpy(), np.arange(1000) + 0.5)
    assert all(c["plugin"] != "jit:add_plus_one" for c in gpukit.explain("add", a, b)["candidates"])


@needs_nvrtc
def test_compiling_parses_no_c_type_text(cache_dir):
    # cffi runs its C parser over every declared type name for each new type string
    # (ffi.new("gk_x*")): tens of milliseconds a string, which was most of a first use. The
    # JIT takes its types from the functions' parsed declarations instead.
    parsed = getattr(jit.ffi, "_parsed_types", None)
    if parsed is None:
        pytest.skip("this cffi keeps no _parsed_types cache to watch")
    before = set(parsed)
    m = gpukit.RawModule(_unique(SCALE), device="cpu", sm_version=80)
    assert m.origin == "compiled" and m.key and m.log == "" and m.sm_version == 80
    assert set(parsed) == before
