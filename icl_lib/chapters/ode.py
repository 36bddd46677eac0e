"""Chapter 4's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.ode`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.ode import OdeSetup

# Every other library name chapter 4's code uses, so that the chapter imports this module alone.
from .. import figures
from ..paper1 import ode
from ..version import __version__

__all__ = ["OdeSetup", "figures", "ode", "__version__"]
