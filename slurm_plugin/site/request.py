"""What the job asked for: SPANK options and site rules → profile, mode, algorithm, budget.

Pure: takes the config, the scheduler's view of the job and the SPANK variables, and
returns a :class:`MappingRequest` or None when rankmap should leave the job alone.

The job's mode (``graph``, ``mesh`` or ``summa``:
:data:`~slurm_plugin.common.job_conventions.JOB_MODES`)
is decided here, once, from what the user typed: a ``mesh:NAME`` profile is a mesh job, a
``--rankmap=summa`` job (or a ``summa-fpm`` profile under ``auto``) a SUMMA job, anything
else a graph job (:func:`request_for`).  Everything downstream reads
:attr:`MappingRequest.mode`; slurm_plugin.modes.registry maps it to the code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..common.job_conventions import (
    GRAPH_MODE,
    MESH_MODE,
    MESH_PREFIX,
    SPANK_PROFILE,
    SPANK_RANKMAP,
    SPANK_RECORD,
    SPANK_TIME,
    SUMMA_MODE,
    SUMMA_PROFILE,
    summa_args,
)
from .config import Config


@dataclass(frozen=True)
class MappingRequest:
    """What to compute for one job.

    ``mode``: graph, mesh or summa (:func:`request_mode`); ``algorithm``: the job's
    ``--rankmap`` (or the rule's, or the site's ``[solver] algorithm``), ``summa`` in the
    summa mode; ``refusal``: set when the job asked but may not be mapped (the job
    then gets its mode's fallback report with this reason)."""

    profile: str
    mode: str
    algorithm: str
    time_limit: float
    origin: str  # "user" (sbatch flags), "rule" (site config) or "record" (--rankmap-record)
    refusal: str | None = None


def spank_values(env: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """The user's --comm-profile, --rankmap and --rankmap-time as the prolog sees them."""
    return (env.get(SPANK_PROFILE) or None, env.get(SPANK_RANKMAP) or None,
            env.get(SPANK_TIME) or None)


def wants_rules(config: Config) -> bool:
    return bool(config.rules)


def is_summa_profile(profile: str) -> bool:
    """``summa-fpm[:FILE][,size=N]``: ``summa-fpm``, ``summa-fpm:FILE``,
    ``summa-fpm,size=N`` or ``summa-fpm:FILE,size=N``."""
    return summa_args(profile) is not None


def is_mesh_profile(profile: str) -> bool:
    """``mesh:NAME[,OPTIONS]``: a mesh to partition onto the job's ranks."""
    return profile.strip().startswith(MESH_PREFIX)


def profile_mode(profile: str) -> str:
    """The mode a profile's form is written for: ``mesh`` for ``mesh:NAME[,...]``,
    ``summa`` for ``summa-fpm[:FILE][,size=N]``, else ``graph`` (a store name, a generator
    spec, ``file:PATH``)."""
    if is_mesh_profile(profile):
        return MESH_MODE
    return SUMMA_MODE if is_summa_profile(profile) else GRAPH_MODE


def request_mode(profile: str, algorithm: str) -> str:
    """The job's mode: a mesh profile is a mesh job whatever the algorithm, the
    algorithm ``summa`` a SUMMA job, anything else a graph job.  A pairing the mode
    cannot serve is refused (:func:`request_for`), not sent to another mode: the mode
    then only says which report the job's fallback gets."""
    if profile_mode(profile) == MESH_MODE:
        return MESH_MODE
    return SUMMA_MODE if algorithm == SUMMA_MODE else GRAPH_MODE


def _mesh_refusal(profile: str, algorithm: str) -> str | None:
    """Why a mesh request cannot run: it needs a store name, and the summa mode
    arranges a SUMMA partition, not a mesh.  The name's characters and the options
    are checked by the worker (slurm_plugin.modes.mesh_job), which reports them."""
    if not is_mesh_profile(profile):
        return None
    name = profile.strip()[len(MESH_PREFIX):].partition(",")[0].strip()
    if not name:
        return (f"profile {profile!r}: give the store entry of the mesh, "
                f"{MESH_PREFIX}NAME")
    if algorithm == SUMMA_MODE:
        return (f"profile {profile!r} is a mesh to partition, not a SUMMA partition: use "
                f"--rankmap=auto or a mapping algorithm, not summa")
    return None


def _summa_refusal(profile: str, algorithm: str) -> str | None:
    """Why a SUMMA request cannot run: a SUMMA profile needs the summa mode and the
    summa mode needs a SUMMA profile (its speeds are not a communication graph)."""
    if algorithm == SUMMA_MODE and not is_summa_profile(profile) \
            and not is_mesh_profile(profile):  # _mesh_refusal says why
        return (f"--rankmap=summa needs --comm-profile={SUMMA_PROFILE}[:FILE][,size=N], got "
                f"profile {profile!r}")
    if algorithm != SUMMA_MODE and is_summa_profile(profile):
        return (f"profile {profile!r} is a SUMMA partition, not a communication graph: use "
                f"--rankmap=summa (or auto), not {algorithm!r}")
    return None


def request_for(profile: str, rankmap: str | None, algorithm: str, time_limit: float,
                origin: str = "user") -> MappingRequest:
    """The request for ``profile`` with the ``--rankmap`` value ``rankmap``: an
    algorithm (or ``summa``) replaces ``algorithm`` (the rule's or the site's); None or
    ``auto`` keeps it, except that a ``summa-fpm`` profile means the summa mode.  Its
    mode is :func:`request_mode`'s; a pairing no mode serves is refused, with the
    reason the user reads (``mesh:`` without a name or with ``summa``; ``summa`` with
    a graph profile; a ``summa-fpm`` profile with a mapping algorithm).  The prolog
    (:func:`decide`) and ``rankmap plan`` both take their request from here."""
    if rankmap not in (None, "auto"):
        algorithm = rankmap
    elif is_summa_profile(profile):
        algorithm = SUMMA_MODE
    refusal = _mesh_refusal(profile, algorithm) or _summa_refusal(profile, algorithm)
    return MappingRequest(profile, request_mode(profile, algorithm), algorithm, time_limit,
                          origin, refusal)


def decide(config: Config, env: Mapping[str, str], partition: str | None,
           account: str | None = None, job_name: str | None = None
           ) -> MappingRequest | None:
    """The mapping to compute for this job, or None to leave it untouched.

    SUMMA jobs: ``--rankmap=summa`` without a profile means ``summa-fpm`` (equal
    speeds; a site rule's graph profile is not taken for it); a ``summa-fpm`` profile
    under ``auto`` (or no ``--rankmap``) means the summa mode; any other pairing of the
    two is refused (:func:`request_for`), which the prolog turns into a fallback.

    Mesh jobs: a ``mesh:NAME`` profile keeps the algorithm (``--rankmap``, the rule's
    or the site's), which maps the mesh's quotient graph onto the job's tree
    (slurm_plugin.modes.mesh_job); ``mesh:`` without a name, or with ``--rankmap=summa``, is
    refused.
    """
    profile, rankmap, time_text = spank_values(env)
    if rankmap == "off":
        return None
    rule = config.rule_for(partition, account, job_name)
    origin = "user"
    if profile is None and rankmap == SUMMA_MODE:
        profile = SUMMA_PROFILE
    if profile is None and env.get(SPANK_RECORD):
        # --rankmap-record=NAME alone: mapped with NAME once it exists (the job records
        # another sample); until then the report says it was not found
        profile, origin = env[SPANK_RECORD], "record"
    if profile is None and rule is not None and rule.profile:
        profile, origin = rule.profile, "rule"
    if profile is None:
        return None
    algorithm = config.solver.algorithm
    if rule is not None and rule.algorithm:
        algorithm = rule.algorithm
    time_limit = config.solver.time_limit
    if rule is not None and rule.time_limit:
        time_limit = rule.time_limit
    time_refusal = None
    if time_text is not None:
        try:
            time_limit = float(time_text)
            if not time_limit > 0:
                raise ValueError
        except ValueError:
            time_refusal = f"--rankmap-time={time_text!r} is not a positive number"
            time_limit = config.solver.time_limit
    time_limit = min(time_limit, config.solver.max_time_limit)
    request = request_for(profile, rankmap, algorithm, time_limit, origin)
    refusal = request.refusal or time_refusal
    if not config.partition_enabled(partition):
        refusal = f"rankmap is not enabled on partition {partition!r}"
    return replace(request, refusal=refusal)
