"""Baselines: rank r on PE r, and a uniformly random bijection."""

from __future__ import annotations

import numpy as np


def identity(n: int) -> np.ndarray:
    """Rank r on PE r (what a launcher does without help).  O(n)."""
    return np.arange(n, dtype=np.int64)


def random_mapping(n: int, seed: int) -> np.ndarray:
    """A uniformly random bijection (Fisher-Yates via numpy).  O(n)."""
    return np.random.default_rng(seed).permutation(n).astype(np.int64)
