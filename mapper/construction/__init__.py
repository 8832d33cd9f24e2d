"""Initial mappings, one module per construction."""

from .bottomup import bottom_up
from .boxes import coordinate_bisection
from .greedy import greedy_allc, muller_merbach
from .matching import matching
from .ohtma import ohtma
from .regroup import regroup
from .topdown import top_down
from .trivial import identity, random_mapping

__all__ = ["bottom_up", "coordinate_bisection", "greedy_allc", "identity", "matching",
           "muller_merbach", "ohtma", "random_mapping", "regroup", "top_down"]
