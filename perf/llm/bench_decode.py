#!/usr/bin/env python3
"""Decode and prefill of decoder-only models, GPUkit against HF transformers, side by side in
one process on the GPU machine (issue 30's table; docs/kernels/llm.md keeps the results).

    python3 perf/llm/bench_decode.py [--models llama-3.2-1b,qwen2.5-0.5b] [--prompt 512]
                                     [--new 64] [--runs 3] [--batch 1] [--json OUT.json]
                                     [--gguf q8_0,q4_k]

Each model is built by transformers from its published configuration with random weights
(speed does not depend on the values), saved as SafeTensors, and loaded by both sides in
bf16 on the GPU. Per model and side:
  prefill   one forward pass over a prompt of --prompt random token ids (ours: a session's
            step; HF: model(ids) with a fresh cache), tokens/s;
  decode    --new greedy tokens after that prompt (ours: gk_session_generate; HF:
            generate(do_sample=False, min_new_tokens=max_new_tokens)), the prefill time
            subtracted, tokens/s and ms/token; ours twice: replaying decode graphs (the
            default) and op by op (GPUKIT_DECODE_GRAPHS=0), with whether the two give the
            same greedy tokens;
  roofline  the bytes a decode step must read (every weight once, tied embeddings once, and
            the KV cache at the mean context) per ms/token, as a fraction of this run's
            device-to-device copy bandwidth (read + write bytes / time of a 1 GiB copy).
With --gguf q8_0,q4_k (block-quantized weights, no HF side): per model and type, a GGUF file
of the model's shape with random weights (perf/llm/gguf_random.py: projections in the type,
the tied embedding f16) is loaded in bf16 twice, projections kept packed (GPUKIT_LLM_PACKED=1)
and dequantized at load (the default); decode tokens/s of both, the roofline of the
packed bytes a decode step reads (projections as stored, the tied head in bf16, the KV cache)
against this run's copy bandwidth, and where the two paths' greedy tokens first differ (the
dequantized path rounds every weight to bf16, the packed one reads the exact values: first-step
logits differ by about 1e-3 (q4) to 1e-2 (q8_0) relative on these random models, and near-ties
of random weights make early token differences expected).
With --batch N > 1, N sequences of --prompt distinct random ids decode together (ours: one
gk_batch, whose prompts are prefilled one by one and then step together; HF: generate over
an [N, prompt] batch), and decode tokens/s counts the tokens of all N sequences.
Timing: wall clock around calls that return to the host (both sides synchronise), warm-up
first, the median of --runs. Correctness: the first decode step's logits (ours vs HF,
relative Frobenius error) and the index where the greedy tokens first differ (random weights
give near-ties, so a late divergence is expected and not by itself an error).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

import gpukit
import gpukit.llm

# Published configurations (hidden sizes, heads, vocabularies, rope) of the shapes issue 30
# names; the weights are random.
SHAPES = {
    "llama-3.2-1b": dict(
        cls="LlamaForCausalLM", cfg="LlamaConfig", hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
        rope_theta=500000.0, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "qwen2.5-0.5b": dict(
        cls="Qwen2ForCausalLM", cfg="Qwen2Config", hidden_size=896, intermediate_size=4864,
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
        vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=True),
    "llama-3-8b": dict(
        cls="LlamaForCausalLM", cfg="LlamaConfig", hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        vocab_size=128256, max_position_embeddings=8192, rms_norm_eps=1e-5,
        rope_theta=500000.0, tie_word_embeddings=False),
}


def copy_bandwidth_gbs() -> float:
    """Device-to-device copy of 1 GiB: bytes read + written per second, median of 10."""
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    times = []
    for i in range(13):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) / 1e3)
    return 2 * src.numel() / statistics.median(times) / 1e9


def build_model(name: str, folder: str):
    spec = dict(SHAPES[name])
    cls = getattr(transformers, spec.pop("cls"))
    cfg = getattr(transformers, spec.pop("cfg"))(**spec, torch_dtype="bfloat16")
    torch.manual_seed(30)
    with torch.device("cuda"):
        model = cls(cfg).to(torch.bfloat16)
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model, cfg


def weight_bytes(model, cfg) -> int:
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if not cfg.tie_word_embeddings:
        # The input embedding is a gather of one row per token, not a full read.
        total -= model.get_input_embeddings().weight.numel() * 2
    return total


def kv_bytes(cfg, context: int) -> int:
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * context * 2


def timed(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(name: str, prompt_len: int, new: int, runs: int, copy_gbs: float) -> dict:
    row = {"model": name, "prompt": prompt_len, "new": new}
    with tempfile.TemporaryDirectory() as folder:
        hf, cfg = build_model(name, folder)
        rng = np.random.default_rng(30)
        prompt = rng.integers(0, cfg.vocab_size, prompt_len).tolist()
        ids = torch.tensor([prompt], device="cuda")

        # ---- HF transformers (eager, its default dynamic cache) ----
        with torch.inference_mode():
            hf_prefill = timed(lambda: hf(ids, use_cache=True), runs)
            hf_total = timed(lambda: hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                min_new_tokens=new, do_sample=False, pad_token_id=0), runs)
            hf_tokens = hf.generate(ids, attention_mask=torch.ones_like(ids),
                                    max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                    pad_token_id=0)[0, prompt_len:].tolist()
            hf_logits = hf(ids).logits[0, -1].float().cpu().numpy()

        # ---- GPUkit ----
        try:
            ours = gpukit.llm.load(folder, device="cuda", dtype="bf16")
        except gpukit.GpukitError as e:  # an architecture or option not served yet
            row["error"] = str(e)
            return row

        def our_prefill():
            ours.session(max_context=prompt_len + new + 1).step(prompt)

        def our_generate():
            return ours.session(max_context=prompt_len + new + 1).generate(
                prompt, max_new_tokens=new)

        our_prefill_s = timed(our_prefill, runs)
        our_total = timed(our_generate, runs)
        our_tokens = our_generate()
        our_logits = ours.session(max_context=prompt_len + 1).step(prompt)
        del ours

        # ---- GPUkit, every decode step op by op (no CUDA graphs) ----
        os.environ["GPUKIT_DECODE_GRAPHS"] = "0"
        try:
            eager = gpukit.llm.load(folder, device="cuda", dtype="bf16")
        finally:
            del os.environ["GPUKIT_DECODE_GRAPHS"]

        def eager_generate():
            return eager.session(max_context=prompt_len + new + 1).generate(
                prompt, max_new_tokens=new)

        eager_total = timed(eager_generate, runs)
        eager_tokens = eager_generate()
        del eager

    per_token_bytes = weight_bytes(hf, cfg) + kv_bytes(cfg, prompt_len + new // 2)
    del hf
    torch.cuda.empty_cache()
    for side, prefill_s, total_s in (("hf", hf_prefill, hf_total),
                                     ("ours", our_prefill_s, our_total),
                                     ("ours_op_by_op", our_prefill_s, eager_total)):
        decode_s = max(total_s - prefill_s, 1e-9) / new
        row[side] = {
            "prefill_tok_s": prompt_len / prefill_s,
            "decode_tok_s": 1 / decode_s,
            "ms_per_token": decode_s * 1e3,
            "roofline": per_token_bytes / decode_s / 1e9 / copy_gbs,
        }
    row["decode_ratio"] = row["ours"]["decode_tok_s"] / row["hf"]["decode_tok_s"]
    row["prefill_ratio"] = row["ours"]["prefill_tok_s"] / row["hf"]["prefill_tok_s"]
    row["logits_rel_err"] = float(np.linalg.norm(our_logits - hf_logits) /
                                  np.linalg.norm(hf_logits))
    first = next((i for i, (a, b) in enumerate(zip(our_tokens, hf_tokens)) if a != b), None)
    row["greedy_first_difference"] = first
    row["graph_tokens_equal_op_by_op"] = our_tokens == eager_tokens
    return row


def bench_batch(name: str, batch: int, prompt_len: int, new: int, runs: int) -> dict:
    row = {"model": name, "batch": batch, "prompt": prompt_len, "new": new}
    with tempfile.TemporaryDirectory() as folder:
        hf, cfg = build_model(name, folder)
        rng = np.random.default_rng(31)
        prompts = rng.integers(0, cfg.vocab_size, (batch, prompt_len))
        ids = torch.tensor(prompts, device="cuda")
        with torch.inference_mode():
            hf_prefill = timed(lambda: hf(ids, use_cache=True), runs)
            hf_total = timed(lambda: hf.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                min_new_tokens=new, do_sample=False, pad_token_id=0), runs)
        del hf
        torch.cuda.empty_cache()
        ours = gpukit.llm.load(folder, device="cuda", dtype="bf16")
        lists = [p.tolist() for p in prompts]

        def our_prefill():
            for p in lists:
                ours.session(max_context=prompt_len + new + 1).step(p)

        def our_generate():
            b = ours.batch(max_context=prompt_len + new + 1)
            for p in lists:
                b.add(p, max_new_tokens=new)
            while b.step():
                pass

        our_prefill_s = timed(our_prefill, runs)
        our_total = timed(our_generate, runs)
    for side, prefill_s, total_s in (("hf", hf_prefill, hf_total),
                                     ("ours", our_prefill_s, our_total)):
        row[side] = {"decode_tok_s": batch * new / max(total_s - prefill_s, 1e-9)}
    row["decode_ratio"] = row["ours"]["decode_tok_s"] / row["hf"]["decode_tok_s"]
    return row


def bench_gguf(name: str, quant: str, prompt_len: int, new: int, runs: int,
               copy_gbs: float) -> dict:
    """Decode of a random-weight GGUF of the model's shape, packed against dequantized."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gguf_random
    spec = SHAPES[name]
    row = {"model": name, "quant": quant, "prompt": prompt_len, "new": new}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.{quant}.gguf")
        weights_read = gguf_random.write_model(path, spec, quant)
        head_dim = spec.get("head_dim") or spec["hidden_size"] // spec["num_attention_heads"]
        kv = (2 * spec["num_hidden_layers"] * spec["num_key_value_heads"] * head_dim *
              (prompt_len + new // 2) * 2)
        prompt = np.random.default_rng(30).integers(0, spec["vocab_size"], prompt_len).tolist()
        results = {}
        for side, env in (("packed", "1"), ("dequantized", None)):
            if env:
                os.environ["GPUKIT_LLM_PACKED"] = env
            try:
                model = gpukit.llm.load(path, device="cuda", dtype="bf16")
            except gpukit.GpukitError as e:
                row["error"] = f"{side}: {e}"
                return row
            finally:
                os.environ.pop("GPUKIT_LLM_PACKED", None)

            def prefill():
                model.session(max_context=prompt_len + new + 1).step(prompt)

            def generate():
                return model.session(max_context=prompt_len + new + 1).generate(
                    prompt, max_new_tokens=new)

            prefill_s = timed(prefill, runs)
            total_s = timed(generate, runs)
            tokens = generate()
            logits = model.session(max_context=prompt_len + 1).step(prompt)
            del model
            decode_s = max(total_s - prefill_s, 1e-9) / new
            results[side] = (tokens, logits)
            row[side] = {"prefill_tok_s": prompt_len / prefill_s, "decode_tok_s": 1 / decode_s,
                         "ms_per_token": decode_s * 1e3}
        row["packed"]["bytes_per_token"] = weights_read + kv
        row["packed"]["roofline"] = (weights_read + kv) / (row["packed"]["ms_per_token"] / 1e3) \
            / 1e9 / copy_gbs
        (ta, la), (tb, lb) = results["packed"], results["dequantized"]
        row["logits_rel_err"] = float(np.linalg.norm(la - lb) / np.linalg.norm(lb))
        row["greedy_first_difference"] = next(
            (i for i, (a, b) in enumerate(zip(ta, tb)) if a != b), None)
        row["decode_ratio"] = row["packed"]["decode_tok_s"] / row["dequantized"]["decode_tok_s"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama-3.2-1b,qwen2.5-0.5b")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--gguf", help="block-quantized types to bench from GGUF files "
                    "(q8_0, q4_0, q4_1, q4_k; comma-separated), instead of bf16 against HF")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_decode: no CUDA device; this benchmark runs on the GPU machine")
        return 0
    copy_gbs = copy_bandwidth_gbs()
    print(f"device {torch.cuda.get_device_name()}, copy {copy_gbs:.0f} GB/s, "
          f"transformers {transformers.__version__}, torch {torch.__version__}")
    rows = []
    for name in args.models.split(",") if args.gguf else []:
        for quant in args.gguf.split(","):
            row = bench_gguf(name, quant, args.prompt, args.new, args.runs, copy_gbs)
            rows.append(row)
            if "error" in row:
                print(f"{name} {quant}: gpukit could not load it: {row['error']}")
                continue
            p, d = row["packed"], row["dequantized"]
            print(f"{name} {quant}: prompt {args.prompt}, {args.new} new tokens, bf16 activations")
            print(f"  packed      decode {p['decode_tok_s']:8.1f} tok/s {p['ms_per_token']:7.2f} "
                  f"ms/token, {p['bytes_per_token'] / 1e6:.0f} MB/token, roofline "
                  f"{p['roofline']:.1%}; prefill {p['prefill_tok_s']:.0f} tok/s")
            print(f"  dequantized decode {d['decode_tok_s']:8.1f} tok/s {d['ms_per_token']:7.2f} "
                  f"ms/token; prefill {d['prefill_tok_s']:.0f} tok/s")
            print(f"  packed/dequantized decode {row['decode_ratio']:.2f}x; first-step logits rel "
                  f"err {row['logits_rel_err']:.2e}; greedy tokens first differ at "
                  f"{row['greedy_first_difference']}")
    for name in args.models.split(",") if not args.gguf else []:
        if args.batch > 1:
            row = bench_batch(name, args.batch, args.prompt, args.new, args.runs)
            rows.append(row)
            print(f"{name}: batch {args.batch}, prompt {args.prompt}, {args.new} new tokens each,"
                  f" bf16: decode tok/s hf {row['hf']['decode_tok_s']:.0f}, ours "
                  f"{row['ours']['decode_tok_s']:.0f}, ours/hf {row['decode_ratio']:.2f}x")
            continue
        row = bench(name, args.prompt, args.new, args.runs, copy_gbs)
        rows.append(row)
        if "error" in row:
            print(f"{name}: gpukit could not load it: {row['error']}")
            continue
        print(f"{name}: prompt {args.prompt}, {args.new} new tokens, bf16")
        print(f"  {'side':<13} {'prefill tok/s':>14} {'decode tok/s':>13} {'ms/token':>9} "
              f"{'roofline':>9}")
        for side in ("hf", "ours", "ours_op_by_op"):
            r = row[side]
            print(f"  {side:<13} {r['prefill_tok_s']:>14.0f} {r['decode_tok_s']:>13.1f} "
                  f"{r['ms_per_token']:>9.2f} {r['roofline']:>8.1%}")
        print(f"  decode graphs: {row['ours']['decode_tok_s'] / row['ours_op_by_op']['decode_tok_s']:.2f}x"
              f" the op-by-op steps; greedy tokens identical: {row['graph_tokens_equal_op_by_op']}")
        print(f"  ours/hf: decode {row['decode_ratio']:.2f}x, prefill "
              f"{row['prefill_ratio']:.2f}x; first-step logits rel err "
              f"{row['logits_rel_err']:.2e}; greedy tokens first differ at "
              f"{row['greedy_first_difference']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_gbs": copy_gbs, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
