"""The job modes by name: where a request's ``mode`` becomes code.

A request's mode is decided once, by :func:`slurm_plugin.site.request.request_for`, and
travels as a name (:data:`slurm_plugin.common.job_conventions.JOB_MODES`); :func:`job_mode` gives
the :class:`~slurm_plugin.modes.base.JobMode` of that name.  Each mode's module is
imported when the mode is first asked for: the mesh mode pulls in scipy.sparse.csgraph
and scipy.linalg (0.2-0.5 s), which a graph job's worker never needs.
"""

from __future__ import annotations

from collections.abc import Callable

from ..common.job_conventions import GRAPH_MODE, MESH_MODE, SUMMA_MODE
from .base import JobMode


def _graph() -> JobMode:
    from .graph_job import GRAPH

    return GRAPH


def _mesh() -> JobMode:
    from .mesh_job import MESH

    return MESH


def _summa() -> JobMode:
    from .summa_job import SUMMA

    return SUMMA


#: mode name → the function that imports and returns the mode
MODES: dict[str, Callable[[], JobMode]] = {GRAPH_MODE: _graph, MESH_MODE: _mesh,
                                           SUMMA_MODE: _summa}


def job_mode(name: str) -> JobMode:
    """The mode called ``name``; ValueError for a name that is none (a request's mode
    is checked where it is made or read, so this is a bug)."""
    try:
        load = MODES[name]
    except KeyError:
        raise ValueError(f"unknown job mode {name!r} (known: {', '.join(MODES)})") from None
    return load()
