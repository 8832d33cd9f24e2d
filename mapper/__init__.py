"""rankmap's scheduler-independent process-mapping library.

Tiny public API over one module per strategy::

    from mapper import CommGraph, Hierarchy, map_processes
    result = map_processes(graph, Hierarchy.parse("4:16:8", "1:10:100"),
                           algorithm="topdown+n10", seed=0, time_limit=5.0)
    result.mapping, result.objective, result.traffic
"""

from .api import ALGORITHMS, NEIGHBORHOODS, map_processes
from .graph import CommGraph, GraphError
from .machine import DistanceMatrix, Hierarchy, Machine, MachineError
from .objective import Evaluation, MappingError, TrafficLevel, evaluate, objective
from .result import MappingResult

__all__ = [
    "ALGORITHMS", "NEIGHBORHOODS", "CommGraph", "DistanceMatrix", "Evaluation", "GraphError",
    "Hierarchy", "Machine", "MachineError", "MappingError", "MappingResult", "TrafficLevel",
    "evaluate", "map_processes", "objective",
]
