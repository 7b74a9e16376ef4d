"""``clusterkit selectors``: the shipped and registered selectors with their settings.

One line per selector (name and description), then its settings as a spec writes them
(``key=default``), then the ``exclude``/``include`` settings every selector takes, and the
installed plugin execution providers an ``ep:`` spec can name.
"""

from __future__ import annotations

import argparse

from clusterkit.io.ep_query import plugin_eps
from clusterkit.selection.protocol import LIMIT_SETTINGS
from clusterkit.selection.registry import registered_selectors, selector_settings
from clusterkit.selection.specs import GENERIC_SETTINGS, format_value


def add_parser(sub) -> argparse.ArgumentParser:
    return sub.add_parser("selectors", help="list the selectors with their settings and defaults")


def settings_line(name: str) -> str:
    """The settings of selector ``name`` as ``key=default (type)``, comma separated."""
    settings = selector_settings(name)
    if settings is None:
        return "any keyword (the factory takes **kwargs)"
    if not settings:
        return "no settings of its own"
    return ", ".join(f"{s.name}=<required> ({s.type_name})" if s.required else
                     f"{s.name}={format_value(s.default)} ({s.type_name})" for s in settings)


def main(args: argparse.Namespace) -> int:
    described = registered_selectors()
    width = max((len(n) for n in described), default=0)
    for name, doc in described.items():
        print(f"{name:<{width}}  {doc}")
        print(f"{'':<{width}}  settings: {settings_line(name)}")
    print("every selector also takes "
          + ", ".join(f"{k}=OP|OP ({what})" for k, what in GENERIC_SETTINGS.items()))
    print("and the device's limits "
          + ", ".join(f"{k}=N ({what})" for k, what in LIMIT_SETTINGS.items()))
    print("spec: [DEVICE=]NAME[key=value,...], e.g. --selector 'npu=nnapi[feature_level=3,"
          "exclude=Softmax|TopK]'")
    eps = ", ".join(plugin_eps()) or "none installed"
    print(f"an installed plugin EP's own answer: [DEVICE=]ep:EPNAME[option=value,...] ({eps})")
    return 0
