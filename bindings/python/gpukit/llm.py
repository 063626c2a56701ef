"""Decoder-only transformers, thin over the C ABI's gk_model_* / gk_session_* calls
(gpukit.h, "Models, ABI 1.6"; docs/llm.md, "Models").

    model = gpukit.llm.load("path/to/hf-folder", device=None, dtype="bf16")
    tokens = model.generate([1, 17, 203], max_new_tokens=32, temperature=0.7, seed=1)

A model is loaded once (config.json + SafeTensors, converted to `dtype` on `device`); each
generate() opens a session of its own, so one model serves many threads.
"""
from __future__ import annotations

import os

import numpy as np

from ._array import _gk_dtype, _resolve
from ._lib import check, ffi, lib

__all__ = ["Model", "Session", "load"]

_MODEL_DTYPES = {1: "f32", 3: "f16", 4: "bf16"}


def _model_dtype(dtype) -> int:
    if dtype is None:
        return 1
    try:
        gk = _gk_dtype(dtype)
    except TypeError:
        gk = None
    if gk not in _MODEL_DTYPES:
        raise ValueError(f"dtype={dtype!r} is not a model dtype; give \"f32\", \"bf16\" or "
                         "\"f16\" (or None for f32)")
    return gk


def _ids(tokens) -> np.ndarray:
    ids = np.ascontiguousarray(np.asarray(tokens, dtype=np.int64).reshape(-1))
    if ids.size and (ids.min() < -2**31 or ids.max() >= 2**31):
        raise ValueError("token ids must fit in int32")
    return ids.astype(np.int32)


class Session:
    """One sequence and its KV cache (gk_session). Made by Model.session(); use it from one
    thread at a time."""

    def __init__(self, model: "Model", max_context: int = 0):
        opts = ffi.new("gk_session_options*")
        opts.struct_size = ffi.sizeof("gk_session_options")
        opts.max_context = int(max_context)
        out = ffi.new("gk_session**")
        check(lib.gk_session_create(model._ptr, opts, out))
        self.model = model
        self._ptr = ffi.gc(out[0], lib.gk_session_release)

    def __len__(self) -> int:
        return int(lib.gk_session_length(self._ptr))

    def step(self, tokens, all_logits: bool = False) -> np.ndarray:
        """Appends `tokens` and returns the last token's logits [vocab] (float32), or every
        token's [len(tokens), vocab] with all_logits=True."""
        ids = _ids(tokens)
        vocab = self.model.vocab_size
        out = np.empty((len(ids) if all_logits else 1, vocab), dtype=np.float32)
        check(lib.gk_session_step(self._ptr, ffi.from_buffer("int32_t[]", ids), len(ids),
                                  1 if all_logits else 0, ffi.from_buffer("float[]", out)))
        return out if all_logits else out[0]

    def generate(self, tokens, max_new_tokens: int = 32, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: int = 0, stop_tokens=()) -> list:
        """Steps `tokens`, then samples up to `max_new_tokens` ids (greedy at temperature 0)
        and returns them; stops after a stop token. The last id returned is not yet stepped:
        pass it first to go on."""
        ids = _ids(tokens)
        stops = _ids(stop_tokens)
        opts = ffi.new("gk_generate_options*")
        opts.struct_size = ffi.sizeof("gk_generate_options")
        opts.max_tokens = int(max_new_tokens)
        opts.temperature = float(temperature)
        opts.top_k = int(top_k)
        opts.top_p = float(top_p)
        opts.min_p = float(min_p)
        opts.repetition_penalty = float(repetition_penalty)
        opts.seed = int(seed) & (2**64 - 1)
        stop_buf = ffi.from_buffer("int32_t[]", stops) if len(stops) else ffi.NULL
        opts.stop_tokens = stop_buf
        opts.num_stop_tokens = len(stops)
        capacity = max(int(max_new_tokens), 0)
        out = ffi.new("int32_t[]", max(capacity, 1))
        count = ffi.new("int32_t*")
        check(lib.gk_session_generate(self._ptr, ffi.from_buffer("int32_t[]", ids), len(ids),
                                      opts, out, capacity, count))
        return [int(out[i]) for i in range(count[0])]


class Model:
    """A loaded model (gk_model). Made by gpukit.llm.load."""

    def __init__(self, path, device=None, dtype=None, *, runtime=None):
        dev = _resolve(device, runtime)
        opts = ffi.new("gk_model_options*")
        opts.struct_size = ffi.sizeof("gk_model_options")
        opts.device = dev.id
        opts.dtype = _model_dtype(dtype)
        out = ffi.new("gk_model**")
        check(lib.gk_model_load(dev.runtime.ptr, os.fsencode(os.fspath(path)), opts, out))
        self._ptr = ffi.gc(out[0], lib.gk_model_release)
        self.device = dev
        info = ffi.new("gk_model_info*")
        info.struct_size = ffi.sizeof("gk_model_info")
        check(lib.gk_model_get_info(self._ptr, info))
        self.architecture = ffi.string(info.architecture).decode()
        self.vocab_size = int(info.vocab_size)
        self.context_length = int(info.context_length)
        self.num_layers = int(info.num_layers)
        self.hidden_size = int(info.hidden_size)
        self.dtype = _MODEL_DTYPES[int(info.dtype)]

    def __repr__(self) -> str:
        return (f"<gpukit.llm.Model {self.architecture} {self.num_layers} layers, vocab "
                f"{self.vocab_size}, {self.dtype} on {self.device.name}>")

    def session(self, max_context: int = 0) -> Session:
        """A new sequence; max_context positions (0: the model's context length)."""
        return Session(self, max_context)

    def generate(self, tokens, max_new_tokens: int = 32, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: int = 0, stop_tokens=()) -> list:
        """Session.generate on a fresh session."""
        return self.session().generate(tokens, max_new_tokens, temperature, top_k, top_p,
                                       min_p, repetition_penalty, seed, stop_tokens)


def load(path, device=None, dtype=None, *, runtime=None) -> Model:
    """Loads an HF model folder (config.json + SafeTensors weights) on `device` (None: the
    runtime's default device; "cpu", "cuda", "cuda:N", an id or a Device) as `dtype`
    ("f32" (None), "bf16" or "f16")."""
    return Model(path, device, dtype, runtime=runtime)
