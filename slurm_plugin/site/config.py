"""Site configuration: one TOML file, ``/etc/rankmap/rankmap.toml``.

The path can be overridden with ``RANKMAP_CONFIG``.  Every key has a documented
default (``DEFAULTS``); unknown keys and bad values are errors that name the file and
the key; every effective value remembers where it came from, which
``rankmap config check`` prints.
"""

from __future__ import annotations

import copy
import errno
import fnmatch
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

import tomllib

from mapper.errors import RankmapError
from mapper.solve.algorithm_names import NETWORK_DEFAULT, PRESETS, normalize_algorithm

from ..common.job_conventions import (
    LAUNCHER_FILES,
    OPENMPI_RECORDERS,
    PROFILE_NAME,
)
from ..common.launcher_support import LAUNCHERS

DEFAULT_PATH = "/etc/rankmap/rankmap.toml"
#: a site configuration is a few KiB; anything far larger is not one
MAX_CONFIG_BYTES = 4 << 20

RENDERABLE = LAUNCHER_FILES


class ConfigError(RankmapError, ValueError):
    """A configuration that cannot be used; the message names the file and key."""


# -- value checkers ---------------------------------------------------------------------

def _positive_number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ValueError(f"must be a positive number, got {v!r}")
    return float(v)


def _non_negative_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"must be a non-negative integer, got {v!r}")
    return v


def _positive_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"must be a positive integer, got {v!r}")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"must be true or false, got {v!r}")
    return v


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"must be a string, got {v!r}")
    return v


def _abs_path(v: Any) -> str:
    v = _string(v)
    if not v.startswith("/"):
        raise ValueError(f"must be an absolute path, got {v!r}")
    return v


def _optional_path(v: Any) -> str:
    v = _string(v)
    return _abs_path(v) if v else ""


def _choice(*options: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError(f"must be one of {', '.join(options)}, got {v!r}")
        return v
    return check


def _string_list(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"must be a list of strings, got {v!r}")
    return list(v)


def _path_list(v: Any) -> list[str]:
    return [_abs_path(x) for x in _string_list(v)]


def _render_list(v: Any) -> list[str]:
    items = _string_list(v)
    for x in items:
        if x not in RENDERABLE:
            raise ValueError(f"unknown file {x!r}; choose from {', '.join(RENDERABLE)}")
    return items


def _user_path(v: Any) -> str:
    """A path for each job user: absolute, or under ``~`` (the user's home from the
    password database); ``%u`` is the user name; empty turns the feature off."""
    v = _string(v)
    if v and not (v.startswith("/") or v == "~" or v.startswith("~/")):
        raise ValueError(f"must be an absolute path or start with ~/, got {v!r}")
    if "\0" in v or ".." in v.split("/"):
        raise ValueError(f"must not contain '..' or NUL, got {v!r}")
    return v


def _launcher_list(v: Any) -> list[str]:
    items = _string_list(v)
    for x in items:
        if x not in LAUNCHERS:
            raise ValueError(f"unknown launcher family {x!r}; choose from "
                             f"{', '.join(LAUNCHERS)}")
    return items


def _distances(v: Any) -> list[float]:
    if not isinstance(v, list) or not v:
        raise ValueError(f"must be a non-empty list of numbers, got {v!r}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
            raise ValueError(f"entries must be non-negative numbers, got {x!r}")
        out.append(float(x))
    if any(b < a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError(f"must not decrease from the innermost level outwards, got {v!r}")
    return out


def _oversubscription(v: Any) -> list[float]:
    if not isinstance(v, list):
        raise ValueError(f"must be a list of numbers >= 1 (leaf switches first), got {v!r}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 1 <= x < float("inf"):
            raise ValueError(f"entries must be numbers >= 1 (4 for 4:1), got {x!r}")
        out.append(float(x))
    return out


def _topology(v: Any) -> str:
    v = _string(v)
    if v in ("auto", "scontrol", "none"):
        return v
    return _abs_path(v)


# The grammar of mapper.solve.runner.AlgorithmSpec, checked here without importing the solver
# (and numpy) so that the TaskProlog, which reads this file once per task, stays light.


def _algorithm(v: Any) -> str:
    return normalize_algorithm(_string(v))


def _host_table(v: Any, what: str) -> list[tuple[str, list[str], Any]]:
    """(host list, its node names, value) of a ``{ "n[1-16]" = VALUE }`` table, the
    host lists checked; ``what`` names the value in the error for a non-table."""
    from ..common.hostlist import HostlistError, expand_hostlist

    if not isinstance(v, dict):
        raise ValueError(f"must be a table of host list = {what}, got {v!r}")
    out = []
    for hosts, value in v.items():
        try:
            out.append((hosts, expand_hostlist(hosts), value))
        except HostlistError as exc:
            raise ValueError(f"{hosts!r}: {exc}") from None
    return out


def _hwloc_files(v: Any) -> dict[str, str]:
    for _, _, path in _host_table(v, "XML path"):
        _abs_path(path)
    return dict(v)


def _gpu_domains(v: Any) -> dict[str, list[list[int]]]:
    """``{ "n[1-16]" = [[0, 1, 2, 3], [4, 5, 6, 7]] }``: host list → the node type's GPU
    domains (GPUs joined by NVLink/xGMI, by Slurm's GPU index); a GPU in two domains of
    one type is an error."""
    for hosts, _, domains in _host_table(v, "[[GPU indexes], ...]"):
        if not isinstance(domains, list) or not all(
                isinstance(d, list) and d and all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in d)
                for d in domains):
            raise ValueError(f"{hosts!r}: must be a list of lists of GPU indexes (0, 1, "
                             f"...), got {domains!r}")
        counts = Counter(i for d in domains for i in d)
        twice = sorted(i for i, n in counts.items() if n > 1)
        if twice:
            raise ValueError(f"{hosts!r}: GPU {twice[0]} is in two domains")
    return {hosts: [list(d) for d in domains] for hosts, domains in v.items()}


def _speed(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
        raise ValueError(f"must be a positive number, got {v!r}")
    return float(v)


def _speeds_by_nodes(v: Any) -> dict[str, float]:
    """``{ "n[1-16]" = 2.0, ... }``: host list → relative speed; a node in two keys is an
    error naming both."""
    owner: dict[str, str] = {}
    out = {}
    for hosts, names, speed in _host_table(v, "speed"):
        if not names:
            raise ValueError(f"{hosts!r}: names no node")
        try:
            out[hosts] = _speed(speed)
        except ValueError as exc:
            raise ValueError(f"{hosts!r}: {exc}") from None
        for name in names:
            if owner.setdefault(name, hosts) != hosts:
                raise ValueError(f"{owner[name]!r} and {hosts!r} both name node {name}")
    return out


def _speeds_by_features(v: Any) -> dict[str, float]:
    """``{ gpu = 2.0, ... }``: Slurm node feature → relative speed."""
    if not isinstance(v, dict):
        raise ValueError(f"must be a table of feature = speed, got {v!r}")
    out = {}
    for feature, speed in v.items():
        if not feature or any(c.isspace() or c in ",&|!*()[]" for c in feature):
            raise ValueError(f"{feature!r}: not a Slurm feature name")
        try:
            out[feature] = _speed(speed)
        except ValueError as exc:
            raise ValueError(f"{feature!r}: {exc}") from None
    return out


def _log_level(v: Any) -> str:
    return _choice("debug", "info", "warning", "error")(v)


def setting(default: Any, check: Callable[[Any], Any], doc: str) -> Any:
    """One key of a settings section: its default (a list or table copied for each
    instance), the checker that validates the file's value (raising ValueError with the
    reason; the parser adds the file and key), and its one-line documentation."""
    meta = {"check": check, "doc": doc}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class GeneralSettings:
    """[general]: where rankmap acts and logs."""

    enabled_partitions: list[str] = setting(
        ["*"], _string_list,
        "partitions where rankmap may act (glob patterns)")
    output_dir: str = setting(
        "/run/rankmap", _abs_path,
        "per-job directories job.<id> are created here on the batch host")
    log_file: str = setting(
        "/var/log/rankmap/rankmap.log", _optional_path,
        "prolog log; empty: syslog-free stderr only")
    log_level: str = setting("info", _log_level, "debug, info, warning or error")


@dataclass(frozen=True)
class SolverSettings:
    """[solver]: the solver every job runs."""

    default_preset: str = setting(
        "fast", _choice(*PRESETS),
        "fast (topdown+n10), eco (best of several starts) or strong "
        "(more starts, then iterated local search): what jobs run "
        "unless algorithm is set (README: Presets)")
    algorithm: str = setting(
        "", _algorithm,
        "a preset or an algorithm such as topdown+n10; overrides "
        "default_preset (unset: the preset)")
    objective: str = setting(
        "congestion", _choice("congestion", "J"),
        "congestion: J under Slurm's default's busiest link of each switch "
        "level (a result loading one more is repaired under them); J: J "
        "alone, such results only refused (docs/solver.md: Objectives)")
    time_limit: float = setting(5.0, _positive_number, "seconds the solver may use per job")
    max_time_limit: float = setting(30.0, _positive_number, "cap on users' --rankmap-time")
    seed: int = setting(0, _non_negative_int, "random seed (reproducible placements)")
    oversubscribe: str = setting(
        "never", _choice("never", "allow"),
        "jobs with more tasks than cores (sbatch --overcommit): never = "
        "keep Slurm's placement and say why in the report; allow = map "
        "them, ranks sharing a core forming an innermost 'core' level")
    uplink_oversubscription: list[float] = setting(
        [], _oversubscription,
        "switch uplinks' oversubscription, leaf switches "
        "first, the last for the levels above (e.g. [4] for "
        "4:1 everywhere); empty: unknown. Known, a profile's "
        "phases are timed over every link level together "
        "(docs/solver.md: Phases)")
    level_distances: list[float] = setting(
        [1.0, 10.0, 100.0, 1000.0], _distances,
        "cost per byte: same socket, same node, same leaf switch, "
        "each switch level above (the last value x10 per extra level)")


@dataclass(frozen=True)
class SlurmSettings:
    """[slurm]: how Slurm is asked."""

    backend: str = setting(
        "auto", _choice("auto", "scontrol", "squeue", "pyslurm"),
        "how job data is read: pyslurm when it matches the running Slurm, "
        "else the CLI")
    topology: str = setting(
        "auto", _topology,
        "auto (scontrol show topology), scontrol, none, or a topology.conf path")
    command_timeout: float = setting(10.0, _positive_number, "seconds per Slurm command")
    bin_dir: str = setting(
        "", _optional_path,
        "directory of Slurm's commands (scontrol, squeue); empty: PATH, then "
        "/usr/local/bin, /usr/bin")


@dataclass(frozen=True)
class ProfilesSettings:
    """[profiles]: where communication profiles are found."""

    stores: list[str] = setting(["/etc/rankmap/profiles"], _path_list, "profile store directories")
    allow_user_files: bool = setting(
        False, _bool,
        "accept --comm-profile=file:PATH, read as the job's user")
    max_file_bytes: int = setting(64 << 20, _non_negative_int, "size limit of a profile matrix")
    user_store: str = setting(
        "~/.local/share/rankmap/profiles", _user_path,
        "each user's own store (~ is the user's home, %u the user name), "
        "searched first and read as the user; recordings go there; empty: "
        "none")


@dataclass(frozen=True)
class RecordSettings:
    """[record]: jobs that record their own profile."""

    enabled: bool = setting(
        True, _bool,
        "jobs may record their communication (--rankmap-record=NAME, rules "
        "with record = true)")
    dir: str = setting(
        "~/.local/share/rankmap/recordings", _user_path,
        "where a recording job's ranks write (per user, on a file system every "
        "node of the job shares; ~ and %u as for user_store)")
    openmpi: str = setting(
        "monitoring", _choice(*OPENMPI_RECORDERS),
        "who records an Open MPI program: monitoring (Open MPI's pml/coll "
        "monitoring components) or interposer (librankmap_record)")
    library: str = setting(
        "", _optional_path,
        "librankmap_record.so (empty: PREFIX/lib/librankmap_record.so of this "
        "installation, as deploy/install.sh puts it)")
    max_file_bytes: int = setting(
        16 << 20, _positive_int,
        "size limit of one rank's recording file")


@dataclass(frozen=True)
class RenderSettings:
    """[render]: the launcher files written."""

    files: list[str] = setting(list(RENDERABLE), _render_list, "launcher files to write")
    export_slurm_hostfile: bool = setting(
        False, _bool,
        "TaskProlog sets SLURM_HOSTFILE and "
        "SLURM_DISTRIBUTION=arbitrary for srun")
    templates_dir: str = setting("", _optional_path, "site templates (empty: packaged ones)")


@dataclass(frozen=True)
class LaunchersSettings:
    """[launchers]: which launcher families get the placement."""

    supported: list[str] = setting(
        list(LAUNCHERS), _launcher_list,
        "launcher families whose ranks get the placement: openmpi (mpirun of "
        "Open MPI 4 and 5), hydra (mpiexec/mpirun of MPICH and Intel MPI), "
        "srun")
    bind_library: str = setting(
        "", _optional_path,
        "librankmap_bind.so, preloaded into the job to bind every rank to "
        "its cores (empty: PREFIX/lib/librankmap_bind.so of this "
        "installation, as deploy/install.sh puts it)")


@dataclass(frozen=True)
class HwlocSettings:
    """[hwloc]: cache levels from hwloc XML."""

    files: dict[str, str] = setting(
        {}, _hwloc_files,
        "hwloc XML (lstopo --of xml) per node type: { \"n[1-64]\" = PATH }; adds a "
        "cache level (L3 / die / group) between core and socket")
    cache_distance: float = setting(
        0.5, _positive_number,
        "distance between cores sharing a cache group (below the socket "
        "distance)")


@dataclass(frozen=True)
class GpusSettings:
    """[gpus]: GPU ranks (jobs with --gpus-per-task)."""

    enabled: bool = setting(
        True, _bool,
        "map GPU ranks: each rank of a --gpus-per-task job gets GPUs and the cores wired "
        "to them, and its CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / ZE_AFFINITY_MASK "
        "narrowed to them (false: Slurm's own GPU binding)")
    gres_conf: str = setting(
        "", _optional_path,
        "gres.conf giving each GPU's Cores= (empty: gres.conf beside the slurm.conf "
        "in use); GPUs without Cores= take their cores from the [hwloc] XML")
    nics: bool = setting(
        True, _bool,
        "each GPU rank's UCX_NET_DEVICES set, unless the job sets it, to the RDMA NIC "
        "nearest its GPU in the node's [hwloc] XML (same PCIe switch, else socket); "
        "nothing for nodes without an XML")
    domains: dict[str, list[list[int]]] = setting(
        {}, _gpu_domains,
        "GPU domains per node type (GPUs joined by NVLink/NVSwitch/xGMI, by Slurm's GPU "
        "index): { \"n[1-16]\" = [[0, 1, 2, 3], [4, 5, 6, 7]] }; a GPU job's ranks are "
        "grouped by domain instead of by socket")


@dataclass(frozen=True)
class SpeedsSettings:
    """[speeds]: nodes' relative compute speeds."""

    nodes: dict[str, float] = setting(
        {}, _speeds_by_nodes,
        "relative compute speed per host list: { \"n[1-16]\" = 2.0 }; nodes not "
        "listed (and matching no feature) have speed 1.0; a node in two keys "
        "is an error")
    features: dict[str, float] = setting(
        {}, _speeds_by_features,
        "relative compute speed per Slurm node feature (ActiveFeatures, else "
        "AvailableFeatures): { gpu = 2.0 }; a node matched by two keys (two "
        "features, or a feature and a host list) is an error naming both")


@dataclass(frozen=True)
class PrologSettings:
    """[prolog]: the prolog's worker and its limits."""

    grace_seconds: float = setting(
        20.0, _positive_number,
        "start-up and I/O time allowed beyond the solver budget before "
        "the watchdog stops the computation")
    compute_on: str = setting(
        "batch_host", _choice("batch_host", "slurmctld"),
        "batch_host: the Prolog on the job's first node computes (no shared "
        "file system needed); slurmctld: PrologSlurmctld computes into a "
        "shared output_dir")
    fallback_dir: str = setting(
        "/run/rankmap-fallback", _abs_path,
        "where reports go when output_dir cannot be used")
    worker_memory_bytes: int = setting(
        4 << 30, _non_negative_int,
        "address-space limit (RLIMIT_AS) of the worker that reads "
        "the profile and solves, in bytes; 0: no limit")
    max_workers: int = setting(
        0, _non_negative_int,
        "computations at once on one node; 0: as many as half the node's "
        "memory holds at worker_memory_bytes each (at least 1); a job that "
        "finds them all busy waits up to its time budget plus "
        "grace_seconds for one, then keeps Slurm's placement")
    max_output_bytes: int = setting(
        1 << 30, _positive_int,
        "most bytes of files one job's computation may write into "
        "its job directory (launcher files, report); more: the job "
        "keeps Slurm's placement")


@dataclass(frozen=True)
class SummaSettings:
    """[summa]: --rankmap=summa jobs."""

    level: str = setting(
        "auto", _choice("auto", "switch", "node", "socket"),
        "--rankmap=summa jobs: the level whose groups are the clusters of the "
        "SUMMA cost model (auto: leaf switches when the job spans several, else "
        "nodes, else sockets)")
    weighted: bool = setting(
        False, _bool,
        "--rankmap=summa jobs: weight each transfer by the level distances "
        "instead of counting inter-group transfers")


#: The sections by name, each a typed, frozen settings class.
SECTIONS: dict[str, type] = {
    "general": GeneralSettings,
    "solver": SolverSettings,
    "slurm": SlurmSettings,
    "profiles": ProfilesSettings,
    "record": RecordSettings,
    "render": RenderSettings,
    "launchers": LaunchersSettings,
    "hwloc": HwlocSettings,
    "gpus": GpusSettings,
    "speeds": SpeedsSettings,
    "prolog": PrologSettings,
    "summa": SummaSettings,
}


def _default_of(f: Any) -> Any:
    return f.default_factory() if f.default is MISSING else f.default


#: Every key: (default, checker, one-line documentation), derived from :data:`SECTIONS`.
DEFAULTS: dict[str, dict[str, tuple[Any, Callable[[Any], Any], str]]] = {
    name: {f.name: (_default_of(f), f.metadata["check"], f.metadata["doc"])
           for f in fields(cls)}
    for name, cls in SECTIONS.items()}

# -- [network]: a node-level hop matrix for non-tree interconnects ---------------------

#: Default algorithm for a hop-matrix machine when the site sets no ``[solver] algorithm``
#: (Top-Down and Bottom-Up need a switch tree).
NETWORK_ALGORITHM = NETWORK_DEFAULT

#: The generators' hop matrices are built for the whole network (N² entries, several
#: N² temporaries inside the generators) in the prolog's worker, which has
#: ``worker_memory_bytes`` (4 GiB) of address space: 8192 slots is 512 MiB per matrix.
MAX_NETWORK_SLOTS = 8192

NETWORK_KINDS = ("file", "mesh", "torus", "tianhe3", "dragonfly")
_GENERATORS = NETWORK_KINDS[1:]


def _positive_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"must be a positive integer, got {v!r}")
    return v


def _non_negative_number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
        raise ValueError(f"must be a non-negative number, got {v!r}")
    return float(v)


def _dims(v: Any) -> list[int]:
    if not isinstance(v, list) or not v:
        raise ValueError(f"must be a non-empty list of positive integers, got {v!r}")
    for x in v:
        try:
            _positive_int(x)
        except ValueError:
            raise ValueError(f"must be a list of positive integers, got {v!r}") from None
    return list(v)


def _chip_hops(v: Any) -> list[int]:
    if (not isinstance(v, list) or len(v) != 3
            or any(isinstance(x, bool) or not isinstance(x, int) for x in v)
            or not 0 <= v[0] <= v[1] <= v[2]):
        raise ValueError(f"must be three integers 0 <= same chip <= same row or column <= "
                         f"other, got {v!r}")
    return list(v)


def _node_names(v: Any) -> list[str]:
    from ..common.hostlist import HostlistError, expand_hostlist

    v = _string(v)
    try:
        names = expand_hostlist(v)
    except HostlistError as exc:
        raise ValueError(str(exc)) from None
    if not names:
        raise ValueError("names no node")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"node {name} is listed twice")
        seen.add(name)
    return names


#: Every [network] key: (checker, the kinds it belongs to (None: all), documentation).
NETWORK_KEYS: dict[str, tuple[Callable[[Any], Any], tuple[str, ...] | None, str]] = {
    "kind": (_choice(*NETWORK_KINDS), None,
             "file (hop_file) or a generator: mesh, torus, tianhe3, dragonfly"),
    "hop_file": (_abs_path, ("file",),
                 "node-level hop (or cost) matrix: line 1 the node names, then the rows"),
    "dims": (_dims, ("mesh", "torus"), "routers per dimension, e.g. [4, 4, 4]"),
    "rows": (_positive_int, ("tianhe3",), "rows of chips"),
    "cols": (_positive_int, ("tianhe3",), "columns of chips"),
    "nodes_per_chip": (_positive_int, ("tianhe3",), "compute nodes per chip"),
    "chip_hops": (_chip_hops, ("tianhe3",),
                  "hops for same chip, same row or column, otherwise (default [1, 2, 3])"),
    "groups": (_positive_int, ("dragonfly",), "dragonfly groups"),
    "routers": (_positive_int, ("dragonfly",), "routers per group"),
    "nodes_per_router": (_positive_int, ("dragonfly",), "compute nodes per router"),
    "nodes": (_node_names, _GENERATORS, "host list; its i-th node sits at slot i"),
    "node_order": (_abs_path, _GENERATORS, "file, one node name per line: line i = slot i"),
    "per_hop": (_non_negative_number, None, "cost per byte and network hop"),
    "base": (_non_negative_number, None, "cost per byte of leaving a node"),
}

_NETWORK_REQUIRED = {"file": ("hop_file",), "mesh": ("dims",), "torus": ("dims",),
                     "tianhe3": ("rows", "cols", "nodes_per_chip"),
                     "dragonfly": ("groups", "routers", "nodes_per_router")}


@dataclass(frozen=True)
class NetworkConfig:
    """The checked ``[network]`` table (no file read yet: :mod:`slurm_plugin.machine.network_source`
    reads the hop file or node order and builds the matrix)."""

    kind: str
    params: dict[str, Any]  # the generator's keys (dims, rows, …) as given
    hop_file: str = ""
    nodes: tuple[str, ...] = ()  # from ``nodes``: slot i holds nodes[i]
    node_order: str = ""
    per_hop: float = 100.0
    base: float = 0.0
    path: str = ""  # the config file, for messages
    given: tuple[str, ...] = ()  # the keys the file sets (the others are defaults)

    @property
    def slots(self) -> int | None:
        """Number of slots a generator builds (None for a hop file)."""
        p = self.params
        if self.kind in ("mesh", "torus"):
            return math.prod(p["dims"])
        if self.kind == "tianhe3":
            return p["rows"] * p["cols"] * p["nodes_per_chip"]
        if self.kind == "dragonfly":
            return p["groups"] * p["routers"] * p["nodes_per_router"]
        return None

    def describe(self) -> str:
        """``torus [4, 4, 4]``, ``hop file /etc/rankmap/hops.txt``."""
        if self.kind == "file":
            return f"hop file {self.hop_file}"
        shown = {k: v for k, v in self.params.items() if k != "chip_hops"}
        if self.kind in ("mesh", "torus"):
            return f"{self.kind} {shown['dims']}"
        text = f"{self.kind} " + ", ".join(f"{k}={v}" for k, v in shown.items())
        if "chip_hops" in self.params:
            text += f", chip_hops={self.params['chip_hops']}"
        return text

    def as_table(self) -> dict[str, Any]:
        """The effective keys, for ``rankmap config check``."""
        table: dict[str, Any] = {"kind": self.kind}
        if self.hop_file:
            table["hop_file"] = self.hop_file
        table.update(self.params)
        if self.nodes:
            table["nodes"] = self._folded_nodes
        if self.node_order:
            table["node_order"] = self.node_order
        table["per_hop"], table["base"] = self.per_hop, self.base
        return table

    @property
    def _folded_nodes(self) -> str:
        from ..common.hostlist import expand_hostlist, fold_hostlist

        folded = fold_hostlist(list(self.nodes))
        # folding sorts: the expanded order is shown when folding would change it
        return folded if expand_hostlist(folded) == list(self.nodes) else ",".join(self.nodes)


def _parse_network(body: Any, path: str) -> NetworkConfig:
    where = f"{path}: [network]"
    if not isinstance(body, dict):
        raise ConfigError(f"{path}: network: must be a [network] table")
    for key in body:
        if key not in NETWORK_KEYS:
            raise ConfigError(f"{where} unknown key {key!r} (known: {', '.join(NETWORK_KEYS)})")
    if "kind" not in body:
        raise ConfigError(f"{where} kind: required (one of {', '.join(NETWORK_KINDS)})")
    values: dict[str, Any] = {}
    for key, value in body.items():
        try:
            values[key] = NETWORK_KEYS[key][0](value)
        except ValueError as exc:
            raise ConfigError(f"{where} {key}: {exc}") from None
    kind = values["kind"]
    for key in values:
        kinds = NETWORK_KEYS[key][1]
        if kinds is not None and kind not in kinds:
            raise ConfigError(f"{where} {key}: only for kind = "
                              f"{' or '.join(repr(k) for k in kinds)} (kind is {kind!r})")
    for key in _NETWORK_REQUIRED[kind]:
        if key not in values:
            raise ConfigError(f"{where} {key}: required for kind = {kind!r}")
    if kind != "file" and ("nodes" in values) == ("node_order" in values):
        raise ConfigError(f"{where} nodes: give exactly one of nodes (a host list in slot "
                          f"order) and node_order (a file, one node per line) for kind = "
                          f"{kind!r}")
    params = {k: v for k, v in values.items()
              if k not in ("kind", "hop_file", "nodes", "node_order", "per_hop", "base")}
    net = NetworkConfig(kind, params, values.get("hop_file", ""),
                        tuple(values.get("nodes", ())), values.get("node_order", ""),
                        values.get("per_hop", NetworkConfig.per_hop),
                        values.get("base", NetworkConfig.base), path, tuple(values))
    slots = net.slots
    if slots is not None and slots > MAX_NETWORK_SLOTS:
        first = _NETWORK_REQUIRED[kind][0]
        raise ConfigError(f"{where} {first}: {net.describe()} has {slots} slots, more than "
                          f"the {MAX_NETWORK_SLOTS} whose hop matrix (slots² entries) fits "
                          f"the prolog's worker; use a hop_file of the nodes that run jobs")
    if slots is not None and len(net.nodes) > slots:
        raise ConfigError(f"{where} nodes: {len(net.nodes)} nodes but {net.describe()} has "
                          f"only {slots} slots")
    return net


RULE_KEYS: dict[str, Callable[[Any], Any]] = {
    "partition": _string, "account": _string, "job_name": _string,
    "profile": _string, "algorithm": _algorithm, "time_limit": _positive_number,
    "record": _bool,
}


@dataclass(frozen=True)
class Rule:
    """Site rule: jobs matching every given glob get this profile/algorithm."""

    partition: str = "*"
    account: str = "*"
    job_name: str = "*"
    profile: str | None = None
    algorithm: str | None = None
    time_limit: float | None = None
    #: record the job's communication as ``profile`` while that profile does not exist
    record: bool = False

    def matches(self, partition: str | None, account: str | None,
                job_name: str | None) -> bool:
        return all(fnmatch.fnmatchcase(value or "", pattern) for value, pattern in (
            (partition, self.partition), (account, self.account), (job_name, self.job_name)))


@dataclass(frozen=True)
class Config:
    """Effective configuration: ``values[section][key]`` and where each came from."""

    values: dict[str, dict[str, Any]]
    sources: dict[str, dict[str, str]]
    rules: tuple[Rule, ...] = ()
    path: str | None = None
    notes: tuple[str, ...] = field(default=())
    network: NetworkConfig | None = None  # [network]; None: the switch tree as before

    def get(self, section: str, key: str) -> Any:
        """One value by name, for code that walks every key (``rankmap config check``);
        code that uses a setting reads it typed: ``config.solver.time_limit``."""
        return self.values[section][key]

    @property
    def general(self) -> GeneralSettings:
        """The checked [general] section."""
        return GeneralSettings(**self.values["general"])

    @property
    def solver(self) -> SolverSettings:
        """The checked [solver] section."""
        return SolverSettings(**self.values["solver"])

    @property
    def slurm(self) -> SlurmSettings:
        """The checked [slurm] section."""
        return SlurmSettings(**self.values["slurm"])

    @property
    def profiles(self) -> ProfilesSettings:
        """The checked [profiles] section."""
        return ProfilesSettings(**self.values["profiles"])

    @property
    def record(self) -> RecordSettings:
        """The checked [record] section."""
        return RecordSettings(**self.values["record"])

    @property
    def render(self) -> RenderSettings:
        """The checked [render] section."""
        return RenderSettings(**self.values["render"])

    @property
    def launchers(self) -> LaunchersSettings:
        """The checked [launchers] section."""
        return LaunchersSettings(**self.values["launchers"])

    @property
    def hwloc(self) -> HwlocSettings:
        """The checked [hwloc] section."""
        return HwlocSettings(**self.values["hwloc"])

    @property
    def gpus(self) -> GpusSettings:
        """The checked [gpus] section."""
        return GpusSettings(**self.values["gpus"])

    @property
    def speeds(self) -> SpeedsSettings:
        """The checked [speeds] section."""
        return SpeedsSettings(**self.values["speeds"])

    @property
    def prolog(self) -> PrologSettings:
        """The checked [prolog] section."""
        return PrologSettings(**self.values["prolog"])

    @property
    def summa(self) -> SummaSettings:
        """The checked [summa] section."""
        return SummaSettings(**self.values["summa"])

    def partition_enabled(self, partition: str | None) -> bool:
        return any(fnmatch.fnmatchcase(partition or "", p)
                   for p in self.general.enabled_partitions)

    def rule_for(self, partition: str | None, account: str | None,
                 job_name: str | None) -> Rule | None:
        """First rule that matches the job, if any."""
        for rule in self.rules:
            if rule.matches(partition, account, job_name):
                return rule
        return None


def parse_config(text: str, path: str) -> Config:
    """Parse and check TOML text; errors name ``path`` and the key (or line)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None
    # each file its own copy of the default lists and tables (not DEFAULTS' objects)
    values = {s: {k: copy.deepcopy(d[0]) for k, d in keys.items()}
              for s, keys in DEFAULTS.items()}
    sources = {s: dict.fromkeys(keys, "default") for s, keys in DEFAULTS.items()}
    rules: list[Rule] = []
    network = None
    for section, body in data.items():
        if section == "network":
            network = _parse_network(body, path)
            continue
        if section == "rules":
            if not isinstance(body, list):
                raise ConfigError(f"{path}: rules: must be [[rules]] tables")
            for i, table in enumerate(body, 1):
                rules.append(_parse_rule(table, f"{path}: [[rules]] #{i}"))
            continue
        if section not in DEFAULTS:
            raise ConfigError(f"{path}: unknown section [{section}] (known: "
                              f"{', '.join(list(DEFAULTS) + ['network', 'rules'])})")
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: {section}: must be a [{section}] table")
        for key, value in body.items():
            if key not in DEFAULTS[section]:
                raise ConfigError(f"{path}: [{section}] unknown key {key!r} (known: "
                                  f"{', '.join(DEFAULTS[section])})")
            try:
                values[section][key] = DEFAULTS[section][key][1](value)
            except ValueError as exc:
                raise ConfigError(f"{path}: [{section}] {key}: {exc}") from None
            sources[section][key] = path
    if values["solver"]["time_limit"] > values["solver"]["max_time_limit"]:
        raise ConfigError(f"{path}: [solver] time_limit: must not exceed max_time_limit "
                          f"({values['solver']['max_time_limit']:g})")
    if sources["solver"]["algorithm"] == "default":
        if network is not None and sources["solver"]["default_preset"] == "default":
            values["solver"]["algorithm"] = NETWORK_ALGORITHM
            sources["solver"]["algorithm"] = "default for [network]"
        else:
            values["solver"]["algorithm"] = values["solver"]["default_preset"]
            sources["solver"]["algorithm"] = "[solver] default_preset"
    return Config(values, sources, tuple(rules), path, network=network)


def _parse_rule(table: Any, where: str) -> Rule:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    kwargs = {}
    for key, value in table.items():
        if key not in RULE_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(RULE_KEYS)})")
        try:
            kwargs[key] = RULE_KEYS[key](value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from None
    if "profile" not in kwargs and "algorithm" not in kwargs:
        raise ConfigError(f"{where}: a rule needs a profile or an algorithm")
    if kwargs.get("record") and not PROFILE_NAME.match(kwargs.get("profile", "")):
        raise ConfigError(f"{where}: record: needs profile = a store name to record into "
                          f"(letters, digits, '.', '_', '+', '-'), got "
                          f"{kwargs.get('profile')!r}")
    return Rule(**kwargs)


def config_path(env: Mapping[str, str] = os.environ) -> str:
    return env.get("RANKMAP_CONFIG") or DEFAULT_PATH


def load_config(path: str | None = None, env: Mapping[str, str] = os.environ) -> Config:
    """Read the site config; a missing default file means all defaults."""
    explicit = path is not None or "RANKMAP_CONFIG" in env
    path = path or config_path(env)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path}: no such file") from None
        cfg = parse_config("", path)
        return Config(cfg.values, cfg.sources, (), None,
                      (f"{path} does not exist: built-in defaults",))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}"
                          + (" (the TaskProlog and the worker read it as the job's user: "
                             "make it 0644)" if exc.errno == errno.EACCES else ""),
                          source=path) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes; not a rankmap "
                          "configuration", source=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {exc.start}: "
                          f"{data[exc.start:exc.start + 1]!r})", source=path,
                          line=line) from None
    return parse_config(text, path)


def format_effective(config: Config) -> str:
    """Every effective value with its source, for ``rankmap config check``."""
    lines = [f"# rankmap configuration: {config.path or 'built-in defaults'}"]
    lines += [f"# {n}" for n in config.notes]
    for section, keys in config.values.items():
        lines.append(f"[{section}]")
        for key, value in keys.items():
            lines.append(f"{key} = {_toml_value(value)}    # {config.sources[section][key]}")
    if config.network is not None:
        lines.append("[network]")
        net = config.network
        for key, value in net.as_table().items():
            source = net.path if key in net.given else "default"
            lines.append(f"{key} = {_toml_value(value)}    # {source}")
    for rule in config.rules:
        lines.append("[[rules]]")
        for key in RULE_KEYS:
            value = getattr(rule, key)
            if value is not None:
                lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_value(k)} = {_toml_value(x)}" for k, x in v.items()) \
            + "}"
    if isinstance(v, float) and v.is_integer():
        return f"{v:.1f}"
    return str(v)

