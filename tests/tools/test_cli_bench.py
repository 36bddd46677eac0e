"""The command line and the benchmark's reference implementation."""

import math
import subprocess
import sys
from pathlib import Path

import torch

from icl_lib import AttentionEnsemble, DataConfig, sample_batch
from icl_lib.tools.bench import ReferenceAttention


def test_reference_computes_the_same_function():
    """The benchmark compares like with like: the nn.Linear reference equals the engine's model."""
    H, d = 3, 4
    ref = ReferenceAttention(H, d).double()
    m = AttentionEnsemble(H, d, dtype=torch.float64)
    with torch.no_grad():
        for h in range(H):
            m.Q[0, h] = ref.q[h].weight
            m.K[0, h] = ref.k[h].weight
            m.V[0, h] = ref.v[h].weight
            m.O[0, h] = ref.o[h].weight
    b = sample_batch(DataConfig(d=d, L=9), 16, 0)
    Z = torch.cat([b.x, b.y], -1)
    zq = torch.cat([b.xq, torch.zeros(16, 1, dtype=torch.float64)], -1)
    torch.testing.assert_close(ref(Z, zq), m(b)[0, :, 0])


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "icl_lib", *args], capture_output=True, text=True, timeout=300)


def call(main, args, capsys) -> tuple[int, str]:
    """``(exit status, stderr)`` of a command's ``main`` called in this process (argparse's errors
    exit with status 2); the commands refuse bad arguments before any work, so a subprocess (a
    second or two of imports each) adds nothing the first such check in a subprocess does not."""
    try:
        rc = main(list(args))
    except SystemExit as stop:
        rc = stop.code
    return rc, capsys.readouterr().err


def test_cli_trains_and_reports(tmp_path):
    out = tmp_path / "runs.pt"
    p = run_cli("train", "--heads", "2", "--d", "3", "--L", "8", "--steps", "30", "--batch", "32",
                "--ensemble", "2", "--device", "cpu", "--no-progress", "--out", str(out))
    assert p.returncode == 0, p.stderr
    last = p.stdout.strip().splitlines()[-1]
    fields = dict(kv.split("=") for kv in last.split())
    assert set(fields) == {"steps_per_s", "model_steps_per_s", "final_loss"}
    assert math.isclose(float(fields["model_steps_per_s"]), 2 * float(fields["steps_per_s"]), rel_tol=1e-3)
    runs = torch.load(out, weights_only=True)
    assert len(runs) == 2 and runs[1]["spec"]["seed"] == 1
    assert not out.with_name(out.name + ".ckpt").exists()


def test_cli_rejects_bad_arguments(capsys):
    from icl_lib.tools.cli import main

    p = run_cli("train", "--steps", "5", "--heads", "0")  # the command as a reader runs it
    assert p.returncode == 2 and "heads=0" in p.stderr and "Traceback" not in p.stderr, p.stderr
    for args, name in ((["--L", "-3"], "L=-3"), (["--device", "tpu"], "device='tpu'"),
                       (["--ensemble", "0"], "ensemble=0"), (["--sigma2", "-1"], "sigma2=-1"),
                       (["--draw-ahead", "0"], "draw_ahead=0"), (["--draw-ahead", "x"], "draw_ahead='x'"),
                       (["--device", "cpu", "--cuda-graph"], "graph=True")):
        rc, err = call(main, ["train", "--steps", "5", *args], capsys)
        assert rc == 2 and name in err, (args, err)
    rc, err = call(main, ["train", "--steps", "abc"], capsys)
    assert rc == 2 and "invalid int value" in err


def test_cli_checks_out_before_training(tmp_path):
    """--out onto a folder, under a file or into a folder that refuses files fails at once, naming
    out, with no traceback and no temporary file (the previous code failed after training)."""
    (tmp_path / "afile").write_text("x")
    bad = [tmp_path, tmp_path / "afile" / "runs.pt", Path("/proc/icl_lib_runs.pt")]
    for out in bad:
        p = run_cli("train", "--steps", "100000", "--device", "cpu", "--no-progress", "--out", str(out))
        assert p.returncode == 2 and "out=" in p.stderr and "Traceback" not in p.stderr, (out, p.stderr)
    assert not list(tmp_path.glob(".*"))
    p = run_cli("train", "--steps", "5", "--checkpoint-every", "0", "--device", "cpu")
    assert p.returncode == 2 and "checkpoint_every=0.0" in p.stderr


def test_cli_interrupt_saves_a_checkpoint_and_says_how_to_resume(tmp_path):
    """Ctrl-C prints where the checkpoint is and how to resume (not a KeyboardInterrupt traceback);
    the same command then finishes from the checkpoint."""
    import signal
    import time

    out = tmp_path / "runs.pt"
    ckpt = out.with_name(out.name + ".ckpt")
    args = [sys.executable, "-m", "icl_lib", "train", "--heads", "2", "--d", "3", "--L", "8", "--steps", "200000",
            "--batch", "32", "--device", "cpu", "--no-progress", "--out", str(out), "--checkpoint-every", "0.5"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline:  # training has started once it checkpoints
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "checkpoint saved at step" in err and "run the same command again" in err
    state = torch.load(ckpt, weights_only=True)
    assert state["step"] > 0


def test_cli_reports_divergence_in_one_line():
    p = run_cli("train", "--lr", "5", "--steps", "300", "--batch", "64", "--device", "cpu", "--no-progress")
    assert p.returncode == 1 and "training diverged" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_bench_rejects_bad_arguments(capsys):
    from icl_lib.tools.bench import main

    p = subprocess.run([sys.executable, "-m", "icl_lib.tools.bench", "--device", "cpu", "--seconds", "nan"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "seconds=nan" in p.stderr and "Traceback" not in p.stderr, p.stderr
    for args, name in ((["--seconds", "-1"], "seconds=-1.0"), (["--repeats", "0"], "repeats=0"),
                       (["--ensembles", "0"], "ensembles=0")):
        rc, err = call(main, ["--device", "cpu", *args], capsys)
        assert rc == 2 and name in err, (args, err)


def test_cli_stops_quietly_when_its_reader_leaves():
    # `python -m icl_lib store status | grep -q ...` under `set -o pipefail` (as CI runs it): the
    # reader closes the pipe first; the command must not die with a BrokenPipeError traceback.
    p = subprocess.Popen([sys.executable, "-m", "icl_lib", "store", "status", "--profile", "quick"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_bench_reports_per_core_floors_and_their_ceiling():
    """Structure, not speed: every engine row has its per-core floors, and the ceiling is the
    stated function of them (an ensemble: shards over the cores; a lone model: the slower half)."""
    from icl_lib.tools import bench

    rows = bench.measure("cpu", ensembles=(1, 2), seconds=0.05, repeats=1)
    eager = [r for r in rows if r["impl"] == "engine"]
    fused = [r for r in rows if r["impl"] == "engine, fused backend"]
    assert rows[0]["impl"].startswith("reference") and len(rows) == 1 + len(eager) + len(fused)
    assert [r["R"] for r in eager] == [1, 2] and [r["R"] for r in fused] == [1, 2]
    threads = torch.get_num_threads()
    for row in eager:
        s, c = row["sampler_per_core"], row["compute_per_core"]
        assert min(row["normals_per_core"], s, c) > 0
        want = min(s, c) if row["R"] == 1 and threads > 1 else min(row["R"], threads) / (1 / s + 1 / c)
        assert math.isclose(row["ceiling"], want, rel_tol=1e-9)
    for row, base in zip(fused, eager):  # the fused rows are set against the eager engine of the same run
        assert math.isclose(row["vs_eager"], row["model_steps_per_s"] / base["model_steps_per_s"], rel_tol=1e-9)
        assert min(row["step_per_core"], row["rng_per_core"]) > 0


def test_bench_sets_the_engine_against_the_cpu_targets(capsys):
    from icl_lib.tools import bench

    floors = {"normals_per_core": 4000.0, "sampler_per_core": 3000.0, "compute_per_core": 2000.0, "ceiling": 2400.0}
    rows = [{"impl": "reference (nn.Linear, one model)", "R": 1, "model_steps_per_s": 100.0, "ratio": 1.0},
            {"impl": "engine", "R": 1, "model_steps_per_s": 900.0, "ratio": 9.0} | floors,
            {"impl": "engine", "R": 32, "model_steps_per_s": 2000.0, "ratio": 20.0} | floors]
    bench._print_cpu(rows)
    out = capsys.readouterr().out.splitlines()
    assert "met: >= 8x" in out[2] and "not met" not in out[2]
    assert "not met: >= 3,000" in out[3]
    assert any(line.split()[:1] == ["32"] and line.rstrip().endswith("83%") for line in out)  # 2000 / 2400


def test_bench_sets_the_fused_backend_against_the_eager_engine(capsys):
    from icl_lib.tools import bench

    floors = {"normals_per_core": 4000.0, "sampler_per_core": 3000.0, "compute_per_core": 2000.0, "ceiling": 2400.0}
    fused = {"step_per_core": 3000.0, "rng_per_core": 12000.0}
    rows = [{"impl": "reference (nn.Linear, one model)", "R": 1, "model_steps_per_s": 100.0, "ratio": 1.0},
            {"impl": "engine", "R": 1, "model_steps_per_s": 400.0, "ratio": 4.0} | floors,
            {"impl": "engine", "R": 32, "model_steps_per_s": 1000.0, "ratio": 10.0} | floors,
            {"impl": "engine, fused backend", "R": 1, "model_steps_per_s": 2000.0, "ratio": 20.0, "vs_eager": 5.0}
            | fused,
            {"impl": "engine, fused backend", "R": 32, "model_steps_per_s": 4000.0, "ratio": 40.0, "vs_eager": 4.0}
            | fused]
    bench._print_cpu(rows)
    out = capsys.readouterr().out.splitlines()
    assert "not met: >= 7x eager" in out[4] and "5.00x" in out[4]
    assert "met: >= 3.5x eager" in out[5] and "not met" not in out[5]
    assert any(line.split()[:3] == ["32", "12000", "3000"] and line.rstrip().endswith("1.33x") for line in out)


def test_bench_names_the_cpu_and_the_instruction_set_of_its_figures(capsys, monkeypatch):
    """A figure says where it came from: the CPU's model and the target numba compiled the fused
    kernels for (its name and widest vector instructions; NUMBA_CPU_NAME and NUMBA_CPU_FEATURES)."""
    import llvmlite.binding as llvm
    from numba.core import config

    from icl_lib.tools import bench

    monkeypatch.setattr(bench, "measure", lambda *a, **k: [
        {"impl": "reference (nn.Linear, one model)", "R": 1, "model_steps_per_s": 100.0, "ratio": 1.0}])
    assert bench.main(["--device", "cpu"]) == 0
    cpu = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cpu: "))
    assert f"compiled for {config.CPU_NAME or llvm.get_host_cpu_name()} " in cpu, cpu
    monkeypatch.setattr(config, "CPU_NAME", "haswell")
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx,+avx2,+fma,-avx512f")
    assert bench.main(["--device", "cpu"]) == 0
    cpu = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cpu: "))
    assert "compiled for haswell" in cpu and cpu.endswith("AVX2, FMA"), cpu
