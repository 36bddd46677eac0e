"""What every chapter's setup shares: :class:`ChapterSetup` (the profile, seed and device of every
chapter, each validated and resolved once: :func:`resolve_common`), the one bound of a chapter's
``seed`` (:data:`SEED_MAX`), and grouping a spec builder's runs."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, ClassVar, Hashable, Mapping, Sequence

import torch

from ..parameters import changed_parameters
from ..claims import Claims
from ..claimsets import declared
from ..config import RunSpec, resolve_device
from ..engine.execution import Execution
from ..engine.profiles import resolve_profile
from ..validate import check_int

__all__ = ["SEED_MAX", "ChapterSetup", "check_seed", "resolve_common", "flat", "grouped", "split"]

# The largest seed a chapter's run may have: a chapter's ``seed`` parameter and the ``span - 1``
# consecutive run seeds it trains from it stay within it (torch seeds are 64-bit; derived seeds
# are hashed from it, :mod:`icl_lib.seeding`).
SEED_MAX = 2**62


def check_seed(seed, span: int = 1) -> int:
    """A chapter's ``seed`` parameter: an integer in ``[0, SEED_MAX - span + 1]``, so that the
    ``span`` run seeds ``seed, ..., seed + span - 1`` it stands for are all at most
    :data:`SEED_MAX` (a bad one raises ``ValueError`` naming ``seed``)."""
    span = check_int("span", span, 1, 2**20)
    return check_int("seed", seed, 0, SEED_MAX - span + 1)


def resolve_common(profile, seed, device, span: int = 1) -> tuple[str, int, str]:
    """``(profile, seed, device)`` of a chapter's parameters cell, each checked once: the device
    resolved to the one the chapter runs on (``"cpu"`` or ``"cuda"``; ``"cuda"`` needs a GPU), the
    profile to ``"quick"`` or ``"paper"`` on it (:func:`~icl_lib.engine.profiles.resolve_profile`)
    and the seed checked by :func:`check_seed`."""
    device = resolve_device(device).type  # checks it
    return resolve_profile(profile, device), check_seed(seed, span), device  # checks the profile


@dataclass(frozen=True)
class ChapterSetup:
    """A chapter's parameters, validated once (``from_parameters``, by the names of the chapter's
    ``parameters`` cell and with its error messages), and the runs it trains.

    Every setup holds the chapter's resolved ``profile`` (``"quick"`` or ``"paper"``), its ``seed``
    and the ``device`` it runs on (``"cpu"`` or ``"cuda"``, never ``"auto"``), from
    :func:`resolve_common`, and where and how its runs train (:attr:`execution`, resolved once and
    handed to :func:`~icl_lib.engine.training.train`).  Subclasses hold the other validated parameters and the configurations
    built from them (``data``, ``train``, ...) and declare their runs in :meth:`runs`; the chapter
    trains those groups and the book's plan (:mod:`icl_lib.book.plan`) lists them.
    """

    chapter: ClassVar[str] = ""  # the chapter's notebook's name (NN_topic)

    profile: str
    seed: int
    device: str

    @cached_property
    def execution(self) -> Execution:
        """Where and how the chapter's runs train: :attr:`device` with the engine's choices for it
        (draw-ahead, CUDA graphs from ``ICL_CUDA_GRAPH``, compilation, the CPU backend), resolved
        once; the chapter hands it to :func:`~icl_lib.engine.training.train_groups`."""
        return Execution.resolve(torch.device(self.device), "auto", None, backend="auto")

    def claims(self, namespace: Mapping) -> Claims:
        """The chapter's claims collector (:class:`~icl_lib.claims.Claims`): the claims declared for
        it (:mod:`icl_lib.claimsets`), decided in this setup's profile on its device, and the
        parameters this run set away from the chapter's own (``namespace``: the chapter's
        ``globals()`` in its validation cell; :func:`~icl_lib.parameters.changed_parameters`)."""
        return Claims(declared(self.chapter), self.profile, self.device, changed_parameters(self.chapter, namespace))

    @classmethod
    def from_parameters(cls, **parameters) -> "ChapterSetup":  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{group: [RunSpec, ...]}``: the chapter's runs by experiment, in the order it trains them
        (none: a chapter that trains no model keeps this)."""
        return {}

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
