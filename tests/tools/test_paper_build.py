"""A paper-profile chapter on a CPU evaluates the runs of the run store and trains nothing: chapter
1 on a small paper-shaped plan (its one run at 30 steps, every other setting the paper profile's),
stored from one run cache and executed against a fresh one, as on another machine."""

import json
import os
import subprocess
import sys

import nbformat
import pytest

from icl_lib.book.plan import BOOK, book_plan
from icl_lib.book.plan_training import store_plan


@pytest.mark.chapters
def test_a_paper_chapter_evaluates_the_stored_run_and_trains_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "trainer-cache"))  # where the store's run was trained
    plan = book_plan("paper", overrides={"01_setup": {"steps": 30}})
    chapter_plan = {"01_setup": plan["01_setup"]}
    assert store_plan(chapter_plan, early_step=10, device="cpu", command="test", progress=False)["complete"]

    fresh = tmp_path / "fresh-cache"
    log = tmp_path / "runs.jsonl"
    out = tmp_path / "01_setup.ipynb"
    env = dict(os.environ, ICL_PROGRESS="0", OMP_NUM_THREADS="1", ICL_CACHE_DIR=str(fresh), ICL_RUN_LOG=str(log),
               ICL_CLAIMS_DIR=str(tmp_path / "claims"))
    proc = subprocess.run([sys.executable, "-m", "papermill", str(BOOK / "01_setup.ipynb"), str(out), "--cwd",
                           str(BOOK), "-p", "profile", "paper", "-p", "steps", "30", "--no-progress-bar"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert out.exists(), proc.stderr[-2000:]
    code = [c for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"]
    errors = [(k, o) for k, c in enumerate(code) for o in c.get("outputs", []) if o.output_type == "error"]
    # 30 steps decide little, but a re-run with a parameter set away from the chapter's reports every
    # verdict and finishes
    assert not errors, errors[:1]
    printed = "".join(o.get("text", "") for o in code[-1].get("outputs", []) if o.output_type == "stream")
    assert "RE-RUN 01_setup with parameters set away from the chapter's own (steps)" in printed
    assert "CLAIM " in printed or "CHECK " in printed
    asked = [json.loads(line)["spec"] for line in log.read_text().splitlines()]
    assert asked and all(a == plan["01_setup"][0].to_dict() for a in asked)  # the plan's run, paper settings
    assert not list(fresh.rglob("*.pt")) and not list(fresh.rglob("*.ckpt"))  # nothing trained here
    # such a re-run is not the profile's run: it records nothing beside the profile's verdicts
    assert not (tmp_path / "claims" / "paper" / "01_setup.json").exists()
