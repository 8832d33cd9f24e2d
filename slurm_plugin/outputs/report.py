"""The job's report: the placement the job runs with, next to Slurm's own placements.

The numbers come from :func:`mapper.evaluate`, so the report shows exactly the J and
per-level traffic the solver optimized.  J counts each undirected edge once.  The
first lines say in words which placement the job runs with and why.  On a hop-matrix
machine (``[network]``) every placement also gets its hop-bytes, the largest hop count
any communicating pair crosses and the mean hops per byte (:mod:`mapper.objectives.hop_bytes`),
in the JSON record (``placements[].hops``) and in a table after the template's text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from ClusterShell.RangeSet import RangeSet

from mapper import CommGraph, MappingResult, evaluate
from mapper.model.machine import Hierarchy
from mapper.objectives.hop_bytes import has_hops, hop_bytes
from mapper.solve.candidates import BOXES, BOXES_SHARED, HOSTS_BLOCK, REGROUPED_IN_ORDER

from ..common.hostlist import fold_hostlist
from ..common.safe_text import escape_controls, escape_strings
from ..machine.layout import Layout
from .render import render_template


@dataclass(frozen=True)
class PlacementCost:
    name: str
    objective: float
    traffic: dict[str, float]
    saved_vs_default: str = ""  # "12.3%": J below the job's default placement
    applied: bool = False  # the job runs with this placement
    default: bool = False  # the placement Slurm gives the job without rankmap
    # hop-matrix machines: hop_bytes, max_hops, mean_hops_per_byte (mapper.objectives.hop_bytes)
    hops: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    job_id: str | None
    profile: str | None
    n: int
    nodes: str  # the job's nodes, folded: c[1-2048]
    node_count: int
    machine: str
    applied: bool
    algorithm: str | None = None
    seconds: float | None = None
    fallback_reason: str | None = None
    placements: list[PlacementCost] = field(default_factory=list)
    level_distances: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    default_placement: str = "block"  # the job's default placement, by name
    default_assumed: bool = True  # the prolog was not told --distribution
    summary: str = ""
    origin: str | None = None
    candidates: dict[str, float] = field(default_factory=dict)
    units: str = "bytes"
    rejected: dict[str, str] = field(default_factory=dict)  # candidate → why refused
    hop_metrics: bool = False  # the machine is a hop matrix: placements carry ``hops``
    #: GPU jobs the placement applies to: per rank, its host, Slurm's GPU indexes and
    #: its Slurm CPU ids (:func:`rank_gpus`)
    gpus: list[dict[str, Any]] = field(default_factory=list)


def _saved(base: float, value: float) -> str:
    if base <= 0:
        return "-"
    return f"{100.0 * (base - value) / base:.1f}%"


def _pct(base: float, value: float) -> float:
    return 100.0 * (base - value) / base if base > 0 else 0.0


def build_report(layout: Layout, graph: CommGraph | None, result: MappingResult | None,
                 defaults: Mapping[str, np.ndarray] | None = None,
                 default_name: str = "block", *, job_id: str | None = None,
                 profile: str | None = None, fallback_reason: str | None = None,
                 default_assumed: bool = True, units: str = "bytes",
                 machine=None, extra_notes: list[str] | None = None) -> Report:
    """Report data; without a usable graph only the reason and the job are shown.

    ``defaults`` are Slurm's placements by name (the job's default first, as
    :func:`slurm_plugin.machine.distribution.default_placements` returns them).  ``machine``
    is the one the solver used (default: the layout's hierarchy; a
    :class:`~mapper.model.networks.NodeHopMachine` for a ``[network]``), ``extra_notes``
    are the plan's notes beside the layout's.
    """
    machine = layout.hierarchy if machine is None else machine
    with_hops = has_hops(machine)
    placements: list[PlacementCost] = []
    distances = ({name: float(d) for name, d in zip(machine.level_names, machine.distances,
                                                    strict=True)}
                 if isinstance(machine, Hierarchy) else {})
    ours = result is not None and fallback_reason is None and result.origin != "baseline"
    summary = ""
    if graph is not None and graph.n == layout.n:
        if defaults is None:
            from ..machine.distribution import default_placements

            defaults = default_placements(layout)
            default_name = next(iter(defaults))
        candidates = dict(defaults)
        if ours:
            candidates = {"rankmap": result.mapping, **candidates}
        evals = {name: evaluate(graph, machine, m) for name, m in candidates.items()}
        default_j = evals[default_name].objective
        if not isinstance(machine, Hierarchy):
            # traffic per distinct distance, every value any placement reaches
            found = {t.name: t.distance for ev in evals.values() for t in ev.traffic}
            distances = dict(sorted(found.items(), key=lambda item: item[1]))
        for name, ev in evals.items():
            applied = name == "rankmap" if ours else name == default_name
            placements.append(PlacementCost(
                name, ev.objective, {t.name: t.volume for t in ev.traffic},
                "" if name == default_name else _saved(default_j, ev.objective),
                applied, name == default_name,
                hop_bytes(graph, machine, candidates[name]).as_dict() if with_hops else {}))
        summary = _summary(result, fallback_reason, default_name, default_j,
                           evals["rankmap"].objective if ours else None)
    elif fallback_reason:
        summary = f"rankmap was NOT applied: {fallback_reason}"
    hosts = layout.hosts()
    gpus = rank_gpus(layout, result.mapping) if ours else []
    return Report(job_id, profile, layout.n, fold_hostlist(hosts), len(hosts),
                  machine.describe(),
                  ours, result.algorithm if result else None,
                  result.seconds if result else None, fallback_reason, placements,
                  distances, list(layout.notes) + list(extra_notes or ()), default_name,
                  default_assumed, summary, result.origin if result else None,
                  dict(result.candidates) if result else {}, units,
                  dict(result.rejected) if result else {}, with_hops, gpus)


def rank_gpus(layout: Layout, mapping: np.ndarray) -> list[dict[str, Any]]:
    """Per rank of a GPU job, ``{"rank", "host", "gpus", "cpu_ids", "nic"}`` of its slot
    (``nic``: the NIC for its UCX_NET_DEVICES, "" when none); []
    when no slot has GPUs.  O(n)."""
    slots = layout.slots
    if not any(s.gpus for s in slots):
        return []
    return [{"rank": r, "host": slots[pe].host, "gpus": list(slots[pe].gpus),
             "cpu_ids": list(slots[pe].cpu_ids), "nic": slots[pe].nic}
            for r, pe in enumerate(np.asarray(mapping).tolist())]


def _summary(result: MappingResult | None, fallback_reason: str | None, default_name: str,
             default_j: float, ours_j: float | None) -> str:
    if fallback_reason is not None or result is None:
        return f"rankmap was NOT applied: {fallback_reason}"
    if ours_j is None and result.algorithm in result.rejected:
        return (f"Slurm's {default_name} placement kept: rankmap's best ({result.algorithm}) "
                f"was refused: {result.rejected[result.algorithm]}")
    if ours_j is None:
        best = result.candidates.get(result.algorithm, result.objective)
        if best > default_j:
            why = f"J {-_pct(default_j, best):.1f}% above it"
        else:
            why = "J equal to it"
        return (f"Slurm's {default_name} placement kept: it is already as good as rankmap's "
                f"best ({result.algorithm}, {why})")
    if result.origin == "algorithm":
        how = result.algorithm
    elif result.origin in ("baseline regrouped", REGROUPED_IN_ORDER):
        how = (f"Slurm's {default_name} placement, its nodes' rank sets kept and the nodes "
               f"rearranged on the switches by {result.algorithm}")
        if result.origin == REGROUPED_IN_ORDER:
            how += ", nodes close in rank order kept together for rank-order collectives"
    elif result.origin in (BOXES, BOXES_SHARED):
        how = "the profile's grid cut into the switch tree's groups by coordinate bisection"
        if result.origin == BOXES_SHARED:
            how += ", every node keeping a share of its switch's outer faces"
    elif result.origin == HOSTS_BLOCK:
        how = (f"rank r on slot r, node after node, which ties {result.algorithm}'s result "
               f"and keeps every host's ranks in one block")
    else:
        how = (f"Slurm's {default_name} placement improved by local search "
               f"{result.origin.split('+', 1)[-1]}")
    return (f"rankmap's placement applied ({how}): J {_pct(default_j, ours_j):.1f}% below "
            f"Slurm's {default_name} placement")


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def human(value: float, unit: str = "") -> str:
    """Three significant digits with an SI prefix: ``1.28 GB``, ``907 k`` (J), ``12``.

    Bytes are shown as B/kB/MB/GB (powers of 1000); any other unit follows the
    number (``4.1 k messages``).  The same style for J and volumes everywhere.
    """
    prefix = ""
    for scale, symbol in _PREFIXES:
        if abs(value) >= scale:
            value, prefix = value / scale, symbol
            break
    number = f"{value:.3g}"
    if unit in ("bytes", "byte", "B"):
        return f"{number} {prefix}B"
    return " ".join(part for part in (number, prefix, unit) if part)


def render_report_text(report: Report, templates_dir: str | None = None) -> str:
    """The report as text: the decision in one sentence first, then the numbers.

    Profile specs, reasons and notes quote what the job's user wrote (a ``file:`` path
    with a newline or a terminal escape in it): the whole context is escaped here,
    where the text is assembled, so no field (nor one a site template adds) is missed.
    """
    rows = [{"level": level, "distance": d,
             "volumes": [human(p.traffic.get(level, 0.0), report.units)
                         for p in report.placements]}
            for level, d in report.level_distances.items()]
    placements = [{"name": p.name + (" *" if p.applied else ""),
                   "objective": human(p.objective),
                   "saved": p.saved_vs_default or "-", "applied": p.applied,
                   "default": p.default} for p in report.placements]
    context = dict(job_id=report.job_id, profile=report.profile, n=report.n,
                   nodes=report.nodes, node_count=report.node_count, units=report.units,
                   machine=report.machine, notes=report.notes,
                   fallback_reason=report.fallback_reason, summary=report.summary,
                   algorithm=report.algorithm, seconds=report.seconds or 0.0,
                   default_placement=report.default_placement +
                   (" (assumed: the prolog is not told --distribution)"
                    if report.default_assumed else " (the job's --distribution)"),
                   placements=placements, traffic_rows=rows,
                   names=[p.name for p in report.placements])
    text = render_template("report.txt.j2", templates_dir, **escape_strings(context))
    return text + hop_table(report) + gpu_table(report)


#: ranks listed one per line in the text report's GPU table; the JSON has them all
GPU_TABLE_RANKS = 64


def gpu_table(report: Report) -> str:
    """Which GPUs and CPUs each rank got, as text; empty unless the job maps GPU ranks
    (appended after the template's text, as :func:`hop_table`)."""
    if not report.gpus:
        return ""
    nics = any(row.get("nic") for row in report.gpus)
    lines = ["", "  GPUs per rank (Slurm's GPU indexes; the rank's CUDA_VISIBLE_DEVICES, "
             "ROCR_VISIBLE_DEVICES and ZE_AFFINITY_MASK name them"
             + ("; nic: its UCX_NET_DEVICES" if nics else "") + "):",
             f"  {'rank':>6s}  {'host':20s} {'gpus':10s} " + (f"{'nic':12s} " if nics else "")
             + "cpus"]
    for row in report.gpus[:GPU_TABLE_RANKS]:
        nic = f"{escape_controls(str(row.get('nic') or '-')):12s} " if nics else ""
        lines.append(f"  {row['rank']:>6d}  {escape_controls(str(row['host'])):20s} "
                     f"{','.join(map(str, row['gpus'])) or '-':10s} {nic}"
                     f"{fold_ids(row['cpu_ids'])}")
    if len(report.gpus) > GPU_TABLE_RANKS:
        lines.append(f"  ... {len(report.gpus) - GPU_TABLE_RANKS} more ranks in report.json")
    return "\n".join(lines) + "\n"


def fold_ids(ids: list[int]) -> str:
    """0,1,2,5 → 0-2,5 (ClusterShell's RangeSet, as host lists fold); "-" for none."""
    return str(RangeSet(",".join(map(str, ids)))) if ids else "-"


def hop_table(report: Report) -> str:
    """Hop-bytes per placement as text; empty unless the machine is a hop matrix.

    Appended after the template's text so that site templates written before
    ``[network]`` existed still show it.
    """
    rows = [p for p in report.placements if p.hops]
    if not report.hop_metrics or not rows:
        return ""
    unit = "byte" if report.units == "bytes" else report.units.rstrip("s")
    lines = ["", f"  network hops ({report.units} x hops between nodes; 0 inside a node):",
             f"  {'placement':36s} {'hop-bytes':>12s} {'max hops':>9s} "
             f"{'mean hops/' + unit:>16s}"]
    for p in rows:
        lines.append(f"  {escape_controls(p.name) + (' *' if p.applied else ''):36s} "
                     f"{human(p.hops['hop_bytes']):>12s} {p.hops['max_hops']:>9g} "
                     f"{p.hops['mean_hops_per_byte']:>16.3f}")
    return "\n".join(lines) + "\n"


def report_record(report: Report) -> dict[str, Any]:
    """Machine-readable record of the same data (J counts each edge once), its strings
    escaped as in the text: readers (the TaskProlog, ``rankmap report``) print them."""
    return escape_strings(asdict(report))


def render_report_json(record: dict[str, Any]) -> str:
    """report.json's text, in every mode."""
    return json.dumps(record, indent=1, sort_keys=True) + "\n"
