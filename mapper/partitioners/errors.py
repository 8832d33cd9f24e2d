"""The errors of partitioning: a request that cannot be met, a partitioner not installed."""

from __future__ import annotations

from ..errors import RankmapError


class PartitionError(RankmapError, ValueError):
    """A partition request that cannot be met (k > n, bad targets, unknown backend…)."""


class KahipMissing(RankmapError, RuntimeError):
    """KaHIP (PyPI ``kahip``) is not installed."""
