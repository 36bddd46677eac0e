"""The verdicts of every committed state of the records, and the rule changes that moved them.

A verdict of the published book is its chapter's committed record (:mod:`icl_lib.book.records`).
The ledger, ``results/records/ledger.json``, keeps the verdict of every claim in every committed
state of the records, oldest first (``python -m icl_lib record run`` adds the new state; the first
states were read from the repository's history).  Between two consecutive states, every claim
whose verdict moved, or that was removed, must be on the rule-change page
(:mod:`icl_lib.rule_changes`) with the change that moved it and its verdicts before and after
(:func:`uncovered`); a test holds the ledger to the current records and every move to an entry.
The page states each change's net effect, and the ledger's (:func:`net_effect`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..rule_changes import CHANGES, RuleChange, direction

__all__ = ["Move", "LEDGER", "ledger_path", "load", "current", "append", "moves", "uncovered", "net_effect",
           "covered_by", "history"]

LEDGER = Path("results") / "records" / "ledger.json"


@dataclass(frozen=True)
class Move:
    """One claim's verdict moving between two states of the records (``"-"``: not there)."""

    chapter: str
    cid: str
    before: str
    after: str
    state: str  # the state in which it moved


ROOT = Path(__file__).resolve().parents[2]  # the project checkout: book/, icl_lib/, results/


def ledger_path(root: str | Path | None = None) -> Path:
    return (Path(root) if root is not None else ROOT) / LEDGER


def load(root: str | Path | None = None) -> list[dict]:
    """The ledger's states, oldest first: ``{"state", "date", "verdicts": {"chapter:cid": verdict}}``."""
    path = ledger_path(root)
    return json.loads(path.read_text())["states"] if path.exists() else []


def current(root: str | Path | None = None, profile: str = "paper") -> dict[str, str]:
    """``{"chapter:cid": verdict}`` of the committed records of ``profile`` now."""
    folder = (Path(root) if root is not None else ROOT) / "results" / "records" / profile
    out = {}
    for f in sorted(folder.glob("*.json")):
        rec = json.loads(f.read_text())
        for c in rec.get("claims", []):
            out[f"{rec['chapter']}:{c['cid']}"] = c["verdict"]
    return out


def append(root: str | Path | None = None, label: str | None = None) -> bool:
    """Add the current records' verdicts to the ledger as a new state, when they differ from its
    last (atomically); returns whether a state was added."""
    states = load(root)
    now = current(root)
    if states and states[-1]["verdicts"] == now:
        return False
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    states.append({"state": label or f"recorded {stamp}", "date": stamp[:10], "verdicts": now})
    path = ledger_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"states": states}, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return True


def moves(states: list[dict]) -> list[Move]:
    """Every verdict that moved, and every claim removed, between consecutive ``states`` (a claim
    added is new, not moved)."""
    out = []
    for a, b in zip(states, states[1:]):
        va, vb = a["verdicts"], b["verdicts"]
        for key in sorted(set(va) | set(vb)):
            before, after = va.get(key, "-"), vb.get(key, "-")
            if before != after and before != "-":
                chapter, cid = key.split(":", 1)
                out.append(Move(chapter, cid, before, after, b["state"]))
    return out


def covered_by(move: Move, changes: tuple[RuleChange, ...] = CHANGES) -> RuleChange | None:
    """The listed change whose verdicts record ``move``: a row of its chapter named by the claim
    (or ``"old -> new"`` naming it on either side) with the same verdicts before and after (a
    claim replaced: the old claim's before and the new one's after)."""
    for c in changes:
        if c.chapter != move.chapter:
            continue
        for label, before, after in c.verdicts:
            names = [n.strip().split(" ")[-1] for n in label.split("->")]
            if move.cid not in names or before != move.before:
                continue
            if after == move.after or (move.after == "-" and len(names) > 1 and names[0] == move.cid):
                return c
    return None


def uncovered(states: list[dict], changes: tuple[RuleChange, ...] = CHANGES) -> list[Move]:
    """The moves of ``states`` that no listed change records."""
    return [m for m in moves(states) if covered_by(m, changes) is None]


def net_effect(states: list[dict]) -> dict[str, int]:
    """How many verdicts moved toward PASS and toward FAIL over the ledger (a claim removed counts
    by the verdict it had: removing a FAIL moves toward PASS)."""
    out = {"toward PASS": 0, "toward FAIL": 0}
    for m in moves(states):
        d = direction(m.before, m.after)
        if d:
            out[d] += 1
    return out


def history(root: str | Path | None = None, profile: str = "paper") -> list[dict] | None:
    """The states of the committed records read from the repository's history (``git``), one per
    commit that changed them and moved a verdict, each chapter's claims carried forward until its
    record changes; ``None`` where the history is not available (no ``git``, a shallow clone)."""
    import subprocess

    root = Path(root) if root is not None else ROOT
    folder = f"results/records/{profile}"

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout

    try:
        if git("rev-parse", "--is-shallow-repository").strip() == "true":
            return None
        commits = git("log", "--reverse", "--format=%h %ad", "--date=short", "--", folder).split("\n")
    except (OSError, subprocess.CalledProcessError):
        return None
    states, carried = [], {}
    for line in filter(None, commits):
        commit, date = line.split()
        now = {}
        for name in git("ls-tree", "--name-only", commit, folder + "/").split():
            if name.endswith(".json"):
                rec = json.loads(git("show", f"{commit}:{name}"))
                now.update({f"{rec['chapter']}:{c['cid']}": c["verdict"] for c in rec.get("claims", [])})
        chapters = {k.split(":", 1)[0] for k in now}
        carried = {**{k: v for k, v in carried.items() if k.split(":", 1)[0] not in chapters}, **now}
        if not states or states[-1]["verdicts"] != carried:
            states.append({"state": commit, "date": date, "verdicts": dict(sorted(carried.items()))})
    return states
