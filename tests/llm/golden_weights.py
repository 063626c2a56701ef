#!/usr/bin/env python3
"""Writes the weights of the golden models (tests/llm/golden/<name>/model.safetensors) from
their weights.json: they are not stored in the repository, each is made again from a seed.

    python3 tests/llm/golden_weights.py [name ...]   # write what is missing or stale

weights.json (written by make_golden.py) names the seed, the two scales and every tensor,
HF name and shape. Tensors are drawn in name order from one NumPy PCG64 generator
(np.random.default_rng(seed), whose standard normal stream NumPy keeps stable across
versions): a norm weight is 1 + norm_noise * N(0, 1), anything else (matrices, embeddings,
biases) weight_std * N(0, 1), drawn in float64 and stored as float32.

Needs NumPy only (ctest runs this before the llm tests: see tests/llm/CMakeLists.txt). The
file records the SHA-256 of the weights.json it came from, so a changed weights.json is
written again; the write goes through a temporary file and a rename, so test processes
running at once never read half a file.
"""
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
_STAMP = "weights_json_sha256"


def golden_names(golden_dir=GOLDEN_DIR):
    """The folders of golden_dir that hold a weights.json."""
    return sorted(d for d in os.listdir(golden_dir)
                  if os.path.isfile(os.path.join(golden_dir, d, "weights.json")))


def is_norm_weight(name):
    return name.endswith(".weight") and (
        "norm" in name or ".ln_" in name or name.endswith("ln_f.weight")
    )


def make_weights(spec):
    """{name: float32 array} for a weights.json's contents."""
    rng = np.random.default_rng(spec["seed"])
    out = {}
    for name, shape in sorted((n, tuple(s)) for n, s in spec["tensors"]):
        noise = rng.standard_normal(shape)
        if is_norm_weight(name):
            out[name] = (1.0 + spec["norm_noise"] * noise).astype(np.float32)
        else:
            out[name] = (spec["weight_std"] * noise).astype(np.float32)
    return out


def _safetensors_bytes(tensors, metadata):
    """A SafeTensors file of float32 tensors, in name order."""
    header, offset = {"__metadata__": metadata}, 0
    for name in sorted(tensors):
        t = tensors[name]
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    data = b"".join(np.ascontiguousarray(tensors[n], dtype="<f4").tobytes()
                    for n in sorted(tensors))
    return len(text).to_bytes(8, "little") + text + data


def _stamp_of(path):
    """The weights.json hash recorded in a model.safetensors, or None."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        return header.get("__metadata__", {}).get(_STAMP)
    except (OSError, ValueError):
        return None


def ensure(names=None, golden_dir=GOLDEN_DIR):
    """Writes golden_dir/<name>/model.safetensors for each name (default: every golden
    model) unless it is already there for the current weights.json. Returns the names
    written."""
    written = []
    for name in names or golden_names(golden_dir):
        folder = os.path.join(golden_dir, name)
        with open(os.path.join(folder, "weights.json"), "rb") as f:
            raw = f.read()
        digest = hashlib.sha256(raw).hexdigest()
        target = os.path.join(folder, "model.safetensors")
        if _stamp_of(target) == digest:
            continue
        blob = _safetensors_bytes(make_weights(json.loads(raw)),
                                  {"format": "pt", _STAMP: digest})
        fd, tmp = tempfile.mkstemp(prefix=".model.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would be unlike every other test file
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        written.append(name)
    return written


def main(argv):
    written = ensure(argv or None)
    print(f"golden weights: wrote {', '.join(written) if written else 'nothing (up to date)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
