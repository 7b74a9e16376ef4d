"""PyTorch graphs (the optional extra ``clusterkit[torch]``).

Read a ``torch.fx.GraphModule`` or a ``torch.export.ExportedProgram`` into a clusterkit Graph
(:func:`read_fx`), use any fx ``OperatorSupportBase`` as a clusterkit device
(:class:`FxSupportProperty`) or a clusterkit selector as an fx predicate
(:class:`SelectorSupport`, :class:`OpsSupport`), and partition with
:class:`CapabilityBasedPartitioner`, a drop-in for torch.fx's. Without torch installed, importing
this package raises :class:`TorchMissingError` (an ``ImportError``) naming the extra; the rest of
clusterkit never needs torch.
"""

from __future__ import annotations

from clusterkit.errors import ClusterkitError


class TorchMissingError(ClusterkitError, ImportError):
    """PyTorch is not installed; clusterkit.torch needs the extra ``clusterkit[torch]``."""


try:
    import torch  # noqa: F401
    import torch.fx  # noqa: F401  (the submodules below use it)
except ImportError as _err:
    raise TorchMissingError(
        "clusterkit.torch needs PyTorch, which is not installed: install the CPU build "
        "(pip install torch --index-url https://download.pytorch.org/whl/cpu) and then "
        f"pip install 'clusterkit[torch]' ({_err})") from _err

from clusterkit._deprecated import module_getattr  # noqa: E402
from clusterkit.torch.partitioner import CapabilityBasedPartitioner, Cluster  # noqa: E402
from clusterkit.torch.reader import op_name, read_fx  # noqa: E402
from clusterkit.torch.support import FxSupportProperty, OpsSupport, SelectorSupport  # noqa: E402

__all__ = ["CapabilityBasedPartitioner", "Cluster", "FxSupportProperty", "OpsSupport",
           "SelectorSupport", "TorchMissingError", "op_name", "read_fx"]

#: ``Partition`` (torch.fx's word for one cluster) is the deprecated old name of ``Cluster``
__getattr__ = module_getattr(__name__, {"Partition": "Cluster"}, globals())
