"""What every job mode is: the job it is given, the plan it returns, the interface.

A job's request has one mode (``graph``, ``mesh`` or ``summa``), decided once by
:func:`slurm_plugin.site.request.request_for`; :mod:`slurm_plugin.modes.registry` gives the
:class:`JobMode` of that name, and the worker
(:func:`slurm_plugin.lifecycle.job_worker.compute_job`, also behind ``rankmap plan``) runs
every mode the same way::

    mode = job_mode(request.mode)
    data = mode.load(job)         # the profile's input, read (an error: the reason)
    machine = mode.machine(job)   # what the site adds to the machine (idem)
    plan = mode.plan(job, data, machine, reason)   # pure: plan, render, report

A mode's ``load`` and ``machine`` are the edges that read files (and, for ``[speeds]
features``, Slurm); they raise a :class:`~mapper.errors.RankmapError` or ``OSError``
naming the input, which becomes the job's fallback reason.  ``plan`` reads nothing: it
is given what was read, or None and the reason, and always returns a :class:`JobPlan`,
a fallback one (no files, a report saying why) when anything stops it.

The modes: :mod:`~slurm_plugin.modes.graph_job` (a communication graph mapped onto the
job's machine; its rank reordering files, :mod:`~slurm_plugin.outputs.reorder_files`, are
one more output of it), :mod:`~slurm_plugin.modes.mesh_job` (a mesh partitioned onto the
job's slots), :mod:`~slurm_plugin.modes.summa_job` (a SUMMA partition arranged for the
job's network).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ..machine.distribution import Distribution, parse_distribution
from ..machine.layout import Layout
from ..outputs import render
from ..outputs.report import render_report_json
from ..site.config import (
    Config,
    NetworkConfig,
    ProfilesSettings,
    RenderSettings,
    SolverSettings,
    SpeedsSettings,
    SummaSettings,
)
from ..slurm.topology import SwitchTree

#: Launcher files by name, with the renderer that produces each.
RENDERERS = {
    "rankfile": render.render_rankfile,
    "hostfile": render.render_hostfile,
    "machinefile": render.render_machinefile,
    "slurm_hostfile": render.render_slurm_hostfile,
    "bindings": render.render_bindfile,
    "hydra_hostfile": render.render_hydra_hostfile,
    "hydra_rankmap": render.render_hydra_rankmap,
}


R = TypeVar("R")


@dataclass(frozen=True)
class ModeSettings:
    """The site's settings a mode reads, and no others: the solver's, the files to
    render, the profile limits, the node speeds and SUMMA's sections, the ``[network]``
    table, and the file they came from (for messages)."""

    solver: SolverSettings
    render: RenderSettings
    profiles: ProfilesSettings
    speeds: SpeedsSettings
    summa: SummaSettings
    network: NetworkConfig | None = None
    path: str | None = None

    @classmethod
    def of(cls, config: Config) -> ModeSettings:
        return cls(config.solver, config.render, config.profiles, config.speeds,
                   config.summa, config.network, config.path)


@dataclass(frozen=True)
class Job:
    """One job as every mode sees it: its machine, what it asked for, the site's settings
    for modes (``settings``).

    ``layout`` (the job's slots in the machine's hierarchy) and ``tree`` (the switch tree
    it came from; None without one) are read by the caller: the worker from Slurm,
    ``rankmap plan`` from its options.  ``profile``, ``algorithm`` and ``time_limit``
    (seconds) are the request's.  ``stores`` are the profile stores (the bundled one
    last); ``allow_user_files`` lets ``file:`` and ``summa-fpm:/PATH`` be read.
    ``distribution``: the job's ``--distribution`` as Slurm spells it (None: Slurm's
    default, assumed).  ``node_features(nodes)``: the nodes' Slurm features, asked for
    only by ``[speeds] features`` in mesh mode.  ``progress``: the solver's progress
    line (``rankmap plan`` on a terminal).
    """

    layout: Layout
    tree: SwitchTree | None
    settings: ModeSettings
    profile: str
    algorithm: str
    time_limit: float
    stores: tuple[str, ...]
    allow_user_files: bool
    distribution: str | None = None
    job_id: str | None = None
    node_features: Callable[[Sequence[str]], Mapping[str, Sequence[str]]] | None = None
    progress: Callable[[str], None] | None = None

    @property
    def slurm_distribution(self) -> Distribution:
        """``distribution`` parsed: Slurm's default placement, the one rankmap must beat."""
        return parse_distribution(self.distribution)

    @property
    def distribution_assumed(self) -> bool:
        """The job's ``--distribution`` was not known: Slurm's default was taken for it."""
        return self.distribution is None

    @property
    def render_files(self) -> tuple[str, ...]:
        """The launcher files the site renders (``[render] files``)."""
        return tuple(self.settings.render.files)

    @property
    def templates_dir(self) -> str | None:
        return self.settings.render.templates_dir or None

    @property
    def max_file_bytes(self) -> int | None:
        return self.settings.profiles.max_file_bytes


@dataclass
class JobPlan(Generic[R]):
    """What one job gets, in every mode: its files, its report, and what the worker's
    status says of it.

    ``files``: the job files by FILE_NAMES key (launcher files, the mode's own —
    ``partition``, ``arrangement``, the reorder files — in the order they are written),
    without the report; ``report_text``: report.txt; ``report_record``: what report.json
    holds (rendered only where it is written: :attr:`report_json`).
    ``fallback_reason``: why rankmap's placement is not applied (no files then);
    ``kept_default``: nothing beat Slurm's default placement, which the job keeps
    (graph mode).  ``objective`` and ``seconds``: the mode's measure of what was applied
    (J, MaxElTime, the SUMMA norm) and the solver's seconds, for the status;
    ``status_notes``: what the prolog logs for the job; ``notes``: the plan's notes (the
    layout's and the mode's); ``timings``: wall seconds by part.  ``result``: the mode's
    own outcome, for callers in this process — a :class:`mapper.MappingResult` (graph),
    a :class:`~slurm_plugin.modes.mesh_job.MeshResult` (mesh), a
    :class:`mapper.summa.arrange.Arrangement` (summa); None when nothing was computed.
    """

    files: dict[str, str]
    report_text: str
    report_record: dict[str, Any]
    fallback_reason: str | None = None
    kept_default: bool = False
    summary: str = ""
    objective: float | None = None
    seconds: float | None = None
    notes: list[str] = field(default_factory=list)
    status_notes: tuple[str, ...] = ()
    #: wall seconds by phase: the graph mode's ``default_placements``, the solver's
    #: (:data:`mapper.solve.result.TIMINGS`, its ``other`` as ``solver_other``), ``render``
    #: (the launcher files), ``report`` (evaluating the placements and writing it)
    timings: dict[str, float] = field(default_factory=dict)
    result: R | None = None

    @property
    def report_json(self) -> str:
        """report.json's text."""
        return render_report_json(self.report_record)

    @property
    def applied(self) -> bool:
        """True when rankmap's placement is used (launcher files rendered)."""
        return self.fallback_reason is None and not self.kept_default


class JobMode(Protocol):
    """One kind of job (module docstring): how it reads its input, how it plans.

    ``name`` is the mode's name in requests (:data:`slurm_plugin.common.job_conventions.JOB_MODES`).
    ``load(job)`` reads what the job's profile names (a communication graph, a mesh,
    per-rank speeds); ``machine(job)`` what the site's configuration adds to the
    layout (the ``[network]`` hop matrix, the ``[speeds]`` architecture; None when the
    mode needs nothing); both raise a ``RankmapError`` or ``OSError`` naming the input
    when it cannot be used.  ``plan(job, data, machine, reason)`` computes and renders:
    with ``reason`` set (the request was refused, or an input could not be read; then
    ``data`` or ``machine`` may be None) it renders the fallback report only.
    """

    name: str

    def load(self, job: Job) -> Any: ...

    def machine(self, job: Job) -> Any: ...

    def plan(self, job: Job, data: Any, machine: Any, reason: str | None) -> JobPlan: ...
