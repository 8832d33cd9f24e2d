"""``--comm-profile=mesh:NAME``: the job's mesh partitioned onto its slots.

A code that reads a partition file (METIS ``part`` format: line v holds the rank owning
mesh vertex v; OpenFOAM's ``manual`` method, many FE codes) gets a decomposition
computed for this job's allocation: its switch tree, its nodes' speeds, its link costs.
:class:`MeshMode`, the mode the prolog's worker (:mod:`slurm_plugin.lifecycle.job_worker`)
runs for a mesh request, calls, in this order:

1. :func:`load_mesh_input` (the edge that reads files) — the spec and the mesh::

       mesh:NAME                      the store entry NAME (kind = "mesh")
       mesh:NAME,method=rb            another partitioning method (mapper.mesh.method_names)
       mesh:NAME,epsilon=0.05         balance tolerance (default 0.03)

   NAME is a profile store entry with ``kind = "mesh"`` (its TOML, the mesh file and an
   optional weights file: :mod:`slurm_plugin.profiles.store`), read with
   :func:`mapper.io.mesh_file.read_mesh` under the size limits of profiles.  There are
   no user files: a mesh is a site-curated entry, like a named profile.

2. :func:`job_architecture` (pure) — Moulitsas & Karypis' architecture graph of the job
   (ICA3PP 2008, doi:10.1007/978-3-540-69501-1_6, §2.2): the PEs of the job's
   :attr:`Layout.hierarchy <slurm_plugin.machine.layout.Layout.hierarchy>`, every PE at its
   node's speed from ``[speeds]`` (:func:`slurm_plugin.machine.speeds.layout_pe_speeds`), and
   the tree link model with link costs from the layout's level distances (e* inside a
   node, QPL across nodes, the switch links chosen so that the QPL equals the level
   distance: :func:`qpl_link_costs`), each switch's uplink scaled by its ``LinkSpeed``
   (:func:`slurm_plugin.machine.speeds.layout_uplink_costs`).

3. :func:`plan_mesh` (pure) — :func:`mapper.mesh.decompose.decompose`: the method is
   ``rms`` (hierarchical multisection along the job's tree, block = PE) with the
   quotient graph mapped by the job's algorithm (``--rankmap``, the site's
   ``[solver] algorithm``, default Top-Down + N_C^10) when every PE has the same speed,
   and ``archaware-elt-sparse`` (ElTS: the predictor-corrector that minimises
   MaxElTime without new communicating pairs) when speeds differ — with unequal speeds
   the blocks cannot be permuted across PEs anyway (their targets follow the speeds),
   and MaxElTime, the time of the slowest rank, is what heterogeneity costs.  The
   baseline is what a user gets without rankmap: METIS k-way with speed-proportional
   targets (:func:`mapper.mesh.archaware.kvmetis_partition`), part r owned by rank r,
   ranks at Slurm's default placement (``--distribution``, block when unknown).  The
   job gets rankmap's decomposition unless the baseline is strictly better by the
   method's own objective (:func:`criterion`: J, the mapping objective, for ``rms`` and
   ``rb``; MaxElTime for the architecture-aware methods), so it is never worse than
   what it would get anyway by the measure rankmap optimised.  Files: ``partition``
   (one line per vertex: the rank) and the launcher files for the rank → PE placement
   (rank r of the rankfile owns the vertices whose line says r); the report compares
   MaxElTime, SumElTime, total volume, edge cut, imbalance and J and gives the time of
   every phase.

The time budget (the request's ``time_limit``) bounds the decomposition (it gets
``slurm_plugin.common.job_budget.SOLVER_SHARE`` of it); the baseline runs only when the rest of the
budget can hold it (estimated by the decomposition's partition phase), else the report says it was
skipped.  A decomposition over the budget is a fallback.  Every failure (spec, store
entry, mesh file:line, a mesh with fewer vertices than ranks, the budget) is a
:class:`~mapper.errors.RankmapError` the worker reports: no partition, no launcher file,
the job keeps Slurm's placement.

Complexity: reading O(file size); the architecture O(P k) (k levels); the decomposition
and the baseline as their partitioners (about O(m) per METIS level, O(m · levels) for
rms); the partition file O(n).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mapper.errors import RankmapError
from mapper.mesh import method_names as mesh_names
from mapper.mesh.archaware import kvmetis_partition
from mapper.mesh.architecture import Architecture, architecture_from_hierarchy
from mapper.mesh.decompose import Decomposition, decompose
from mapper.mesh.mesh import Mesh
from mapper.mesh.metrics import PartitionMetrics, evaluate_partition

from ..common.hostlist import fold_hostlist
from ..common.job_budget import JobBudget
from ..common.job_conventions import MESH_MODE, MESH_PREFIX, PARTITION_FILE
from ..common.safe_text import escape_strings
from ..machine.distribution import DEFAULT, Distribution, dist_label, slurm_placement
from ..machine.layout import Layout
from ..machine.speeds import config_node_speeds, layout_pe_speeds, layout_uplink_costs
from ..profiles.store import NAME, ProfileStore
from ..slurm.topology import SwitchTree
from .base import RENDERERS, Job, JobPlan

#: balance tolerance when the spec does not give ``epsilon=``
DEFAULT_EPSILON = 0.03
#: method when every PE has the same speed / when speeds differ (module docstring)
HOMOGENEOUS_METHOD = mesh_names.RMS
HETEROGENEOUS_METHOD = mesh_names.ARCHAWARE_ELT_SPARSE
_ARCHAWARE_METHODS = (mesh_names.ARCHAWARE_VOL_SPARSE, mesh_names.ARCHAWARE_VOL_DENSE,
                      mesh_names.ARCHAWARE_ELT_SPARSE, mesh_names.ARCHAWARE_ELT_DENSE)
#: the names of the two decompositions in the report
RANKMAP, BASELINE = "rankmap", "metis+block"
#: the metrics compared, JSON key → column title
COLUMNS = {"max_el_time": "MaxElTime", "sum_el_time": "SumElTime",
           "total_volume": "volume", "edge_cut": "edge cut", "imbalance": "imbalance",
           "objective": "J"}


class MeshJobError(RankmapError, ValueError):
    """A mesh request that cannot be served (names the spec, entry, file:line or cause)."""


@dataclass(frozen=True)
class MeshSpec:
    """A parsed ``mesh:NAME[,method=M][,epsilon=E]`` (method None: the default rule)."""

    name: str
    method: str | None = None
    epsilon: float = DEFAULT_EPSILON


@dataclass(frozen=True, eq=False)
class MeshInput:
    """The mesh, the spec it came from, the store entry's TOML and the read time."""

    mesh: Mesh
    spec: MeshSpec
    entry: str
    description: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Candidate:
    """One decomposition the report compares: rank of every vertex, PE of every rank."""

    name: str
    part: np.ndarray
    placement: np.ndarray
    metrics: PartitionMetrics
    label: str


@dataclass(frozen=True, eq=False)
class MeshResult:
    """The mesh mode's outcome (a :class:`~slurm_plugin.modes.base.JobPlan`'s ``result``):
    the decomposition the job gets (rankmap's or the baseline) and rankmap's own."""

    chosen: Candidate
    decomposition: Decomposition


class MeshMode:
    """The mesh mode's :class:`~slurm_plugin.modes.base.JobMode`: ``load`` is
    :func:`load_mesh_input`, ``machine`` :func:`job_architecture` with the nodes' speeds
    from ``[speeds]`` (``features`` asks Slurm for the nodes' features), ``plan``
    :func:`plan_mesh` with the job's algorithm mapping the quotient graph."""

    name = MESH_MODE

    def load(self, job: Job) -> MeshInput:
        return load_mesh_input(job.profile, job.stores, job.max_file_bytes)

    def machine(self, job: Job) -> Architecture:
        nodes = job.layout.hosts()
        features = (job.node_features(nodes)
                    if job.node_features and job.settings.speeds.features else None)
        speeds = config_node_speeds(job.settings.speeds, job.settings.path, nodes, features)
        return job_architecture(job.layout, speeds, job.tree)

    def plan(self, job: Job, data: MeshInput | None, machine: Architecture | None,
             reason: str | None) -> JobPlan[MeshResult]:
        settings = job.settings
        by_config = bool(settings.speeds.nodes or settings.speeds.features)
        return plan_mesh(job.layout, data, machine, map_algorithm=job.algorithm,
                         time_limit=job.time_limit, seed=settings.solver.seed,
                         job_id=job.job_id, profile=job.profile, fallback_reason=reason,
                         distribution=job.slurm_distribution,
                         distribution_assumed=job.distribution_assumed,
                         files=job.render_files, templates_dir=job.templates_dir,
                         speeds_source=(f"[speeds] of {settings.path}" if by_config
                                        else "equal speeds (no [speeds])"))


MESH = MeshMode()


# -- the spec and the mesh ------------------------------------------------------------------

def parse_mesh_spec(spec: str) -> MeshSpec:
    """``mesh:NAME[,method=M][,epsilon=E]``; E in [0, 1)."""
    text = spec.strip()
    if not text.startswith(MESH_PREFIX):
        raise MeshJobError(f"profile {spec!r} is not a mesh profile ({MESH_PREFIX}NAME)")
    name, *options = (item.strip() for item in text[len(MESH_PREFIX):].split(","))
    if not NAME.match(name) or ".." in name:
        raise MeshJobError(f"{spec!r}: the mesh's store name {name!r} is letters, digits, "
                           f"'.', '_', '+', '-'")
    method, epsilon = None, DEFAULT_EPSILON
    for item in options:
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq:
            raise MeshJobError(f"{spec!r}: {item!r}: expected OPTION=VALUE (method=, "
                               f"epsilon=)")
        if key == "method":
            if value not in mesh_names.PARTITION_METHODS:
                raise MeshJobError(f"{spec!r}: method={value!r}: expected one of "
                                   f"{', '.join(mesh_names.PARTITION_METHODS)}")
            method = value
        elif key == "epsilon":
            try:
                epsilon = float(value)
            except ValueError:
                epsilon = -1.0
            if not 0 <= epsilon < 1:
                raise MeshJobError(f"{spec!r}: epsilon={value!r}: the balance tolerance "
                                   f"is a number in [0, 1), e.g. 0.03")
        else:
            raise MeshJobError(f"{spec!r}: unknown option {key!r} (known: method=, "
                               f"epsilon=)")
    return MeshSpec(name, method, epsilon)


def load_mesh_input(spec: str, stores: Sequence[str | Path],
                    max_bytes: int | None = None) -> MeshInput:
    """The mesh of the store entry the spec names (reads its files); errors name the
    entry or the file and line (:meth:`ProfileStore.load_mesh`)."""
    parsed = parse_mesh_spec(spec)
    start = time.perf_counter()
    mesh, info = ProfileStore(stores, max_bytes).load_mesh(parsed.name)
    return MeshInput(mesh, parsed, str(info.path), info.description,
                     time.perf_counter() - start)


# -- the machine ---------------------------------------------------------------------------

def job_architecture(layout: Layout, node_speeds: Mapping[str, float] | None = None,
                     tree: SwitchTree | None = None,
                     link_costs: Sequence[float] | None = None) -> Architecture:
    """The job's architecture graph (module docstring, step 2).

    ``node_speeds``: host → relative speed (:func:`slurm_plugin.machine.speeds.config_node_speeds`;
    a host not in it has speed 1); ``tree``: the switch tree whose LinkSpeeds scale the
    switches' uplinks; ``link_costs`` (one per level of the layout, innermost first)
    default to :func:`qpl_link_costs` of the layout's level distances.  O(P k).
    """
    h = layout.hierarchy
    costs = np.asarray(qpl_link_costs(layout) if link_costs is None else link_costs,
                       dtype=np.float64)
    speeds = layout_pe_speeds(layout, node_speeds or {})
    uplinks = layout_uplink_costs(layout, tree, costs)
    return architecture_from_hierarchy(h, costs, speeds, uplinks, name="job")


def qpl_link_costs(layout: Layout) -> np.ndarray:
    """Link costs per level such that, on the job's tree, e* = the level distance.

    Inside a node PEs are directly linked: level i <= node costs ``d_i`` (the layout's
    level distance).  Between nodes e* is the QPL, the sum of the squared link costs
    along the path node → switches → node (Moulitsas & Karypis §2.2), which climbs and
    descends every switch level up to the common one, L: e* = 2 Σ_{j=node+1..L} c_j².
    Choosing ``c_(node+1) = sqrt(d_(node+1) / 2)`` and ``c_j = sqrt((d_j - d_(j-1)) / 2)``
    above makes that sum ``d_L``: the partitioner's cost model and J (the mapping's
    objective) see the same pair costs, and a switch's LinkSpeed factor then scales its
    own links (squared along the path).  A level distance below the one beneath it
    gives a 0 link.  O(k).
    """
    h = layout.hierarchy
    d = np.asarray(h.distances, dtype=np.float64)
    node = h.level_names.index("node")
    out = d.copy()
    if node + 1 < len(d):
        steps = np.diff(d[node:])
        steps[0] = d[node + 1]
        out[node + 1:] = np.sqrt(np.maximum(steps, 0.0) / 2)
    return out


def default_method(speeds: np.ndarray) -> str:
    """``rms`` when every PE has the same speed, else ``archaware-elt-sparse``."""
    s = np.asarray(speeds, dtype=np.float64)
    return HOMOGENEOUS_METHOD if np.all(s == s[0]) else HETEROGENEOUS_METHOD


def criterion(method: str) -> str:
    """The metric (a :meth:`PartitionMetrics.to_dict` key) that decides between
    rankmap's decomposition and the baseline: the one the method optimises —
    ``max_el_time`` for the architecture-aware methods (Moulitsas & Karypis' measure),
    ``objective`` (J of the quotient graph on the job's tree, what the mapping
    minimises; Schulz, Träff & von Kirchbach §4) for ``rms`` and ``rb``."""
    return "max_el_time" if method in _ARCHAWARE_METHODS else "objective"


def format_partition(part: np.ndarray) -> str:
    """The partition file: line v holds the rank owning vertex v.  O(n)."""
    return "\n".join(np.asarray(part, dtype=np.int64).astype(str).tolist()) + "\n"


# -- the plan --------------------------------------------------------------------------------

def baseline(mesh: Mesh, layout: Layout, arch: Architecture, mapping: np.ndarray,
             epsilon: float, seed: int) -> tuple[Candidate, float]:
    """METIS k-way with speed targets, part r owned by rank r, rank r on PE
    ``mapping[r]`` (Slurm's placement): rank r's target is the speed of the PE it runs
    on.  Returns the candidate and its seconds."""
    start = time.perf_counter()
    h = layout.hierarchy
    rank_speeds = np.asarray(arch.speeds)[mapping]
    # only the speeds of this architecture are used: they set part r's target
    targets = architecture_from_hierarchy(h, h.distances, rank_speeds, name="targets")
    part = kvmetis_partition(mesh, targets, epsilon=epsilon, seed=seed).part
    metrics = evaluate_partition(mesh, mapping[part], arch, hierarchy=h)
    return (Candidate(BASELINE, part, np.asarray(mapping, dtype=np.int64), metrics,
                      "METIS k-way (speed targets), Slurm's placement"),
            time.perf_counter() - start)


def plan_mesh(layout: Layout, data: MeshInput | None, arch: Architecture | None, *,
              map_algorithm: str = "topdown+n10", time_limit: float = 5.0, seed: int = 0,
              job_id: str | None = None, profile: str | None = None,
              fallback_reason: str | None = None, distribution: Distribution = DEFAULT,
              distribution_assumed: bool = True, files: Sequence[str] = tuple(RENDERERS),
              templates_dir: str | None = None, speeds_source: str = "equal speeds",
              clock=time.perf_counter) -> JobPlan[MeshResult]:
    """Decompose the mesh for the job, compare with the baseline, render the files.

    ``data`` or ``arch`` None (with ``fallback_reason``) or any error of the
    decomposition gives a plan without files whose report says why.  ``clock`` is the
    time source of the budget (tests replace it).
    """
    start = clock()
    mapping = slurm_placement(layout, distribution)
    placement_name = dist_label(distribution)
    dec: Decomposition | None = None
    candidates: list[Candidate] = []
    seconds: dict[str, float] = {}
    notes: list[str] = []
    method = None
    if fallback_reason is None and (data is None or arch is None):
        fallback_reason = "no mesh"
    if fallback_reason is None:
        try:
            method = data.spec.method or default_method(arch.speeds)
            dec = decompose(data.mesh, layout.hierarchy, arch, method=method,
                            epsilon=data.spec.epsilon, map_algorithm=map_algorithm,
                            seed=seed, time_limit=JobBudget(time_limit).solver_seconds)
            used = clock() - start
            if used > time_limit:
                raise MeshJobError(f"the decomposition took {used:.3f} s, over its time "
                                   f"budget of {time_limit:g} s")
            seconds.update({k: v for k, v in dec.seconds.items() if k != "total"})
            notes += dec.notes
            candidates.append(Candidate(RANKMAP, dec.part, dec.placement, dec.metrics,
                                        f"{dec.method}, mapped by {dec.map_algorithm}"))
        except RankmapError as exc:
            fallback_reason, dec = str(exc), None
    if dec is not None:
        estimate = dec.seconds.get("partition", 0.0)
        if clock() - start + estimate <= time_limit:
            try:
                cand, seconds["baseline"] = baseline(data.mesh, layout, arch, mapping,
                                                     data.spec.epsilon, seed)
                candidates.append(cand)
            except RankmapError as exc:
                notes.append(f"baseline not computed: {exc}")
        else:
            notes.append(f"baseline skipped: the time budget of {time_limit:g} s would "
                         f"not hold it (the partition took {estimate:.2f} s)")
    key = criterion(method) if method else "max_el_time"
    chosen = candidates[0] if candidates else None
    if len(candidates) > 1 and _value(candidates[1], key) < _value(chosen, key):
        chosen = candidates[1]  # strictly better: ties go to rankmap's
    rendered: dict[str, str] = {}
    if chosen is not None:
        t0 = clock()
        rendered[PARTITION_FILE] = format_partition(chosen.part)
        for name in files:
            rendered[name] = RENDERERS[name](layout, chosen.placement,
                                             templates_dir=templates_dir,
                                             algorithm=f"mesh {chosen.label}", job_id=job_id)
        seconds["render"] = clock() - t0
    seconds["total"] = clock() - start
    if data is not None:
        seconds = {"read": data.seconds, **seconds}
    summary = _summary(chosen, candidates, fallback_reason, placement_name, key)
    # the spec, file names and errors quoting them are the user's: escaped once, here,
    # for both the text and the record
    record = escape_strings(_record(layout, data, arch, method, dec, candidates, chosen,
                                    seconds, notes, job_id, profile, fallback_reason, summary,
                                    placement_name, distribution_assumed, map_algorithm,
                                    speeds_source))
    all_notes = [*layout.notes, *notes]
    applied = fallback_reason is None
    return JobPlan(files=rendered, report_text=_text(record),
                   report_record=record,
                   fallback_reason=fallback_reason, summary=summary,
                   objective=chosen.metrics.max_el_time if chosen else None,
                   seconds=dec.seconds.get("total") if dec else None, notes=all_notes,
                   status_notes=(*all_notes, *([summary] if applied else [])),
                   result=MeshResult(chosen, dec) if chosen and dec else None)


def _value(c: Candidate, key: str) -> float:
    value = c.metrics.to_dict()[key]
    return float("inf") if value is None else float(value)


def _summary(chosen: Candidate | None, candidates: list[Candidate], reason: str | None,
             placement: str, key: str) -> str:
    if chosen is None:
        return f"rankmap was NOT applied: {reason}"
    title = COLUMNS[key]
    base = next((c for c in candidates if c.name == BASELINE), None)
    if chosen.name == BASELINE:
        return (f"mesh partition written: METIS k-way with speed targets at Slurm's "
                f"{placement} placement ({title} {_value(chosen, key):.6g}; rankmap's "
                f"{_value(candidates[0], key):.6g} was not lower)")
    if base is None:
        return f"mesh partition applied: {title} {_value(chosen, key):.6g} (no baseline)"
    a, b = _value(chosen, key), _value(base, key)
    gain = 100 * (b - a) / b if b > 0 else 0.0
    return (f"mesh partition applied: {title} {gain:.1f}% below METIS with speed targets "
            f"at Slurm's {placement} placement ({a:.6g} vs {b:.6g})")


def _speeds_dict(arch: Architecture, layout: Layout, source: str) -> dict:
    """Speeds by value → the nodes at that speed (folded), and where they came from."""
    h = layout.hierarchy
    bounds = h.bounds[h.level_names.index("node")]
    hosts = [layout.slots[int(b)].host for b in bounds[:-1]]
    per_node = np.asarray(arch.speeds)[bounds[:-1]]
    groups = {f"{s:g}": fold_hostlist([hh for hh, x in zip(hosts, per_node, strict=True)
                                       if x == s]) for s in np.unique(per_node)}
    return {"source": source, "min": float(per_node.min()), "max": float(per_node.max()),
            "nodes": groups}


def _record(layout: Layout, data: MeshInput | None, arch: Architecture | None,
            method: str | None, dec: Decomposition | None, candidates: list[Candidate],
            chosen: Candidate | None, seconds: dict, notes: list[str], job_id: str | None,
            profile: str | None, reason: str | None, summary: str, placement: str,
            assumed: bool, map_algorithm: str, speeds_source: str) -> dict:
    """report.json: the keys of slurm_plugin.outputs.report's record that readers use (job_id,
    profile, n, nodes, applied, summary, fallback_reason, level_distances), plus
    ``mesh``."""
    hosts = layout.hosts()
    h = layout.hierarchy
    record = {
        "job_id": job_id, "profile": profile, "n": layout.n, "nodes": fold_hostlist(hosts),
        "node_count": len(hosts), "machine": h.describe(), "applied": reason is None,
        "algorithm": map_algorithm, "fallback_reason": reason, "summary": summary,
        "default_placement": placement, "default_assumed": assumed,
        "level_distances": {n: float(d) for n, d in zip(h.level_names, h.distances,
                                                        strict=True)},
        "notes": [*layout.notes, *notes], "placements": [], "mesh": None,
    }
    if data is None:
        return record
    mesh = data.mesh
    record["mesh"] = {
        "entry": data.entry, "name": data.spec.name, "file": mesh.source,
        "description": data.description, "vertices": mesh.n, "edges": int(mesh.graph.m),
        "total_weight": float(mesh.total_weight), "epsilon": data.spec.epsilon,
        "method": method, "map_algorithm": dec.map_algorithm if dec else None,
        "architecture": arch.describe() if arch is not None else None,
        "speeds": _speeds_dict(arch, layout, speeds_source) if arch is not None else None,
        "chosen": chosen.name if chosen else None,
        "criterion": criterion(method) if method else None,
        "decompositions": [{"name": c.name, "label": c.label, "applied": c is chosen,
                            **c.metrics.to_dict()} for c in candidates],
        "seconds": seconds, "partition_file": PARTITION_FILE if chosen else None,
    }
    return record


def _text(record: dict) -> str:
    """report.txt: the decision first, then the job, then the comparison and times."""
    lines = [f"rankmap report for job {record['job_id'] or '-'}", "", "",
             f"  {record['summary']}"]
    if not record["applied"]:
        lines.append("  The job runs with Slurm's default placement and gets no partition.")
    assumed = (" (assumed: the prolog is not told --distribution)" if record["default_assumed"]
               else " (the job's --distribution)")
    lines += ["", f"  profile    {record['profile'] or '-'}",
              f"  ranks      {record['n']} on {record['node_count']} node(s): {record['nodes']}",
              f"  machine    {record['machine']}",
              f"  default    {record['default_placement']}{assumed}"]
    m = record["mesh"]
    if m is not None:
        lines += [f"  mesh       {m['name']}: {m['vertices']} vertices, {m['edges']} edges, "
                  f"total weight {m['total_weight']:g} ({m['file']})"]
        if m["method"]:
            mapped = f", blocks mapped by {m['map_algorithm']}" if m["map_algorithm"] else ""
            lines.append(f"  method     {m['method']} (epsilon {m['epsilon']:g}){mapped}")
        if m["speeds"]:
            s = m["speeds"]
            lines.append(f"  speeds     {s['source']}: " + ", ".join(
                f"{nodes} {speed}" for speed, nodes in s["nodes"].items()))
        if m["architecture"]:
            lines.append(f"  links      e* = level distances inside a node, QPL across "
                         f"nodes ({m['architecture']})")
    lines += [f"  note       {note}" for note in record["notes"]]
    if m is not None and m["decompositions"]:
        lines += ["", f"  {'decomposition':16s}" + "".join(f" {t:>12s}"
                                                           for t in COLUMNS.values())]
        for d in m["decompositions"]:
            mark = "*" if d["applied"] else " "
            cells = "".join(" " + (f"{d[k]:12.6g}" if d[k] is not None else f"{'-':>12s}")
                            for k in COLUMNS)
            lines.append(f"  {d['name']:14s} {mark}{cells}")
        lines += [f"  {d['name']:16s} {d['label']}" for d in m["decompositions"]]
        lines.append(f"  * the job's partition file and rankfile (decided by "
                     f"{COLUMNS[m['criterion']]}); MaxElTime/SumElTime: Moulitsas & Karypis "
                     f"§3 (w* x work + e*-weighted volume); J: the blocks' traffic x level "
                     f"distance")
    if m is not None and m["seconds"]:
        lines += ["", "  time       " + ", ".join(f"{k} {v:.3f} s"
                                                  for k, v in m["seconds"].items())]
    if m is not None and m["partition_file"]:
        lines.append(f"  partition  {m['partition_file']}: line v holds the rank owning mesh "
                     f"vertex v; rank r runs where the rankfile's rank r does")
    return "\n".join(lines) + "\n"
