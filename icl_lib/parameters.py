"""A chapter's parameters, and what its validation cell uses besides :mod:`icl_lib.validate`'s
checks.

* :func:`renamed` -- a configuration validated by its own field names (``heads``) reports the
  chapter's parameter name instead (``grid_heads``), so that every error names what the reader set
  (chapter 9);
* :func:`chapter_parameters` -- a chapter's own parameters, read from its ``parameters`` cell;
* :func:`changed_parameters` -- which of them a run set to other values (a reader's re-run, for
  instance by papermill): its claims are then reported, not enforced (:class:`icl_lib.claims.Claims`).
"""

from __future__ import annotations

import ast
import json
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

__all__ = ["renamed", "chapter_parameters", "changed_parameters", "BOOK", "UNCHANGING"]

BOOK = Path(__file__).resolve().parents[1] / "book"  # the chapters of a source checkout
# parameters that choose where and in which profile a chapter runs, not what it claims
UNCHANGING = ("profile", "device")


def chapter_parameters(path: str | Path) -> dict:
    """Name -> value of a chapter's ``parameters`` cell (plain literals, one per line)."""
    nb = json.loads(Path(path).read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    params = {}
    for node in ast.parse("".join(cell["source"])).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{path}: the parameters cell holds {ast.unparse(node)!r}: accepted `name = literal`")
        params[node.targets[0].id] = ast.literal_eval(node.value)
    return params


def changed_parameters(chapter: str, namespace: Mapping, book: str | Path = BOOK) -> list[str]:
    """The parameters of ``chapter`` (its notebook's name) whose value in ``namespace`` (the
    chapter's ``globals()`` before its validation cell rebinds them) differs from its own
    parameters cell, ``profile`` and ``device`` aside.  Empty where the notebook is not found (an
    installed library without its book): the run is then taken to be the chapter's own."""
    path = Path(book) / f"{chapter}.ipynb"
    if not path.exists():
        return []
    own = chapter_parameters(path)
    return [name for name, value in own.items() if name not in UNCHANGING and name in namespace
            and _normal(namespace[name]) != _normal(value)]


def _normal(value):
    """A parameter's value for comparison: tuples as lists, an int equal to a float as that float."""
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


@contextmanager
def renamed(**names: str) -> Iterator[None]:
    """Inside the block, a :class:`ValueError` that names a parameter ``old`` (``old=...``,
    ``old[2]=...``) is raised again naming ``names[old]`` instead; any other error passes as it is."""
    try:
        yield
    except ValueError as err:
        m = re.match(r"([A-Za-z_]\w*)(?=[=\[ ])", str(err))
        if m and m.group(1) in names:
            raise ValueError(names[m.group(1)] + str(err)[m.end():]) from err
        raise
