"""One setting, checked once: a chapter's setup validates and resolves its profile and device, and
everything below -- the execution, training, the claims and their report -- takes what it resolved.
Counted on one chapter-2 setup, through training and its claims, with counters on the checking
functions wherever the library imported them."""

from __future__ import annotations

import sys
from collections import Counter

import icl_lib.config
import icl_lib.validate
from icl_lib.parameters import chapter_parameters
from icl_lib.setups import PatternsSetup
from icl_lib.engine import train_groups

from tests.test_chapters import BOOK


def _count(monkeypatch) -> Counter:
    """Counters on ``check_choice`` (by the name it checks) and ``resolve_device``, in every
    loaded module of the library that holds them."""
    seen: Counter = Counter()
    check, resolve = icl_lib.validate.check_choice, icl_lib.config.resolve_device

    def counted_check(name, value, *args, **kw):
        seen[f"checked {name}"] += 1
        return check(name, value, *args, **kw)

    def counted_resolve(device):
        seen["device resolved"] += 1
        return resolve(device)

    for mod in [m for n, m in sys.modules.items() if n.startswith("icl_lib") and m is not None]:
        if getattr(mod, "check_choice", None) is check:
            monkeypatch.setattr(mod, "check_choice", counted_check)
        if getattr(mod, "resolve_device", None) is resolve:
            monkeypatch.setattr(mod, "resolve_device", counted_resolve)
    return seen


def test_a_chapter_2_setup_resolves_its_device_once_and_validates_its_profile_once(monkeypatch, tmp_path):
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path))
    params = {**chapter_parameters(BOOK / "02_patterns.ipynb"), "heads": [2], "seeds": 1, "steps": 2,
              "sens_heads": 0, "n_test": 100, "device": "cpu", "profile": "quick"}
    seen = _count(monkeypatch)
    S = PatternsSetup.from_parameters(**params)
    runs = train_groups(S.sweep(), execution=S.execution, progress=False)
    claims = S.claims(params)  # a reader's run: its parameters differ from the chapter's
    claims.cannot_decide("multi-near-debiased-gd", "two steps of training", H=2)
    claims.report()
    assert claims.changed and claims.items[0].verdict == "INCONCLUSIVE"
    assert [r.spec.train.steps for r in runs[2]] == [2]
    assert seen["device resolved"] == 1 and seen["checked device"] == 1, seen
    assert seen["checked profile"] == 1, seen
