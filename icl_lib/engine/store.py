"""The run store: trained runs committed to the repository, found by every build on any machine.

The run cache (:mod:`icl_lib.engine.cache`) keeps what this machine trained, keyed by the device
that trained it.  The store keeps runs trained once elsewhere (the ``paper`` profile's 500,000
Adam steps, on a GPU) so that every CPU build can evaluate them: it is keyed by what defines the
experiment -- the :class:`~icl_lib.config.RunSpec` and ``MODEL_CODE_VERSION``
(:func:`experiment_key`) -- and keeps where and how a run was trained as its provenance.
:func:`icl_lib.train` looks a run up in the run cache, then in the store, and trains only what
neither has.

One compact file per run, ``<experiment key>.npz`` (float32, loaded without pickle): the final
parameters, the logged history thinned to at most :data:`HISTORY_POINTS` snapshots (the first
steps kept, log-spaced after), the parameters of an early checkpoint (the run's *early twin*: the
same spec trained for ``early_step`` steps, which with a constant learning rate are the run's own
first steps), and the provenance as JSON (spec, model-code version, torch version, device, steps,
wall time, date, the command, a checksum of the arrays).  ``manifest.json`` lists them.  Entries
and manifest are written atomically (:mod:`icl_lib.engine.atomic`): a write that fails (a full
disk) leaves no temporary file and raises one :class:`~icl_lib.engine.atomic.WriteFailed` naming
the file, and writing the manifest first removes what writers killed mid-write left.

Integrity: an entry must carry its checksum, the current model-code version (an entry of other
model code is *stale*: reported, never used) and its spec; :func:`verify_early` retrains a stored
run's early twin from its seed on this machine and compares it with the stored early checkpoint.
The initialisation is bitwise on every device.  A run trained on a CPU draws the same data here,
so its early parameters agree to float32 rounding (:data:`CPU_TOLERANCE`: the ensemble it was
packed in and the CPU's vector kernels change the order of summation, not the numbers drawn); a
GPU draws its data from other random streams, so there the early losses agree within
:data:`EARLY_TOLERANCE`.  ``verify_early(...)["ok"]`` applies these rules.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import io
import json
import logging
import os
import platform
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..config import RunSpec
from ..version import MODEL_CODE_VERSION
from .atomic import remove_stale_temporaries, write_atomic
from .cache import checkpoint_name
from .run import Run

__all__ = ["RunStore", "store_dir", "experiment_key", "early_twin", "HISTORY_POINTS", "CPU_TOLERANCE", "EARLY_TOLERANCE", "StoreEntry", "holds_all"]

log = logging.getLogger(__name__)
HISTORY_POINTS = 120  # snapshots of the history a stored run keeps
EARLY_TOLERANCE = 0.25  # GPU-trained entries: relative gap of early validation losses accepted (other data)
# CPU-trained entries: the largest absolute gap of the early parameters (of order 1; a float32 ulp
# at 1 is 1.2e-7) and relative gap of the early validation losses accepted.  Summation order moves
# the early checkpoint by a few ulps: 2e-7 to 1.4e-6 for eight committed entries, retrained here
# (AVX2 and the unvectorised kernels) as ensembles of one after training in ensembles of eight.  A
# 1e-3 change of one array, or another seed, is far outside (tests/engine/test_store.py).
CPU_TOLERANCE = 1e-5


def store_dir() -> Path:
    """``$ICL_STORE_DIR``, else ``results/paper`` of the project checkout."""
    env = os.environ.get("ICL_STORE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "results" / "paper"


def experiment_key(spec: RunSpec, code: str = MODEL_CODE_VERSION) -> str:
    """Hash of the run's full configuration and the model-code version (no device: a run trained
    anywhere is the same experiment)."""
    payload = json.dumps({"spec": spec.to_dict(), "code": code}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def early_twin(spec: RunSpec, early_step: int) -> RunSpec:
    """The same run stopped after ``early_step`` steps: its final parameters are the run's own
    parameters at that step (constant learning rate; the history logged is its own)."""
    return dataclasses.replace(spec, train=dataclasses.replace(spec.train, steps=early_step))


def _thin(history: dict, points: int = HISTORY_POINTS) -> dict:
    T = len(history["step"])
    if T <= points:
        idx = np.arange(T)
    else:
        idx = np.unique(np.round(np.geomspace(1, T, points)).astype(int) - 1)
        idx = np.unique(np.concatenate([np.arange(min(10, T)), idx, [T - 1]]))
    return {k: v[torch.as_tensor(idx)] for k, v in history.items()}


def _arrays_checksum(arrays: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}/{a.dtype}/{a.shape}".encode() + a.tobytes())
    return h.hexdigest()


@dataclasses.dataclass
class StoreEntry:
    """What the store holds of one run: the run (history thinned), its early checkpoint and provenance."""

    run: Run
    early_step: int
    early_params: dict
    provenance: dict


def holds_all(keys: set[str], current: set[str]) -> bool:
    """Whether a plan with experiment ``keys`` is complete in a store whose current entries are
    ``current`` (:meth:`RunStore.scan`): a plan of no runs is never complete."""
    return bool(keys) and keys <= current


class RunStore:
    """Runs stored as ``<experiment key>.npz`` in ``root`` (:func:`store_dir` by default)."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else store_dir()

    def path(self, spec: RunSpec) -> Path:
        return self.root / f"{experiment_key(spec)}.npz"

    @property
    def checkpoint_dir(self) -> Path:
        """``ckpt/``: the checkpoints of ``store export``'s ensembles in training, committed with
        the store so that a later export on the same kind of device resumes them."""
        return self.root / "ckpt"

    # ---------------------------------------------------------------- writing
    def save(self, run: Run, early: Run, command: str) -> Path:
        """Store ``run`` with its early twin ``early`` (same spec, fewer steps) and provenance, then
        rewrite the manifest; raises :class:`~icl_lib.engine.atomic.WriteFailed` if either cannot
        be written (nothing half-written is left; an entry written before a failed manifest is
        listed by the next :meth:`write_manifest`)."""
        if early_twin(run.spec, early.spec.train.steps) != early.spec:
            raise ValueError("early is invalid: accepted the early twin of run (the same spec with fewer steps)")
        hist = _thin(run.history)
        arrays = {f"params/{k}": v.float().numpy() for k, v in run.params.items()}
        arrays |= {f"early/{k}": v.float().numpy() for k, v in early.params.items()}
        arrays |= {f"history/{k}": v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in hist.items()}
        arrays["early/val_loss"] = early.history["val_loss"].float().numpy()
        arrays["early/step"] = early.history["step"].numpy()
        device = run.meta.get("device", "?")
        if device == "cuda" and torch.cuda.is_available():
            device = f"cuda ({torch.cuda.get_device_name()})"
        provenance = {
            "spec": run.spec.to_dict(),
            "code": MODEL_CODE_VERSION,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": device,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the vector kernels used here
            "draw_ahead": run.meta.get("draw_ahead", 1),
            "backend": run.meta.get("backend", "eager"),  # the CPU backend (its random numbers)
            "cuda_graph": bool(run.meta.get("cuda_graph", False)),
            "ensemble": run.meta.get("ensemble"),
            "steps": run.spec.train.steps,
            "early_step": early.spec.train.steps,
            "seconds": run.meta.get("seconds"),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command,
            "checksum": _arrays_checksum(arrays),
        }
        arrays["provenance"] = np.array(json.dumps(provenance, sort_keys=True))
        self.root.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        p = write_atomic(self.path(run.spec), buf.getvalue(), "run store entry")
        self.write_manifest()
        return p

    def write_manifest(self) -> Path:
        """``manifest.json``: every entry's key, spec, device, date and code version (atomic: exports
        may run in several processes).  The temporary files that writers killed mid-write left in
        the store and its ``ckpt/`` are removed first, so that the folder holds what it lists; a
        manifest that already lists the entries is left as it is."""
        for folder in (self.root, self.checkpoint_dir):
            remove_stale_temporaries(folder)
        rows = []
        for p in sorted(self.root.glob("*.npz")):
            prov = self._provenance(p)
            if prov is not None:
                rows.append({"key": p.stem, **{k: prov[k] for k in ("code", "device", "date", "steps", "spec")}})
        text = json.dumps(rows, indent=1, sort_keys=True) + "\n"
        out = self.root / "manifest.json"
        try:
            if out.read_text() == text:
                return out
        except OSError:  # none yet, or unreadable: written
            pass
        return write_atomic(out, text.encode(), "run store manifest")

    # ---------------------------------------------------------------- reading
    @staticmethod
    def _provenance(p: Path) -> dict | None:
        try:
            with np.load(p, allow_pickle=False) as z:
                return json.loads(str(z["provenance"]))
        except Exception:  # noqa: BLE001 - an unreadable file has no provenance
            return None

    def entry(self, spec: RunSpec) -> StoreEntry | None:
        """The verified entry of ``spec`` (``None``: absent, or invalid -- then one warning line)."""
        p = self.path(spec)
        if not p.exists():
            return None
        try:
            with np.load(p, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            prov = json.loads(str(arrays.pop("provenance")))
            if prov.get("checksum") != _arrays_checksum(arrays):
                raise ValueError("its checksum does not match its arrays")
            if prov.get("code") != MODEL_CODE_VERSION or prov.get("spec") != json.loads(json.dumps(spec.to_dict())):
                raise ValueError("it holds another spec or model-code version than its key")
            params = {k: torch.from_numpy(arrays[f"params/{k}"]) for k in "QKVO"}
            if not all(bool(torch.isfinite(t).all()) for t in params.values()):
                raise ValueError("its parameters are not finite")
        except Exception as err:  # noqa: BLE001 - never serve an entry that does not verify
            log.warning("icl_lib run store: %s is not a valid entry (%s); not used", p, err)
            return None
        hist = {k.split("/", 1)[1]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("history/")}
        meta = {"device": prov["device"], "stored": True, "cached": True, "seconds": prov.get("seconds"),
                "date": prov["date"], "draw_ahead": prov.get("draw_ahead", 1), "ensemble": prov.get("ensemble"),
                "backend": prov.get("backend", "eager")}
        early = {k: torch.from_numpy(arrays[f"early/{k}"]) for k in "QKVO"}
        return StoreEntry(Run(spec=spec, params=params, history=hist, meta=meta), int(prov["early_step"]), early, prov)

    def load(self, spec: RunSpec) -> Run | None:
        """The stored run of ``spec`` for :func:`icl_lib.train`, or ``None``."""
        e = self.entry(spec)
        return None if e is None else e.run

    def scan(self) -> tuple[set[str], list[str]]:
        """The experiment keys of the entries written by this model code, and the file names of
        the stale ones (other model code, or provenance that does not read): one read of every
        entry's provenance, for callers that test several plans against the store."""
        stale, current = [], set()
        for p in sorted(self.root.glob("*.npz")) if self.root.exists() else []:
            prov = self._provenance(p)
            if prov is None or prov.get("code") != MODEL_CODE_VERSION:
                stale.append(p.name)
            else:
                current.add(p.stem)
        return current, stale

    def status(self, specs: Sequence[RunSpec] | None = None) -> dict:
        """Counts of a plan's runs in the store, and the stale entries (other model code)."""
        current, stale = self.scan()
        out = {"root": str(self.root), "entries": len(current), "stale": stale}
        if specs is not None:
            keys = {experiment_key(s) for s in specs}
            out.update(planned=len(keys), stored=len(keys & current), complete=holds_all(keys, current))
        return out

    def checkpoints(self, device_type: str = "cpu", draw_ahead: int = 1, backend: str = "eager") -> list[dict]:
        """The ensembles ``store export`` left in training in :attr:`checkpoint_dir`, one dict each:
        ``file``, ``runs``, ``step`` reached, ``steps``, ``seconds`` trained so far, ``keys`` (their
        experiment keys), ``current`` (written by this model code) and ``resumable`` (an export on
        a ``device_type`` machine drawing ``draw_ahead`` steps at once with ``backend`` picks it up:
        the file is named after the runs' cache keys, which include all three).  A file that does not load is
        listed with ``invalid`` set (it is never resumed: the trainer refuses it)."""
        out = []
        for p in sorted(self.checkpoint_dir.glob("*.pt")) if self.checkpoint_dir.exists() else []:
            try:
                state = torch.load(p, map_location="cpu", weights_only=True)
                specs = [spec_from_dict(json.loads(raw)) for raw in state["specs"]]
                cache_keys = [s.key(device_type, draw_ahead, backend) for s in specs]
                out.append({
                    "file": p.name, "runs": len(specs), "step": int(state["step"]), "steps": specs[0].train.steps,
                    "seconds": float(state["elapsed"]), "keys": [experiment_key(s) for s in specs],
                    "current": state.get("code") == MODEL_CODE_VERSION,
                    "resumable": checkpoint_name(cache_keys) == p.name,
                })
            except Exception as err:  # noqa: BLE001 - reported, not resumed
                out.append({"file": p.name, "invalid": f"{type(err).__name__}: {err}"[:200]})
        return out

    def verify_early(self, spec: RunSpec, device: str = "cpu") -> dict:
        """Retrain the stored run's early twin from its seed here and compare it with the stored
        early checkpoint: ``{"bitwise", "init_equal", "max_param_gap", "val_gap", "device", "ok"}``;
        ``ok`` says whether the entry passes the rules of the module docstring (the initialisation
        bitwise; a CPU entry's gaps below :data:`CPU_TOLERANCE`, a GPU entry's early losses within
        :data:`EARLY_TOLERANCE`)."""
        from .trainer import EnsembleTrainer

        e = self.entry(spec)
        if e is None:
            raise ValueError(f"spec is invalid: accepted a spec with a valid entry in {self.root}")
        twin = early_twin(spec, e.early_step)
        trainer = EnsembleTrainer([twin], device, progress=False, backend=e.provenance.get("backend", "eager"))
        init = {k: getattr(trainer.model, k)[0, : spec.model.heads].detach().float().cpu().clone() for k in "QKVO"}
        again = trainer.run()[0]
        gaps = [float((again.params[k].float() - e.early_params[k]).abs().max()) for k in "QKVO"]
        with np.load(self.path(spec), allow_pickle=False) as z:
            stored_val = torch.from_numpy(z["early/val_loss"])
        val_gap = float(((again.history["val_loss"].float() - stored_val).abs() / stored_val).max())
        init_equal = self._init_equal(e, init)
        on_cpu = e.provenance["device"] == "cpu"
        close = max(gaps) < CPU_TOLERANCE and val_gap < CPU_TOLERANCE if on_cpu else val_gap < EARLY_TOLERANCE
        return {
            "bitwise": all(g == 0.0 for g in gaps),
            "max_param_gap": max(gaps),
            "val_gap": val_gap,
            "init_equal": init_equal,
            "device": e.provenance["device"],
            "ok": bool(init_equal and close),
        }

    @staticmethod
    def _init_equal(e: StoreEntry, init: dict) -> bool:
        """The stored history's step-0 circuits are those of the initialisation drawn here."""
        D = e.run.spec.data.D
        KQ0 = (init["K"].mT @ init["Q"]) / D**0.5
        return bool(torch.allclose(e.run.history["KQ"][0], KQ0, rtol=1e-5, atol=1e-7))


def spec_from_dict(raw: dict) -> RunSpec:
    """A :class:`RunSpec` from :meth:`RunSpec.to_dict` (as a provenance stores it)."""
    return RunSpec.from_dict(raw)
