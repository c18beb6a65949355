"""Probes: named, versioned lists of items with provenance, and the loaders that find them."""

from bias_core.probes.base import Probe, ProbeItem

__all__ = ["Probe", "ProbeItem"]
