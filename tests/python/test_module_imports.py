"""The package's modules form no import cycle: each imports on its own, in a fresh
interpreter, without gpukit/__init__.py having imported the rest first, and the module-level
imports between them form a directed acyclic graph."""
import ast
import os
import subprocess
import sys

import pytest

import gpukit

PACKAGE_DIR = os.path.dirname(os.path.abspath(gpukit.__file__))
MODULES = sorted(f[:-3] for f in os.listdir(PACKAGE_DIR)
                 if f.endswith(".py") and f != "__init__.py")

# Registers an empty `gpukit` package over the package's folder, so importing one module
# runs that module and what it imports, and nothing of gpukit/__init__.py.
IMPORT_ALONE = """
import importlib, sys, types
package = types.ModuleType("gpukit")
package.__path__ = [sys.argv[1]]
sys.modules["gpukit"] = package
importlib.import_module("gpukit." + sys.argv[2])
loaded = sorted(n for n in sys.modules if n.startswith("gpukit."))
print(" ".join(loaded))
"""


def module_level_imports(name: str) -> set:
    """The package modules `name` imports at module level (not inside functions)."""
    with open(os.path.join(PACKAGE_DIR, name + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    nodes = list(tree.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.If, ast.Try)):  # `try: import x` and `if …: import x`
            nodes += node.body + node.orelse + getattr(node, "handlers", []) \
                + getattr(node, "finalbody", [])
        elif isinstance(node, ast.ExceptHandler):
            nodes += node.body
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpukit."):
            found.add(node.module.split(".")[1])
    return found & set(MODULES)


def test_the_package_has_private_modules_to_check():
    assert {"_array", "_call", "_dtypes", "_creation", "_operators", "jit"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_alone_in_a_fresh_interpreter(name):
    r = subprocess.run([sys.executable, "-c", IMPORT_ALONE, PACKAGE_DIR, name],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"import gpukit.{name} alone failed:\n{r.stderr}"
    assert f"gpukit.{name}" in r.stdout.split()


def test_module_level_imports_form_no_cycle():
    graph = {name: module_level_imports(name) for name in MODULES}
    assert graph["_call"] >= {"_array", "_dtypes"}, "the import scan finds the imports"
    done, on_path = set(), []

    def visit(name):
        if name in on_path:
            cycle = on_path[on_path.index(name):] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        on_path.append(name)
        for dep in sorted(graph[name]):
            visit(dep)
        on_path.pop()
        done.add(name)

    for name in MODULES:
        visit(name)
