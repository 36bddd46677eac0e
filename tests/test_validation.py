"""Every invalid parameter raises ValueError naming the parameter, the value and what is accepted."""

import re

import pytest

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig, resolve_profile, train_config
from icl_lib.config import resolve_device


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: ModelConfig(heads=0), "heads"),
        (lambda: ModelConfig(heads=2.5), "heads"),
        (lambda: ModelConfig(attention="relu"), "attention"),
        (lambda: DataConfig(L=0), "L"),
        (lambda: DataConfig(d=0), "d"),
        (lambda: DataConfig(sigma2=-0.1), "sigma2"),
        (lambda: DataConfig(sigma2=float("nan")), "sigma2"),
        (lambda: DataConfig(rho=1.0), "rho"),
        (lambda: DataConfig(rho=-1.5), "rho"),
        (lambda: DataConfig(d=4, supports=[[0, 4]]), "supports[0] index"),
        (lambda: DataConfig(d=4, supports=[[0, 0]]), "supports[0]"),
        (lambda: DataConfig(d=4, supports=[]), "supports"),
        (lambda: DataConfig(d=2, covariance=[[1, 2], [2, 1]]), "covariance"),
        (lambda: TrainConfig(steps=0), "steps"),
        (lambda: TrainConfig(lr=0), "lr"),
        (lambda: TrainConfig(batch=1), "batch"),
        (lambda: TrainConfig(optimizer="lbfgs"), "optimizer"),
        (lambda: RunSpec(seed=-1), "seed"),
        (lambda: resolve_profile("fast", "cpu"), "profile"),
        (lambda: train_config("auto"), "profile"),
        (lambda: resolve_device("tpu"), "device"),
    ],
)
def test_invalid_parameter(make, name):
    with pytest.raises(ValueError) as err:
        make()
    msg = str(err.value)
    assert msg.startswith(f"{name}=") and "accepted" in msg


def test_profile_env_override(monkeypatch):
    monkeypatch.setenv("ICL_PROFILE", "paper")
    assert resolve_profile("auto", "cpu") == "paper"
    assert resolve_profile("quick", "cpu") == "quick"
    monkeypatch.setenv("ICL_PROFILE", "slow")
    with pytest.raises(ValueError, match="ICL_PROFILE='slow'"):
        resolve_profile("auto", "cpu")
    monkeypatch.delenv("ICL_PROFILE")
    assert resolve_profile("auto", "cpu") == "quick"
    assert train_config("paper").steps == 500_000 and train_config("paper").lr == 1e-3
    assert train_config("quick", steps=None, lr=0.01).lr == 0.01


def test_literal_list_reads_lists_typed_on_the_command_line():
    """papermill -p passes "[3]" as a string: literal_list reads it; other values pass through unchanged."""
    from icl_lib.validate import literal_list

    assert literal_list("heads", "[3]") == [3]
    assert literal_list("supports", " [[0, 1], [1, 2]] ") == [[0, 1], [1, 2]]
    assert literal_list("kappas", "(1, 4.5)") == (1, 4.5)
    assert literal_list("heads", 3) == 3 and literal_list("profile", "auto") == "auto"
    assert literal_list("heads", [1, 2]) == [1, 2] and literal_list("steps", None) is None
    for bad in ("[1, 2", "[x]", "[1] + [2]"):
        with pytest.raises(ValueError, match=r"^heads='.*' is invalid: accepted a list literal"):
            literal_list("heads", bad)


def test_list_parameters_read_papermills_text_and_name_their_elements():
    """papermill -p passes "[1, 4]" as a string: it is read as the list; bad lists fail by name."""
    from icl_lib.validate import check_float_list, check_int_list

    assert check_float_list("kappas", "[1, 4, 16]", 1.0) == (1.0, 4.0, 16.0)
    assert check_int_list("Ls", (5, 10), 2, max_len=2) == (5, 10)
    for bad, text in (("[1,", "Ls='[1,'"), ([], "Ls=[]"), ([5, 6, 7], "at most 2"), ([5, "a"], "Ls[1]='a'"),
                      ([5, 1], "Ls[1]=1"), ("five", "Ls='five'")):
        with pytest.raises(ValueError, match=re.escape(text)):
            check_int_list("Ls", bad, 2, max_len=2)
    with pytest.raises(ValueError, match=re.escape("x[0]=1.0 is invalid")):
        check_float_list("x", [1.0], 0.0, 1.0, hi_open=True)
