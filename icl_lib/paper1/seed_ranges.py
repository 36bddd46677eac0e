"""Where each group of paper 1's runs takes its seeds (chapters 1-7 and 9): one table.

A run is its configuration and its seed, so two groups that train one configuration from one seed
train one run, which a chapter would then count twice as if it were two.  Each group takes its
seeds from its own range of :data:`SEED_RANGES`, a test checks that no two ranges overlap and that
every run the chapters train with their default parameters, in either profile, lies in its group's
range (``tests/test_seed_ranges.py``).  A chapter's ``seed`` parameter moves the first seed of its
own groups; its default is its range's start.
"""

from __future__ import annotations

__all__ = ["SEED_RANGES", "first_seed"]

# name: (the seeds, who takes them)
SEED_RANGES: dict[str, tuple[range, str]] = {
    "own": (range(0, 900), "the runs of chapters 1-7 from their seed parameter (default 0): the shared "
                           "head sweep, chapter 5's variants, proportional and sphere runs, chapter 6's "
                           "correlations, chapter 7's tasks"),
    "pilot": (range(900, 902), "the pilot that chose plain SGD's rate for chapter 2 (two three-head seeds; "
                               "not trained by the book)"),
    "trap": (range(1000, 2000), "chapter 9's runs from its seed parameter (default 1000): its sweep, grid, "
                                "longer runs and causes, and the anchor runs chapter 2 counts with its own"),
    "sensitivity": (range(2000, 2048), "chapter 2's runs with other optimiser settings, from 2000 plus its seed "
                                       "parameter (up to 48 seeds per setting)"),
}


def first_seed(name: str) -> int:
    """The first seed of the range ``name`` of :data:`SEED_RANGES`."""
    return SEED_RANGES[name][0].start
