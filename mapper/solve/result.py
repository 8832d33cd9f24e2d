"""The result object every mapping algorithm returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..objectives.qap import TrafficLevel

#: The solver's parts timed in :attr:`MappingResult.timings`, in order.
TIMINGS = ("construction", "search", "baseline", "evaluation", "other")


@dataclass(frozen=True)
class MappingResult:
    """A rank → PE mapping and what it costs.

    Attributes
    ----------
    mapping:
        ``mapping[r]`` is the PE (0-based, numbered as the machine numbers them) of rank r.
    objective:
        J, each undirected edge counted once (SharedMap and the paper's code print 2J).
    traffic:
        Volume per hierarchy level, innermost first.
    seconds:
        Wall time of construction plus local search.
    algorithm, seed:
        What produced it, so that it can be reproduced.
    hit_time_limit:
        True when local search stopped at the time limit (the best mapping found so far
        is returned).
    origin:
        ``"algorithm"``; with a baseline (:func:`mapper.map_processes`) also
        ``"baseline"`` (nothing beat it), ``"baseline+<neighbourhood>"`` (the
        baseline improved by local search won) or ``"baseline regrouped"`` (the
        baseline's node groups kept whole and moved, :mod:`mapper.construction.regroup`;
        ``"baseline regrouped in rank order"`` with its rank-order term);
        ``"grid boxes"`` or ``"grid boxes, outer faces shared"`` (with or without a
        baseline) when the graph's Cartesian grid cut into the tree's groups won
        (:mod:`mapper.construction.boxes`); ``"hosts in one block each (block
        placement)"`` when rank r on PE r tied the winner and kept its hosts whole
        (:func:`mapper.solve.candidates.whole_host_variants`; the winner's rotation onto
        whole hosts keeps the winner's origin, with a note).
    candidates:
        J of every candidate that was compared, by name.
    rejected:
        Candidates with a lower J that were refused, by name, with the reason (they
        loaded a shared uplink more than the baseline did, see
        :mod:`mapper.objectives.congestion`).
    notes:
        Sentences for the user's report about how the result was obtained, e.g. that
        every placement has the same J (:func:`mapper.model.dense.uniform_pattern`).
    timings:
        Wall seconds by solver part (:data:`TIMINGS`): the constructions of every
        start, the local searches (N_C^d, cycles, iterated search), the comparison
        with the baseline (its polishing and regrouping included) and the evaluations
        of J; ``other`` is the rest of :attr:`seconds`, so they sum to it.
    """

    mapping: np.ndarray
    objective: float
    traffic: tuple[TrafficLevel, ...]
    seconds: float
    algorithm: str
    seed: int
    hit_time_limit: bool = False
    origin: str = "algorithm"
    candidates: dict[str, float] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready summary (without the mapping array)."""
        return {
            "algorithm": self.algorithm,
            "seed": self.seed,
            "objective": self.objective,
            "seconds": self.seconds,
            "n": int(len(self.mapping)),
            "hit_time_limit": self.hit_time_limit,
            "origin": self.origin,
            "candidates": dict(self.candidates),
            "rejected": dict(self.rejected),
            "notes": list(self.notes),
            "traffic": [t.as_dict() for t in self.traffic],
            "timings": dict(self.timings),
        }
