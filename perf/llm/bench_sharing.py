#!/usr/bin/env python3
"""Decode as a Guaranteed task while a BestEffort task saturates the GPU (issue 30's sharing
target), in one process on the GPU machine.

    python3 perf/llm/bench_sharing.py [--shape llama-1b] [--sm 0.5] [--tokens 512]
                                      [--prompt 512] [--matmul 8192] [--json OUT.json]

Target: per-token p99 of the shared decode <= 1.3x the isolated one, and the BestEffort task
keeps >= 50% of its solo throughput.

The model is a random-weight bf16 Llama of the published shape (--shape llama-1b: Llama 3.2
1B), written as SafeTensors with its config.json by NumPy alone (speed does not depend on
the values) and loaded with gpukit.llm.
  decode    a Guaranteed task (--sm of the device's SMs, --memory) owns a session; after a
            --prompt token prefill, batch-1 greedy decode of --tokens tokens, each timed on
            the wall clock: one session call that steps the last token and draws the next
            (generate(max_new_tokens=1): the step, the sample op, the 4-byte copy back).
  hog       a BestEffort task in another thread runs bf16 --matmul^3 matmuls (C = A @ B,
            out= C) on its task stream back to back, waiting for its stream every few, and
            counts the completed ones.
Phases: (a) decode alone (isolated), (b) the hog alone for --hog-seconds (solo throughput),
(c) both at once, the hog's throughput taken over the decode's window. Reported: p50/p99
ms/token isolated and shared and their p99 ratio, the hog's TFLOP/s solo and shared and their
ratio, pass/fail against the two targets, and each task's SM partition, stream priority,
ops launched and time held by pacing (gpukit.task info and partition events).

No CUDA device: prints "skipped: no CUDA device" and exits 0. --device cpu with --shape tiny
runs every phase on the cpu device (a dry run of the script, not a measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

import gpukit
import gpukit.llm

# Published shapes (Llama 3.2 1B), and a tiny one for dry runs on the cpu device.
SHAPES = {
    "llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                     vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                     rope_theta=500000.0, tie_word_embeddings=True,
                     rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192}),
    "tiny": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=320,
                 max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=10000.0,
                 tie_word_embeddings=False),
}

P99_TARGET = 1.3        # shared p99 / isolated p99 at most
THROUGHPUT_TARGET = 0.5  # shared hog throughput / solo at least
BF16_ONE = 0x3F80        # 1.0 in bfloat16 bits
RANDOM_BLOCK = 1 << 22   # random values drawn per model (8 MiB), repeated through its weights


def llama_tensors(c: dict) -> dict:
    """HF Llama tensor names -> shapes."""
    h, kv = c["hidden_size"], c["num_key_value_heads"] * c["head_dim"]
    q = c["num_attention_heads"] * c["head_dim"]
    out = {"model.embed_tokens.weight": (c["vocab_size"], h), "model.norm.weight": (h,)}
    if not c["tie_word_embeddings"]:
        out["lm_head.weight"] = (c["vocab_size"], h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (c["intermediate_size"], h),
            p + "mlp.up_proj.weight": (c["intermediate_size"], h),
            p + "mlp.down_proj.weight": (h, c["intermediate_size"])})
    return out


def random_bf16(shape, rng) -> np.ndarray:
    """Random bf16 bits of magnitude in [2^-7, 2^-6), either sign: random mantissas and
    signs under one exponent, drawn as integers (no bf16 NumPy type needed). Activations stay
    finite through the layers."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    return (bits & np.uint16(0x807F)) | np.uint16(0x3C00)


def write_model(shape: str, folder: str, seed: int = 30) -> dict:
    """config.json and model.safetensors (bf16) of a random-weight Llama of `shape`."""
    c = SHAPES[shape]
    config = dict(c, architectures=["LlamaForCausalLM"], model_type="llama",
                  hidden_act="silu", attention_bias=False, mlp_bias=False,
                  bos_token_id=1, eos_token_id=2, torch_dtype="bfloat16")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tensors = llama_tensors(c)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(tensors):
        nbytes = int(np.prod(tensors[name])) * 2
        header[name] = {"dtype": "BF16", "shape": list(tensors[name]),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    # One block of random values, repeated through every matrix at a moving offset: drawing
    # all 1.2 G values would take a minute of host time, and speed does not depend on them.
    block = random_bf16((RANDOM_BLOCK,), np.random.default_rng(seed)).astype("<u2").tobytes()
    start = 0
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for name in sorted(tensors):
            count = int(np.prod(tensors[name]))
            if name.endswith("norm.weight"):
                f.write(np.full(count, BF16_ONE, dtype="<u2").tobytes())
                continue
            left = count * 2
            while left:
                piece = block[start:start + left]
                f.write(piece)
                left -= len(piece)
                start = (start + len(piece)) % len(block)
            start = (start + 2 * 7919) % len(block)  # the next tensor starts elsewhere
    return config


def percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def decode(model, task, prompt, tokens: int, warmup: int) -> list:
    """Per-token wall-clock seconds of `tokens` greedy decode steps of a fresh session of
    `task`, after a prefill of `prompt` and `warmup` untimed steps."""
    session = model.session(max_context=len(prompt) + warmup + tokens + 2, task=task)
    token = session.generate(prompt, max_new_tokens=1)[0]
    for _ in range(warmup):
        token = session.generate([token], max_new_tokens=1)[0]
    times = []
    for _ in range(tokens):
        t0 = time.perf_counter()
        token = session.generate([token], max_new_tokens=1)[0]
        times.append(time.perf_counter() - t0)
    del session
    return times


class Hog:
    """The BestEffort load: matmuls of n x n on a task's stream in a thread, until stop().
    `marks` holds (seconds, matmuls completed) each time the thread waited for its stream."""

    def __init__(self, name: str, device, n: int, dtype: str, per_wait: int):
        self.task = gpukit.task(name, qos="best_effort", device=device)
        self.n, self.dtype, self.per_wait, self.device = n, dtype, per_wait, device
        self.marks: list = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self):
        try:
            # `with` makes the task's stream this thread's current stream: the matmuls run
            # on it, charged to the task and paced as BestEffort.
            with self.task:
                a = gpukit.full((self.n, self.n), 0.01, dtype="float32",
                                device=self.device).astype(self.dtype)
                b = a.copy()
                c = gpukit.empty((self.n, self.n), dtype=self.dtype, device=self.device)
                gpukit.matmul(a, b, out=c)  # warm-up: dispatch, workspace
                self.task.stream.synchronize()
                done = 0
                self.marks.append((time.perf_counter(), done))
                self._ready.set()
                while not self._stop.is_set():
                    for _ in range(self.per_wait):
                        gpukit.matmul(a, b, out=c)
                    self.task.stream.synchronize()
                    done += self.per_wait
                    self.marks.append((time.perf_counter(), done))
        except BaseException as e:  # reported by stop()
            self.error = e
            self._ready.set()

    def start(self):
        self._thread.start()
        self._ready.wait()
        if self.error:
            raise self.error

    def stop(self):
        self._stop.set()
        self._thread.join()
        if self.error:
            raise self.error

    def tflops(self, t0: float, t1: float) -> float:
        """TFLOP/s over the marks inside [t0, t1] (the first and last such)."""
        inside = [m for m in self.marks if t0 <= m[0] <= t1]
        if len(inside) < 2:
            raise RuntimeError(f"{self.task.name}: fewer than two waits on its stream in a "
                               f"{t1 - t0:.3f} s window; lower --matmul or --hog-per-wait")
        (ta, na), (tb, nb) = inside[0], inside[-1]
        return 2.0 * self.n ** 3 * (nb - na) / (tb - ta) / 1e12


def task_summary(task) -> dict:
    info = task.info()
    partition = [e["text"] for e in task.events() if e["kind"] == "partition"]
    return {"qos": info["qos"], "state": info["state"], "sm_partition": info["sm_partition"],
            "stream_priority": info["stream_priority"], "ops_launched": info["ops_launched"],
            "throttle_count": info["throttle_count"],
            "throttled_ms": info["throttled_ns"] / 1e6, "partition_events": partition}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="llama-1b", choices=sorted(SHAPES))
    ap.add_argument("--sm", default="0.5",
                    help="the Guaranteed task's SMs: a fraction of the device's (0.5) or a "
                         "count (66); 0: no SM request")
    ap.add_argument("--memory", default="2GiB", help="the Guaranteed task's memory request")
    ap.add_argument("--tokens", type=int, default=512, help="timed decode tokens per phase")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens before decoding")
    ap.add_argument("--warmup", type=int, default=16, help="untimed decode steps first")
    ap.add_argument("--matmul", type=int, default=8192, help="the hog's matmul size n (n^3)")
    ap.add_argument("--hog-dtype", default="bf16")
    ap.add_argument("--hog-per-wait", type=int, default=4,
                    help="matmuls the hog queues between waits on its stream")
    ap.add_argument("--hog-seconds", type=float, default=3.0, help="the solo hog phase")
    ap.add_argument("--be-inflight", type=int, default=None,
                    help="gpukit.set_pacing best_effort_inflight (default: the device's)")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu for a dry run")
    ap.add_argument("--dtype", default="bf16", help="the model's dtype (bf16, f16, f32)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    if args.device.startswith("cuda") and not any(d.is_cuda for d in gpukit.devices()):
        print("bench_sharing: skipped: no CUDA device (this benchmark runs on the GPU machine;"
              " --device cpu --shape tiny is a dry run)")
        return 0
    device = gpukit.runtime().device(args.device)
    sm = float(args.sm) if "." in args.sm else int(args.sm)
    if not device.is_cuda:
        sm = 0  # the cpu device has no SMs to partition
    if device.is_cuda and args.be_inflight is not None:
        gpukit.set_pacing(device, best_effort_inflight=args.be_inflight)
    props = device.props
    print(f"device {device} ({props['sm_count']} SMs), shape {args.shape}, prompt "
          f"{args.prompt}, {args.tokens} tokens, hog {args.hog_dtype} {args.matmul}^3")

    guaranteed = gpukit.task("decode", qos="guaranteed", device=device, memory=args.memory,
                             sm=sm or None)
    guaranteed.wait(timeout=10)
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        config = write_model(args.shape, folder)
        model = gpukit.llm.load(folder, device=device, dtype=args.dtype)
        print(f"model written and loaded in {time.perf_counter() - t0:.1f} s: {model}")
    prompt = np.random.default_rng(31).integers(0, config["vocab_size"], args.prompt).tolist()

    # (a) decode alone
    isolated = decode(model, guaranteed, prompt, args.tokens, args.warmup)
    # (b) the hog alone
    solo = Hog("hog-solo", device, args.matmul, args.hog_dtype, args.hog_per_wait)
    solo.start()
    t_solo = time.perf_counter()
    time.sleep(args.hog_seconds)
    solo.stop()
    solo_tflops = solo.tflops(t_solo, time.perf_counter())
    # (c) both
    shared_hog = Hog("hog-shared", device, args.matmul, args.hog_dtype, args.hog_per_wait)
    shared_hog.start()
    t_start = time.perf_counter()
    shared = decode(model, guaranteed, prompt, args.tokens, args.warmup)
    t_end = time.perf_counter()
    shared_hog.stop()
    shared_tflops = shared_hog.tflops(t_start, t_end)

    ms = lambda s: s * 1e3  # noqa: E731
    row = {
        "device": str(device), "sm_count": props["sm_count"], "shape": args.shape,
        "prompt": args.prompt, "tokens": args.tokens, "matmul": args.matmul,
        "isolated_ms": {"p50": ms(percentile(isolated, 50)), "p99": ms(percentile(isolated, 99)),
                        "mean": ms(statistics.mean(isolated))},
        "shared_ms": {"p50": ms(percentile(shared, 50)), "p99": ms(percentile(shared, 99)),
                      "mean": ms(statistics.mean(shared))},
        "hog_tflops": {"solo": solo_tflops, "shared": shared_tflops},
        "tasks": {"decode": task_summary(guaranteed), "hog-solo": task_summary(solo.task),
                  "hog-shared": task_summary(shared_hog.task)},
    }
    row["p99_ratio"] = row["shared_ms"]["p99"] / row["isolated_ms"]["p99"]
    row["hog_ratio"] = shared_tflops / solo_tflops
    row["p99_pass"] = row["p99_ratio"] <= P99_TARGET
    row["hog_pass"] = row["hog_ratio"] >= THROUGHPUT_TARGET

    print(f"  {'decode':<10} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name in ("isolated", "shared"):
        r = row[name + "_ms"]
        print(f"  {name:<10} {r['p50']:>8.3f} {r['p99']:>8.3f} {r['mean']:>8.3f}")
    print(f"  hog TFLOP/s: solo {solo_tflops:.1f}, shared {shared_tflops:.1f}")
    verdict = lambda ok: "PASS" if ok else "FAIL"  # noqa: E731
    print(f"  p99 shared/isolated {row['p99_ratio']:.2f}x (target <= {P99_TARGET}x): "
          f"{verdict(row['p99_pass'])}")
    print(f"  hog shared/solo {row['hog_ratio']:.0%} (target >= {THROUGHPUT_TARGET:.0%}): "
          f"{verdict(row['hog_pass'])}")
    for name, t in row["tasks"].items():
        print(f"  task {name}: {t['qos']}, {t['state']}, SM partition {t['sm_partition']} "
              f"(0: none), stream priority {t['stream_priority']}, {t['ops_launched']} ops, "
              f"held by pacing {t['throttle_count']} times / {t['throttled_ms']:.1f} ms")
        for text in t["partition_events"]:
            print(f"    partition: {text}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(row, f, indent=1)
    del model
    if guaranteed.state not in ("Completed", "Failed", "Cancelled"):
        guaranteed.complete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
