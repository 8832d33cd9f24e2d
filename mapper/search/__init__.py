"""Local search neighbourhoods, one module per search space."""

from .communication import communication_neighborhood
from .iterated import IteratedStats, iterated_local_search
from .pruned import pruned_neighborhood
from .quadratic import quadratic_neighborhood
from .swap import SearchStats

__all__ = ["IteratedStats", "SearchStats", "communication_neighborhood",
           "iterated_local_search", "pruned_neighborhood",
           "quadratic_neighborhood"]
