"""The links a placement is checked against: one value for every link argument.

:func:`mapper.solve.api.map_processes` compares candidates with the baseline on the
machine's shared links and, with objective ``"congestion"``, keeps the result under the
baseline's busiest ones.  Which links those are, and what they carry, is one
:class:`LinkModel`: a switch tree's congestion levels (with their links' weights, and
the uplinks' capacities where a profile's phases are timed over every level, or
scenarios of them where they are not known), or a routed network for a machine that
is no tree.  The default model has no links: J alone decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..objectives.congestion import LinkCapacities, LinkWeights
from ..objectives.link_load import RoutedNetwork


@dataclass(frozen=True)
class LinkModel:
    """``congestion_levels``: hierarchy level indices whose groups reach the next level
    through a shared link (nodes' host links, switches' uplinks).  ``link_weights``
    (:data:`~mapper.objectives.congestion.LinkWeights`): per level, each group's link
    cost, 1 / relative capacity (None: a level's links alike).  ``link_capacities``
    (:data:`~mapper.objectives.congestion.LinkCapacities`): per level, each group's
    uplink capacity, comparable across levels (a profile's phases are then timed over
    every level).  ``capacity_scenarios``: label → capacities, used where those are not
    known.  ``routed``: the routed network of a machine that is not a switch tree, in
    place of the levels."""

    congestion_levels: tuple[int, ...] = ()
    link_weights: LinkWeights | None = None
    link_capacities: LinkCapacities | None = None
    capacity_scenarios: Mapping[str, LinkCapacities] | None = None
    routed: RoutedNetwork | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "congestion_levels", tuple(self.congestion_levels or ()))
