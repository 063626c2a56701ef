#!/usr/bin/env python3
"""Installs distributions that this Python already has into another site-packages folder,
file for file as their wheels installed them, each file checked against the sha256 its
wheel's RECORD gives.

    python3 tests/packaging/copy_installed_dist.py SITE_PACKAGES NAME [NAME ...]

The GPU machine cannot download the nvidia-* wheels (no network, and at 90-600 MB they do
not fit a carried folder), but its PyTorch environment has them installed. Copying their
recorded files with matching hashes gives a venv the same bytes in the same layout as
`pip install gpukit[cuda]` would, so check_wheel.sh --gpu tests the libraries NVIDIA ships
on PyPI rather than a toolkit's copies. Exits 1, naming the distribution, when one is not
installed or a file does not match its record.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import shutil
import sys


def sha256_record(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def copy_distribution(name: str, site: str) -> str:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(f"copy_installed_dist: {name} is not installed in {sys.executable}")
    copied = total = 0
    for f in dist.files or []:
        if "__pycache__" in f.parts or f.suffix == ".pyc" or str(f).startswith(".."):
            continue  # written by Python when imported, not part of the wheel
        src = str(f.locate())
        if f.hash is not None:
            got = sha256_record(src)
            if got != f"{f.hash.mode}={f.hash.value}":
                raise SystemExit(f"copy_installed_dist: {name}: {f} does not match its RECORD "
                                 f"({got} != {f.hash.mode}={f.hash.value})")
        dst = os.path.join(site, str(f))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
        copied += 1
        total += os.path.getsize(dst)
    if copied == 0:
        raise SystemExit(f"copy_installed_dist: {name} {dist.version} lists no files")
    return f"{name} {dist.version}: {copied} files, {total / 2**20:.0f} MiB, hashes match RECORD"


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    site = sys.argv[1]
    for name in sys.argv[2:]:
        print("copy_installed_dist: " + copy_distribution(name, site), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
