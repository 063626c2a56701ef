"""The llm ops (embedding, rope, attention, sample) through gpukit.call on the cpu device,
against NumPy float64 references written from docs/ops.md, and their argument errors."""
import math

import numpy as np
import pytest

import gpukit

rng = np.random.default_rng(28)


def run(op, inputs, **attrs):
    return gpukit.call(op, [gpukit.asarray(x) for x in inputs], attrs).to_numpy()


# ---- embedding -------------------------------------------------------------------------

@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_embedding_gathers_rows_for_any_id_shape(id_dtype):
    table = rng.standard_normal((50, 16)).astype(np.float32)
    ids = rng.integers(0, 50, (2, 3, 4)).astype(id_dtype)
    got = run("embedding", [table, ids])
    assert got.shape == (2, 3, 4, 16) and got.dtype == np.float32
    np.testing.assert_array_equal(got, table[ids])


def test_embedding_refuses_an_id_out_of_range_naming_it():
    table = np.zeros((10, 4), np.float32)
    with pytest.raises(gpukit.InvalidArgument, match=r"holds 10 at \[2\].*0\.\.9"):
        run("embedding", [table, np.array([0, 1, 10], np.int32)])


# ---- rope --------------------------------------------------------------------------------

def hf_inv_freq(rot, theta=10000.0, scaling="none", factor=8.0, low=1.0, high=4.0,
                original=8192.0):
    """HF transformers' float32 inverse frequencies (modeling_rope_utils)."""
    f32 = np.float32
    exponent = np.arange(0, rot, 2).astype(f32) / f32(rot)
    inv = (f32(1.0) / np.power(np.float64(f32(theta)), exponent.astype(np.float64)).astype(f32))
    if scaling == "linear":
        return inv / f32(factor)
    if scaling == "llama3":
        low_w, high_w = f32(original) / f32(low), f32(original) / f32(high)
        wavelen = f32(2 * math.pi) / inv
        scaled = np.where(wavelen > low_w, inv / f32(factor), inv)
        smooth = (f32(original) / wavelen - f32(low)) / (f32(high) - f32(low))
        smoothed = (f32(1) - smooth) * scaled / f32(factor) + smooth * scaled
        medium = ~(wavelen < high_w) & ~(wavelen > low_w)
        return np.where(medium, smoothed, scaled).astype(f32)
    return inv


def rope_reference(x, pos, rot, style, **scaling):
    inv = hf_inv_freq(rot, **scaling)
    pos = np.broadcast_to(pos, x.shape[:2]).astype(np.float32)
    angle = (pos[..., None] * inv).astype(np.float64)[:, :, None, :]  # [B, T, 1, rot/2]
    c, s = np.cos(angle), np.sin(angle)
    x = x.astype(np.float64)
    out = x.copy()
    if style == "half":
        x0, x1 = x[..., : rot // 2], x[..., rot // 2: rot]
        out[..., : rot // 2] = x0 * c - x1 * s
        out[..., rot // 2: rot] = x1 * c + x0 * s
    else:
        x0, x1 = x[..., 0:rot:2], x[..., 1:rot:2]
        out[..., 0:rot:2] = x0 * c - x1 * s
        out[..., 1:rot:2] = x1 * c + x0 * s
    return out


@pytest.mark.parametrize("style", ["half", "interleaved"])
@pytest.mark.parametrize("rot,scaling", [(64, {}), (32, {}),
                                         (64, {"scaling": "llama3", "theta": 500000.0}),
                                         (64, {"scaling": "linear", "factor": 2.0})])
def test_rope_matches_hf_formula(style, rot, scaling):
    x = rng.standard_normal((2, 6, 3, 64)).astype(np.float32)
    pos = rng.integers(0, 20000, (2, 6)).astype(np.int32)
    attrs = dict(style=style, rotary_dim=rot, **scaling)
    got = run("rope", [x, pos], **attrs)
    want = rope_reference(x, pos, rot, style, **scaling)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_rope_errors_name_the_argument():
    x = np.zeros((1, 4, 2, 16), np.float32)
    with pytest.raises(gpukit.InvalidArgument, match="rotary_dim' is 7; expected an even value"):
        run("rope", [x, np.arange(4, dtype=np.int32)], rotary_dim=7)
    with pytest.raises(gpukit.InvalidArgument, match=r"positions' has shape \[5\]; expected \[4\]"):
        run("rope", [x, np.arange(5, dtype=np.int32)])
    with pytest.raises(gpukit.InvalidArgument, match="style' is 'neox'"):
        run("rope", [x, np.arange(4, dtype=np.int32)], style="neox")
    with pytest.raises(gpukit.InvalidArgument, match="high_freq_factor"):
        run("rope", [x, np.arange(4, dtype=np.int32)], scaling="llama3", low_freq_factor=4.0,
            high_freq_factor=1.0)


# ---- attention ---------------------------------------------------------------------------

def attention_reference(q, k, v, lengths, causal, scale):
    B, Tq, Hq, D = q.shape
    group = Hq // k.shape[2]
    out = np.zeros(q.shape)
    for b in range(B):
        L = lengths[b]
        for i in range(Tq):
            last = min(L - 1, L - Tq + i) if causal else L - 1
            if last < 0:
                continue
            for h in range(Hq):
                s = k[b, : last + 1, h // group].astype(np.float64) @ q[b, i, h] * scale
                w = np.exp(s - s.max())
                out[b, i, h] = w @ v[b, : last + 1, h // group] / w.sum()
    return out


@pytest.mark.parametrize("causal", [1, 0])
def test_attention_gqa_over_a_cache_view_with_lengths(causal):
    B, Tq, cap, Tk, Hq, Hkv, D = 2, 3, 12, 9, 4, 2, 16
    q = rng.standard_normal((B, Tq, Hq, D)).astype(np.float32)
    kc = rng.standard_normal((B, cap, Hkv, D)).astype(np.float32)
    vc = rng.standard_normal((B, cap, Hkv, D)).astype(np.float32)
    lengths = np.array([9, 2], np.int32)
    # k and v are zero-copy views of the first Tk positions of the caches (strided on T).
    gk_k = gpukit.from_numpy(kc[:, :Tk])
    gk_v = gpukit.from_numpy(vc[:, :Tk])
    got = gpukit.call("attention", [gpukit.asarray(q), gk_k, gk_v, gpukit.asarray(lengths)],
                      {"causal": causal}).to_numpy()
    want = attention_reference(q, kc[:, :Tk], vc[:, :Tk], lengths, causal, 1 / math.sqrt(D))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if causal:
        assert not got[1, 0].any()  # L = 2 < Tq = 3: the first query sees no key


def test_attention_errors_name_the_argument():
    q = np.zeros((1, 1, 6, 8), np.float32)
    k = np.zeros((1, 4, 4, 8), np.float32)
    with pytest.raises(gpukit.InvalidArgument, match="6 heads of input 'q'.*multiple"):
        run("attention", [q, k, k])
    k = np.zeros((1, 4, 2, 8), np.float32)
    with pytest.raises(gpukit.InvalidArgument, match="holds 5 for sequence 0; expected 0..4"):
        run("attention", [q, k, k, np.array([5], np.int32)])
    with pytest.raises(gpukit.InvalidArgument, match=r"kv_lengths' has shape \[2\]"):
        run("attention", [q, k, k, np.array([1, 2], np.int32)])


# ---- sample ------------------------------------------------------------------------------

def test_sample_greedy_is_argmax_and_seeded_draws_replay():
    logits = rng.standard_normal((16, 300)).astype(np.float32)
    got = run("sample", [logits], temperature=0.0)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, logits.argmax(-1))
    a = run("sample", [logits], temperature=0.8, top_k=20, top_p=0.9, seed=7, offset=3)
    b = run("sample", [logits], temperature=0.8, top_k=20, top_p=0.9, seed=7, offset=3)
    np.testing.assert_array_equal(a, b)
    top20 = np.argsort(-logits, axis=-1)[:, :20]
    assert all(a[r] in top20[r] for r in range(16))


def test_sample_refuses_bad_parameters():
    logits = np.zeros((1, 4), np.float32)
    with pytest.raises(gpukit.InvalidArgument, match=r"top_p' is 0; expected a value in \(0, 1\]"):
        run("sample", [logits], top_p=0.0)
    with pytest.raises(gpukit.InvalidArgument, match="temperature' is -1"):
        run("sample", [logits], temperature=-1.0)
    with pytest.raises(gpukit.InvalidArgument, match="top_k' is -2"):
        run("sample", [logits], top_k=-2)


def test_kv_cache_append_is_a_cast_into_a_view_of_the_cache():
    """No kv_append op: writing a step's k/v into the cache is `cast` (same dtype) into a
    strided view of it, which every op accepts as an output."""
    cache = np.zeros((2, 16, 2, 8), np.float32)
    new = rng.standard_normal((2, 3, 2, 8)).astype(np.float32)
    view = gpukit.from_numpy(cache[:, 5:8])
    gpukit.call("cast", [gpukit.asarray(new)], out=view)
    np.testing.assert_array_equal(cache[:, 5:8], new)
    assert not cache[:, :5].any() and not cache[:, 8:].any()
