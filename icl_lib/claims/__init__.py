"""The verdict every chapter ends with: one ``CLAIM`` line per checked statement of the papers.

A claim tests a statement of a paper (quoted, with its section) against something independent of
the code that produced the measurement: a closed form, a baseline estimator, a Monte Carlo of the
true loss, a rival hypothesis.  It is decided on an interval (:mod:`icl_lib.stats`), by a
:class:`Rule` written before the run:

    claims.test("multi-near-debiased-gd", estimate, Within(-0.02, 0.02) & Excludes(-0.013),
                statement="...", section="P1 §4.3", profiles=QUICK_AND_PAPER)

A rule gives ``PASS`` when the whole interval satisfies it, ``FAIL`` when none of it does, and
``INCONCLUSIVE`` when the interval straddles the boundary: the data cannot decide, which the
dashboard counts and shows (it does not fail the chapter).  A check says how many independent
units its measurement rests on (``n=12, unit="seeds per head count"``): where it is left
INCONCLUSIVE, the report prints how many would decide it at the measured value and spread
(:func:`icl_lib.stats.size_to_decide`), and the chapter says why they are not trained
(``undecided="..."``).

Each check is of one *kind* (:data:`KINDS`): ``"paper"``, a statement of one of the two papers, the
only kind the dashboard's headline counts; ``"beyond"``, the book's own hypothesis beyond the papers
(chapter 9's single-sign trap); ``"check"``, a check of the book's own derivations, samplers,
invariances or study design (it can fail, but it does not test a paper).  Paper and beyond-the-paper
claims print ``CLAIM`` lines, checks ``CHECK`` lines of the same form.  Every claim declares the profiles in
which it is claimed to hold; in another profile it is listed as ``NOT-RUN`` (never silently
omitted).  A chapter records its claims as it measures them, then calls :meth:`Claims.report` in
its last cell, which prints

    CLAIM <id> <PASS|FAIL|INCONCLUSIVE|NOT-RUN> measured=<value> interval=<[lo,hi]|-> expected=<rule> profiles=<p,..>

for every claim, shows them as a table, and raises ``AssertionError`` if any failed, so CI (nbval)
and the book build fail with it.

A claim that was written before the run and then did not reproduce is not re-written, re-declared
or dropped: its chapter shows the evidence and says so, and the claim carries that as
``known_failure="<where and how it fails, and where the chapter shows it>"``.  Its verdict is
computed and shown exactly as for any other claim (a ``FAIL`` stays a ``FAIL`` on every page and
in every count); only :meth:`Claims.report` does not raise for it, and it prints one
``REPORTED <id> ...`` line per such claim after the ``CLAIM`` lines, whatever its verdict in this
run.  Any other ``FAIL`` still fails the chapter.

In a notebook it also records the same claims as JSON (the chapter, its profile and device, the
library versions, and every claim with the paper's statement and the cell that checked it) in a
MyST-NB ``glue`` record named :data:`CLAIMS_GLUE_KEY`, of media type :data:`CLAIMS_MIME`.  Nothing
shows it; the book's claims dashboard and execution-status page (``icl_lib/book/sphinx``) read it.
With the environment variable ``ICL_CLAIMS_DIR`` set (``make test`` and ``make book`` set it to
``_build/claims``), it also writes them, with the time of the run, to
``$ICL_CLAIMS_DIR/<profile>/<chapter>.json`` (atomically): a build of one profile shows the
verdicts a run of the other profile recorded there beside its own.
"""

from .report import CLAIM_LINE, CLAIMS_GLUE_KEY, CLAIMS_MIME, KINDS, PROFILES, VERDICTS, Claim, Claims
from .rules import Above, Below, Excludes, Outside, Rule, Within, format_value

__all__ = ["Claims", "Claim", "Rule", "Within", "Above", "Below", "Outside", "Excludes", "VERDICTS", "PROFILES",
           "KINDS", "format_value", "CLAIM_LINE", "CLAIMS_MIME", "CLAIMS_GLUE_KEY"]
