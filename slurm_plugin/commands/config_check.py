"""Site checks of ``rankmap config check`` beyond the config file's own syntax.

The TaskProlog and the prolog's worker run as the job's user, so the Python running
rankmap, its packages, the config file and the output directory must be usable by
users other than root; the output directory must exist when jobs start or be creatable
by the prolog (``/run`` is emptied at boot; install.sh adds a tmpfiles.d entry).  Each
function takes paths and returns warning strings; nothing here fails a check, the
command only prints them.  A ``[network]`` is loaded as the prolog loads it (hop file or
node order read, matrix generated): a summary line, or the error every job would fall
back with.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from ..machine.speeds import speeds_check
from ..site.config import Config, format_effective, load_config

#: Where systemd-tmpfiles reads its configuration (tmpfiles.d(5)).
TMPFILES_DIRS = ("/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/local/lib/tmpfiles.d",
                 "/usr/lib/tmpfiles.d", "/lib/tmpfiles.d")
_TMPFILES_CREATE = {"d", "D", "v", "q", "Q"}

_WHY = "the TaskProlog and the prolog's worker run as the job's user"


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def _blocked_parent(path: Path) -> str | None:
    """The first directory above ``path`` that other users cannot enter, as a message."""
    for parent in path.parents:
        try:
            st = os.stat(parent)
        except OSError as exc:
            return f"{parent} cannot be examined ({exc.strerror})"
        if not st.st_mode & stat.S_IXOTH:
            return f"{parent} is not searchable by other users (mode {_mode(st)})"
    return None


def world_access_problem(path: str | os.PathLike, *, executable: bool = True) -> str | None:
    """Why other users cannot use ``path`` (read it, and execute or enter it), or None.

    A directory needs r-x for others, a file r-- (and --x when ``executable``); every
    directory above it needs --x, both on the path as given and on the path it resolves
    to (a virtual environment's ``bin/python`` is a link to the base interpreter).
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        return f"{p} cannot be examined ({exc.strerror})"
    need = stat.S_IROTH
    if stat.S_ISDIR(st.st_mode) or executable:
        need |= stat.S_IXOTH
    if st.st_mode & need != need:
        kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
        access = "readable" if need == stat.S_IROTH else "readable and executable"
        return f"{kind} {p} is not {access} by other users (mode {_mode(st)})"
    return _blocked_parent(p.absolute()) or _blocked_parent(p.resolve())


def python_warnings(executable: str | None = None,
                    package_dirs: Iterable[str | os.PathLike] | None = None) -> list[str]:
    """Warnings when the Python running rankmap (or rankmap's packages) is root-only.

    ``executable`` defaults to ``sys.executable``; both the path as called (a virtual
    environment's ``bin/python``) and the interpreter it resolves to are checked, and so
    are the directories holding the ``slurm_plugin`` and ``mapper`` packages.
    """
    exe = Path(executable or sys.executable)
    if package_dirs is None:
        package_dirs = [Path(__file__).resolve().parents[1]]  # slurm_plugin/
        try:
            import mapper  # only located, not used
            package_dirs.append(Path(mapper.__file__).resolve().parent)
        except ImportError:
            pass
    warnings: list[str] = []
    seen: set[str] = set()
    candidates = [("the Python running rankmap", exe, True)]
    if exe.resolve() != exe:
        candidates.append(("the interpreter it runs", exe.resolve(), True))
    candidates += [("rankmap's package", Path(d), True) for d in package_dirs]
    for what, path, executable_file in candidates:
        problem = world_access_problem(path, executable=executable_file)
        if problem and problem not in seen:
            seen.add(problem)
            warnings.append(f"{what} ({path}) is not usable by other users: {problem}; {_WHY}, "
                            "so jobs fail (TaskProlog failed status=126): install with "
                            "deploy/install.sh (a world-readable /opt/rankmap on /usr/bin/python3)")
    return warnings


def tmpfiles_creates(path: str | os.PathLike,
                     dirs: Iterable[str | os.PathLike] = TMPFILES_DIRS) -> Path | None:
    """The tmpfiles.d file whose ``d``/``D``/``v``/``q``/``Q`` line creates ``path``, or None."""
    target = os.path.normpath(os.fspath(path))
    for d in dirs:
        try:
            confs = sorted(Path(d).glob("*.conf"))
        except OSError:
            continue
        for conf in confs:
            try:
                lines = conf.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                fields = line.split()
                if len(fields) < 2 or fields[0].startswith("#"):
                    continue
                kind = fields[0].rstrip("!-=~^+")
                if kind in _TMPFILES_CREATE and os.path.normpath(fields[1]) == target:
                    return conf
    return None


def _prolog_can_create(path: Path) -> str | None:
    """None when the prolog will create ``path`` itself (its parent is a directory owned
    by root and not world-writable without the sticky bit), else why not."""
    from ..common.jobdir import JobDirError, open_trusted_dir

    try:
        os.close(open_trusted_dir(path.parent, "parent of the output directory"))
    except JobDirError as exc:
        return str(exc)
    return None


def output_dir_warnings(output_dir: str | os.PathLike,
                        tmpfiles_dirs: Iterable[str | os.PathLike] = TMPFILES_DIRS) -> list[str]:
    """Warnings when ``output_dir`` is missing and nothing will create it (a tmpfiles.d
    entry at boot, or the prolog inside a trusted parent), or when it is root-only."""
    p = Path(output_dir)
    if not p.exists():
        if tmpfiles_creates(p, tmpfiles_dirs):
            return []
        why_not = _prolog_can_create(p)
        if why_not is None:
            return []
        return [f"output directory {p} does not exist, no tmpfiles.d entry creates it and the "
                f"prolog cannot ({why_not}): every job runs with Slurm's default placement; "
                f"create it (root, 0755) and add 'd {p} 0755 root root -' to "
                "/etc/tmpfiles.d/rankmap.conf (deploy/install.sh does both)"]
    if not p.is_dir():
        return [f"output directory {p} is not a directory"]
    problem = world_access_problem(p)
    if problem:
        return [f"output directory {p} is not usable by other users: {problem}; "
                f"{_WHY} and read the job's files there"]
    return []


def config_file_warnings(path: str | os.PathLike | None) -> list[str]:
    """A warning when the config file exists but other users cannot read it."""
    if path is None or not Path(path).exists():
        return []
    problem = world_access_problem(path, executable=False)
    if problem:
        return [f"config file {path} is not readable by other users: {problem}; the "
                "TaskProlog reads it as the job's user"]
    return []


def network_check(config: Config) -> tuple[list[str], list[str]]:
    """``[network]``: (summary lines, warnings).  Nothing without a ``[network]``.

    Warns when the network cannot be loaded (every job would fall back, with that
    message) and when one hop between nodes costs less than two PEs of one node (the
    solver would then spread communicating ranks over nodes).
    """
    if config.network is None:
        return [], []
    import numpy as np

    from mapper.errors import RankmapError

    from ..machine.network_source import load_network

    try:
        net = load_network(config.network)
    except RankmapError as exc:
        return [], [f"[network] cannot be used, every job keeps Slurm's placement: {exc}"]
    assert net is not None
    off = net.hops[~np.eye(len(net.hops), dtype=bool)]
    low, high = (float(off.min()), float(off.max())) if len(off) else (0.0, 0.0)
    lines = [f"# [network] {net.description}: {len(net.hops)} slots, {len(net.names)} nodes "
             f"named ({net.where}), {low:g} to {high:g} hops between nodes; cost between "
             f"nodes {net.base:g} + {net.per_hop:g} x hops"]
    warnings = []
    levels = config.solver.level_distances
    node = levels[1] if len(levels) > 1 else None
    cheapest = net.base + net.per_hop * low
    if node is not None and len(off) and cheapest < node:
        warnings.append(f"[network] base + per_hop x {low:g} hops = {cheapest:g} is below the "
                        f"same-node distance {node:g} ([solver] level_distances[1]): ranks on "
                        f"two nodes would look closer than on one; raise per_hop or base")
    return lines, warnings


def directory_errors(config: Config) -> list[str]:
    """Errors for an output or fallback directory that the prolog would refuse: not a
    directory, a symlink, not owned by root, or writable by its group or by everyone
    (even with the sticky bit: a user who can create entries there can plant
    ``job.<id>`` of a job to come).  A missing one is not an error here (see
    :func:`output_dir_warnings`)."""
    from ..common.jobdir import JobDirError, open_trusted_dir

    errors = []
    for what, section, key in (("output directory", "general", "output_dir"),
                               ("fallback directory", "prolog", "fallback_dir")):
        path = config.get(section, key)
        if not os.path.lexists(path):
            continue
        try:
            os.close(open_trusted_dir(path, f"{what} ([{section}] {key})"))
        except JobDirError as exc:
            errors.append(f"{exc}; the prolog refuses it and jobs keep Slurm's placement")
    return errors


def launcher_warnings(config: Config) -> list[str]:
    """What a supported launcher family would miss on this node: the binder library
    (cores for every family), rankmap-prterun (Open MPI 5), rankmap-hydra-srun (Hydra),
    each usable by the job's users."""
    from ..common.launcher_support import default_bind_library, supported_launchers

    supported = config.launchers.supported
    needed = []
    if supported:
        needed.append((config.launchers.bind_library or default_bind_library(),
                       "the rank binder (cores for every launcher; deploy/install.sh builds "
                       "it)", False))
    for launcher in supported_launchers(supported):
        needed += [(path, what, True) for path, what in launcher.helpers()]
    warnings = []
    for path, what, executable in needed:
        problem = world_access_problem(path, executable=executable)
        if problem:
            warnings.append(f"[launchers]: {what} at {path}: {problem}; without it those "
                            "launches keep their own placement")
    return warnings


def record_warnings(config: Config) -> list[str]:
    """What a recording job would miss: the recorder library (every MPI but Open MPI
    under monitoring) usable by the job's users, and a place for the recordings."""
    from ..lifecycle.recording_setup import default_record_library

    if not config.record.enabled:
        return []
    warnings = []
    library = config.record.library or default_record_library()
    problem = world_access_problem(library, executable=False)
    if problem:
        warnings.append(f"[record]: the recorder librankmap_record.so at {library}: "
                        f"{problem}; without it only Open MPI programs are recorded "
                        f"(its monitoring components), and only with openmpi = "
                        f"\"monitoring\"")
    for key, section in (("dir", "record"), ("user_store", "profiles")):
        if not config.get(section, key):
            warnings.append(f"[{section}] {key} is empty: recording jobs cannot "
                            f"{'write' if key == 'dir' else 'store'} anything; set [record] "
                            f"enabled = false to switch recording off")
    return warnings


def site_warnings(config: Config, executable: str | None = None,
                  tmpfiles_dirs: Iterable[str | os.PathLike] = TMPFILES_DIRS) -> list[str]:
    """Every warning for this configuration on this machine."""
    return (python_warnings(executable)
            + config_file_warnings(config.path)
            + output_dir_warnings(config.general.output_dir, tmpfiles_dirs)
            + launcher_warnings(config) + record_warnings(config))


def check_command(args) -> int:
    """``rankmap config check``: the effective values, then the site warnings and errors
    (stderr); exit 2 when there is an error (a directory the prolog would refuse)."""
    config = load_config(args.config)
    print(format_effective(config), end="")
    lines, network_warnings = network_check(config)
    speed_lines, speed_warnings = speeds_check(config)  # node features: in jobs
    for line in lines + speed_lines:
        print(line)
    for warning in site_warnings(config) + network_warnings + speed_warnings:
        print(f"rankmap config check: warning: {warning}", file=sys.stderr)
    errors = directory_errors(config)
    for error in errors:
        print(f"rankmap config check: error: {error}", file=sys.stderr)
    return 2 if errors else 0
