"""What the job asked for: SPANK options and site rules → profile, algorithm, budget.

Pure: takes the config, the scheduler's view of the job and the SPANK variables, and
returns a :class:`MappingRequest` or None when rankmap should leave the job alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..common.job_conventions import (
    MESH_PREFIX,
    SPANK_MODE,
    SPANK_PROFILE,
    SPANK_TIME,
    SUMMA_MODE,
    SUMMA_PROFILE,
    summa_args,
)
from .config import Config


@dataclass(frozen=True)
class MappingRequest:
    profile: str
    algorithm: str
    time_limit: float
    origin: str  # "user" (sbatch flags) or "rule" (site config)
    refusal: str | None = None  # set when the job asked but may not be mapped


def spank_values(env: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    """The user's --comm-profile, --rankmap and --rankmap-time as the prolog sees them."""
    return (env.get(SPANK_PROFILE) or None, env.get(SPANK_MODE) or None,
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


def mesh_refusal(profile: str, algorithm: str) -> str | None:
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


def summa_refusal(profile: str, algorithm: str) -> str | None:
    """Why a SUMMA request cannot run: a SUMMA profile needs the summa mode and the
    summa mode needs a SUMMA profile (its speeds are not a communication graph)."""
    if algorithm == SUMMA_MODE and not is_summa_profile(profile) \
            and not is_mesh_profile(profile):  # mesh_refusal says why
        return (f"--rankmap=summa needs --comm-profile={SUMMA_PROFILE}[:FILE][,size=N], got "
                f"profile {profile!r}")
    if algorithm != SUMMA_MODE and is_summa_profile(profile):
        return (f"profile {profile!r} is a SUMMA partition, not a communication graph: use "
                f"--rankmap=summa (or auto), not {algorithm!r}")
    return None


def decide(config: Config, env: Mapping[str, str], partition: str | None,
           account: str | None = None, job_name: str | None = None
           ) -> MappingRequest | None:
    """The mapping to compute for this job, or None to leave it untouched.

    SUMMA jobs: ``--rankmap=summa`` without a profile means ``summa-fpm`` (equal
    speeds; a site rule's graph profile is not taken for it); a ``summa-fpm`` profile
    under ``auto`` (or no ``--rankmap``) means the summa mode; any other pairing of the
    two is refused (:func:`summa_refusal`), which the prolog turns into a fallback.

    Mesh jobs: a ``mesh:NAME`` profile keeps the algorithm (``--rankmap``, the rule's
    or the site's), which maps the mesh's quotient graph onto the job's tree
    (slurm_plugin.modes.mesh_job); ``mesh:`` without a name, or with ``--rankmap=summa``, is
    refused (:func:`mesh_refusal`).
    """
    profile, mode, time_text = spank_values(env)
    if mode == "off":
        return None
    rule = config.rule_for(partition, account, job_name)
    origin = "user"
    if profile is None and mode == SUMMA_MODE:
        profile = SUMMA_PROFILE
    if profile is None and rule is not None and rule.profile:
        profile, origin = rule.profile, "rule"
    if profile is None:
        return None
    algorithm = config.get("solver", "algorithm")
    if rule is not None and rule.algorithm:
        algorithm = rule.algorithm
    if mode not in (None, "auto"):
        algorithm = mode
    elif is_summa_profile(profile):
        algorithm = SUMMA_MODE
    time_limit = config.get("solver", "time_limit")
    if rule is not None and rule.time_limit:
        time_limit = rule.time_limit
    refusal = mesh_refusal(profile, algorithm) or summa_refusal(profile, algorithm)
    if time_text is not None:
        try:
            time_limit = float(time_text)
            if not time_limit > 0:
                raise ValueError
        except ValueError:
            refusal = refusal or f"--rankmap-time={time_text!r} is not a positive number"
            time_limit = config.get("solver", "time_limit")
    time_limit = min(time_limit, config.get("solver", "max_time_limit"))
    if not config.partition_enabled(partition):
        refusal = f"rankmap is not enabled on partition {partition!r}"
    return MappingRequest(profile, algorithm, time_limit, origin, refusal)
