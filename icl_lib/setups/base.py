"""What every chapter setup shares: :class:`ChapterSetup`, and grouping a spec builder's runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Hashable, Mapping, Sequence

from ..config import RunSpec

__all__ = ["ChapterSetup", "flat", "grouped", "split"]


@dataclass(frozen=True)
class ChapterSetup:
    """A training chapter's parameters, validated once (``from_parameters``, by the names of the
    chapter's ``parameters`` cell and with its error messages), and the runs it trains.

    Subclasses hold the validated parameters and the configurations built from them (``data``,
    ``train``, ...) and declare their runs in :meth:`runs`; the chapter trains those groups and the
    book's plan (:mod:`icl_lib.tools.plan`) lists them.
    """

    chapter: ClassVar[str] = ""  # the chapter's notebook, e.g. "02_patterns"

    @classmethod
    def from_parameters(cls, **parameters) -> "ChapterSetup":  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def runs(self) -> dict[str, list[RunSpec]]:  # pragma: no cover - every subclass has its own
        """``{group: [RunSpec, ...]}``: the chapter's runs by experiment, in the order it trains them."""
        raise NotImplementedError

    def specs(self) -> list[RunSpec]:
        """Every run of :meth:`runs`, group after group (the chapter's line of the book's plan)."""
        return flat(self.runs())


def flat(groups: Mapping[object, Sequence[RunSpec]]) -> list[RunSpec]:
    """The runs of ``{key: [RunSpec, ...]}``, group after group."""
    return [s for group in groups.values() for s in group]


def grouped(specs: Sequence[RunSpec], key: Callable[[RunSpec], Hashable]) -> dict:
    """``specs`` as ``{key(spec): [specs]}``, keys in order of first appearance and each group in
    the order of ``specs`` (so that :func:`flat` of the result is ``specs`` when the groups are
    contiguous, as a spec builder's are)."""
    out: dict = {}
    for s in specs:
        out.setdefault(key(s), []).append(s)
    return out


def split(specs: Sequence[RunSpec], keys: Sequence[Hashable], size: int) -> dict:
    """``specs`` as ``{key: [specs]}``: consecutive groups of ``size``, one per key of ``keys`` (a
    spec builder's runs, ``size`` seeds per value of the swept parameter)."""
    return {k: list(specs[i * size:(i + 1) * size]) for i, k in enumerate(keys)}
