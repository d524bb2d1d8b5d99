"""Counters kept beside the model and the Nsight Compute-named metrics computed from them."""

from .counters import REASONS, SMCounters

__all__ = ["REASONS", "SMCounters"]
