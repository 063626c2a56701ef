"""Byte-level BPE tokenizer over the C ABI's gk_tokenizer_* calls (gpukit.h, "Tokenizer,
ABI 1.5"; docs/llm.md): from a GGUF weight set's vocabulary or an HF tokenizer.json.

The tokenizer is immutable; every method may run from any thread at the same time.
"""
from __future__ import annotations

import os

from ._lib import check, ffi, lib
from ._runtime import runtime as _default_runtime

__all__ = ["Tokenizer", "Detokenizer"]

_OUT_OF_RANGE = 11


class Tokenizer:
    """A byte-level BPE tokenizer (gk_tokenizer). Make one with :meth:`from_weights` (a GGUF
    file or a :class:`gpukit.Weights`) or :meth:`open` (an HF tokenizer.json)."""

    def __init__(self, ptr):
        self._ptr = ffi.gc(ptr, lib.gk_tokenizer_release)
        info = ffi.new("gk_tokenizer_info*")
        info.struct_size = ffi.sizeof("gk_tokenizer_info")
        check(lib.gk_tokenizer_info_get(self._ptr, info))
        self.vocab_size = int(info.vocab_size)
        self.bos_id = int(info.bos_id) if info.bos_id >= 0 else None
        self.eos_id = int(info.eos_id) if info.eos_id >= 0 else None
        self.eot_id = int(info.eot_id) if info.eot_id >= 0 else None
        self.pad_id = int(info.pad_id) if info.pad_id >= 0 else None
        self.unk_id = int(info.unk_id) if info.unk_id >= 0 else None
        self.add_bos = bool(info.add_bos)
        self.add_eos = bool(info.add_eos)
        self.pre = ffi.string(info.pre).decode("utf-8", "replace")

    @classmethod
    def from_weights(cls, weights) -> "Tokenizer":
        """From the GGUF vocabulary of `weights`: a :class:`gpukit.Weights` or a path (the
        file is opened for the vocabulary and closed again)."""
        from ._weights import Weights
        if isinstance(weights, Weights):
            out = ffi.new("gk_tokenizer**")
            check(lib.gk_tokenizer_from_weights(weights._ptr, out))
            return cls(out[0])
        rt = _default_runtime()
        w = ffi.new("gk_weights**")
        check(lib.gk_weights_open(rt.ptr, os.fsencode(os.fspath(weights)), ffi.NULL, w))
        try:
            out = ffi.new("gk_tokenizer**")
            check(lib.gk_tokenizer_from_weights(w[0], out))
        finally:
            lib.gk_weights_close(w[0])
        return cls(out[0])

    @classmethod
    def open(cls, path) -> "Tokenizer":
        """From an HF tokenizer.json (its tokenizer_config.json beside it is read too)."""
        out = ffi.new("gk_tokenizer**")
        check(lib.gk_tokenizer_open(_default_runtime().ptr, os.fsencode(os.fspath(path)), out))
        return cls(out[0])

    @classmethod
    def open_tiktoken(cls, path, special_tokens=(), pattern=None) -> "Tokenizer":
        """From a tiktoken-format vocabulary (openai-whisper's gpt2.tiktoken and
        multilingual.tiktoken): each line's base64 bytes get its rank as id; the
        `special_tokens` (strings) follow as control tokens in order; `pattern` (a PCRE2
        pattern) cuts the text, GPT-2's when None."""
        names = [ffi.new("char[]", s.encode()) for s in special_tokens]
        array = ffi.new("char*[]", names) if names else ffi.NULL
        out = ffi.new("gk_tokenizer**")
        check(lib.gk_tokenizer_open_tiktoken(
            _default_runtime().ptr, os.fsencode(os.fspath(path)), array, len(names),
            pattern.encode() if pattern is not None else ffi.NULL, out))
        return cls(out[0])

    def encode(self, text, add_special: bool = True, parse_special: bool = False) -> list:
        """Token ids of `text` (str, or bytes taken as UTF-8; invalid UTF-8 reads as U+FFFD
        per invalid part). `add_special` adds BOS/EOS where the model says to;
        `parse_special` matches control tokens' texts ("<|im_start|>") as those tokens."""
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        flags = ((lib.GK_TOKENIZE_ADD_SPECIAL if add_special else 0)
                 | (lib.GK_TOKENIZE_PARSE_SPECIAL if parse_special else 0))
        count = ffi.new("size_t*")
        capacity = len(data) + 4
        while True:
            ids = ffi.new("int32_t[]", capacity)
            status = lib.gk_tokenizer_encode(self._ptr, data, len(data), flags, ids, capacity,
                                             count)
            if status == _OUT_OF_RANGE and count[0] > capacity:
                capacity = count[0]
                continue
            check(status)
            return list(ids[0:count[0]])

    def decode_bytes(self, ids, skip_special: bool = False) -> bytes:
        """The exact bytes `ids` stand for (may end inside a UTF-8 character)."""
        ids = [int(i) for i in ids]
        arr = ffi.new("int32_t[]", ids)
        flags = lib.GK_DETOKENIZE_SKIP_SPECIAL if skip_special else 0
        length = ffi.new("size_t*")
        capacity = 16 * len(ids) + 16
        while True:
            buf = ffi.new("char[]", capacity)
            status = lib.gk_tokenizer_decode(self._ptr, arr, len(ids), flags, buf, capacity,
                                             length)
            if status == _OUT_OF_RANGE and length[0] > capacity:
                capacity = length[0] + 1
                continue
            check(status)
            return ffi.buffer(buf, length[0])[:]

    def decode(self, ids, skip_special: bool = False) -> str:
        """The text of `ids`; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids, skip_special).decode("utf-8", "replace")

    def token_text(self, token_id: int) -> bytes:
        """The vocabulary's stored text of `token_id` (byte-level form, e.g. b"\\xc4\\xa0the")."""
        text = ffi.new("const char**")
        length = ffi.new("size_t*")
        check(lib.gk_tokenizer_token_text(self._ptr, int(token_id), text, length))
        return ffi.buffer(text[0], length[0])[:]

    def detokenizer(self, skip_special: bool = False) -> "Detokenizer":
        """A streaming decoder for one generated sequence."""
        return Detokenizer(self, skip_special)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self):
        return f"Tokenizer(vocab_size={self.vocab_size}, pre={self.pre!r})"


class Detokenizer:
    """Streaming decode (gk_detokenizer): ``push(id)`` returns the text that id completes,
    whole characters only; ``flush()`` returns what is held back at the end."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False):
        out = ffi.new("gk_detokenizer**")
        flags = lib.GK_DETOKENIZE_SKIP_SPECIAL if skip_special else 0
        check(lib.gk_detokenizer_create(tokenizer._ptr, flags, out))
        self._ptr = ffi.gc(out[0], lib.gk_detokenizer_release)
        self._text = ffi.new("const char**")
        self._length = ffi.new("size_t*")

    def push(self, token_id: int) -> str:
        check(lib.gk_detokenizer_push(self._ptr, int(token_id), self._text, self._length))
        return ffi.buffer(self._text[0], self._length[0])[:].decode("utf-8")

    def flush(self) -> str:
        check(lib.gk_detokenizer_flush(self._ptr, self._text, self._length))
        return ffi.buffer(self._text[0], self._length[0])[:].decode("utf-8")
