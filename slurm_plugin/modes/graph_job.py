"""The graph mode: a communication graph mapped onto the job's machine.

The default mode (a store name, a generator spec or ``file:PATH`` as
``--comm-profile``).  :class:`GraphMode` is its :class:`~slurm_plugin.modes.base.JobMode`:
``load`` reads the profile (:func:`~slurm_plugin.profiles.store.resolve_profile`, checked
against the job's task count, errors naming file:line), ``machine`` the site's
``[network]`` hop matrix (None without one), and ``plan`` is :func:`make_plan` plus, when
rankmap's placement is applied, the rank reordering files for launchers that place the
ranks themselves (:mod:`slurm_plugin.outputs.reorder_files`).

``make_plan`` is the computation itself: it maps the ranks with the solver inside a time
budget, decides whether the result can be used, and renders the launcher files and the
report.  It reads and writes nothing; ``rankmap simulate`` calls it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mapper import CommGraph, MappingResult, map_processes
from mapper.model.phased_graph import PIPELINE_PACES, PhasedGraph
from mapper.objectives.congestion import LinkCapacities
from mapper.objectives.link_load import RoutedNetwork
from mapper.objectives.qap import evaluate
from mapper.solve.algorithm_names import for_network
from mapper.solve.api import has_links_to_cap
from mapper.solve.link_model import LinkModel
from mapper.solve.result import TIMINGS

from ..common.job_budget import JobBudget
from ..common.job_conventions import GRAPH_MODE
from ..machine.distribution import DEFAULT, Distribution, default_placements, dist_label
from ..machine.layout import Layout
from ..machine.network_source import (
    HopNetwork,
    NetworkError,
    hop_machine,
    load_network,
    routed_network,
)
from ..machine.speeds import layout_link_weights, layout_uplink_capacities, slow_switches
from ..outputs import report
from ..outputs.reorder_files import reorder_files
from ..profiles.samples import SampledGraph, SampleVerdict, check_samples
from ..profiles.store import GeneratedProfile, ProfileError, ProfileStore, resolve_profile
from ..slurm.topology import SwitchTree
from .base import RENDERERS, Job, JobPlan


@dataclass(frozen=True, eq=False)
class GraphInput:
    """The job's communication graph and the unit of its volumes (``bytes``,
    ``messages``: the store entry's ``units``)."""

    graph: CommGraph
    units: str = "bytes"


class GraphMode:
    """The graph mode's :class:`~slurm_plugin.modes.base.JobMode` (module docstring)."""

    name = GRAPH_MODE

    def load(self, job: Job) -> GraphInput:
        graph = resolve_profile(job.profile, job.layout.n, job.stores, job.allow_user_files,
                                job.max_file_bytes)
        return GraphInput(graph, profile_units(job.profile, job.stores, job.max_file_bytes))

    def machine(self, job: Job) -> HopNetwork | None:
        return load_network(job.settings.network)

    def plan(self, job: Job, data: GraphInput | None, machine: HopNetwork | None,
             reason: str | None) -> JobPlan[MappingResult]:
        graph = data.graph if data is not None else None
        plan = make_plan(job.layout, graph, algorithm=job.algorithm,
                         time_limit=job.time_limit, seed=job.settings.solver.seed,
                         files=job.render_files, job_id=job.job_id, profile=job.profile,
                         fallback_reason=reason, templates_dir=job.templates_dir,
                         progress=job.progress, distribution=job.slurm_distribution,
                         distribution_assumed=job.distribution_assumed,
                         units=data.units if data is not None else "bytes", network=machine,
                         objective=job.settings.solver.objective, tree=job.tree,
                         uplink_oversubscription=job.settings.solver.uplink_oversubscription)
        if plan.applied and plan.result is not None:  # srun, mpirun without the rankfile
            plan.files.update(reorder_files(job.layout, plan.result.mapping, graph))
        return plan


GRAPH = GraphMode()


def profile_units(spec: str, stores: Sequence[str], max_bytes: int | None) -> str:
    """The unit of a store profile's volumes (its TOML's ``units``); ``bytes`` for
    generators and ``file:`` profiles, which do not say.  Called after the profile
    resolved, so a lookup failure here means the name was a generator's."""
    if spec.startswith("file:") or ":" in spec:
        return "bytes"
    try:
        return ProfileStore(stores, max_bytes).find(spec.strip()).units
    except ProfileError:
        return "bytes"


def make_plan(layout: Layout, graph: CommGraph | None, *, algorithm: str,
              time_limit: float, seed: int = 0, files: Sequence[str] = tuple(RENDERERS),
              job_id: str | None = None, profile: str | None = None,
              fallback_reason: str | None = None, templates_dir: str | None = None,
              progress: Callable[[str], None] | None = None,
              distribution: Distribution = DEFAULT,
              distribution_assumed: bool = True, units: str = "bytes",
              network: HopNetwork | None = None,
              objective: str = "congestion",
              tree: SwitchTree | None = None,
              uplink_oversubscription: Sequence[float] = ()) -> JobPlan[MappingResult]:
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
    replaced by OHTMA with the same neighbourhood; the never-worse rule's link check uses
    the network's links and routing (:func:`~slurm_plugin.machine.network_source.routed_network`:
    dimension-order on tori, meshes and Tianhe-3, minimal on dragonflies; the report names it;
    the solver is given the routed network, so under objective ``congestion`` a result
    refused for a routed link is repaired under the default's busiest routed links,
    :func:`mapper.solve.aimed.aim_at_routed_congestion`), or none where rankmap has no link
    model (a hop file: J only, said so); the report adds hop-bytes.  A job node the network
    does not name is a fallback.

    ``tree`` (the switch tree the layout came from) gives the link check on the switch
    tree its capacities: when a switch on the job's paths has a LinkSpeed below its
    level's fastest, each group's link load is its volume times its LinkSpeed cost
    factor (:func:`~slurm_plugin.machine.speeds.layout_link_weights`; load over
    capacity, Hoefler & Snir's congestion), the report says so and names the slow
    switches, and a refusal speaks of load/capacity; otherwise every link of a level
    is alike, as without LinkSpeed.

    ``uplink_oversubscription`` (``[solver] uplink_oversubscription``: leaf switches
    first) gives a profile with phases link capacities across levels
    (:func:`~slurm_plugin.machine.speeds.layout_uplink_capacities`): its phase time is
    then taken over every link level together, and the candidate of least phase time
    is applied (:func:`mapper.map_processes`, ``link_capacities``).  Without it, a
    candidate slower than the default over every link level under any of
    :data:`UNSTATED_OVERSUBSCRIPTIONS` is refused (``capacity_scenarios``).

    A profile measured in several runs (a :class:`~slurm_plugin.profiles.samples.SampledGraph`
    from a store entry with ``samples``) applies rankmap's placement only when it also
    beats the default under every sample (lower J, no busiest link raised:
    :func:`~slurm_plugin.profiles.samples.check_samples`); otherwise the default is kept
    and the report names the sample that disagreed.

    A store profile recorded at another task count and served by its generator (a
    :class:`~slurm_plugin.profiles.store.GeneratedProfile`) puts its note in the
    report ("profile NAME recorded at 512 ranks, used as stencil3d at 4096").
    """
    result = None
    clock = time.perf_counter()
    defaults = default_placements(layout, distribution)
    timings = {"default_placements": time.perf_counter() - clock,
               **{_solver_timing(k): 0.0 for k in TIMINGS}}
    default_name = dist_label(distribution)
    machine, congestion_levels, notes = layout.hierarchy, layout.network_levels, []
    routed: RoutedNetwork | None = None
    link_weights = None
    if network is None and congestion_levels:
        names = [layout.hierarchy.level_names[lv] for lv in congestion_levels]
        link_weights = layout_link_weights(layout, tree)
        if link_weights is None:
            notes.append(f"link check: switch tree, routes up to the lowest common switch "
                         f"and down, each level's links alike ({', '.join(names)} links)")
        else:
            slow = slow_switches(tree, layout.hosts())
            notes.append(f"link check: switch tree, routes up to the lowest common switch "
                         f"and down, each link's load over its capacity from topology "
                         f"LinkSpeed ({', '.join(names)} links; "
                         + ", ".join(f"links into {s} cost {f:.3g}x" for s, f in slow.items())
                         + ")")
    if isinstance(graph, GeneratedProfile):  # a store profile of another size
        notes.append(graph.note)
    if network is not None:
        notes.append(f"network: {network.description} (per hop {network.per_hop:g}, "
                     f"base {network.base:g}); switch levels not used")
        try:
            machine, congestion_levels = hop_machine(layout, network), None
            routed = routed_network(layout, network, machine)
            notes.append(f"link check: {routed.routing}, every link of a level alike"
                         if routed is not None else
                         "link check: none (no link model for this network): J only")
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
    aimed = objective == "congestion" and has_links_to_cap(machine, congestion_levels, routed)
    link_capacities, scenarios = phase_capacities(
        graph, layout, tree, bool(congestion_levels) and network is None,
        uplink_oversubscription)
    if isinstance(graph, PhasedGraph) and graph.phases:
        notes.append(_phase_note(graph, bool(congestion_levels), uplink_oversubscription
                                 if link_capacities is not None else (),
                                 tuple(scenarios or ())))
    notes.append(_objective_note(objective, aimed,
                                 bool(congestion_levels) or routed is not None,
                                 network is not None,
                                 routed.routing if routed is not None else None))
    if fallback_reason is None:
        result = map_processes(graph, machine, algorithm, seed,
                               JobBudget(time_limit).solver_seconds, progress=progress,
                               baseline=defaults[default_name],
                               objective="congestion" if aimed else "J",
                               links=LinkModel(congestion_levels=congestion_levels,
                                               link_weights=link_weights, routed=routed,
                                               link_capacities=link_capacities,
                                               capacity_scenarios=scenarios))
        timings.update({_solver_timing(k): v for k, v in result.timings.items()})
        if result.seconds > time_limit:
            fallback_reason = (f"solver took {result.seconds:.3f} s, over its time budget of "
                               f"{time_limit:g} s")
            result = None
    if (result is not None and result.origin != "baseline"
            and isinstance(graph, SampledGraph) and graph.samples):
        result, note = _under_samples(graph, machine, result, defaults[default_name],
                                      default_name, congestion_levels, link_weights)
        notes.append(note)
    kept_default = result is not None and result.origin == "baseline"
    clock = time.perf_counter()
    rendered: dict[str, str] = {}
    if fallback_reason is None and not kept_default:
        assert result is not None
        for name in files:
            rendered[name] = RENDERERS[name](layout, result.mapping, templates_dir=templates_dir,
                                             algorithm=algorithm, job_id=job_id)
    timings["render"] = time.perf_counter() - clock
    clock = time.perf_counter()
    usable_graph = graph if graph is not None and graph.n == layout.n else None
    rep = report.build_report(layout, usable_graph, result, defaults, default_name,
                              job_id=job_id, profile=profile,
                              fallback_reason=fallback_reason,
                              default_assumed=distribution_assumed, units=units,
                              machine=machine,
                              extra_notes=notes + list(result.notes if result else ()))
    text, record = report.render_report_text(rep, templates_dir=templates_dir), \
        report.report_record(rep)
    timings["report"] = time.perf_counter() - clock
    return JobPlan(files=rendered, report_text=text, report_record=record,
                   fallback_reason=fallback_reason, kept_default=kept_default,
                   summary=rep.summary, objective=result.objective if result else None,
                   seconds=result.seconds if result else None,
                   notes=list(layout.notes) + notes, status_notes=tuple(layout.notes),
                   timings=timings, result=result)


def _objective_note(objective: str, aimed: bool, checked: bool, network: bool,
                    routing: str | None = None) -> str:
    """The report's line on what the solver minimised (``checked``: a link check
    follows; ``network``: a ``[network]`` job; ``routing``: its routed link model)."""
    if aimed and routing is not None:
        return (f"objective: J under the default's busiest routed link of each level "
                f"({routing}; a result that loads one more is repaired under them, not "
                f"only refused)")
    if aimed:
        return ("objective: J under the default's busiest link of each level (a result "
                "that loads one more is repaired under them, not only refused)")
    if objective == "congestion" and network:
        return ("objective: J only (no link model for this network: no link caps to "
                "search under)")
    return ("objective: J" + (", the link check refusing what loads a busiest link more"
                              if checked else ""))


#: Uplink oversubscriptions (every switch level alike) under which a candidate for a
#: profile with phases must not be slower than the default where the site states none
#: ([solver] uplink_oversubscription): the cheap, the common and the stingy fabrics.
UNSTATED_OVERSUBSCRIPTIONS = (1.0, 2.0, 4.0, 8.0)


def phase_capacities(graph: CommGraph | None, layout: Layout, tree: SwitchTree | None,
                     on_tree: bool, uplink_oversubscription: Sequence[float] = ()
                     ) -> tuple[LinkCapacities | None, dict[str, LinkCapacities] | None]:
    """The uplink capacities a phased profile's phase time is checked with on a switch
    tree (``on_tree``): (``link_capacities``, None) from the site's
    ``uplink_oversubscription``, else (None, ``capacity_scenarios``) at each of
    :data:`UNSTATED_OVERSUBSCRIPTIONS`; (None, None) for a profile without phases or
    off a tree."""
    if not (isinstance(graph, PhasedGraph) and graph.phases and on_tree):
        return None, None
    if uplink_oversubscription:
        return layout_uplink_capacities(layout, tree, uplink_oversubscription), None
    # not stated: a candidate must not be slower under any of these
    return None, {f"{r:g}:1": layout_uplink_capacities(layout, tree, [r])
                  for r in UNSTATED_OVERSUBSCRIPTIONS}


def _phase_note(graph: PhasedGraph, checked: bool,
                oversubscription: Sequence[float] = (),
                scenarios: Sequence[str] = ()) -> str:
    """The report's line on a profile's phases and whether the rule checks them."""
    what = f"profile by phase: {len(graph.phases)} phases"
    paced = [p.name for p in graph.phases if p.pace in PIPELINE_PACES]
    rounds = sum(1 for p in graph.phases if p.pace == "rounds")
    pace = (f"; and one whose pipelined phases ({', '.join(paced)}: small messages, "
            f"latency-bound) have a slowest rank sending across more links than the "
            f"default's" if paced else "")
    if rounds:
        pace += (f"; and one whose exchange rounds ({rounds} distinct: small messages, "
                 f"each round waiting for its farthest) cross more links than the "
                 f"default's")
    if checked and oversubscription:
        ratios = ", ".join(f"{x:g}:1" for x in oversubscription)
        return (f"{what}; timed over every link level (uplinks oversubscribed {ratios}, "
                f"leaf switches first; each synchronising group waiting for the busiest "
                f"link on its own paths, mapper.objectives.phase_time): the placement of "
                f"least phase time is applied, J deciding within 2 %, and one slower than the "
                f"default's is refused{pace}")
    if checked:
        unstated = (f", or over every link level with uplinks oversubscribed "
                    f"{', '.join(scenarios)} (the site states no ratio)" if scenarios else "")
        return (f"{what}; a placement whose phase time at a link level (each synchronising "
                f"group waiting for its busiest link, mapper.objectives.phase_time){unstated} "
                f"exceeds the default's is refused{pace}")
    return f"{what}, not checked (no switch tree)"


def _solver_timing(name: str) -> str:
    """A solver timing's name among the plan's (its ``other`` is not the plan's)."""
    return "solver_other" if name == "other" else name


def _under_samples(graph: SampledGraph, machine, result: MappingResult,
                   baseline: np.ndarray, default_name: str,
                   congestion_levels, link_weights=None) -> tuple[MappingResult, str]:
    """``result`` if it beats the default under every sample of ``graph``, else the
    default as a result whose ``rejected`` says which sample disagreed; and a note with
    the verdict of every sample (links weighted as in the solver's check).
    O(S·(n + m·L))."""
    verdicts = check_samples(graph.samples, graph.sample_names, machine, result.mapping,
                             baseline, congestion_levels, link_weights=link_weights)
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
    return _kept_default(result, baseline, base_eval, why), note


def _kept_default(result: MappingResult, baseline: np.ndarray, base_eval,
                  why: str) -> MappingResult:
    """The default placement as the result, ``result``'s algorithm refused with ``why``
    (its candidates, notes and timings kept for the report)."""
    return MappingResult(baseline.copy(), base_eval.objective, base_eval.traffic,
                         result.seconds, result.algorithm, result.seed,
                         result.hit_time_limit, "baseline", dict(result.candidates),
                         {**result.rejected, result.algorithm: why}, result.notes,
                         result.timings)


def _verdict(v: SampleVerdict) -> str:
    text = f"{v.name} {100 * v.j_change:+.1f}%"
    if v.raised is not None:
        what = "load/capacity " if v.weighted else ""
        text += f" (busiest {v.raised} link {what}{v.link_ratio:.2f}x)"
    return text


def hop_algorithm(algorithm: str) -> tuple[str, str | None]:
    """The algorithm to run on a hop-matrix machine, and a note when it was changed:
    a tree-only construction becomes ``ohtma`` with the same neighbourhood (the site's
    default for a network is ``ohtma+n10``, :data:`slurm_plugin.site.config.NETWORK_ALGORITHM`;
    this covers rules and users asking for a tree algorithm by name)."""
    replaced = for_network(algorithm)
    if replaced == algorithm:
        return algorithm, None
    return replaced, (f"{algorithm} needs a switch tree: {replaced} used on the [network] "
                      f"hop matrix")
