"""Where every random number of the book comes from: seeds derived from a seed and a named purpose.

A user's seed (the ``seed`` of a :class:`~icl_lib.config.RunSpec` or a chapter's ``seed``
parameter) never seeds a generator directly.  :func:`derive_seed` turns ``(seed, purpose,
*index)`` into an independent 63-bit seed with :class:`numpy.random.SeedSequence`, so the streams
of one seed for different purposes (a model's initialisation, its training data, a chapter's test
set, a Monte Carlo of a risk) never share numbers, and a purpose is a name a reader can search
for instead of an offset like ``seed + 5000``::

    test = sample_batch(data, 4096, derive_seed(seed, "moments"))
    gen = generator(seed, "length-sweep", j, k)        # the k-th test set at the j-th length

The purposes ``init``, ``train``, ``val`` and ``test`` are the run streams of the training engine
(their codes 0-3 are part of the model-code numerics); any other name is coded by a hash of it.
:func:`content_seed` derives a seed from a description instead (the validation set of a task is a
function of the task, so that all runs of one task are compared on the same sequences).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from .validate import check_int, fail

__all__ = ["STREAMS", "RUN_PURPOSES", "derive_seed", "generator", "make_generators", "content_seed"]

STREAMS = 2  # generator streams per model; part of the model-code version (changes the numbers)
RUN_PURPOSES = {"init": 0, "train": 1, "val": 2, "test": 3}  # the engine's streams -> SeedSequence word


def _purpose_code(purpose: str) -> int:
    if purpose in RUN_PURPOSES:
        return RUN_PURPOSES[purpose]
    if not isinstance(purpose, str) or not purpose.strip():
        fail("purpose", purpose, "a non-empty name")
    return int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "big") | 1 << 31  # never 0-3


def derive_seed(seed: int, purpose: str, *index: int) -> int:
    """Independent 63-bit seed for ``(seed, purpose, *index)`` via ``numpy.random.SeedSequence``.

    ``index`` numbers the streams of one purpose (a model's generator streams, the test sets of a
    sweep); no index is index 0.
    """
    seed = check_int("seed", seed, 0)
    words = [check_int("index", i, 0) for i in index] or [0]
    ss = np.random.SeedSequence([seed, _purpose_code(purpose), *words])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def generator(seed: int, purpose: str, *index: int, device="cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with :func:`derive_seed`."""
    return torch.Generator(device=torch.device(device)).manual_seed(derive_seed(seed, purpose, *index))


def make_generators(seed: int, purpose: str, device, streams: int = STREAMS) -> list[torch.Generator]:
    """The ``streams`` generators of one model for ``purpose`` (the engine's ``init`` and ``train``)."""
    return [generator(seed, purpose, s, device=device) for s in range(streams)]


def content_seed(payload: dict) -> int:
    """A 56-bit seed that is a function of ``payload`` (JSON-serialisable; key order irrelevant)."""
    text = json.dumps(payload, sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")
