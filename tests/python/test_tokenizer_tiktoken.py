"""gpukit.Tokenizer.open_tiktoken against tiktoken itself on openai-whisper's vocabularies.

openai-whisper (installed without its dependencies by `make deps`) ships gpt2.tiktoken and
multilingual.tiktoken; tiktoken (PyPI) reads the same files offline. Both must give the same
ids on the shared corpus of tests/python/test_tokenizer.py, and decoding gives the text back.
"""
import importlib.metadata
import os

import pytest

import gpukit

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is not installed (make deps)")
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

from test_tokenizer import _corpus  # noqa: E402

# openai-whisper's pattern (whisper/tokenizer.py), GPT-2's.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _whisper_vocab(name):
    try:
        files = importlib.metadata.files("openai-whisper") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith(name):
            return str(f.locate())
    return None


@pytest.mark.parametrize("name", ["gpt2.tiktoken", "multilingual.tiktoken"])
def test_whisper_vocabularies_encode_as_tiktoken_does(name):
    path = _whisper_vocab(name)
    if path is None:
        pytest.skip("openai-whisper is not installed (make deps installs it)")
    ranks = load_tiktoken_bpe(path)
    specials = ["<|endoftext|>", "<|startoftranscript|>"]
    peer = tiktoken.Encoding(name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={s: len(ranks) + i for i, s in enumerate(specials)})
    ours = gpukit.Tokenizer.open_tiktoken(path, specials)
    assert ours.vocab_size == len(ranks) + len(specials)
    corpus = [s for s in _corpus() if "\ud800" not in s]
    mismatches = [(s, ours.encode(s, add_special=False), peer.encode_ordinary(s))
                  for s in corpus]
    mismatches = [m for m in mismatches if m[1] != m[2]]
    assert not mismatches, f"{len(mismatches)} of {len(corpus)} differ; first: {mismatches[0]}"
    for s in corpus[:80]:
        assert ours.decode(peer.encode_ordinary(s)) == s
    text = "<|startoftranscript|> hi<|endoftext|>"
    assert ours.encode(text, add_special=False, parse_special=True) == \
        peer.encode(text, allowed_special="all")


def test_malformed_tiktoken_files_are_refused_naming_the_line(tmp_path):
    good = tmp_path / "good.tiktoken"
    good.write_text("IQ== 0\nIg== 1\nISI= 2\n")  # "!", '"', '!"'
    t = gpukit.Tokenizer.open_tiktoken(good, ["<|endoftext|>"])
    assert t.encode('!"', add_special=False) == [2]
    assert t.vocab_size == 4
    cases = {
        "IQ== 0\nnot-base64! 1\n": "good.tiktoken:2",
        "IQ== 0\nIg== 2\n": "out of order",
        "IQ== 0\nIg==\n": "two fields",
        "IQ== 0\nIg== x\n": "rank 'x'",
        "IQ== 0\nIQ== 1\n": "repeats the bytes of token 0",
        "": "no tokens",
    }
    for text, needle in cases.items():
        good.write_text(text)
        with pytest.raises(gpukit.InvalidArgument, match=needle.replace("(", r"\(")):
            gpukit.Tokenizer.open_tiktoken(good)
    with pytest.raises(gpukit.NotFound):
        gpukit.Tokenizer.open_tiktoken(os.path.join(tmp_path, "missing.tiktoken"))
    good.write_text("IQ== 0\n")
    with pytest.raises(gpukit.InvalidArgument, match="special_tokens"):
        gpukit.Tokenizer.open_tiktoken(good, [""])
