"""Where every random number of the book comes from: seeds derived from a run seed and a purpose.

A run seed (the ``seed`` of a :class:`~icl_lib.config.RunSpec` or a chapter's ``seed`` parameter)
never seeds a generator directly: :func:`derive_seed` turns ``(seed, purpose, stream)`` into an
independent 63-bit seed with :class:`numpy.random.SeedSequence`, so the initialisation, the
training stream, the validation set and the test sets of one seed never share numbers.
:func:`content_seed` derives a seed from a description instead (the validation set of a task is a
function of the task, so that all runs of one task are compared on the same sequences).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

__all__ = ["STREAMS", "PURPOSES", "derive_seed", "make_generators", "content_seed"]

STREAMS = 2  # generator streams per model; part of the model-code version (changes the numbers)
PURPOSES = {"init": 0, "train": 1, "val": 2, "test": 3}  # purpose -> SeedSequence entropy word


def derive_seed(seed: int, purpose: str, stream: int = 0) -> int:
    """Independent 63-bit seed for (run seed, purpose, stream) via ``numpy.random.SeedSequence``."""
    ss = np.random.SeedSequence([int(seed), PURPOSES[purpose], int(stream)])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def make_generators(seed: int, purpose: str, device, streams: int = STREAMS) -> list[torch.Generator]:
    """The ``streams`` generators of one model for ``purpose`` (``init``, ``train``, ``val``, ``test``)."""
    device = torch.device(device)
    return [torch.Generator(device=device).manual_seed(derive_seed(seed, purpose, s)) for s in range(streams)]


def content_seed(payload: dict) -> int:
    """A 56-bit seed that is a function of ``payload`` (JSON-serialisable; key order irrelevant)."""
    text = json.dumps(payload, sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")
