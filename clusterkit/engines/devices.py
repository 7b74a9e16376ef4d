"""The old home of the device choice: :mod:`clusterkit.passes.devices` (re-exported here)."""

from clusterkit.passes.devices import (
    MODES,
    check_mode,
    choose_devices,
    device_cut,
    device_labels,
    narrow,
    widen,
)

__all__ = ["MODES", "check_mode", "choose_devices", "device_cut", "device_labels", "narrow",
           "widen"]
