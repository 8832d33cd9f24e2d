"""From a job's layout and communication graph to the files launchers read.

``make_plan`` is the one computation the prolog and ``rankmap plan`` share: it maps
the ranks with the solver inside a time budget, decides whether the result can be
used, and renders the launcher files and the report.  It reads and writes nothing;
the callers do the I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mapper import CommGraph, MappingResult, map_processes
from mapper.names import TREE_CONSTRUCTIONS, is_preset, parse_algorithm
from mapper.objective import evaluate
from mapper.result import PHASES

from ..machine.distribution import DEFAULT, Distribution, default_placements, dist_label
from ..machine.layout import Layout
from ..machine.network_source import HopNetwork, NetworkError, hop_machine
from ..outputs import render, report
from ..profiles.samples import SampledGraph, SampleVerdict, check_samples

#: Launcher files by name, with the renderer that produces each.
RENDERERS = {
    "rankfile": render.render_rankfile,
    "hostfile": render.render_hostfile,
    "machinefile": render.render_machinefile,
    "slurm_hostfile": render.render_slurm_hostfile,
    "bindings": render.render_bindfile,
    "hydra_hostfile": render.render_hydra_hostfile,
}

#: Share of the time budget given to the solver; the rest absorbs the overshoot of its
#: own stop check, so a result that arrives is within the budget.
SOLVER_SHARE = 0.9


@dataclass
class JobPlan:
    """What the prolog writes for one job."""

    files: dict[str, str]
    report_text: str
    report_json: str
    result: MappingResult | None = None
    fallback_reason: str | None = None
    notes: list[str] = field(default_factory=list)
    kept_default: bool = False  # the solver found nothing better than Slurm's default
    summary: str = ""
    #: wall seconds by phase: ``default_placements``, the solver's
    #: (:data:`mapper.result.PHASES`, its ``other`` as ``solver_other``), ``render``
    #: (the launcher files), ``report`` (evaluating the placements and writing it)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        """True when rankmap's placement is used (launcher files rendered)."""
        return self.fallback_reason is None and not self.kept_default


def make_plan(layout: Layout, graph: CommGraph | None, *, algorithm: str,
              time_limit: float, seed: int = 0, files: Sequence[str] = tuple(RENDERERS),
              job_id: str | None = None, profile: str | None = None,
              fallback_reason: str | None = None, templates_dir: str | None = None,
              progress: Callable[[str], None] | None = None,
              distribution: Distribution = DEFAULT,
              distribution_assumed: bool = True, units: str = "bytes",
              network: HopNetwork | None = None) -> JobPlan:
    """Map, compare with Slurm's default, render; any reason not to apply becomes a fallback.

    ``fallback_reason`` given by the caller (e.g. the profile could not be loaded)
    skips the solver.  The solver is given the job's default placement (Slurm's
    ``distribution`` over the layout) as its baseline, so the placement applied is never
    worse than the one the job would get anyway: when nothing beats the default, no
    launcher file is rendered and the job keeps Slurm's placement; the report says
    which placement won and why.  ``distribution_assumed`` says the job's real
    ``--distribution`` was not known (the prolog is not told it) and the default was
    taken for it.  ``units`` name the profile's volumes in the report (bytes,
    messages).

    ``network`` (the site's ``[network]``, :func:`slurm_plugin.machine.network_source.load_network`)
    replaces the switch tree: the machine is the job's nodes on the hop matrix, each
    with its own socket/core levels; a tree-only algorithm (Top-Down, Bottom-Up) is
    replaced by OHTMA with the same neighbourhood; the congestion check, which needs
    switch uplinks, is skipped; the report adds hop-bytes.  A job node the network
    does not name is a fallback.

    A profile measured in several runs (a :class:`~slurm_plugin.profiles.samples.SampledGraph`
    from a store entry with ``samples``) applies rankmap's placement only when it also
    beats the default under every sample (lower J, no busiest link raised:
    :func:`~slurm_plugin.profiles.samples.check_samples`); otherwise the default is kept
    and the report names the sample that disagreed.
    """
    result = None
    clock = time.perf_counter()
    defaults = default_placements(layout, distribution)
    phases = {"default_placements": time.perf_counter() - clock,
              **{_solver_phase(k): 0.0 for k in PHASES}}
    default_name = dist_label(distribution)
    machine, congestion_levels, notes = layout.hierarchy, layout.network_levels, []
    if network is not None:
        notes.append(f"network: {network.description} (per hop {network.per_hop:g}, "
                     f"base {network.base:g}); switch levels not used")
        try:
            machine, congestion_levels = hop_machine(layout, network), None
        except NetworkError as exc:
            fallback_reason = fallback_reason or str(exc)
        algorithm, swapped = hop_algorithm(algorithm)
        if swapped:
            notes.append(swapped)
    if fallback_reason is None and graph is None:
        fallback_reason = "no communication profile"
    if fallback_reason is None and graph.n != layout.n:
        fallback_reason = (f"profile {profile or graph.source!r} has {graph.n} ranks but the "
                           f"job has {layout.n} tasks")
    if fallback_reason is None:
        result = map_processes(graph, machine, algorithm, seed,
                               time_limit * SOLVER_SHARE, progress=progress,
                               baseline=defaults[default_name],
                               congestion_levels=congestion_levels)
        phases.update({_solver_phase(k): v for k, v in result.phases.items()})
        if result.seconds > time_limit:
            fallback_reason = (f"solver took {result.seconds:.3f} s, over its time budget of "
                               f"{time_limit:g} s")
            result = None
    if (result is not None and result.origin != "baseline"
            and isinstance(graph, SampledGraph) and graph.samples):
        result, note = _under_samples(graph, machine, result, defaults[default_name],
                                      default_name, congestion_levels)
        notes.append(note)
    kept_default = result is not None and result.origin == "baseline"
    clock = time.perf_counter()
    rendered: dict[str, str] = {}
    if fallback_reason is None and not kept_default:
        assert result is not None
        for name in files:
            rendered[name] = RENDERERS[name](layout, result.mapping, templates_dir=templates_dir,
                                             algorithm=algorithm, job_id=job_id)
    phases["render"] = time.perf_counter() - clock
    clock = time.perf_counter()
    usable_graph = graph if graph is not None and graph.n == layout.n else None
    rep = report.build_report(layout, usable_graph, result, defaults, default_name,
                              job_id=job_id, profile=profile,
                              fallback_reason=fallback_reason,
                              default_assumed=distribution_assumed, units=units,
                              machine=machine,
                              extra_notes=notes + list(result.notes if result else ()))
    text, record = report.render_report_text(rep, templates_dir=templates_dir), \
        report.report_json(rep)
    phases["report"] = time.perf_counter() - clock
    return JobPlan(rendered, text, record, result, fallback_reason,
                   list(layout.notes) + notes, kept_default, rep.summary, phases)


def _solver_phase(name: str) -> str:
    """A solver phase's name among the plan's (its ``other`` is not the plan's)."""
    return "solver_other" if name == "other" else name


def _under_samples(graph: SampledGraph, machine, result: MappingResult,
                   baseline: np.ndarray, default_name: str,
                   congestion_levels) -> tuple[MappingResult, str]:
    """``result`` if it beats the default under every sample of ``graph``, else the
    default as a result whose ``rejected`` says which sample disagreed; and a note with
    the verdict of every sample.  O(S·(n + m·L))."""
    verdicts = check_samples(graph.samples, graph.sample_names, machine, result.mapping,
                             baseline, congestion_levels)
    note = (f"checked under {len(verdicts)} measured sample(s) of the profile, J against "
            f"Slurm's {default_name} placement: " + ", ".join(_verdict(v) for v in verdicts))
    against = [v for v in verdicts if not v.agrees]
    if not against:
        return result, note
    base_eval = evaluate(graph, machine, baseline)
    saved = 100 * (1 - result.objective / base_eval.objective)
    who = f"Slurm's {default_name} placement"
    why = (f"J {saved:.1f}% lower under the profile, but {against[0].describe(who)} "
           f"({len(against)} of {len(verdicts)} samples disagree: the profile does not "
           f"predict this application's traffic)")
    kept = MappingResult(baseline.copy(), base_eval.objective, base_eval.traffic,
                         result.seconds, result.algorithm, result.seed,
                         result.hit_time_limit, "baseline", dict(result.candidates),
                         {**result.rejected, result.algorithm: why}, result.notes,
                         result.phases)
    return kept, note


def _verdict(v: SampleVerdict) -> str:
    text = f"{v.name} {100 * v.j_change:+.1f}%"
    if v.raised is not None:
        text += f" (busiest {v.raised} link {v.link_ratio:.2f}x)"
    return text


def hop_algorithm(algorithm: str) -> tuple[str, str | None]:
    """The algorithm to run on a hop-matrix machine, and a note when it was changed:
    a tree-only construction becomes ``ohtma`` with the same neighbourhood (the site's
    default for a network is ``ohtma+n10``, :data:`slurm_plugin.site.config.NETWORK_ALGORITHM`;
    this covers rules and users asking for a tree algorithm by name)."""
    if is_preset(algorithm):
        return algorithm, None  # a preset picks its own algorithm on a hop matrix
    construction = parse_algorithm(algorithm)[0]
    if construction not in TREE_CONSTRUCTIONS:
        return algorithm, None
    rest = algorithm.split("+", 1)[1] if "+" in algorithm else None
    replaced = f"ohtma+{rest}" if rest else "ohtma"
    return replaced, (f"{algorithm} needs a switch tree: {replaced} used on the [network] "
                      f"hop matrix")
