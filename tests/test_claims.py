"""Claims.report() in a real kernel: the printed CLAIM lines and the JSON output the book reads."""

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from icl_lib.claims import CLAIMS_GLUE_KEY, CLAIMS_MIME, Claims

ROOT = Path(__file__).resolve().parents[1]


def _run(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True)
    client.km = client.create_kernel_manager()
    client.km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    client.execute(env=env)
    return nb


def test_report_in_a_kernel_prints_lines_and_json_with_cells():
    nb = _run(
        [
            "import icl_lib as icl\nclaims = icl.Claims('99_t', 'quick')",
            "x = 1",
            "claims.check('first', True, 0.5, 'x < 1', 'the first statement')",
            "claims.check('second', False, [1, 2], 'y > 3', 'the second statement')",
            "claims.report()",
        ]
    )
    counts = [c.execution_count for c in nb.cells]
    last = nb.cells[-1].outputs
    text = "".join(o.get("text", "") for o in last if o.output_type == "stream")
    assert "CLAIM first PASS measured=0.5 expected=x<1\n" in text
    assert "CLAIM second FAIL measured=[1,2] expected=y>3\n" in text
    shown = [o for o in last if o.output_type == "display_data" and "text/html" in o.data]
    assert len(shown) == 1 and "first" in shown[0].data["text/html"]  # the table, as before
    # the JSON is a MyST-NB glue record: read as glue data, shown nowhere
    from myst_nb.ext.glue import extract_glue_data

    glued = extract_glue_data(nb, list(range(len(nb.cells))), logger=None)
    assert list(glued) == [CLAIMS_GLUE_KEY]
    assert [o for o in nb.cells[-1].outputs if o.output_type == "display_data"] == shown
    payload = glued[CLAIMS_GLUE_KEY]["data"][CLAIMS_MIME]
    assert payload["chapter"] == "99_t" and payload["profile"] == "quick" and payload["device"] == "cpu"
    first, second = payload["claims"]
    assert (first["cid"], first["passed"], first["statement"]) == ("first", True, "the first statement")
    assert (second["cid"], second["passed"], second["measured"]) == ("second", False, "[1,2]")
    # each claim names the cell that checked it by its execution count
    assert (first["cell"], second["cell"]) == (counts[2], counts[3])
    assert any(o.output_type == "error" and o.ename == "AssertionError" for o in last)


def test_payload_outside_ipython_has_no_cell():
    c = Claims("t", "paper", device="cpu")
    c.check("a", True, 1.0, "x", "s")
    p = c.payload()
    assert p["claims"][0]["cell"] is None and p["device"] == "cpu" and p["profile"] == "paper"
    with pytest.raises(ValueError):  # a wrong device fails as every config does
        Claims("t", "quick", device="gpu")
