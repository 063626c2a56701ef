"""Generates the cffi declarations from the public C headers (never copied by hand).

A small preprocessor, enough for gpukit.h (and the per-concept headers it includes) and
gpukit_dlpack.h: it strips comments, evaluates #if/#ifdef/#ifndef/#elif/#else/#endif with
nothing predefined (so neither __cplusplus nor _WIN32 nor GK_BUILDING_LIBRARY is set and
GK_API is empty), reads a quoted #include of a header beside the including one in place
(each header once) and drops the others (<stdint.h>, …), drops function-like macros, keeps object-like integer macros as cffi
``#define NAME value`` lines and substitutes them where cffi needs a constant
(array sizes such as ``shape[GK_MAX_DIMS]``).
"""
from __future__ import annotations

import os
import re

__all__ = ["cdef_from_headers"]

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_INT = re.compile(r"^\(?\s*([0-9]+)[uUlL]*\s*\)?$")
_SHIFT = re.compile(r"^\(\s*([0-9]+)[uUlL]*\s*<<\s*([0-9]+)[uUlL]*\s*\)$")


def _eval_condition(expr: str, defines: dict) -> bool:
    expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                  lambda m: " True " if (m.group(1) or m.group(2)) in defines else " False ",
                  expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    # Any remaining identifier is an undefined macro: 0, as in C.
    expr = re.sub(r"\b(?!True\b|False\b|and\b|or\b|not\b)[A-Za-z_]\w*\b",
                  lambda m: str(defines.get(m.group(0), 0)), expr)
    return bool(eval(expr, {"__builtins__": {}}, {}))  # noqa: S307 (header text only)


def _preprocess(text: str, defines: dict, folder: str = "", seen: set | None = None) -> list:
    text = _COMMENT.sub(" ", text)
    text = re.sub(r"\\\n", " ", text)
    out = []
    stack = []  # (this branch active, some branch taken, parent active)
    active = True
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            directive, _, rest = s[1:].strip().partition(" ")
            rest = rest.strip()
            if directive in ("if", "ifdef", "ifndef"):
                if directive == "ifdef":
                    cond = rest in defines
                elif directive == "ifndef":
                    cond = rest not in defines
                else:
                    cond = active and _eval_condition(rest, defines)
                stack.append((active, cond and active))
                active = active and cond
            elif directive == "elif":
                parent, taken = stack[-1]
                cond = parent and not taken and _eval_condition(rest, defines)
                stack[-1] = (parent, taken or cond)
                active = cond
            elif directive == "else":
                parent, taken = stack[-1]
                active = parent and not taken
                stack[-1] = (parent, True)
            elif directive == "endif":
                active, _ = stack.pop()
            elif directive == "define" and active:
                m = re.match(r"(\w+)(\(?)\s*(.*)$", rest)
                name, is_function, value = m.group(1), m.group(2), m.group(3).strip()
                if is_function:
                    continue
                defines[name] = value
                num = _INT.match(value)
                shift = _SHIFT.match(value)
                if num:
                    out.append(f"#define {name} {int(num.group(1))}")
                    defines[name] = int(num.group(1))
                elif shift:
                    v = int(shift.group(1)) << int(shift.group(2))
                    out.append(f"#define {name} {v}")
                    defines[name] = v
            elif directive == "include" and active and rest.startswith('"'):
                path = os.path.join(folder, rest.strip('"'))
                if os.path.isfile(path) and os.path.realpath(path) not in seen:
                    seen.add(os.path.realpath(path))
                    with open(path, encoding="utf-8") as f:
                        out += _preprocess(f.read(), defines, os.path.dirname(path), seen)
            elif directive == "error" and active:
                raise RuntimeError(f"header says #error {rest}")
            continue
        if active:
            out.append(line)
    return out


def cdef_from_headers(paths) -> str:
    """The cffi cdef text for the given headers, in order."""
    defines: dict = {}
    lines: list = []
    seen: set = set()
    for path in paths:
        if os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        with open(path, encoding="utf-8") as f:
            lines += _preprocess(f.read(), defines, os.path.dirname(path), seen)
    body = "\n".join(lines)
    body = re.sub(r"\bGK_API\b", "", body)
    # Substitute integer macros inside declarations (cffi accepts only literals there).
    ints = {k: v for k, v in defines.items() if isinstance(v, int)}
    decl_lines = []
    for line in body.splitlines():
        if line.startswith("#define"):
            decl_lines.append(line)
            continue
        for name, value in ints.items():
            if name in line:
                line = re.sub(rf"\b{name}\b", str(value), line)
        # cffi's enum parser wants plain integers: "1u << 0" → "1 << 0".
        line = re.sub(r"\b([0-9]+)[uU][lL]*\b", r"\1", line)
        decl_lines.append(line)
    return "\n".join(l for l in decl_lines if l.strip())


if __name__ == "__main__":  # python -m gpukit._cdef abi/include/gpukit/gpukit.h …
    import sys

    print(cdef_from_headers(sys.argv[1:] or [os.path.join("abi", "include", "gpukit", "gpukit.h")]))
