"""Caps from a profile's phases for the constrained search: its phases' busiest links
and its latency-bound phases' slowest ranks, each kept at the baseline's.

The never-worse rule refuses a candidate whose phase time
(:func:`mapper.objectives.phase_time.phase_time`) or latency pace
(:func:`mapper.objectives.phase_time.latency_pace`) exceeds the baseline's.  The constrained search
(:mod:`mapper.search.congested`) can aim at both instead, with two sufficient conditions that are
local to a swap:

* **phase links**: for every phase p without a pace and every congestion level l, each
  group's cut of p's graph (times its link weight) stays at or below the baseline's
  busiest of that phase and level.  Then each phase's busiest link at each level is
  no busier than under the baseline, so its phase time per level, over all levels
  with any capacities, and summed over phases, is not larger (exactly so in model
  "phases"; in model "runs" a group's sum over a run can still exceed the baseline's
  when the baseline's slow groups differ from phase to phase, which the rule checks
  afterwards).
* **pace channels**: a latency-bound phase's pace is the maximum over ranks of a
  rank's Σ w·links (``"stages"``: all its edges; ``"sweep"``: one maximum over its
  edges to higher ranks plus one over those to lower ranks).  Each of these maxima is
  a *channel*: rank r's load in it is the Σ over the edges it owns, w times the tree
  links the message crosses, and every rank's load stays at or below the baseline's
  largest.  Then the pace is not raised.
* **exchange rounds**: a round's latency is its farthest message's links
  (:func:`mapper.objectives.phase_time.round_latency`).  Each message is a channel entry of weight 1
  owned by one of its ends (a rank's k-th message in the round's k-th channel, so a
  load is one message's links), and all of a round's channels share the baseline's
  farthest as their cap.  Then no round lasts longer.

A swap of u and v changes the phase cuts of u's and v's groups only (as for the total
graph), and the channel loads of u, v and the ranks that own an edge to u or v:
O(Σ_p (deg_p u + deg_p v) · L) per swap.  This module only builds the arrays (and
recomputes the loads and the violation from scratch, O(Σ_p m_p · L)); the search is
compiled (``mapper/search/_congested.pyx``).

Why: under the total graph's caps alone the solver's result kept the J-optimal
placements of NPB LU, BT and SP, slower than block for their latency-bound phases, and
of MG for its per-level phases (bench/README.md, "NPB by phase").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from ..model.phased_graph import PIPELINE_PACES, PhasedGraph
from ..objectives.congestion import LinkWeights, uplink_loads
from ..objectives.phase_time import links_crossed

#: The most rows (channels x ranks) exchange rounds may add to the pace channels: each
#: row costs about 40 bytes in the arrays and the search, and a swap visits every
#: channel; a trace of many distinct rounds beyond it is left to the rule's check.
ROUND_CHANNEL_ROWS = 1 << 22


@dataclass(frozen=True)
class PaceChannels:
    """C channels over n ranks as CSR arrays with rows c·n + r: ``out_*`` the edges
    rank r owns in channel c (partner, weight), ``in_*`` the edges other ranks own
    that end at r (owner, weight).  ``names`` says which phase and pass each is;
    channels with the same ``shared`` number share one cap (an exchange round's)."""

    n: int
    names: tuple[str, ...]
    out_ptr: np.ndarray
    out_idx: np.ndarray
    out_w: np.ndarray
    in_ptr: np.ndarray
    in_idx: np.ndarray
    in_w: np.ndarray
    shared: np.ndarray

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class PhaseCaps:
    """What :func:`phase_caps` keeps: the phases bounded by their busiest links (their
    graphs, and per graph and level the baseline's busiest load) and the pace channels
    (and each one's cap: the baseline's slowest rank's load)."""

    graphs: tuple[CommGraph, ...]
    caps: np.ndarray          # (len(graphs), levels)
    channels: PaceChannels
    pace_caps: np.ndarray     # (channels,)


def pace_channels(phased: PhasedGraph) -> PaceChannels:
    """The pace channels of ``phased``'s latency-bound phases (module docstring): two
    per ``"sweep"`` phase (edges owned by their lower rank, then by their higher), one
    per ``"stages"`` phase (each edge owned by both ends), and for an exchange round
    (``"rounds"``) one per edge of a rank (:func:`_round_channels`), weight 1, all of
    the round's channels under one cap, so that no message of the round crosses more
    links than the baseline's farthest (:func:`mapper.objectives.phase_time.round_latency` is not
    raised).  Rounds whose channels would hold more than :data:`ROUND_CHANNEL_ROWS`
    rows in all are left out (the rule still checks their latency).
    O(Σ_p m_p log m_p)."""
    n = phased.n
    owners, partners, weights, names, shared = [], [], [], [], []
    rounds: list[bool] = []  # per channel: an exchange round's
    groups = 0  # cap numbers given out: one per pipeline channel, one per round
    for phase in phased.phases:
        if phase.pace == "rounds":
            _round_channels(phase.graph, phase.name or f"phase {len(names)}",
                            owners, partners, weights, names)
            rounds += [True] * (len(names) - len(shared))
            shared += [groups] * (len(names) - len(shared))
            groups += 1
            continue
        if phase.pace not in PIPELINE_PACES:
            continue
        u, v, w = phase.graph.edges()
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        label = phase.name or f"phase {len(names)}"
        if phase.pace == "sweep":
            passes = [(lo, hi, f"{label} (forward)"), (hi, lo, f"{label} (backward)")]
        else:
            passes = [(np.concatenate([lo, hi]), np.concatenate([hi, lo]), label)]
        for own, other, name in passes:
            owners.append(own)
            partners.append(other)
            weights.append(np.asarray(w, dtype=np.float64) if len(own) == len(w)
                           else np.concatenate([w, w]).astype(np.float64))
            names.append(name)
            shared.append(groups)
            groups += 1
            rounds.append(False)
    if sum(rounds) * n > ROUND_CHANNEL_ROWS:
        keep = [i for i, r in enumerate(rounds) if not r]
        owners, partners, weights = ([x[i] for i in keep]
                                     for x in (owners, partners, weights))
        names, shared = [names[i] for i in keep], [shared[i] for i in keep]
    return _channel_csr(n, owners, partners, weights, tuple(names),
                        np.asarray(shared, dtype=np.int64))


def _round_channels(graph: CommGraph, label: str, owners: list[np.ndarray],
                    partners: list[np.ndarray], weights: list[np.ndarray],
                    names: list[str]) -> None:
    """Append an exchange round's channels (:func:`pace_channels`): each edge owned by
    its end with fewer edges in the round (the lower rank on a tie), the k-th edge a
    rank owns (by partner) in channel k, weight 1, so a rank's load in a channel is the
    links of one message.  Owned by the smaller end, a hub's messages (a rank that
    sends to every other in a round) make one channel, not n - 1."""
    u, v, _ = graph.edges()
    if not len(u):
        return
    deg = np.bincount(np.concatenate([u, v]), minlength=graph.n)
    by_u = (deg[u] < deg[v]) | ((deg[u] == deg[v]) & (u < v))
    own, other = np.where(by_u, u, v), np.where(by_u, v, u)
    order = np.lexsort((other, own))
    own, other = own[order], other[order]
    k = np.arange(len(own)) - np.searchsorted(own, own, side="left")
    for j in range(int(k.max()) + 1):
        pick = k == j
        owners.append(own[pick])
        partners.append(other[pick])
        weights.append(np.ones(int(pick.sum()), dtype=np.float64))
        names.append(f"{label} (edge {j} of a rank)")


def _channel_csr(n: int, owners: list[np.ndarray], partners: list[np.ndarray],
                 weights: list[np.ndarray], names: tuple[str, ...], shared: np.ndarray
                 ) -> PaceChannels:
    """Stack the channels' directed edges into the out and in CSR arrays."""
    if not names:
        zero = np.zeros(1, dtype=np.int64)
        none_i, none_w = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)
        return PaceChannels(n, (), zero, none_i, none_w, zero.copy(), none_i.copy(),
                            none_w.copy(), np.zeros(0, dtype=np.int64))
    rows_out = np.concatenate([c * n + o for c, o in enumerate(owners)]).astype(np.int64)
    rows_in = np.concatenate([c * n + p for c, p in enumerate(partners)]).astype(np.int64)
    own = np.concatenate(owners).astype(np.int32)
    part = np.concatenate(partners).astype(np.int32)
    w = np.concatenate(weights).astype(np.float64)
    rows = len(names) * n

    def csr(row: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.argsort(row, kind="stable")
        ptr = np.zeros(rows + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(row, minlength=rows))
        return ptr, np.ascontiguousarray(col[order]), np.ascontiguousarray(w[order])
    out_ptr, out_idx, out_w = csr(rows_out, part)
    in_ptr, in_idx, in_w = csr(rows_in, own)
    return PaceChannels(n, names, out_ptr, out_idx, out_w, in_ptr, in_idx, in_w, shared)


def pace_loads(channels: PaceChannels, machine: Hierarchy, pe: np.ndarray,
               levels: Sequence[int]) -> np.ndarray:
    """Every rank's load in every channel (rows c·n + r): Σ over the edges it owns of
    weight × tree links crossed (two per level of ``levels`` where the ends' groups
    differ).  O(Σ_c m_c · L)."""
    n = channels.n
    rows = channels.count * n
    if not rows:
        return np.zeros(0, dtype=np.float64)
    counts = np.diff(channels.out_ptr)
    row = np.repeat(np.arange(rows, dtype=np.int64), counts)
    owner, partner = row % n, channels.out_idx.astype(np.int64)
    links = links_crossed(machine, np.asarray(pe, dtype=np.int64), owner, partner, levels)
    return np.bincount(row, weights=channels.out_w * links, minlength=rows)


def phase_caps(phased: PhasedGraph, machine: Hierarchy, baseline: np.ndarray,
               levels: Sequence[int], link_weights: LinkWeights | None = None
               ) -> PhaseCaps:
    """The caps of ``phased``'s phases under ``baseline`` (module docstring): per phase
    without a pace and level, the busiest load (cut × link weight); per pace channel,
    the largest rank load.  O(Σ_p (n + m_p · L))."""
    graphs = tuple(p.graph for p in phased.phases if not p.pace)
    caps = np.array([[u.load for u in uplink_loads(g, machine, baseline, levels,
                                                   link_weights)] for g in graphs],
                    dtype=np.float64).reshape(len(graphs), len(levels))
    channels = pace_channels(phased)
    loads = pace_loads(channels, machine, baseline, levels)
    pace = (loads.reshape(channels.count, phased.n).max(axis=1) if channels.count
            else np.zeros(0, dtype=np.float64))
    if channels.count:  # channels sharing a cap: the largest of theirs
        top = np.full(int(channels.shared.max()) + 1, -np.inf)
        np.maximum.at(top, channels.shared, pace)
        pace = top[channels.shared]
    return PhaseCaps(graphs, caps, channels, pace)


def pace_violation(pc: PhaseCaps, machine: Hierarchy, pe: np.ndarray,
                   levels: Sequence[int]) -> float:
    """Σ over channels and ranks of (load − cap)⁺ / cap (a cap of 0 counts as 1), from
    scratch; the pace channels' share of the constrained search's V."""
    if not pc.channels.count:
        return 0.0
    loads = pace_loads(pc.channels, machine, pe, levels).reshape(pc.channels.count, -1)
    cap = pc.pace_caps[:, None]
    over = loads > cap
    return float(np.where(over, (loads - cap) / np.where(cap > 0, cap, 1.0), 0.0).sum())
