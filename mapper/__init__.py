"""rankmap's scheduler-independent process-mapping library.

Tiny public API over one module per strategy::

    from mapper import CommGraph, Hierarchy, map_processes
    result = map_processes(graph, Hierarchy.parse("4:16:8", "1:10:100"),
                           algorithm="topdown+n10", seed=0, time_limit=5.0)
    result.mapping, result.objective, result.traffic

Names are imported on first use (PEP 562), so that ``mapper.algorithm_names`` (the algorithm
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
import sys
import types

_EXPORTS = {
    "ALGORITHMS": "algorithm_names", "NEIGHBORHOODS": "algorithm_names", "map_processes": "api",
    "CommGraph": "graph", "GraphError": "graph",
    "DistanceMatrix": "machine", "Hierarchy": "machine", "Machine": "machine",
    "MachineError": "machine",
    "Evaluation": "objective", "MappingError": "objective", "TrafficLevel": "objective",
    "evaluate": "objective",
    "MappingResult": "result",
}

__all__ = sorted([*_EXPORTS, "objective"])


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mapper' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


class _Package(types.ModuleType):
    """``mapper.objective`` is both a submodule and the function exported under that
    name.  Importing the submodule makes Python set the package attribute to the
    module; eager imports used to rebind it to the function afterwards.  Lazily, this
    property keeps ``from mapper import objective`` the function whatever was imported
    first (``from mapper.objective import …`` still reads the module; ``import
    mapper.objective as m`` gives the function, as it did with eager imports)."""

    @property
    def objective(self):
        return importlib.import_module(".objective", __name__).objective

    @objective.setter
    def objective(self, value) -> None:  # the import system's setattr: keep the function
        pass


sys.modules[__name__].__class__ = _Package
