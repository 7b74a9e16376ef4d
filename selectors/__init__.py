"""Shipped selectors for real accelerators, installed as ``clusterkit.selectors``.

This folder sits at the repository root under the name ``selectors``, which is also a module of
Python's standard library (asyncio and subprocess import it). When a Python started at the
repository root imports the bare name ``selectors`` it finds this file first; in that case the
code below loads the standard library's module and puts it in ``sys.modules`` in our place, so
that ``import selectors`` keeps meaning the standard library. Installed (editable or wheel) this
package is ``clusterkit.selectors`` and the branch is never taken.

Importing this package registers nothing: :mod:`clusterkit.selection.registry` declares every
shipped selector by name and module and imports a module when its name is first asked for.
"""

if __name__ == "selectors":  # imported under the bare name: hand back the standard library
    import importlib.util as _util
    import os as _os
    import sys as _sys
    import sysconfig as _sysconfig

    _path = _os.path.join(_sysconfig.get_paths()["stdlib"], "selectors.py")
    _spec = _util.spec_from_file_location("selectors", _path)
    assert _spec is not None and _spec.loader is not None  # a .py file of the stdlib
    _module = _util.module_from_spec(_spec)
    _sys.modules["selectors"] = _module
    _spec.loader.exec_module(_module)
