"""The ``--selector`` names of the selectors shipped in this package.

The table itself lives in :mod:`clusterkit.selection.registry` (which imports a module here on
first use); it is re-exported for callers that list the shipped selectors.
"""

from __future__ import annotations

from clusterkit.selection.registry import SHIPPED

__all__ = ["SHIPPED"]
