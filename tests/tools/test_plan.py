"""The book's plan and train-plan: every chapter's runs known without executing it, trained as few
large ensembles, resumable; a model packed with other chapters' runs ends where it ends alone."""

import dataclasses
from collections import Counter
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig
from icl_lib.engine.cache import RunCache
from icl_lib.engine.execution import Execution
from icl_lib.book import plan as book
from icl_lib.book import plan_cost  # its _measure is replaced by a test
from icl_lib.book.plan_cost import REFERENCE_RATES, EnsembleTiming, _measure, describe, estimate_timing
from icl_lib.book.plan_training import store_plan, train_plan

TINY = TrainConfig(steps=40, batch=16, lr=3e-3, n_log=4, val_size=64, dtype="float64")


def test_the_quick_plan_lists_every_training_chapter_and_shares_runs():
    plan = book.book_plan("quick")
    assert set(plan) == {"01_setup", "02_patterns", "03_two_stage_dynamics", "05_optimality", "06_anisotropic",
                         "07_multitask", "09_phase_diagram"}
    # chapter 2: 12 seeds per head count and 6 per other optimiser setting (three heads; 3x the rate,
    # a batch of 64, SGD); chapter 5: 6 seeds per head count, 6 per two-head variant, 4 per xi, 6 one-head
    # models on the sphere
    assert len(plan["02_patterns"]) == 4 * 12 + 3 * 6 and len(plan["05_optimality"]) == 24 + 5 * 6 + 3 * 4 + 6
    ch2, ch3 = set(plan["02_patterns"]), set(plan["03_two_stage_dynamics"])
    assert len(ch3) == 3 * 9 and ch3 <= ch2  # chapter 3 reuses chapter 2's runs: H = 2..4, 9 of its 12 seeds
    assert set(plan["05_optimality"][:24]) <= ch2  # and chapter 5 its first 6 seeds
    assert plan["01_setup"][0] in plan["02_patterns"]
    assert all(s.train.steps == 4000 for c in plan if not c.startswith("09") for s in plan[c])
    paper = book.book_plan("paper")
    # the paper profile: 36 seeds per head count and 12 per other setting, 500,000 steps; chapter 2
    # also reads chapter 9's anchor cells (two to four heads at the paper's setting, 128 seeds each)
    long = [s for s in paper["02_patterns"] if s.train.steps == 500_000]
    assert len(long) == 4 * 36 + 16 + 4 + 3 * 12 and len(paper["02_patterns"]) == len(long) + 3 * 128
    assert set(paper["02_patterns"]) - set(long) <= set(paper["09_phase_diagram"])
    assert set(paper["03_two_stage_dynamics"]) <= set(long) and len(paper["03_two_stage_dynamics"]) == 3 * 36 + 16 + 4
    assert all(s.train.steps == 500_000 for c in paper if c not in ("02_patterns", "09_phase_diagram")
               for s in paper[c])
    # chapter 9: the trap sweep (paper 1,472 runs, quick 88), the grid's slice (paper 2,048, quick 92), whose
    # cells with two to four heads at the centre and two heads at the sweep's other scales and rate are the
    # sweep's (paper 7 cells of 64 runs, quick 32 runs); the longer runs (paper 32, quick 8) and the two-head
    # anchor cell's seeds continued (paper 128, quick 16), both to five horizons; the causes:
    # initialisations x data streams (paper 512, quick 24) and the three switches (paper 64 + 128 + 128, quick 24)
    assert len(paper["09_phase_diagram"]) == 1472 + 2048 + 32 + 128 + 512 + 320
    assert len(set(paper["09_phase_diagram"])) == 1472 + 2048 - 7 * 64 + 32 + 128 + 512 + 320
    assert len(plan["09_phase_diagram"]) == 88 + 92 + 8 + 16 + 24 + 24
    assert len(set(plan["09_phase_diagram"])) == 148 + 16 + 56
    steps = Counter(s.train.steps for s in paper["09_phase_diagram"])
    assert steps == {20_000: 4512 - 160, 100_000: 32 + 128}
    assert Counter(s.train.steps for s in plan["09_phase_diagram"]) == {6_000: 252 - 24, 30_000: 8 + 16}
    assert min(s.seed for s in plan["09_phase_diagram"]) == 1000  # fresh seeds: not the other chapters'
    assert not set(plan["02_patterns"]) & set(plan["09_phase_diagram"])
    over = book.book_plan("quick", overrides={"02_patterns": {"heads": "[2]", "seeds": 1, "sens_heads": 0}})
    assert [s.model.heads for s in over["02_patterns"]] == [2]


def test_plan_command_describes_the_ensembles():
    p = subprocess.run([sys.executable, "-m", "icl_lib", "plan", "--profile", "quick", "--device", "cpu",
                        "--no-measure"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "406 distinct" in p.stdout and "02_patterns" in p.stdout and "ensembles:" in p.stdout
    # chapter 9's quick runs are in the committed store; the sweep of chapters 2, 3 and 5 trains
    assert "220 in the run store" in p.stdout
    assert "d=5 L=40 tasks=1 softmax" in p.stdout and "256,000 model-steps" in p.stdout
    only = subprocess.run([sys.executable, "-m", "icl_lib", "plan", "--profile", "quick", "--device", "cpu",
                           "--no-measure", "--chapters", "02,05_optimality"], capture_output=True, text=True,
                          timeout=300)
    assert only.returncode == 0, only.stderr
    assert "02_patterns" in only.stdout and "05_optimality" in only.stdout and "07_multitask" not in only.stdout


def test_the_plan_times_training_steps_apart_from_history_records(monkeypatch):
    # log-spaced histories record every one of the first steps: timing those would count a validation
    # pass per step (the paper profile's plan was once projected at 173 h on this CPU that way)
    tc = TrainConfig(steps=400_000, batch=16, lr=3e-3, n_log=400, val_size=64)
    assert set(range(10)) <= set(tc.log_steps())
    specs = [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=2), tc, seed=s) for s in (0, 1)]
    recorded = []
    real = EnsembleTrainer.snapshot

    def spy(self):
        recorded.append(self.step)
        return real(self)

    monkeypatch.setattr(EnsembleTrainer, "snapshot", spy)
    timing = _measure(specs, Execution.resolve("cpu"), steps=6)
    assert recorded == [0, 1, 9]  # the warm-up's records (steps 0, 1), none while timed, then the one timed
    assert timing.models == 2 and timing.step_seconds > 0 and timing.record_seconds > 0
    assert timing.model_steps_per_s == pytest.approx(2 / timing.step_seconds)
    assert timing.seconds(100, 3) == pytest.approx(100 * timing.step_seconds + 3 * timing.record_seconds)


def test_the_expected_time_adds_the_history_records_to_the_steps(monkeypatch):
    monkeypatch.setattr(plan_cost, "_measure", lambda specs, ex: EnsembleTiming(len(specs), 0.01, 2.0))
    monkeypatch.setenv("ICL_CACHE_DIR", "/nonexistent-cache-for-this-test")
    plan = book.select_chapters(book.book_plan("quick"), "01")  # one run: 4,000 steps, 112 records
    records = len(plan["01_setup"][0].train.log_steps())
    text = describe(plan, "cpu", measure=True)
    minutes = (4000 * 0.01 + records * 2.0) / 60
    assert f"{records} history records of 2 s" in text and f"about {minutes:.1f} min" in text


def test_chapters_are_selected_by_name_or_number_and_a_bad_one_is_named():
    plan = {"02_patterns": [1], "05_optimality": [2], "09_phase_diagram": [3]}
    assert book.select_chapters(plan, None) is plan
    assert book.select_chapters(plan, "09, 02_patterns") == {"09_phase_diagram": [3], "02_patterns": [1]}
    for bad in ("04", "", "02,x", "patterns"):
        with pytest.raises(ValueError, match=r"^chapters="):
            book.select_chapters(plan, bad)


def _specs():
    a = [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=h), TINY, seed=s) for h in (1, 2) for s in (0, 1)]
    b = [RunSpec(DataConfig(d=3, L=6, rho=0.4), ModelConfig(heads=2), TINY, seed=s) for s in (0, 1)]
    c = [RunSpec(DataConfig(d=4, L=6, supports=[[0, 1], [1, 2, 3]]), ModelConfig(heads=2), TINY, seed=0)]
    return {"a": a, "b": b + a[2:3], "c": c}


def test_a_packed_run_ends_where_it_ends_alone():
    """train-plan packs the runs of several chapters into one ensemble (here five models of two
    chapters); every model ends where it ends trained alone, up to float64 summation order."""
    plan = _specs()
    packed = train_plan(plan, device="cpu", progress=False)
    for chapter, runs in packed.items():
        for spec, run in zip(plan[chapter], runs):
            assert run.spec == spec
            alone = EnsembleTrainer([spec], "cpu", progress=False).run()[0]
            for k in "QKVO":
                torch.testing.assert_close(run.params[k], alone.params[k], rtol=1e-9, atol=1e-11)
    assert len(list(RunCache().root.glob("*.pt"))) == 7  # one entry per distinct run


SCRIPT = textwrap.dedent("""
    import sys
    from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig
    from icl_lib.book.plan_training import train_plan
    tc = TrainConfig(steps=3000, batch=64, lr=3e-3, n_log=6, val_size=128)
    plan = {"x": [RunSpec(DataConfig(d=4, L=12), ModelConfig(heads=h), tc, seed=s) for h in (1, 3) for s in (0, 1)]}
    train_plan(plan, device="cpu", progress=False, checkpoint_every=float(sys.argv[1]))
""")


def _run_plan(cache, every="60", kill_after_checkpoint=False):
    # the eager backend, as in every test here (conftest): a fused plan of this size ends before it can be killed
    env = {"ICL_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2",
           "ICL_BACKEND": os.environ.get("ICL_BACKEND", "eager")}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, every], env=env, stderr=subprocess.PIPE, text=True)
    if kill_after_checkpoint:
        deadline = time.time() + 240
        while not list((cache / "ckpt").glob("*.pt")) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a few more checkpoints: killed between two of them
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        return None
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return {p.name: torch.load(p, weights_only=True) for p in sorted(cache.glob("*.pt"))}


@pytest.mark.slow
def test_a_killed_plan_resumes_to_the_numbers_of_an_uninterrupted_one(tmp_path):
    whole = _run_plan(tmp_path / "whole")
    assert len(whole) == 4
    _run_plan(tmp_path / "killed", every="0.2", kill_after_checkpoint=True)
    assert len(list((tmp_path / "killed").glob("*.pt"))) < 4, "the plan finished before it was killed"
    ckpts = list((tmp_path / "killed" / "ckpt").glob("*.pt"))
    assert ckpts and all(torch.load(c, weights_only=True)["step"] > 0 for c in ckpts)  # resumes mid-training
    resumed = _run_plan(tmp_path / "killed", every="0.2")
    assert resumed.keys() == whole.keys()
    for name in whole:
        for k in "QKVO":
            assert torch.equal(resumed[name]["params"][k], whole[name]["params"][k]), (name, k)
        for k in ("val_loss", "train_loss", "KQ", "OV"):
            assert torch.equal(resumed[name]["history"][k], whole[name]["history"][k]), (name, k)


def test_the_published_book_shows_a_chapter_in_the_paper_profile_once_its_runs_are_stored(tmp_path, monkeypatch):
    """Chapter 1 (its parameters cell set to 30 steps: a small paper-shaped plan) is published in
    quick until the store holds its run, then in paper; chapter 4 (no training, its paper profile
    computed on the CPU) in paper; chapter 8 in quick (no committed record of its paper run here)."""
    import json as _json

    book_dir = tmp_path / "book"
    book_dir.mkdir()
    nb = _json.loads((book.BOOK / "01_setup.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    source = "".join(cell["source"])
    assert "steps = None" in source
    cell["source"] = source.replace("steps = None", "steps = 30")
    (book_dir / "01_setup.ipynb").write_text(_json.dumps(nb))
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "cache"))
    names = ["01_setup", "04_ode_phases", "08_preconditioned_convergence"]
    assert book.published_profiles(names, book_dir) == {
        "01_setup": "quick", "04_ode_phases": "paper", "08_preconditioned_convergence": "quick"}
    plan = book.book_plan("paper", book_dir)
    assert [s.train.steps for s in plan["01_setup"]] == [30] and plan["01_setup"][0].train.lr == 1e-3
    status = store_plan(plan, early_step=10, device="cpu", command="test", progress=False)
    assert status["complete"]
    assert book.published_profiles(names, book_dir)["01_setup"] == "paper"


def test_the_cost_model_scales_with_the_work_of_a_step():
    ex = Execution.resolve("cpu", backend="fused")
    base = RunSpec(data=DataConfig(d=5, L=40, sigma2=0.1), model=ModelConfig(heads=2), train=TrainConfig(), seed=0)
    ref = estimate_timing([base] * 4, ex, threads=1)
    assert ref.model_steps_per_s == pytest.approx(REFERENCE_RATES["fused"])  # the reference shape, one thread
    assert estimate_timing([base] * 4, ex, threads=2).model_steps_per_s == pytest.approx(2 * ref.model_steps_per_s)
    big = dataclasses.replace(base, data=DataConfig(d=8, L=81, sigma2=0.1), model=ModelConfig(heads=4))
    slow = estimate_timing([big] * 4, ex, threads=1)
    assert slow.step_seconds == pytest.approx(ref.step_seconds * (82 * 9 * 4) / (41 * 6 * 2))
    eager = estimate_timing([base] * 4, Execution.resolve("cpu", backend="eager"), threads=1)
    assert eager.step_seconds > ref.step_seconds and ref.record_seconds > 0
