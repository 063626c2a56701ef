/*
 * gpukit._compiled_call: gpukit.call (bindings/python/gpukit/_array.py) written in C for the
 * cases every op takes, so a call runs no Python bytecode of the binding's own.
 *
 * Served here, with the Python function's exact semantics:
 *   op          a str
 *   inputs      a list or tuple of GPUArray (the exact class), at least one
 *   attrs       None, or a dict (exact) of str names to None (skipped), bool and int
 *               (GK_ATTR_INT), float (GK_ATTR_FLOAT), str (GK_ATTR_STRING) and list or
 *               tuple of bool/int (GK_ATTR_INTS, 64 values in all) values
 *   out         None (gk_op_call_alloc creates `num_outputs` outputs, an int 1..16), a
 *               GPUArray, or a list or tuple of them (gk_op_call)
 *   stream      None (then the task stream rule of _array.call) or a gpukit Stream
 * Everything else (other argument types, other attribute values, a value that does not fit,
 * more than 32 tensors or 16 attributes, a missing slot, …) is handed to the Python function
 * unchanged, which gives every result and every error of the Python path. Nothing with an
 * effect happens before that decision: the C call is the first.
 *
 * No shared state per call: gk_op_args, the tensor pointers and the gk_attr array live on
 * this function's stack, so calls from several threads need no lock. Like a cffi ABI-mode
 * call, the C call runs with the GIL released (GPUKIT_CALL_HOLDS_GIL keeps it, for
 * measurement only); the arrays, attribute strings and streams it reads are held by a
 * reference for the duration.
 *
 * Two layouts are read directly, each checked by init() before anything is served:
 *   - a cffi cdata object: PyObject_HEAD, then its ctype, then the address (cffi's
 *     CDataObject). init() reads probe objects made by the binding (ffi.cast, an item
 *     read from a gk_tensor*[], ffi.gc) whose ctype and address it is told, and records
 *     their Python types; an object of any other type is never read.
 *   - GPUArray's slots: init() is given a GPUArray with a sentinel in _rt, _t, _device and
 *     _stream and finds the offset of each; only objects whose type is GPUArray itself
 *     are read or written at those offsets (a subclass may define a property of the name).
 * An output's cdata is made by storing its pointer in an item of a cffi gk_tensor*[1] (at
 * the address cffi gives for it) and reading the item, which init() also checks.
 * libgpukit is not linked: gk_op_call, gk_op_call_alloc and gk_tensor_release are looked
 * up in the copy the cffi binding loaded (dlopen RTLD_NOLOAD of its path), and init()
 * checks that gk_op_call there is the function cffi calls.
 *
 * Limited API 3.9 (abi3): one build serves CPython 3.9 and later. METH_FASTCALL and
 * PyUnicode_AsUTF8AndSize joined the limited API in 3.10; both exist, with these
 * signatures, in 3.9's ABI (since 3.7 and 3.3), so they are declared here for 3.9.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "gpukit/gpukit.h"

#if Py_LIMITED_API + 0 < 0x030A0000
#ifndef METH_FASTCALL
#define METH_FASTCALL 0x0080
#endif
PyAPI_FUNC(const char*) PyUnicode_AsUTF8AndSize(PyObject* unicode, Py_ssize_t* size);
#endif

typedef PyObject* (*fastcall_keywords_fn)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
typedef gk_status (*op_call_fn)(gk_runtime*, const char*, const gk_op_args*);
typedef gk_status (*op_call_alloc_fn)(gk_runtime*, const char*, const gk_op_args*, int32_t,
                                      gk_tensor**, gk_tensor_desc*);
typedef void (*tensor_release_fn)(gk_tensor*);

enum {
  kMaxTensors = 32,  /* inputs + outputs served here; more go to the Python path */
  kMaxCreated = 16,  /* num_outputs for gk_op_call_alloc */
  kMaxAttrs = 16,
  kMaxAttrInts = 64, /* int-list attribute values of one call, all lists together */
  kMaxCdataTypes = 4,
  kMaxHeld = kMaxTensors + 2 * kMaxAttrs + 2,
};

/* cffi's CDataObject, as far as it is read here (checked by check_cdata_probes). */
typedef struct {
  PyObject ob_base;
  PyObject* c_type;
  char* c_data;
} cdata_layout;

/* Set once by init(); read-only afterwards. */
static struct {
  int ready;
  op_call_fn op_call;
  op_call_alloc_fn op_call_alloc;
  tensor_release_fn tensor_release;
  PyTypeObject* array_type; /* GPUArray */
  newfunc array_new;        /* its tp_new: object.__new__ */
  Py_ssize_t off_rt, off_t, off_device, off_stream;
  PyObject* stream_type;        /* Stream */
  PyObject* python_call;        /* _array.call, the Python implementation */
  PyObject* check;              /* _lib.check */
  PyObject* open_task_streams;  /* _runtime._open_task_streams, a one-item list */
  PyObject* current_stream_get; /* _runtime._current_stream.get */
  PyObject* output_slot;        /* a gk_tensor*[1] of cffi's, read to make output cdata */
  gk_tensor** output_slot_item; /* its item */
  PyObject* ctype_tensor;       /* ffi.typeof("gk_tensor*") */
  PyObject* ctype_stream;
  PyObject* ctype_runtime;
  PyTypeObject* cdata_types[kMaxCdataTypes];
  int num_cdata_types;
  PyObject* zero;
  PyObject* empty_tuple;
  PyObject* s_ptr;     /* "_ptr" */
  PyObject* s_pptr;    /* "ptr" */
  PyObject* s_device;  /* "device" */
  PyObject* kw[6];     /* call's parameter names */
} g;

/* Calls served here and calls handed to the Python function (for tests and docs). */
static unsigned long long g_compiled_calls, g_python_calls;

#define SLOT(obj, off) (*(PyObject**)((char*)(obj) + (off)))

/* The address in `obj` when it is a cdata of a recorded type with ctype `ctype`. */
static inline int cdata_address(PyObject* obj, PyObject* ctype, void** out) {
  PyTypeObject* type = Py_TYPE(obj);
  for (int i = 0; i < g.num_cdata_types; i++) {
    if (type == g.cdata_types[i]) {
      const cdata_layout* c = (const cdata_layout*)obj;
      if (c->c_type != ctype) return 0;
      *out = c->c_data;
      return 1;
    }
  }
  return 0;
}

/* The gk_tensor* of a GPUArray (its type exactly), or 0. */
static inline int array_tensor(PyObject* x, gk_tensor** out) {
  if (Py_TYPE(x) != g.array_type) return 0;
  PyObject* t = SLOT(x, g.off_t);
  return t != NULL && cdata_address(t, g.ctype_tensor, (void**)out);
}

/* ---------------------------------------------------------------------------------
 * The Python path: the arguments exactly as received.
 * ------------------------------------------------------------------------------- */
static PyObject* call_python(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (g.python_call == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "gpukit._compiled_call is not initialised");
    return NULL;
  }
  g_python_calls++;
  PyObject* tuple = PyTuple_New(nargs);
  if (tuple == NULL) return NULL;
  for (Py_ssize_t i = 0; i < nargs; i++) {
    Py_INCREF(args[i]);
    PyTuple_SetItem(tuple, i, args[i]);
  }
  PyObject* kwargs = NULL;
  Py_ssize_t nk = kwnames != NULL ? PyTuple_Size(kwnames) : 0;
  if (nk > 0) {
    kwargs = PyDict_New();
    if (kwargs == NULL) {
      Py_DECREF(tuple);
      return NULL;
    }
    for (Py_ssize_t j = 0; j < nk; j++) {
      if (PyDict_SetItem(kwargs, PyTuple_GetItem(kwnames, j), args[nargs + j]) != 0) {
        Py_DECREF(kwargs);
        Py_DECREF(tuple);
        return NULL;
      }
    }
  }
  PyObject* result = PyObject_Call(g.python_call, tuple, kwargs);
  Py_XDECREF(kwargs);
  Py_DECREF(tuple);
  return result;
}

/* ---------------------------------------------------------------------------------
 * call
 * ------------------------------------------------------------------------------- */
typedef struct {
  PyObject* items[kMaxHeld];
  int count;
} held_refs;

static inline void hold(held_refs* h, PyObject* obj) {
  Py_INCREF(obj);
  h->items[h->count++] = obj;
}

static void release_held(held_refs* h) {
  while (h->count > 0) Py_DECREF(h->items[--h->count]);
}

/* The index of keyword `name` among call's parameters, or -1. */
static int keyword_index(PyObject* name) {
  for (int i = 0; i < 6; i++)
    if (name == g.kw[i]) return i;
  if (!PyUnicode_CheckExact(name)) return -1;
  for (int i = 0; i < 6; i++)
    if (PyUnicode_Compare(name, g.kw[i]) == 0) return i;
  if (PyErr_Occurred()) PyErr_Clear();
  return -1;
}

/* An int as _array._attrs encodes it (bool or exact int in int64 range): 0 and *out set,
 * else -1 (the Python path must encode it; no exception left set). */
static int encode_int(PyObject* value, int64_t* out) {
  if (value == Py_True || value == Py_False) {
    *out = value == Py_True;
    return 0;
  }
  if (!PyLong_CheckExact(value)) return -1;
  int overflow;
  long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow != 0) return -1; /* cffi's OverflowError, from the Python path */
  *out = v;
  return 0;
}

/* Encodes `attrs` (an exact dict, not empty) as _array._attrs does. A list or tuple of ints
 * becomes GK_ATTR_INTS over `ints`, which holds kMaxAttrInts values for all of them.
 * Returns the number of attributes, or -1 where the Python path must encode them (no
 * exception left set). */
static int encode_attrs(PyObject* attrs, gk_attr* out, int64_t* ints, held_refs* h) {
  Py_ssize_t pos = 0;
  PyObject *name, *value;
  int n = 0;
  int ints_used = 0;
  while (PyDict_Next(attrs, &pos, &name, &value)) {
    if (value == Py_None) continue;  /* _attrs skips None */
    if (n == kMaxAttrs || !PyUnicode_CheckExact(name)) return -1;
    Py_ssize_t len;
    gk_attr* a = &out[n];
    a->name = PyUnicode_AsUTF8AndSize(name, &len);
    if (a->name == NULL) goto refused;
    a->count = 0;
    if (value == Py_True || value == Py_False || PyLong_CheckExact(value)) {
      a->type = GK_ATTR_INT;
      if (encode_int(value, &a->value.i) < 0) return -1;
    } else if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
      /* Read under the GIL, which this function keeps: the list cannot change meanwhile. */
      const Py_ssize_t count = PySequence_Size(value);
      if (count < 0 || count > kMaxAttrInts - ints_used) {
        PyErr_Clear();
        return -1;
      }
      for (Py_ssize_t j = 0; j < count; j++) {
        PyObject* item = PyList_CheckExact(value) ? PyList_GetItem(value, j)
                                                   : PyTuple_GetItem(value, j);
        if (item == NULL || encode_int(item, &ints[ints_used + j]) < 0) {
          PyErr_Clear();
          return -1; /* floats, NumPy ints, …: int(v) on the Python path */
        }
      }
      a->type = GK_ATTR_INTS;
      a->count = (int32_t)count;
      a->value.ints = &ints[ints_used];
      ints_used += (int)count;
    } else if (PyFloat_CheckExact(value)) {
      a->type = GK_ATTR_FLOAT;
      a->value.f = PyFloat_AsDouble(value);
    } else if (PyUnicode_CheckExact(value)) {
      a->type = GK_ATTR_STRING;
      a->value.s = PyUnicode_AsUTF8AndSize(value, &len);
      if (a->value.s == NULL) goto refused;
      hold(h, value);
    } else {
      return -1;  /* NumPy scalars, int subclasses, other sequences, … */
    }
    hold(h, name);
    n++;
  }
  return n;
refused:  /* e.g. a lone surrogate: str.encode raises it on the Python path */
  PyErr_Clear();
  return -1;
}

/* The stream a call with no `stream` runs on: _array.call's task stream rule. Sets *out
 * to a new reference (None or the task's stream); returns 0 where the Python path must
 * decide. */
static int task_stream(PyObject* device, PyObject** out) {
  *out = Py_None;
  Py_INCREF(Py_None);
  PyObject* open = PyList_GetItem(g.open_task_streams, 0);
  if (open == NULL) goto python;
  if (open == g.zero) return 1;  /* no task block open anywhere: no ContextVar read */
  int truth = PyObject_IsTrue(open);
  if (truth < 0) goto python;
  if (truth == 0) return 1;
  if (device == NULL) return 0;  /* x0._device unset: the Python path raises */
  PyObject* stream = PyObject_CallObject(g.current_stream_get, NULL);
  if (stream == NULL) goto python;
  if (stream != Py_None) {
    PyObject* d = PyObject_GetAttr(stream, g.s_device);
    if (d == NULL) {
      Py_DECREF(stream);
      goto python;
    }
    int other_device = d != device;
    Py_DECREF(d);
    if (other_device) {
      Py_DECREF(stream);  /* a task's stream serves the task's device only */
      return 1;
    }
  }
  Py_DECREF(*out);
  *out = stream;
  return 1;
python:
  if (PyErr_Occurred()) PyErr_Clear();
  return 0;
}

/* A cffi cdata of ctype gk_tensor* for `tensor`, as reading created[i] out of a
 * gk_tensor*[] gives on the Python path: the pointer is stored in a cffi array's item and
 * the item read back. Nothing between the two releases the GIL or runs Python code. (A
 * call of cffi's cast(ctype, address) does the same; it cost 0.2 µs more warm and 3-4 µs
 * more after a cache-evicting pass, perf/results/cpu/2026-11-25_compiled_call.md.) */
static PyObject* tensor_cdata(gk_tensor* tensor) {
  *g.output_slot_item = tensor;
  PyObject* t = PyObject_GetItem(g.output_slot, g.zero);
  *g.output_slot_item = NULL;
  return t;
}

/* A GPUArray over `tensor` (whose reference it takes), as _array.call makes for outputs:
 * _rt, _t, _device and _stream set, the descriptor read on first use. */
/* -1 with the exception _lib.check raises for a failed status (the Python path's error,
 * message included); 0 for GK_OK. */
static int raise_for_status(gk_status status) {
  if (status == 0) return 0;
  PyObject* r = PyObject_CallFunction(g.check, "i", (int)status);
  if (r == NULL) return -1;
  Py_DECREF(r);
  return 0;
}

static PyObject* wrap_output(gk_tensor* tensor, PyObject* rt, PyObject* device,
                             PyObject* stream) {
  PyObject* t = tensor_cdata(tensor);
  if (t == NULL) return NULL;
  PyObject* arr = g.array_new(g.array_type, g.empty_tuple, NULL);
  if (arr == NULL) {
    Py_DECREF(t);
    return NULL;
  }
  Py_INCREF(rt);
  Py_INCREF(device);
  Py_INCREF(stream);
  SLOT(arr, g.off_rt) = rt;
  SLOT(arr, g.off_t) = t;
  SLOT(arr, g.off_device) = device;
  SLOT(arr, g.off_stream) = stream;
  return arr;
}

PyDoc_STRVAR(call_doc,
"call($module, /, op, inputs, attrs=None, out=None, num_outputs=1, stream=None)\n"
"--\n"
"\n"
"Runs op `op` (docs/ops.md) once through the C ABI: the generic form behind every\n"
"named function (gpukit.call). `inputs` is a list or tuple of arrays (any iterable is\n"
"taken); `attrs` maps attribute names to values; `out` (an array or a list) receives the\n"
"outputs, which are created (gk_op_call_alloc) when it is None, `num_outputs` of them.\n"
"With no `stream`, the current stream (a task's, see gpukit.task) when it is on the\n"
"inputs' device, else the device's default stream.\n"
"\n"
"The compiled implementation (gpukit._compiled_call); cases it does not serve run the\n"
"Python one, gpukit._array._call_python (docs/python.md).");

static PyObject* call(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                      PyObject* kwnames) {
  (void)self;
  /* op, inputs, attrs, out, num_outputs, stream */
  PyObject* a[6] = {NULL, NULL, Py_None, Py_None, NULL, Py_None};
  if (!g.ready || nargs > 6) return call_python(args, nargs, kwnames);
  unsigned given = 0;
  for (Py_ssize_t i = 0; i < nargs; i++) {
    a[i] = args[i];
    given |= 1u << i;
  }
  if (kwnames != NULL) {
    Py_ssize_t nk = PyTuple_Size(kwnames);
    for (Py_ssize_t j = 0; j < nk; j++) {
      int i = keyword_index(PyTuple_GetItem(kwnames, j));
      if (i < 0 || (given & (1u << i))) return call_python(args, nargs, kwnames);
      a[i] = args[nargs + j];
      given |= 1u << i;
    }
  }
  PyObject *op = a[0], *inputs = a[1], *attrs = a[2], *out = a[3], *stream_arg = a[5];
  if (op == NULL || inputs == NULL || !PyUnicode_CheckExact(op))
    return call_python(args, nargs, kwnames);

  held_refs h;
  h.count = 0;
  gk_tensor* tensors[kMaxTensors];
  gk_attr attr_array[kMaxAttrs];
  int64_t attr_ints[kMaxAttrInts];
  gk_op_args op_args;
  PyObject* stream = NULL;  /* owned */
  PyObject* result = NULL;
  const char* name;
  Py_ssize_t name_len;

  /* inputs */
  int is_list = PyList_CheckExact(inputs);
  if (!is_list && !PyTuple_CheckExact(inputs)) goto python;
  Py_ssize_t n = is_list ? PyList_Size(inputs) : PyTuple_Size(inputs);
  if (n < 1 || n > kMaxTensors) goto python;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* x = is_list ? PyList_GetItem(inputs, i) : PyTuple_GetItem(inputs, i);
    if (!array_tensor(x, &tensors[i])) goto python;
    hold(&h, x);
  }
  PyObject* x0 = h.items[0];
  PyObject* rt = SLOT(x0, g.off_rt);
  PyObject* device = SLOT(x0, g.off_device); /* may be unset: read only where used */
  if (rt == NULL) goto python;

  /* stream */
  if (stream_arg == Py_None) {
    if (!task_stream(device, &stream)) goto python;
  } else {
    stream = stream_arg;
    Py_INCREF(stream);
  }
  gk_stream* stream_ptr = NULL;
  if (stream != Py_None) {
    int is_stream = PyObject_IsInstance(stream, g.stream_type);
    if (is_stream <= 0) goto python;
    PyObject* p = PyObject_GetAttr(stream, g.s_pptr);
    if (p == NULL) goto python;
    int ok = cdata_address(p, g.ctype_stream, (void**)&stream_ptr);
    Py_DECREF(p);  /* the address stays valid: `stream` is held */
    if (!ok) goto python;
  }

  /* out, or num_outputs */
  Py_ssize_t m = 0; /* outputs given */
  int created_count = 0;
  if (out != Py_None) {
    if (Py_TYPE(out) == g.array_type) {
      m = 1;
      if (n + 1 > kMaxTensors || !array_tensor(out, &tensors[n])) goto python;
      hold(&h, out);
    } else {
      int out_list = PyList_CheckExact(out);
      if (!out_list && !PyTuple_CheckExact(out)) goto python;
      m = out_list ? PyList_Size(out) : PyTuple_Size(out);
      if (n + m > kMaxTensors) goto python;
      for (Py_ssize_t i = 0; i < m; i++) {
        PyObject* o = out_list ? PyList_GetItem(out, i) : PyTuple_GetItem(out, i);
        if (!array_tensor(o, &tensors[n + i])) goto python;
        hold(&h, o);
      }
    }
  } else {
    PyObject* num = a[4];
    if (num == NULL) {
      created_count = 1;
    } else {
      if (!PyLong_CheckExact(num)) goto python;
      long v = PyLong_AsLong(num);
      if (v < 1 || v > kMaxCreated) {
        if (PyErr_Occurred()) PyErr_Clear();
        goto python;
      }
      created_count = (int)v;
    }
    if (device == NULL) goto python; /* the outputs' _device */
  }

  /* the runtime */
  gk_runtime* runtime_ptr;
  {
    PyObject* p = PyObject_GetAttr(rt, g.s_ptr);
    if (p == NULL) goto python;
    int ok = cdata_address(p, g.ctype_runtime, (void**)&runtime_ptr);
    Py_DECREF(p);  /* x0 holds rt, rt holds its pointer object */
    if (!ok) goto python;
  }

  /* attrs */
  memset(&op_args, 0, sizeof op_args);
  if (attrs != Py_None) {
    if (!PyDict_CheckExact(attrs)) goto python;
    if (PyDict_Size(attrs) > 0) {
      /* A dict of only None values still passes its (empty) array, as _attrs does. */
      int count = encode_attrs(attrs, attr_array, attr_ints, &h);
      if (count < 0) goto python;
      op_args.attrs = attr_array;
      op_args.num_attrs = count;
    }
  }

  name = PyUnicode_AsUTF8AndSize(op, &name_len);
  if (name == NULL) {
    PyErr_Clear();
    goto python;
  }

  /* Served here from this point on. */
  g_compiled_calls++;
  op_args.struct_size = sizeof(gk_op_args);
  op_args.inputs = tensors;
  op_args.num_inputs = (int32_t)n;
  op_args.outputs = m > 0 ? tensors + n : NULL;
  op_args.num_outputs = (int32_t)m;
  op_args.stream = stream_ptr;

  gk_status status;
  if (out == Py_None) {
    gk_tensor* created[kMaxCreated];
#ifndef GPUKIT_CALL_HOLDS_GIL
    Py_BEGIN_ALLOW_THREADS
#endif
    status = g.op_call_alloc(runtime_ptr, name, &op_args, created_count, created, NULL);
#ifndef GPUKIT_CALL_HOLDS_GIL
    Py_END_ALLOW_THREADS
#endif
    if (raise_for_status(status) < 0) goto done;
    if (created_count == 1) {
      result = wrap_output(created[0], rt, device, stream);
      if (result == NULL) g.tensor_release(created[0]);
    } else {
      result = PyTuple_New(created_count);
      for (int i = 0; i < created_count; i++) {
        PyObject* arr = result != NULL ? wrap_output(created[i], rt, device, stream) : NULL;
        if (arr == NULL) {
          for (int j = i; j < created_count; j++) g.tensor_release(created[j]);
          Py_CLEAR(result);
          break;
        }
        PyTuple_SetItem(result, i, arr);
      }
    }
  } else {
#ifndef GPUKIT_CALL_HOLDS_GIL
    Py_BEGIN_ALLOW_THREADS
#endif
    status = g.op_call(runtime_ptr, name, &op_args);
#ifndef GPUKIT_CALL_HOLDS_GIL
    Py_END_ALLOW_THREADS
#endif
    if (raise_for_status(status) < 0) goto done;
    PyObject** outs = h.items + n;
    for (Py_ssize_t i = 0; i < m; i++) {  /* o._stream = stream */
      PyObject* old = SLOT(outs[i], g.off_stream);
      Py_INCREF(stream);
      SLOT(outs[i], g.off_stream) = stream;
      Py_XDECREF(old);
    }
    if (m == 1) {
      result = outs[0];
      Py_INCREF(result);
    } else {
      result = PyTuple_New(m);
      for (Py_ssize_t i = 0; result != NULL && i < m; i++) {
        Py_INCREF(outs[i]);
        PyTuple_SetItem(result, i, outs[i]);
      }
    }
  }
done:
  Py_XDECREF(stream);
  release_held(&h);
  return result;

python:
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(stream);
  release_held(&h);
  return call_python(args, nargs, kwnames);
}

/* ---------------------------------------------------------------------------------
 * The self-checks and init
 * ------------------------------------------------------------------------------- */
static Py_ssize_t basic_size(PyObject* type) {
  PyObject* v = PyObject_GetAttrString(type, "__basicsize__");
  if (v == NULL) return -1;
  Py_ssize_t size = PyLong_AsSsize_t(v);
  Py_DECREF(v);
  return size;
}

/* Reads each probe (cdata, ctype, address) through cdata_layout and returns the tuple of
 * their distinct types; ValueError names the first probe that does not read back. */
static PyObject* check_cdata_probes(PyObject* probes) {
  PyObject* seq = PySequence_Fast(probes, "probes must be a sequence");
  if (seq == NULL) return NULL;
  PyObject* types = PyList_New(0);
  Py_ssize_t count = PySequence_Size(seq);
  for (Py_ssize_t i = 0; types != NULL && i < count; i++) {
    PyObject* probe = PySequence_GetItem(seq, i);
    PyObject *obj, *ctype, *address;
    void* expected = NULL;
    if (probe == NULL || !PyArg_ParseTuple(probe, "OOO", &obj, &ctype, &address) ||
        ((expected = PyLong_AsVoidPtr(address)) == NULL && PyErr_Occurred())) {
      Py_XDECREF(probe);
      Py_CLEAR(types);
      break;
    }
    PyObject* type = (PyObject*)Py_TYPE(obj);
    Py_ssize_t size = basic_size(type);
    const cdata_layout* c = (const cdata_layout*)obj;
    if (size < (Py_ssize_t)sizeof(cdata_layout) || c->c_type != ctype ||
        c->c_data != (char*)expected) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError,
                     "probe %zd (type %R) does not read back as a cffi cdata of its "
                     "ctype and address", i, type);
      Py_DECREF(probe);
      Py_CLEAR(types);
      break;
    }
    int known = PySequence_Contains(types, type);
    if (known == 0) known = PyList_Append(types, type);
    Py_DECREF(probe);
    if (known < 0) Py_CLEAR(types);
  }
  Py_DECREF(seq);
  if (types == NULL) return NULL;
  PyObject* tuple = PyList_AsTuple(types);
  Py_DECREF(types);
  return tuple;
}

/* The offset of the one pointer-sized word of `obj` that holds `value`, or -1. */
static Py_ssize_t find_slot(PyObject* obj, Py_ssize_t size, PyObject* value) {
  Py_ssize_t found = -1;
  for (Py_ssize_t off = sizeof(PyObject); off + (Py_ssize_t)sizeof(PyObject*) <= size;
       off += sizeof(PyObject*)) {
    if (SLOT(obj, off) == value) {
      if (found >= 0) return -1;
      found = off;
    }
  }
  return found;
}

PyDoc_STRVAR(check_cdata_layout_doc,
"check_cdata_layout(probes)\n"
"--\n"
"\n"
"Reads each (cdata, ctype, address) of `probes` the way call() reads a cdata and returns\n"
"the tuple of their Python types; ValueError when one does not read back.");

static PyObject* check_cdata_layout(PyObject* self, PyObject* probes) {
  (void)self;
  return check_cdata_probes(probes);
}

PyDoc_STRVAR(init_doc,
"init(*, library_path, op_call_address, array_type, array_probe, array_sentinels,\n"
"     stream_type, python_call, check, open_task_streams, current_stream_get,\n"
"     output_slot, output_slot_address, ctype_tensor, ctype_stream, ctype_runtime,\n"
"     cdata_probes)\n"
"--\n"
"\n"
"Checks the layouts call() reads and binds it to the loaded libgpukit and the package's\n"
"objects (gpukit._call_path does this once). Raises, serving nothing, when a check fails.");

static PyObject* init(PyObject* self, PyObject* args, PyObject* kwargs) {
  (void)self;
  static char* names[] = {"library_path", "op_call_address", "array_type", "array_probe",
                          "array_sentinels", "stream_type", "python_call", "check",
                          "open_task_streams", "current_stream_get", "output_slot",
                          "output_slot_address", "ctype_tensor", "ctype_stream",
                          "ctype_runtime", "cdata_probes", NULL};
  const char* library_path = NULL;
  PyObject *op_call_address = NULL, *array_type = NULL, *array_probe = NULL,
           *sentinels = NULL, *stream_type = NULL, *python_call = NULL, *check = NULL,
           *open_task_streams = NULL, *current_stream_get = NULL, *output_slot = NULL,
           *output_slot_address = NULL,
           *ctype_tensor = NULL, *ctype_stream = NULL, *ctype_runtime = NULL,
           *cdata_probes = NULL;
  if (g.ready) {
    PyErr_SetString(PyExc_RuntimeError, "gpukit._compiled_call is initialised already");
    return NULL;
  }
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "|$sOO!OO!OOOO!OOOOOOO:init", names, &library_path, &op_call_address,
          &PyType_Type, &array_type, &array_probe, &PyTuple_Type, &sentinels, &stream_type,
          &python_call, &check, &PyList_Type, &open_task_streams, &current_stream_get,
          &output_slot, &output_slot_address, &ctype_tensor, &ctype_stream, &ctype_runtime,
          &cdata_probes))
    return NULL;
  if (library_path == NULL || op_call_address == NULL || array_type == NULL ||
      array_probe == NULL || sentinels == NULL || stream_type == NULL || python_call == NULL ||
      check == NULL || open_task_streams == NULL || current_stream_get == NULL ||
      output_slot == NULL || output_slot_address == NULL || ctype_tensor == NULL ||
      ctype_stream == NULL || ctype_runtime == NULL || cdata_probes == NULL) {
    PyErr_SetString(PyExc_TypeError, "init() needs every keyword argument");
    return NULL;
  }

  /* The library: the copy cffi loaded, not a second one. */
  void* handle = dlopen(library_path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL) {
    PyErr_Format(PyExc_ImportError, "%s is not loaded in this process", library_path);
    return NULL;
  }
  op_call_fn op_call = (op_call_fn)dlsym(handle, "gk_op_call");
  op_call_alloc_fn op_call_alloc = (op_call_alloc_fn)dlsym(handle, "gk_op_call_alloc");
  tensor_release_fn tensor_release = (tensor_release_fn)dlsym(handle, "gk_tensor_release");
  void* expected = PyLong_AsVoidPtr(op_call_address);
  if (expected == NULL && PyErr_Occurred()) return NULL;
  if (op_call == NULL || op_call_alloc == NULL || tensor_release == NULL ||
      (void*)op_call != expected) {
    PyErr_Format(PyExc_ImportError,
                 "%s: gk_op_call, gk_op_call_alloc or gk_tensor_release missing, or "
                 "gk_op_call is not the function cffi calls", library_path);
    return NULL;
  }

  /* cdata objects */
  PyObject* types = check_cdata_probes(cdata_probes);
  if (types == NULL) return NULL;
  Py_ssize_t num_types = PyTuple_Size(types);
  if (num_types < 1 || num_types > kMaxCdataTypes) {
    Py_DECREF(types);
    PyErr_SetString(PyExc_ValueError, "unexpected number of cdata types");
    return NULL;
  }

  /* GPUArray's slots */
  PyTypeObject* atype = (PyTypeObject*)array_type;
  Py_ssize_t size = basic_size(array_type);
  if (size < 0) {
    Py_DECREF(types);
    return NULL;
  }
  Py_ssize_t off[4];
  int slots_ok = (PyType_GetFlags(atype) & Py_TPFLAGS_HEAPTYPE) &&
                 Py_TYPE(array_probe) == atype && PyTuple_Size(sentinels) == 4;
  for (int i = 0; slots_ok && i < 4; i++) {
    off[i] = find_slot(array_probe, size, PyTuple_GetItem(sentinels, i));
    slots_ok = off[i] >= 0;
  }
  newfunc array_new = slots_ok ? (newfunc)PyType_GetSlot(atype, Py_tp_new) : NULL;
  if (array_new == NULL) {
    Py_DECREF(types);
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError,
                      "the GPUArray probe does not hold its sentinels at one offset each");
    return NULL;
  }

  /* The output slot: an item written at its address reads back as a gk_tensor* cdata of a
   * checked type. */
  gk_tensor** slot_item = (gk_tensor**)PyLong_AsVoidPtr(output_slot_address);
  PyObject* item = NULL;
  if (slot_item != NULL) {
    *slot_item = (gk_tensor*)(uintptr_t)0x5a5a5a50;
    item = PyObject_GetItem(output_slot, g.zero);
    *slot_item = NULL;
  }
  int slot_ok = item != NULL && PySequence_Contains(types, (PyObject*)Py_TYPE(item)) == 1 &&
                ((cdata_layout*)item)->c_type == ctype_tensor &&
                ((cdata_layout*)item)->c_data == (char*)(uintptr_t)0x5a5a5a50;
  Py_XDECREF(item);
  if (!slot_ok) {
    Py_DECREF(types);
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError,
                      "output_slot does not read back what is written at its address");
    return NULL;
  }

  g.op_call = op_call;
  g.op_call_alloc = op_call_alloc;
  g.tensor_release = tensor_release;
  g.num_cdata_types = (int)num_types;
  for (Py_ssize_t i = 0; i < num_types; i++) {
    g.cdata_types[i] = (PyTypeObject*)PyTuple_GetItem(types, i);
    Py_INCREF(g.cdata_types[i]);
  }
  Py_DECREF(types);
  Py_INCREF(array_type);
  g.array_type = atype;
  g.array_new = array_new;
  g.off_rt = off[0];
  g.off_t = off[1];
  g.off_device = off[2];
  g.off_stream = off[3];
  g.output_slot_item = slot_item;
  PyObject** keep[] = {&g.stream_type, &g.python_call, &g.check, &g.open_task_streams,
                       &g.current_stream_get, &g.output_slot, &g.ctype_tensor,
                       &g.ctype_stream, &g.ctype_runtime};
  PyObject* values[] = {stream_type, python_call, check, open_task_streams,
                        current_stream_get, output_slot, ctype_tensor, ctype_stream,
                        ctype_runtime};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    Py_INCREF(values[i]);
    *keep[i] = values[i];
  }
  g.ready = 1;
  Py_RETURN_NONE;
}

PyDoc_STRVAR(counts_doc,
"counts($module, /)\n"
"--\n"
"\n"
"(calls served by the compiled path, calls it handed to the Python path), since import.");

static PyObject* counts(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(KK)", g_compiled_calls, g_python_calls);
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))(fastcall_keywords_fn)call,
     METH_FASTCALL | METH_KEYWORDS, call_doc},
    {"init", (PyCFunction)(void (*)(void))init, METH_VARARGS | METH_KEYWORDS, init_doc},
    {"check_cdata_layout", check_cdata_layout, METH_O, check_cdata_layout_doc},
    {"counts", counts, METH_NOARGS, counts_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "gpukit._compiled_call",
    "gpukit.call in C for the common cases (see _compiled_call.c and docs/python.md).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__compiled_call(void) {
  static const char* const kw[6] = {"op", "inputs", "attrs", "out", "num_outputs", "stream"};
  if (g.zero == NULL) {
    for (int i = 0; i < 6; i++)
      if ((g.kw[i] = PyUnicode_InternFromString(kw[i])) == NULL) return NULL;
    g.s_ptr = PyUnicode_InternFromString("_ptr");
    g.s_pptr = PyUnicode_InternFromString("ptr");
    g.s_device = PyUnicode_InternFromString("device");
    g.zero = PyLong_FromLong(0);
    g.empty_tuple = PyTuple_New(0);
    if (g.s_ptr == NULL || g.s_pptr == NULL || g.s_device == NULL || g.zero == NULL ||
        g.empty_tuple == NULL)
      return NULL;
  }
  return PyModule_Create(&module_def);
}
