"""ACME NPU: takes Conv and Relu (a tiny clusterkit plug-in for the tests)."""

from clusterkit import OpsProperty


def make_property(device: str = "acme_npu", *, relu: bool = True) -> OpsProperty:
    """The ACME NPU's op set; ``relu=False`` leaves Relu to the host."""
    return OpsProperty(["Conv", "Relu"] if relu else ["Conv"], device=device)


def run(problem, **options):
    """A plug-in strategy: clusterkit's own singleton strategy under another name."""
    from clusterkit.engines import get_strategy
    return get_strategy("singleton")(problem, **options)
