"""What test_trainer.py, test_trainer_execution.py share: helpers, fixtures and constants."""

import torch

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig

TINY = TrainConfig(steps=60, batch=32, lr=3e-3, n_log=6, val_size=256, dtype="float64")


def spec(seed=0, heads=2, **kw):
    return RunSpec(data=DataConfig(d=3, L=8), model=ModelConfig(heads=heads), train=kw.pop("train", TINY), seed=seed)


def _same_runs(a, b):
    for x, y in zip(a, b, strict=True):
        for k in "QKVO":
            assert torch.equal(x.params[k], y.params[k]), k
        for k in ("train_loss", "val_loss", "KQ", "OV"):
            assert torch.equal(x.history[k], y.history[k]), k
