"""What a chapter's validation cell uses besides :mod:`icl_lib.validate`'s checks.

* :func:`renamed` -- a configuration validated by its own field names (``heads``) reports the
  chapter's parameter name instead (``grid_heads``), so that every error names what the reader set
  (chapter 9).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

__all__ = ["renamed"]


@contextmanager
def renamed(**names: str) -> Iterator[None]:
    """Inside the block, a :class:`ValueError` that names a parameter ``old`` (``old=...``,
    ``old[2]=...``) is raised again naming ``names[old]`` instead; any other error passes as it is."""
    try:
        yield
    except ValueError as err:
        m = re.match(r"([A-Za-z_]\w*)(?=[=\[ ])", str(err))
        if m and m.group(1) in names:
            raise ValueError(names[m.group(1)] + str(err)[m.end():]) from err
        raise
