"""rankmap's scheduler-independent process-mapping library.

Tiny public API over one module per strategy::

    from mapper import CommGraph, Hierarchy, map_processes
    result = map_processes(graph, Hierarchy.parse("4:16:8", "1:10:100"),
                           algorithm="topdown+n10", seed=0, time_limit=5.0)
    result.mapping, result.objective, result.traffic

Names are imported on first use (PEP 562), so that ``mapper.solve.algorithm_names`` (the algorithm
grammar, standard library only) can be read without loading numpy and the compiled
kernels — the Slurm TaskProlog validates its configuration with it once per task.

References
----------
* Schulz, Träff & von Kirchbach: Better Process Mapping and Sparse Quadratic
  Assignment.  arXiv:1702.04164v2 (2019); the § numbers in this package follow this version.
  Journal version: ACM J. Exp. Algorithmics 25 (2020), doi:10.1145/3409667; first
  version (two authors, fewer algorithms, other § numbers possible): SEA 2017,
  doi:10.4230/LIPIcs.SEA.2017.4.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ALGORITHMS": "solve.algorithm_names", "NEIGHBORHOODS": "solve.algorithm_names",
    "map_processes": "solve.api", "MappingResult": "solve.result",
    "LinkModel": "solve.link_model",
    "CommGraph": "model.graph", "GraphError": "model.graph",
    "DistanceMatrix": "model.machine", "Hierarchy": "model.machine", "Machine": "model.machine",
    "MachineError": "model.machine",
    "Evaluation": "objectives.qap", "MappingError": "objectives.qap",
    "TrafficLevel": "objectives.qap", "evaluate": "objectives.qap", "objective": "objectives.qap",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mapper' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return __all__

