"""The job's report: rankmap's placement next to Slurm's block and cyclic placements.

The numbers come from :func:`mapper.evaluate`, so the report shows exactly the J and
per-level traffic the solver optimized.  J counts each undirected edge once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from mapper import CommGraph, MappingResult, evaluate

from .layout import Layout, default_placements
from .render import render_template


@dataclass(frozen=True)
class PlacementCost:
    name: str
    objective: float
    traffic: dict[str, float]
    saved_vs_block: str = ""
    saved_vs_cyclic: str = ""


@dataclass(frozen=True)
class Report:
    job_id: str | None
    profile: str | None
    n: int
    hosts: list[str]
    machine: str
    applied: bool
    algorithm: str | None = None
    seconds: float | None = None
    fallback_reason: str | None = None
    placements: list[PlacementCost] = field(default_factory=list)
    level_distances: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _saved(base: float, value: float) -> str:
    if base <= 0:
        return "-"
    return f"{100.0 * (base - value) / base:.1f}%"


def build_report(layout: Layout, graph: CommGraph | None, result: MappingResult | None, *,
                 job_id: str | None = None, profile: str | None = None,
                 fallback_reason: str | None = None) -> Report:
    """Report data; without a usable graph only the reason and the job are shown."""
    placements: list[PlacementCost] = []
    distances = {name: float(d) for name, d in zip(layout.hierarchy.level_names,
                                                     layout.hierarchy.distances, strict=True)}
    if graph is not None and graph.n == layout.n:
        candidates = dict(default_placements(layout))
        if result is not None and fallback_reason is None:
            candidates = {"rankmap": result.mapping, **candidates}
        evals = {name: evaluate(graph, layout.hierarchy, m) for name, m in candidates.items()}
        block_j, cyclic_j = evals["block"].objective, evals["cyclic"].objective
        for name, ev in evals.items():
            placements.append(PlacementCost(
                name, ev.objective, {t.name: t.volume for t in ev.traffic},
                "" if name == "block" else _saved(block_j, ev.objective),
                "" if name == "cyclic" else _saved(cyclic_j, ev.objective)))
    applied = fallback_reason is None and result is not None
    return Report(job_id, profile, layout.n, layout.hosts(), layout.hierarchy.describe(),
                  applied, result.algorithm if result else None,
                  result.seconds if result else None, fallback_reason, placements,
                  distances, list(layout.notes))


def render_report_text(report: Report, templates_dir: str | None = None) -> str:
    rows = [{"level": level, "distance": d,
             "volumes": [p.traffic.get(level, 0.0) for p in report.placements]}
            for level, d in report.level_distances.items()]
    return render_template("report.txt.j2", templates_dir, job_id=report.job_id,
                           profile=report.profile, n=report.n, hosts=report.hosts,
                           machine=report.machine, notes=report.notes,
                           fallback_reason=report.fallback_reason,
                           algorithm=report.algorithm, seconds=report.seconds or 0.0,
                           placements=report.placements, traffic_rows=rows)


def report_json(report: Report) -> str:
    """Machine-readable record of the same data (J counts each edge once)."""
    return json.dumps(asdict(report), indent=1, sort_keys=True) + "\n"
