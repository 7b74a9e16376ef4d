"""Deprecated: the old name of :mod:`clusterkit.engines.super_nodes` (a "unit" is now a
super-node); every name read from here warns and names its new home."""

from clusterkit._deprecated import module_getattr
from clusterkit.engines import super_nodes

__getattr__ = module_getattr(
    __name__, {"UnitGraph": "SuperNodeGraph"}, vars(super_nodes), new_module=super_nodes.__name__)
