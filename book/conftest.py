"""pytest settings for the chapters under nbval (``make nbval``; not part of the book's pages).

Once a cell has run, nbval 0.11 waits at most 5 s for each of the kernel's output messages (a
constant of the plugin, ``IPyNbCell.output_timeout``, not an option).  On a loaded machine a
chapter's long training cell has missed it: chapter 5's first training cell failed with "Timeout
of 5 seconds exceeded waiting for output" in a full CI run while the machine's two cores also
trained the run store, and passed alone under the same load.  Each message may take up to
:data:`OUTPUT_TIMEOUT` seconds instead; a kernel that is idle ends the wait at once, so a normal
run is not slowed, and a cell's own run time stays bounded by ``--nbval-cell-timeout``.
"""

OUTPUT_TIMEOUT = 120  # seconds nbval waits for each output message of a cell that has run


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval's notebook cells
            item.output_timeout = OUTPUT_TIMEOUT
