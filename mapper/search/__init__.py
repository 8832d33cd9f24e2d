"""Local search neighbourhoods, one module per search space."""

from .communication import communication_neighborhood
from .pruned import pruned_neighborhood
from .quadratic import quadratic_neighborhood
from .swap import SearchStats

__all__ = ["SearchStats", "communication_neighborhood", "pruned_neighborhood",
           "quadratic_neighborhood"]
