"""Lists every shared object of a gpukit wheel with what it needs and its RUNPATH, and fails
when one needs a library that is neither in the wheel, nor a base system library manylinux
allows, nor one of the NVIDIA libraries given on the command line (found at run time), or
when a RUNPATH points outside the wheel (a build folder).

usage: python inspect_wheel.py WHEEL [NVIDIA_SONAME ...]
"""
import os
import sys
import tempfile
import zipfile

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

# The libraries every manylinux policy lets a wheel take from the system (auditwheel's
# manylinux-policy.json lists libz.so.1 in each of them too).
BASE = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
        "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "libutil.so.1",
        "libresolv.so.2", "libnsl.so.1", "libz.so.1"}


def dynamic(path):
    needed, runpath, soname = [], [], None
    with open(path, "rb") as f:
        for section in ELFFile(f).iter_sections():
            if not isinstance(section, DynamicSection):
                continue
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)
                elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                    runpath += (tag.runpath if tag.entry.d_tag == "DT_RUNPATH"
                                else tag.rpath).split(":")
                elif tag.entry.d_tag == "DT_SONAME":
                    soname = tag.soname
    return needed, runpath, soname


def main():
    wheel, nvidia = sys.argv[1], set(sys.argv[2:])
    problems = []
    with tempfile.TemporaryDirectory() as root:
        zipfile.ZipFile(wheel).extractall(root)
        objects = []
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        objects.append(path)
        shipped = {os.path.basename(p) for p in objects}
        shipped |= {dynamic(p)[2] for p in objects} - {None}
        for path in sorted(objects):
            rel = os.path.relpath(path, root)
            needed, runpath, _ = dynamic(path)
            outside = [n for n in needed if n not in BASE]
            print(f"{rel}: {os.path.getsize(path) // 1024} KiB; needs "
                  f"{', '.join(outside) or 'base libraries only'}; "
                  f"RUNPATH {':'.join(runpath) or '(none)'}")
            for n in outside:
                if n not in shipped and n not in nvidia:
                    problems.append(f"{rel} needs {n}, which the wheel does not carry")
            for r in runpath:
                if r and not r.startswith("$ORIGIN"):
                    problems.append(f"{rel} has RUNPATH {r} outside the wheel")
            if any(n.startswith("libcudart") for n in needed):
                problems.append(f"{rel} needs the shared CUDA runtime; link cudart statically")
    for p in problems:
        print("inspect_wheel.py: " + p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
