"""Decoder-only transformers, thin over the C ABI's gk_model_* / gk_session_* / gk_batch_*
calls (gpukit.h, "Models", ABI 1.6 and 1.7; docs/llm.md).

    model = gpukit.llm.load("SmolLM2-135M-Instruct.Q4_1.gguf", device=None)
    text = model.generate("The capital of France is", max_new_tokens=16)  # str; .tokens
    for piece in model.generate("Once upon a time", stream=True):         # text as it comes
        print(piece, end="")
    texts = model.generate(["Hello", "The sky is"], seed=[1, 2], temperature=0.7)  # a batch
    ids = model.generate([1, 17, 203], max_new_tokens=32)                  # token ids in, out

A model is loaded once (converted to `dtype` on `device`); each generation opens sessions of
its own, so one model serves many threads. A batch decodes all its sequences in one forward
pass per token (gk_batch), each with its own sampling parameters and seed, and gives each
sequence the tokens it gets alone.
"""
from __future__ import annotations

import os

import numpy as np

from ._creation import _resolve
from ._dtypes import _dtype_name, _gk_dtype
from ._lib import check, ffi, lib

__all__ = ["Batch", "GeneratedText", "Model", "Session", "load"]

# The dtypes a model runs in (gk_dtype -> name).
_MODEL_DTYPES = {gk: _dtype_name(gk) for gk in (lib.GK_DTYPE_F32, lib.GK_DTYPE_F16,
                                                 lib.GK_DTYPE_BF16)}


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


def _session_options(max_context, task):
    opts = ffi.new("gk_session_options*")
    opts.struct_size = ffi.sizeof("gk_session_options")
    opts.max_context = int(max_context)
    opts.task = task.ptr if task is not None else ffi.NULL
    return opts


def _generate_options(max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                      seed, stop_tokens):
    """A gk_generate_options and the buffer its stop tokens point into (keep both)."""
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
    return opts, (stops, stop_buf)


def _is_batch(prompt) -> bool:
    """A list of prompts (str or id sequences), not one prompt of ids."""
    if isinstance(prompt, (str, bytes)) or isinstance(prompt, np.ndarray):
        return isinstance(prompt, np.ndarray) and prompt.ndim == 2
    if isinstance(prompt, (list, tuple)) and prompt:
        return all(isinstance(p, (str, list, tuple, np.ndarray)) for p in prompt)
    return False


def _per_sequence(value, n, name):
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != n:
            raise ValueError(f"{name} has {len(value)} values for {n} prompts")
        return list(value)
    return [value] * n


class GeneratedText(str):
    """The text generate() returns for a str prompt; .tokens holds the generated ids (a
    stop token included, as the C call returns it)."""

    tokens: list

    def __new__(cls, text: str, tokens):
        self = super().__new__(cls, text)
        self.tokens = list(tokens)
        return self


class _Run:
    """One prompt's generation seen from Python: its ids, stops, and (for a str prompt) the
    text so far, held back where it may still become a stop string."""

    def __init__(self, model: "Model", prompt, stop, stop_tokens):
        self.text_mode = isinstance(prompt, str)
        stops = [stop] if isinstance(stop, (str, int)) else list(stop or [])
        self.stop_strings = [s for s in stops if isinstance(s, str) and s]
        self.stop_ids = [int(s) for s in stops if not isinstance(s, str)] + list(stop_tokens)
        if self.text_mode:
            tok = model.tokenizer
            self.ids = tok.encode(prompt)
            # The model's end of text ends a text generation, whatever else stops it.
            self.stop_ids += [t for t in (tok.eos_id, tok.eot_id) if t is not None]
            self._detok = tok.detokenizer(skip_special=True)
        else:
            if self.stop_strings:
                raise ValueError("stop strings need a str prompt (token ids in, ids out)")
            self.ids = _ids(prompt)
        if len(self.ids) == 0:
            raise ValueError("the prompt is empty: give at least one token")
        self.tokens = []
        self.text = ""
        self.emitted = 0
        self.done = False  # ended here by a stop string

    def feed(self, tokens, finished):
        """What the new ids among `tokens` (every id so far) give: text pieces or ids."""
        new = tokens[len(self.tokens):]
        if not self.text_mode:
            self.tokens.extend(new)
            yield from new
            return
        for t in new:
            self.tokens.append(t)
            self.text += self._detok.push(t)
        yield from self._release(final=False)

    def finish(self):
        if self.text_mode:
            self.text += self._detok.flush()
            yield from self._release(final=True)

    def _release(self, final):
        for s in self.stop_strings:
            cut = self.text.find(s)
            if cut >= 0:
                self.text = self.text[:cut]
                self.done = True
        end = len(self.text)
        if not (final or self.done):
            # Hold back a tail that may be the start of a stop string.
            for s in self.stop_strings:
                for k in range(min(len(s) - 1, len(self.text)), 0, -1):
                    if self.text.endswith(s[:k]):
                        end = min(end, len(self.text) - k)
                        break
        if end > self.emitted:
            piece = self.text[self.emitted:end]
            self.emitted = end
            yield piece


class Batch:
    """Continuous batching (gk_batch): sequences with their own prompts and sampling options,
    added and removed between steps; each step() is one forward pass giving every sequence
    still generating one token. A sequence's session (its KV cache) is freed as soon as it
    finishes or is removed. Use from one thread at a time."""

    def __init__(self, model: "Model", max_context: int = 0, task=None):
        out = ffi.new("gk_batch**")
        check(lib.gk_batch_create(model._ptr, _session_options(max_context, task), out))
        self.model = model
        self.task = task
        self._ptr = ffi.gc(out[0], lib.gk_batch_release)

    def add(self, tokens, max_new_tokens: int = 32, temperature: float = 0.0, top_k: int = 0,
            top_p: float = 1.0, min_p: float = 0.0, repetition_penalty: float = 1.0,
            seed: int = 0, stop_tokens=()) -> int:
        """Prefills `tokens` in a new session, samples the first token and returns the
        sequence's id."""
        ids = _ids(tokens)
        opts, _keep = _generate_options(max_new_tokens, temperature, top_k, top_p, min_p,
                                        repetition_penalty, seed, stop_tokens)
        out = ffi.new("int64_t*")
        check(lib.gk_batch_add(self._ptr, ffi.from_buffer("int32_t[]", ids), len(ids), opts,
                               out))
        return int(out[0])

    def step(self) -> int:
        """One token for every sequence still generating; returns how many still are."""
        active = ffi.new("int32_t*")
        check(lib.gk_batch_step(self._ptr, active))
        return int(active[0])

    def tokens(self, seq: int):
        """(ids generated so far, finished) of sequence `seq`."""
        count = ffi.new("int32_t*")
        finished = ffi.new("int32_t*")
        check(lib.gk_batch_tokens(self._ptr, int(seq), ffi.NULL, 0, count, finished))
        n = int(count[0])
        out = ffi.new("int32_t[]", max(n, 1))
        check(lib.gk_batch_tokens(self._ptr, int(seq), out, n, count, finished))
        return [int(out[i]) for i in range(n)], bool(finished[0])

    def remove(self, seq: int) -> None:
        """Drops sequence `seq`, freeing its KV cache now."""
        check(lib.gk_batch_remove(self._ptr, int(seq)))


class Session:
    """One sequence and its KV cache (gk_session). Made by Model.session(); use it from one
    thread at a time."""

    def __init__(self, model: "Model", max_context: int = 0, task=None):
        opts = _session_options(max_context, task)
        out = ffi.new("gk_session**")
        check(lib.gk_session_create(model._ptr, opts, out))
        self.model = model
        self.task = task  # the session's memory is charged to it: it must outlive the session
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
        opts, _keep = _generate_options(max_new_tokens, temperature, top_k, top_p, min_p,
                                        repetition_penalty, seed, stop_tokens)
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
        self.path = os.fspath(path)
        self._tokenizer = None

    def __repr__(self) -> str:
        return (f"<gpukit.llm.Model {self.architecture} {self.num_layers} layers, vocab "
                f"{self.vocab_size}, {self.dtype} on {self.device.name}>")

    def session(self, max_context: int = 0, task=None) -> Session:
        """A new sequence; max_context positions (0: the model's context length). With a
        gpukit.Task, its KV cache and its steps' scratch are charged to the task (a cache
        beyond the task's memory limit raises with the numbers), and its steps and draws run
        on a stream of the task: its priority and SM partition, counted in its ops_launched;
        once the task has finished they raise FailedPrecondition."""
        return Session(self, max_context, task)

    def step_batch(self, sessions, tokens) -> np.ndarray:
        """One decode step of several sessions of this model in one forward pass
        (gk_session_step_batch): tokens[i] is appended to sessions[i], whatever its length.
        Returns the logits [len(sessions), vocab] (float32), row i equal to sessions[i]
        stepped alone."""
        sessions = list(sessions)
        ids = _ids(tokens)
        if len(ids) != len(sessions):
            raise ValueError(f"{len(ids)} tokens for {len(sessions)} sessions: one each")
        handles = ffi.new("gk_session*[]", [s._ptr for s in sessions])
        out = np.empty((len(sessions), self.vocab_size), dtype=np.float32)
        check(lib.gk_session_step_batch(handles, len(sessions), ffi.from_buffer("int32_t[]", ids),
                                        ffi.from_buffer("float[]", out)))
        return out

    def batch(self, max_context: int = 0, task=None) -> "Batch":
        """An empty generation batch (continuous batching): see Batch."""
        return Batch(self, max_context, task)

    @property
    def tokenizer(self):
        """The model's gpukit.Tokenizer: a GGUF file's own vocabulary, or the tokenizer.json
        beside an HF folder's config.json. Read once, at first use."""
        if self._tokenizer is None:
            from ._tokenizer import Tokenizer
            if os.path.isdir(self.path):
                json_path = os.path.join(self.path, "tokenizer.json")
                if not os.path.exists(json_path):
                    raise FileNotFoundError(
                        f"{self.path} has no tokenizer.json: give token ids to generate(), or "
                        "save the model's tokenizer beside it")
                self._tokenizer = Tokenizer.open(json_path)
            else:
                self._tokenizer = Tokenizer.from_weights(self.path)
        return self._tokenizer

    def generate(self, prompt, max_new_tokens: int = 32, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: int = 0, stop=None,
                 stream: bool = False, stop_tokens=()):
        """Generates up to `max_new_tokens` tokens after `prompt` (greedy at temperature 0; a
        seed makes sampling repeat).

        `prompt` is a str (encoded with .tokenizer, BOS added where the model says so) or a
        sequence of token ids; a list of those is a batch (see generate_batch).
        A str prompt returns a GeneratedText (a str, with the ids in .tokens) and stops at
        the model's end-of-text tokens; ids return a list of ids. `stop` adds stop strings
        (the text ends before the first one) and stop token ids (returned, as the C call
        does). stream=True returns an iterator of text pieces (str prompt; whole UTF-8
        characters, joining to the text returned without stream) or of ids."""
        if _is_batch(prompt):
            if stream:
                raise ValueError("stream=True takes one prompt; use Model.batch() to follow "
                                 "several sequences step by step")
            return self.generate_batch(prompt, max_new_tokens, temperature, top_k, top_p,
                                       min_p, repetition_penalty, seed, stop, stop_tokens)
        run = _Run(self, prompt, stop, stop_tokens)
        options = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
                       top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty,
                       seed=seed)
        pieces = self._stream(run, options)
        if stream:
            return pieces
        out = list(pieces)
        if run.text_mode:
            return GeneratedText("".join(out), run.tokens)
        return out

    def _stream(self, run: "_Run", options: dict):
        """A one-sequence gk_batch, so that each step gives one token; the prefill (and any
        error in the arguments) happens now, not at the first next()."""
        batch = Batch(self)
        seq = batch.add(run.ids, stop_tokens=run.stop_ids, **options)

        def pieces():
            while True:
                tokens, finished = batch.tokens(seq)
                yield from run.feed(tokens, finished)
                if run.done:
                    return
                if finished:
                    yield from run.finish()
                    return
                batch.step()
        return pieces()

    def generate_batch(self, prompts, max_new_tokens=32, temperature=0.0, top_k=0, top_p=1.0,
                       min_p=0.0, repetition_penalty=1.0, seed=0, stop=None, stop_tokens=()):
        """generate() for each prompt of `prompts`, decoded together: one forward pass per
        token over every sequence still generating. Each sampling parameter (max_new_tokens,
        temperature, top_k, top_p, min_p, repetition_penalty, seed) is one value for all or
        a list with one per prompt. Returns a list of what generate() returns for each: the
        same tokens as generating each alone."""
        prompts = list(prompts)
        n = len(prompts)
        per = {name: _per_sequence(value, n, name) for name, value in dict(
            max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
            min_p=min_p, repetition_penalty=repetition_penalty, seed=seed).items()}
        runs = [_Run(self, p, stop, stop_tokens) for p in prompts]
        batch = Batch(self)
        ids = [batch.add(run.ids, stop_tokens=run.stop_ids,
                         **{name: values[i] for name, values in per.items()})
               for i, run in enumerate(runs)]
        pieces = [[] for _ in runs]
        live = set(range(n))
        while live:
            for i in sorted(live):
                tokens, finished = batch.tokens(ids[i])
                pieces[i].extend(runs[i].feed(tokens, finished))
                if runs[i].done or finished:
                    if not runs[i].done:
                        pieces[i].extend(runs[i].finish())
                    batch.remove(ids[i])  # frees its KV cache now
                    live.discard(i)
            if live:
                batch.step()
        return [GeneratedText("".join(p), r.tokens) if r.text_mode else p
                for p, r in zip(pieces, runs)]


def load(path, device=None, dtype=None, *, runtime=None) -> Model:
    """Loads a model: an HF folder (config.json + SafeTensors weights, tokenizer.json for
    .tokenizer) or a .gguf file (llama, qwen2, qwen3; its vocabulary is the tokenizer), on
    `device` (None: the runtime's default device; "cpu", "cuda", "cuda:N", an id or a
    Device) as `dtype` ("f32" (None), "bf16" or "f16")."""
    return Model(path, device, dtype, runtime=runtime)
