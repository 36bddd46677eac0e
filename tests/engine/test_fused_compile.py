"""``python -m icl_lib.engine.fused_compile``: the kernels compiled into numba's cache before the
tests (``make kernels``), and a clear line where the chosen target cannot run here."""

import platform

import pytest

from icl_lib.engine import fused_compile
from icl_lib.engine.execution import fused_unavailable


def test_a_cpu_the_kernels_do_not_support_is_named_and_nothing_compiles(monkeypatch, capsys):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(fused_compile, "compile_kernels", lambda: pytest.fail("compiled on an unsupported CPU"))
    fused_unavailable.cache_clear()
    try:
        assert fused_compile.main([]) == 0
    finally:
        monkeypatch.undo()
        fused_unavailable.cache_clear()
    assert "not compiled (its kernels are built for x86-64 CPUs, and this one is aarch64)" in capsys.readouterr().out


def test_the_kernels_compile_and_say_so(capsys):
    if fused_unavailable() is not None:
        pytest.skip(fused_unavailable())
    assert fused_compile.main([]) == 0
    assert "ready in numba's cache" in capsys.readouterr().out
