"""The library's import graph: no module imports itself through others, and each layer imports only
from the layers above it (the README's table and ``icl_lib/__init__.py``'s list): the base (the
claims machinery, ``claims/``, below the chapters' claims as data, ``claimsets/``), then
``engine/``, then ``paper1/`` and ``paper2/`` (neither from the other), then ``figures/``, then
``setups/`` (each chapter's setup, which declares its runs with the papers' builders), then
``chapters/`` (each chapter's entry point, which gives its chapter the figures), then ``book/`` (the book's plan, execution,
records and Sphinx extension), then ``tools/`` (the command line).  Every import counts, also one made inside a function.

``python tests/test_layers.py`` prints the graph's cycles and layer violations (none) and the
modules' sizes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "icl_lib"
# anything else is the base, 0, but the chapters' claims as data (claimsets/), which the claims
# machinery (claims/, in the base) never imports; the package itself (icl_lib/__init__.py)
# gathers the base and the engine
RANK = {"claimsets": 0.5, "engine": 1, "package": 1, "paper1": 2, "paper2": 2, "figures": 3, "setups": 3.5,
        "chapters": 4, "book": 5, "tools": 6}


def module_of(path: Path) -> str:
    parts = path.relative_to(LIB.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file(module: str) -> Path | None:
    base = LIB.parent / Path(*module.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def imports_of(path: Path) -> set[str]:
    """The icl_lib modules that the module at ``path`` imports (``from P import m`` of a submodule
    ``m`` counts as an import of ``P.m``)."""
    package = module_of(path) if path.name == "__init__.py" else module_of(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "icl_lib"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            if module.split(".")[0] != "icl_lib":
                continue
            for a in node.names:
                sub = f"{module}.{a.name}"
                found.add(sub if _file(sub) is not None else module)
    return {m for m in found if _file(m) is not None}


def graph() -> dict[str, set[str]]:
    return {module_of(p): imports_of(p) for p in sorted(LIB.rglob("*.py")) if "__pycache__" not in p.parts}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``g`` (each found once, as the path that closes it)."""
    found, state, stack = [], {}, []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(g.get(v, ())):
            if state.get(w) == 1:
                found.append(stack[stack.index(w):] + [w])
            elif w not in state:
                visit(w)
        stack.pop()
        state[v] = 2

    for v in sorted(g):
        if v not in state:
            visit(v)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    return parts[1] if len(parts) > 2 or parts[1] in RANK else "base"


def violations(g: dict[str, set[str]]) -> list[str]:
    """Imports of a module from a layer below its own, or between paper1 and paper2 (``__main__``,
    the command line's entry point, is left out)."""
    out = []
    for m, deps in g.items():
        if m == "icl_lib.__main__":
            continue
        for d in deps:
            a, b = layer(m), layer(d)
            if RANK.get(b, 0) > RANK.get(a, 0) or {a, b} == {"paper1", "paper2"}:
                out.append(f"{m} ({a}) imports {d} ({b})")
    return sorted(out)


def test_the_library_has_no_import_cycles():
    assert cycles(graph()) == []


def test_each_layer_imports_only_from_the_layers_above_it():
    assert violations(graph()) == []


if __name__ == "__main__":
    g = graph()
    print(f"{len(g)} modules, {sum(map(len, g.values()))} imports between them")
    print("cycles:", cycles(g) or "none")
    print("layer violations:", violations(g) or "none")
    sizes = sorted(((len(p.read_text().splitlines()), str(p.relative_to(LIB.parent)))
                    for p in LIB.rglob("*.py") if "__pycache__" not in p.parts), reverse=True)
    print("largest modules:", ", ".join(f"{p} {n}" for n, p in sizes[:5]))


def test_no_module_of_the_project_is_over_450_lines():
    """The library (the book's machinery and Sphinx extension included) and its tests: a module
    that outgrew 450 lines is split by topic."""
    root = LIB.parent
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines())
             for folder in (LIB, root / "tests") for p in folder.rglob("*.py") if "__pycache__" not in p.parts}
    assert not {p: n for p, n in sizes.items() if n > 450}


def device_defaults() -> list[str]:
    """``module.function`` of every function below the chapters (their layer ranks under
    ``chapters/``) whose ``device`` defaults to ``"auto"``: a choice of device made for the caller.
    The chapters resolve their device once (their setup's execution) and hand it down."""
    out = []
    for p in sorted(LIB.rglob("*.py")):
        m = module_of(p)
        if "__pycache__" in p.parts or RANK.get(layer(m), 0) >= RANK["chapters"]:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
                if any(arg.arg == "device" and isinstance(d, ast.Constant) and d.value == "auto" for arg, d in pairs):
                    out.append(f"{m}.{node.name}")
    return out


def test_no_function_below_the_chapters_chooses_a_device_for_its_caller():
    assert [f for f in device_defaults() if not f.startswith("icl_lib.claims.")] == []


def test_the_claims_take_the_chapters_resolved_device():
    assert [f for f in device_defaults() if f.startswith("icl_lib.claims.")] == []


def test_the_one_description_of_the_layers_lists_them_in_the_order_the_imports_follow():
    """book/engine.md's table of the library (the README and the package's docstring point to it):
    every layer of :data:`RANK` once, in rank order, and every folder of the library in it."""
    text = (LIB.parent / "book" / "engine.md").read_text()
    table = text[text.index("| layer | module | responsibility |"):].split("\n\n")[0].splitlines()[2:]
    layers = [row.split("|")[1].strip().strip("`").rstrip("/") for row in table]
    listed = [name for name in layers if name]
    assert listed == sorted(listed, key=lambda name: RANK.get(name, 0)), listed
    assert set(listed) == {"base"} | (set(RANK) - {"package"}), listed
    folders = {p.name for p in LIB.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert all(f"`{f}/`" in "\n".join(table) for f in folders), folders
