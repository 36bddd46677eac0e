"""The command line and the benchmark's reference implementation."""

import math
import subprocess
import sys

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


def test_cli_rejects_bad_arguments():
    for args, name in ((["--heads", "0"], "heads=0"), (["--L", "-3"], "L=-3"), (["--device", "tpu"], "device='tpu'"),
                       (["--ensemble", "0"], "ensemble=0"), (["--sigma2", "-1"], "sigma2=-1"),
                       (["--draw-ahead", "0"], "draw_ahead=0"), (["--draw-ahead", "x"], "draw_ahead='x'"),
                       (["--device", "cpu", "--cuda-graph"], "graph=True")):
        p = run_cli("train", "--steps", "5", *args)
        assert p.returncode == 2 and name in p.stderr, (args, p.stderr)
    p = run_cli("train", "--steps", "abc")
    assert p.returncode == 2 and "invalid int value" in p.stderr
