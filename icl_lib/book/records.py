"""Recorded chapter runs: every chapter's ``paper`` profile executed once and its claims committed.

Chapter 8 (paper 2) trains no network, so the run store has nothing to give it: its ``paper``
profile is computation on tiny matrices (longer oracles, more problems, more iterations), about
an hour and a half on one core of a CPU here, which would double CI's book build.  So it is
executed once, by ``python -m icl_lib record run 08`` (``make paper-records``), and what it
measured is committed to ``results/records/<profile>/<chapter>.json``: every claim with its
verdict, interval and rule (the JSON ``Claims.report`` writes), the glued numbers of its text, and
the provenance (device, versions, date, wall time, command); its executed notebook is kept beside
it and the published book serves it.

The other chapters' ``paper`` profiles are evaluated from the run store in seconds to minutes, so
the published book executes them; their records keep the claims only (no notebook), so that a
build of the ``quick`` profile shows the paper's verdict beside each of its own
(``python -m icl_lib record run all``).

A record holds only while the code that decided its claims is unchanged.  It carries a
fingerprint of that code (:func:`fingerprint`): the chapter's code cells (not its prose), the
library modules the chapter's computations and rules run (:data:`RECORDED`), the profile's
settings of its experiments and the torch version.  The book's dashboard shows a current record
beside the build's own verdicts and the status page lists it; a stale one is shown as stale with
the parts that changed, never with its verdicts, and a test (``tests/tools/test_records.py``)
fails until it is recorded again.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from ..setups import DynamicsSetup, PhaseDiagramSetup, ProblemSetup
from ..setups.convergence import ConvergenceSetup
from ..setups.ode import OdeSetup
from ..claimsets import modules
from ..definitions import DEFINITIONS, ENV, label
from ..engine.profiles import SETTINGS
from ..validate import check_choice

__all__ = ["ROOT", "RECORDED", "Recorded", "NOT_DECIDING", "TRAINING_ONLY", "record_path", "fingerprint", "load",
           "status", "record", "select", "select_many", "deciding_modules", "modules_of", "imported_modules",
           "import_closure", "describe", "main_record",
           "notebook_path", "served", "alternatives_of"]

ROOT = Path(__file__).resolve().parents[2]  # the project checkout: book/, icl_lib/, results/


@dataclass(frozen=True)
class Recorded:
    """A chapter whose run in ``profile`` is recorded: the library modules (paths under
    ``icl_lib/``; ``None``: every module that computes or decides (:func:`deciding_modules`) but
    those under the folders ``excluded``) and the settings entries of
    :data:`~icl_lib.engine.profiles.SETTINGS` whose change makes its record stale, whether the
    executed notebook is kept and served by the book build (``notebook``), and the measurement
    definitions (:mod:`icl_lib.definitions`) under whose alternatives the chapter is executed
    again, its record keeping each claim's verdict under each (``definitions``)."""

    profile: str
    modules: tuple[str, ...] | None
    settings: tuple[str, ...]
    notebook: bool = False
    excluded: tuple[str, ...] = ()
    definitions: tuple[str, ...] = ()


# Chapter 8 (paper 2): its experiments (icl_lib.paper2), the statistics and rules of its claims
# (stats/, claims), the seeds (seeding), the parameter checks (validate), its setup and sizes
# (setups.convergence, setups.base), its entry point (chapters.convergence) and the figures it
# draws (figures.curves, rates, style: the book serves the recorded notebook's figures).  The other
# modules it imports pick the device or draw no figure of this chapter.  A test checks that these
# cover every icl_lib module that paper2 and those figures import (engine.profiles is covered by
# the settings entry it reads).
RECORDED: dict[str, Recorded] = {
    ConvergenceSetup.chapter: Recorded(
        profile="paper",
        modules=("paper2/__init__.py", "paper2/algorithms.py", "paper2/data.py", "paper2/dimension.py",
                 "paper2/experiment_fits.py", "paper2/experiments.py", "paper2/fits.py", "paper2/lemmas.py",
                 "paper2/loss.py", "paper2/manifold.py", "paper2/monte_carlo.py", "paper2/regulariser.py",
                 "stats/__init__.py", "stats/combine.py", "stats/decide.py",
                 "stats/estimate.py", "stats/intervals.py", "stats/resample.py", "claims/__init__.py",
                 "claims/decision.py", "claims/findings.py", "claims/multiplicity.py", "claims/report.py",
                 "claims/rules.py", "claims/spec.py", "claims/words.py", "claimsets/__init__.py", "claimsets/convergence.py",
                 "seeding.py", "validate.py", "parameters.py", "setups/base.py", "setups/convergence.py",
                 "chapters/convergence.py", "definitions.py",
                 "figures/curves.py", "figures/rates.py", "figures/style.py"),
        settings=(),
        notebook=True,
    ),
}
# Paper 1's chapters and chapter 9: their claims, fingerprinted by every deciding module but paper
# 2's and chapter 8's entry point (none of them imports them; a test checks).  Chapter 9's executed notebook is kept and served
# too: its descent from every trapped end point of the paper profile takes about half an hour on
# one core, longer than the whole book build of the others.
# The chapters that read trained circuits are executed again under each alternative of the
# definitions of a live head and of the form (3.1); chapter 3, which reads the form along training,
# also under the band's.
_CIRCUITS = ("live-head", "live-tol", "shape-tol")
for _name in (c for c in modules() if c not in RECORDED):
    RECORDED[_name] = Recorded(profile="paper", modules=None, settings=("paper1.train",),
                               excluded=("paper2/", "chapters/convergence.py", "setups/convergence.py"),
                               notebook=_name == PhaseDiagramSetup.chapter,
                               definitions=(() if _name in (ProblemSetup.chapter, OdeSetup.chapter) else
                                            _CIRCUITS + ("kind-band",) if _name == DynamicsSetup.chapter
                                            else _CIRCUITS))
RECORDED = dict(sorted(RECORDED.items()))
# The library's folders that neither compute a chapter's numbers nor decide its claims: the book's
# machinery (book/: its plan, execution, records and Sphinx extension), the command line (and
# `python -m icl_lib`) and the benchmark, the figures (a claims-only record shows no figure), and
# the engine's training-only parts: the fused CPU kernels and the choice of device and backend.  A
# recorded chapter evaluates the runs of a complete run store, whose keys carry the model code's
# version (a change of the trained numbers makes every stored run stale, and the chapter is then
# published in quick until they are trained again); the kernels that trained them run no step there.
TRAINING_ONLY = ("engine/fused", "engine/execution.py")
NOT_DECIDING = ("book/", "tools/", "figures/", "__main__.py", *TRAINING_ONLY)


def _root(root) -> Path:
    return Path(root) if root is not None else ROOT


def deciding_modules(root: str | Path | None = None) -> tuple[str, ...]:
    """Every module of ``icl_lib`` (paths under it) except those of :data:`NOT_DECIDING`."""
    base = _root(root) / "icl_lib"
    paths = (str(p.relative_to(base)) for p in base.rglob("*.py"))
    return tuple(sorted(p for p in paths if not p.startswith(NOT_DECIDING) and "__pycache__" not in p))


def _module_file(base: Path, parts: list[str]) -> Path | None:
    cand = base.joinpath(*parts) if parts else base
    for path in (cand.with_suffix(".py"), cand / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(path: Path, base: Path) -> set[str]:
    """The modules of ``icl_lib`` (paths under ``base``, its folder) that the module at ``path``
    imports, anywhere in it (inside functions too): ``from .x import y`` names ``x/y.py`` where
    ``y`` is a submodule, ``x.py`` (or ``x/__init__.py``) otherwise.  Each file is read once per
    version of it (its size and modification time), however many chapters' closures pass it."""
    st = path.stat()
    return set(_imported_modules(str(path), str(base), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=None)
def _imported_modules(path_text: str, base_text: str, _mtime_ns: int, _size: int) -> frozenset[str]:
    path, base = Path(path_text), Path(base_text)
    pkg = list(path.relative_to(base).parent.parts)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = pkg[: len(pkg) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "icl_lib":
                parts = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                target = _module_file(base, parts + [alias.name]) or _module_file(base, parts)
                if target is not None:
                    found.add(str(target.relative_to(base)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "icl_lib":
                    target = _module_file(base, alias.name.split(".")[1:])
                    if target is not None:
                        found.add(str(target.relative_to(base)))
    return frozenset(found)


def import_closure(starts, root: str | Path | None = None) -> set[str]:
    """The modules ``starts`` (paths under ``icl_lib/``) and every module they import, at any depth."""
    base = _root(root) / "icl_lib"
    todo, seen = [s for s in starts if (base / s).is_file()], set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo += [i for i in imported_modules(base / m, base) if i not in seen]
    return seen


def modules_of(chapter: str, root: str | Path | None = None) -> tuple[str, ...]:
    """The library modules whose change makes ``chapter``'s record stale: those declared in
    :data:`RECORDED`, or every module the chapter's code can run -- its entry point
    (``chapters/<topic>.py``, the one module a chapter imports), its claims' declarations and the
    claims machinery, and every module they import at any depth -- but :data:`NOT_DECIDING` (the
    figures decide a record whose executed notebook the book serves)."""


    name = select(chapter)
    spec = RECORDED[name]
    if spec.modules is not None:
        return spec.modules
    topic = modules()[name]
    mods = import_closure([f"chapters/{topic}.py", f"claimsets/{topic}.py", "claimsets/__init__.py",
                           "claims/__init__.py"], root)
    keep = (lambda m: not m.startswith(NOT_DECIDING) or (spec.notebook and m.startswith("figures/")))
    return tuple(sorted(m for m in mods if keep(m) and not m.startswith(spec.excluded)))


def select_many(chapters: str) -> list[str]:
    """``"all"``, or a comma-separated list of chapters (names or numbers): the recorded chapters."""
    if chapters == "all":
        return list(RECORDED)
    return [select(c.strip()) for c in chapters.split(",")]


def select(chapter: str) -> str:
    """The recorded chapter named ``chapter`` or by its number (``"08"``)."""
    names = [c for c in RECORDED if c == chapter or c.split("_", 1)[0] == chapter]
    if len(names) != 1:
        raise ValueError(f"chapter={chapter!r} is invalid: accepted one of {sorted(RECORDED)} or its number")
    return names[0]


def record_path(chapter: str, root: str | Path | None = None) -> Path:
    """``results/records/<profile>/<chapter>.json`` of the checkout ``root`` (default: this one)."""
    spec = RECORDED[select(chapter)]
    return _root(root) / "results" / "records" / spec.profile / f"{select(chapter)}.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _syntax(source: str) -> str:
    """What a code cell computes: its Python syntax tree, so that a line wrapped or a comment
    reworded leaves a record current; the source itself where it is not plain Python."""
    try:
        return ast.dump(ast.parse(source))
    except SyntaxError:
        return source


def fingerprint(chapter: str, root: str | Path | None = None) -> dict[str, str]:
    """Part -> SHA-256 of what decides ``chapter``'s recorded claims: its code cells (in order, as
    syntax trees: outputs, prose, comments and layout left out), each module of :data:`RECORDED`, each settings entry of its
    profile, and the torch version."""
    name, root = select(chapter), _root(root)
    spec = RECORDED[name]
    nb = json.loads((root / "book" / f"{name}.ipynb").read_text())
    code = [_syntax(c["source"] if isinstance(c["source"], str) else "".join(c["source"]))
            for c in nb["cells"] if c["cell_type"] == "code"]
    parts = {f"book/{name}.ipynb (code cells)": _sha(json.dumps(code).encode())}
    for m in modules_of(name, root):
        parts[f"icl_lib/{m}"] = _sha((root / "icl_lib" / m).read_bytes())
    for key in spec.settings:
        parts[f"settings {key}.{spec.profile}"] = _sha(json.dumps(SETTINGS[key][spec.profile], sort_keys=True).encode())
    parts["torch"] = torch.__version__
    return parts


def load(chapter: str, root: str | Path | None = None) -> dict | None:
    """The committed record of ``chapter``, or ``None`` where there is none."""
    path = record_path(chapter, root)
    return json.loads(path.read_text()) if path.exists() else None


def status(chapter: str, root: str | Path | None = None) -> dict:
    """``{"record": dict | None, "changed": [parts], "current": bool}`` for ``chapter``: the record
    is current when it exists and no part of :func:`fingerprint` changed since it was made."""
    rec = load(chapter, root)
    if rec is None:
        return {"record": None, "changed": [], "current": False}
    now, then = fingerprint(chapter, root), rec.get("fingerprint", {})
    # a part the record has and the fingerprint no longer follows (a module declared not deciding
    # since) cannot make it stale; every part it follows must be as it was
    changed = sorted(p for p in now if now[p] != then.get(p))
    return {"record": rec, "changed": changed, "current": not changed}


def _glued(nb: dict) -> dict[str, str]:
    """The text of every value the executed notebook glued (``myst_nb.glue``), by name."""
    out = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            text = o.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None:
                out[name] = text if isinstance(text, str) else "".join(text)
    return out


def _execute(notebook: Path, env: dict) -> tuple[dict, float, str | None]:
    """Execute ``notebook`` as ``make book`` does (:func:`icl_lib.book.execute._execute`: a fresh
    kernel in the notebook's folder, errors not allowed), with ``env`` set for the kernel and no
    time limit; returns ``(executed notebook, seconds, error)``."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        nb = nbformat.read(str(notebook), as_version=4)
        result = single_nb_execution(nb, cwd=str(notebook.parent.resolve()), timeout=None, allow_errors=False)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    err = None if result.err is None else f"{type(result.err).__name__}: {str(result.err).strip().splitlines()[-1:]}"
    return nb, result.time, err


def notebook_path(chapter: str, root: str | Path | None = None) -> Path:
    """The executed notebook of ``chapter``'s record, next to its JSON (present when the run ended
    without an error): ``make book`` serves it in the recorded profile instead of executing."""
    return record_path(chapter, root).with_suffix(".ipynb")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def record(chapter: str, root: str | Path | None = None, execute=_execute, command: str | None = None) -> Path:
    """Execute ``chapter`` in its recorded profile, as the book build executes a chapter (its
    source unchanged, ``ICL_PROFILE`` set, one thread, no progress bars), and write its record
    atomically; returns the JSON's path.  The executed notebook is kept beside it when the run
    ended without an error.  The fingerprint is taken before and after the run and must not change
    in between (an edit during a half-hour run is refused).  A run whose claims fail still records
    them (the chapter must then report them); one that stopped before its claims records nothing."""
    import nbformat

    name, root = select(chapter), _root(root)
    spec = RECORDED[name]
    before = fingerprint(name, root)
    with tempfile.TemporaryDirectory(prefix="icl-record-") as tmp:
        claims_dir = Path(tmp) / "claims"
        env = {"ICL_PROFILE": spec.profile, "ICL_CLAIMS_DIR": str(claims_dir), "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "ICL_PROGRESS": "0"}
        nb, seconds, err = execute(root / "book" / f"{name}.ipynb", env)
        written = claims_dir / spec.profile / f"{name}.json"
        if not written.exists():
            raise RuntimeError(f"{name} stopped before its claims ({err}): nothing recorded")
        claims = json.loads(written.read_text())
    if claims.get("profile") != spec.profile or claims.get("chapter") != name:
        raise RuntimeError(f"the run recorded {claims.get('chapter')!r} in {claims.get('profile')!r}, "
                           f"not {name!r} in {spec.profile!r}")
    alt_seconds = _alternatives(name, root, spec, claims, env, execute) if err is None else 0.0
    if fingerprint(name, root) != before:
        raise RuntimeError(f"the code of {name} changed while it ran: nothing recorded; run it again")
    rec = dict(claims, seconds=round(seconds, 1), command=command or f"python -m icl_lib record run {name}",
               error=err, fingerprint=before, values=_glued(nb), alternatives_seconds=round(alt_seconds, 1))
    nb_path = notebook_path(name, root)
    if err is None and spec.notebook:
        _write(nb_path, nbformat.writes(nb))
    elif nb_path.exists():
        nb_path.unlink()  # an executed notebook of earlier code must not outlive its record
    path = record_path(name, root)
    _write(path, json.dumps(rec, indent=1) + "\n")
    return path


def alternatives_of(spec: Recorded) -> list[tuple[str, object]]:
    """``(definition, alternative)`` pairs a recorded chapter is executed under."""
    return [(k, v) for k in spec.definitions for v in DEFINITIONS[k].alternatives]


def _alternatives(name: str, root: Path, spec: Recorded, claims: dict, env: dict, execute) -> float:
    """Execute chapter ``name`` again under each alternative of its measurement definitions and
    write each claim's verdict under it into ``claims`` (``"-"``: not decided there); returns the
    seconds they took.  A run that stops before its claims is recorded as ``"error"``."""
    seconds = 0.0
    for key, alt in alternatives_of(spec):
        tag = label(key, alt)
        with tempfile.TemporaryDirectory(prefix="icl-record-alt-") as tmp:
            alt_env = dict(env, ICL_CLAIMS_DIR=str(Path(tmp) / "claims"), **{ENV: tag})
            _, sec, err = execute(root / "book" / f"{name}.ipynb", alt_env)
            seconds += sec
            written = Path(tmp) / "claims" / spec.profile / f"{name}.json"
            verdicts = ({c["cid"]: c["verdict"] for c in json.loads(written.read_text())["claims"]}
                        if written.exists() else None)
        for c in claims["claims"]:
            c.setdefault("alternatives", {})[tag] = ("error" if verdicts is None else verdicts.get(c["cid"], "-"))
        print(f"  {name} under {tag}: {'stopped: ' + str(err) if verdicts is None else 'recorded'}", flush=True)
    return seconds


def served(notebook: str | Path, profile: str) -> tuple[object, float] | None:
    """``(executed notebook, seconds)`` of the committed record of the chapter ``notebook`` (a path
    in a checkout's ``book/``) when the book executes it in ``profile`` and the record is of that
    profile, current, and kept its notebook; ``None`` otherwise (the chapter is executed)."""
    import nbformat

    path = Path(notebook).resolve()
    if path.stem not in RECORDED or RECORDED[path.stem].profile != profile or not RECORDED[path.stem].notebook:
        return None
    root = path.parent.parent
    st = status(path.stem, root)
    nb_path = notebook_path(path.stem, root)
    if not st["current"] or not nb_path.exists():
        return None
    return nbformat.read(str(nb_path), as_version=4), float(st["record"].get("seconds", 0.0))


def describe(root: str | Path | None = None) -> str:
    """One line per recorded chapter: its record's date, device, wall time, verdicts, and whether
    it is current (or which parts changed since)."""
    lines = []
    for name in RECORDED:
        st = status(name, root)
        rec = st["record"]
        if rec is None:
            lines.append(f"  {name:32s} {RECORDED[name].profile}: no record (python -m icl_lib record run {name})")
            continue
        counts = {}
        for c in rec.get("claims", []):
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        state = "current" if st["current"] else "STALE (changed: " + ", ".join(st["changed"]) + ")"
        lines.append(f"  {name:32s} {rec['profile']}: recorded {rec.get('recorded', '?')} on {rec.get('device', '?')} "
                     f"in {rec.get('seconds', 0) / 60:.0f} min; {verdicts}; {state}")
    return "\n".join(lines)


def main_record(action: str, chapter: str | None) -> int:
    """``python -m icl_lib record status|run [chapter]``."""
    check_choice("action", action, ("status", "run"))
    if action == "status":
        print(f"recorded chapter runs in {_root(None) / 'results' / 'records'}:\n{describe()}")
        return 0
    if chapter is None:
        raise ValueError("chapter=None is invalid: accepted a recorded chapter (e.g. 08), several (02,03) or all")
    names = select_many(chapter)
    for name in names:
        command = f"python -m icl_lib record run {name}"
        path = record(name, command=command)
        print(f"recorded {name} in {path}", flush=True)
    from . import ledger

    if ledger.append():
        moved = ledger.uncovered(ledger.load())
        print(f"the records' ledger ({ledger.LEDGER}) has a new state; verdicts moved without an entry on the "
              f"rule-change page: {len(moved)}" + "".join(f"\n  {m.chapter} {m.cid}: {m.before} -> {m.after}"
                                                          for m in moved))
    print(describe())
    return 0
