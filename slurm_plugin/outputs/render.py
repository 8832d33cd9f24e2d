"""Launcher files from a layout and a rank → slot mapping, rendered with jinja2.

Templates are looked up with a jinja2 ``ChoiceLoader``: the site directory
(``[render] templates_dir``) first, the packaged ``rankmap_templates`` second, so a site
overrides any single file and takes the rest from the package.  A site template can
still reach the packaged version of its own name as ``packaged/<name>`` (for example
``{% include "packaged/rankfile.j2" %}`` plus a site line).  Every file goes through its
template, the packaged ones and a site's alike; the per-rank files are given each rank's
line ready made (``lines``) and, to a template that loops, one row per rank
(``ranks``).  Rendering is pure (strings out); :mod:`slurm_plugin.common.files` writes
them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import jinja2
import jinja2.meta
import numpy as np

from ..common.job_conventions import HYDRA_NEEDS_RANK_MAP
from ..machine.layout import Layout


def packaged_templates_dir() -> Path:
    try:
        import rankmap_templates  # installed wheel: templates/ ships as this package

        return Path(rankmap_templates.__file__).parent
    except ImportError:  # running from a source checkout
        return Path(__file__).resolve().parents[2] / "templates"


@lru_cache(maxsize=8)
def _environment(templates_dir: str | None) -> jinja2.Environment:
    packaged = jinja2.FileSystemLoader(str(packaged_templates_dir()))
    loaders: list[jinja2.BaseLoader] = [packaged,
                                        jinja2.PrefixLoader({"packaged": packaged})]
    if templates_dir:
        loaders.insert(0, jinja2.FileSystemLoader(templates_dir))
    return jinja2.Environment(loader=jinja2.ChoiceLoader(loaders),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True,
                              autoescape=False)


def render_template(name: str, templates_dir: str | None = None, **context) -> str:
    return _environment(templates_dir or None).get_template(name).render(**context)


def core_list(cores: tuple[int, ...]) -> str:
    """``(2, 3)`` → ``2-3``; non-contiguous cores as a comma list ``1,3``."""
    if len(cores) > 1 and list(cores) == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def rank_rows(layout: Layout, mapping: np.ndarray) -> list[dict]:
    """Per rank, in rank order: host, socket and core list of its slot (``cores`` is the
    text after ``slot=SOCKET:``, with ``;S:CORES`` for the further sockets of a slot
    that spans sockets)."""
    text = _core_texts(layout)
    rows = []
    for rank, pe in enumerate(np.asarray(mapping).tolist()):
        slot = layout.slots[pe]
        rows.append({"rank": rank, "host": slot.host, "socket": slot.socket,
                     "cores": text[pe]})
    return rows


def host_rows(layout: Layout, mapping: np.ndarray) -> list[dict]:
    """The hosts in the order ranks first use them, with their rank counts; O(n log n)
    in numpy (a Python dictionary per rank took seconds at 10^6 ranks)."""
    node = layout.pe_node[np.asarray(mapping, dtype=np.int64)]
    counts = np.bincount(node, minlength=len(layout.nodes))
    _, first = np.unique(node, return_index=True)
    order = node[np.sort(first)].tolist()
    return [{"host": layout.nodes[i], "slots": int(counts[i])} for i in order]


def _core_texts(layout: Layout) -> list[str]:
    """Per PE, what the rankfile writes after ``slot=SOCKET:``: its core list, and for a
    slot spanning sockets ``;SOCKET:CORES`` per further socket (Open MPI's own example:
    ``slot=0:1;1:0-2``).  One text per distinct core tuple, not per slot."""
    memo: dict[tuple, str] = {}
    out = []
    for s in layout.slots:
        key = (s.cores, s.more_sockets)
        text = memo.get(key)
        if text is None:
            text = memo[key] = core_list(s.cores) + "".join(
                f";{sock}:{core_list(cores)}" for sock, cores in s.more_sockets)
        out.append(text)
    return out


@lru_cache(maxsize=64)
def _uses(templates_dir: str | None, name: str) -> frozenset[str]:
    """The variables template ``name`` reads, and those of the templates it includes or
    extends (jinja2's own analysis of their sources; a name computed at render time
    counts as reading everything)."""
    env = _environment(templates_dir)
    used: set[str] = set()
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        tree = env.parse(env.loader.get_source(env, current)[0])  # type: ignore[union-attr]
        used |= jinja2.meta.find_undeclared_variables(tree)
        for ref in jinja2.meta.find_referenced_templates(tree):
            if ref is None:
                return frozenset({"lines", "ranks"})
            todo.append(ref)
    return frozenset(used)


def _render_per_rank(name: str, templates_dir: str | None, layout: Layout,
                     mapping: np.ndarray, lines: Callable[[], str], **context: object) -> str:
    """A one-line-per-rank file through its template, given ``lines`` (every rank's line,
    built by whole-list operations) and, only when the template loops over them,
    ``ranks`` (a dict per rank: jinja2 spends about 3 µs per rank and template, 10 s for
    three files at 2^20 ranks, so the packaged templates print ``lines``)."""
    used = _uses(templates_dir or None, name)
    if "lines" in used:
        context["lines"] = lines()
    if "ranks" in used:
        context["ranks"] = rank_rows(layout, mapping)
    return render_template(name, templates_dir, **context)


def _host_lines(layout: Layout, mapping: np.ndarray) -> str:
    per_pe = layout.pe_host_lines
    return "".join([per_pe[pe] for pe in np.asarray(mapping).tolist()])


def _rankfile_lines(layout: Layout, mapping: np.ndarray) -> str:
    cores = _core_texts(layout)
    slots = [f"{s.host} slot={s.socket}:{c}" for s, c in zip(layout.slots, cores, strict=True)]
    return "".join([f"rank {r}={slots[pe]}\n"
                    for r, pe in enumerate(np.asarray(mapping).tolist())])


def render_rankfile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                    algorithm: str = "", job_id: str | None = None) -> str:
    return _render_per_rank("rankfile.j2", templates_dir, layout, mapping,
                            lambda: _rankfile_lines(layout, mapping),
                            algorithm=algorithm or "rankmap", job_id=job_id or "-")


def render_hostfile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                    **_: object) -> str:
    return render_template("hostfile.j2", templates_dir, hosts=host_rows(layout, mapping))


def render_machinefile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                       **_: object) -> str:
    return _render_per_rank("machinefile.j2", templates_dir, layout, mapping,
                            lambda: _host_lines(layout, mapping))


def render_slurm_hostfile(layout: Layout, mapping: np.ndarray,
                          templates_dir: str | None = None, **_: object) -> str:
    return _render_per_rank("slurm_hostfile.j2", templates_dir, layout, mapping,
                            lambda: _host_lines(layout, mapping))


def render_bindfile(layout: Layout, mapping: np.ndarray, **_: object) -> str:
    """The bind file of ``librankmap_bind`` (slurm_plugin/bind/rankmap_bind.c): a header
    ``rankmap-bind 1 NRANKS WIDTH`` and one record ``RANK HOST SOCKET:CORES [gpu=I,J
    [nic=DEV:PORT]]`` per rank (``gpu=``: Slurm's indexes of the rank's GPUs, ``nic=``
    the RDMA NIC nearest to them where the node's hwloc XML says, in GPU jobs, whose header
    ends with `` gpumask=0xM gpunode=K``: the srun ``--gpu-bind`` mask,
    :attr:`Layout.gpu_mask`, and the fewest GPUs of the job's nodes, which a launcher's
    daemons ask for per node),
    every line padded with spaces to WIDTH bytes (newline included), so that a rank
    reads its own record with one ``pread`` at ``WIDTH * (rank + 1)``.  The slot text is
    the rankfile's.  Not a template: its layout is a contract with the C reader, which
    a site cannot change.  O(n) in the job's ranks."""
    cores = _core_texts(layout)
    slots = [f"{s.host} {s.socket}:{c}" + (f" gpu={','.join(map(str, s.gpus))}" if s.gpus
                                            else "") + (f" nic={s.nic}" if s.gpus and s.nic
                                                        else "")
             for s, c in zip(layout.slots, cores, strict=True)]
    records = [f"{r} {slots[pe]}" for r, pe in enumerate(np.asarray(mapping).tolist())]
    n = len(records)
    per_node = 0
    if layout.gpu_mask:  # distinct GPUs per host: tasks may share one (gpu_slot_groups)
        seen: dict[str, set[int]] = {}
        for s in layout.slots:
            seen.setdefault(s.host, set()).update(s.gpus)
        per_node = min((len(seen.get(h, ())) for h in layout.nodes), default=0)
    gpus = f" gpumask=0x{layout.gpu_mask:x} gpunode={per_node}" if layout.gpu_mask else ""
    width = max(max((len(r) for r in records), default=0),
                len(f"rankmap-bind 1 {n} 9999{gpus}")) + 1
    header = f"rankmap-bind 1 {n} {width}{gpus}"
    return "".join(line.ljust(width - 1) + "\n" for line in (header, *records))


#: Hydra passes a rank map to its ranks compressed into at most this many characters
#: (PMI_MAXVALLEN); a longer one crashes mpiexec (MPICH 5.0.2 pmiserv_utils.c), so a
#: map that might be longer is not given
HYDRA_MAP_LIMIT = 1024


def hydra_runs(layout: Layout, mapping: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The maximal runs of consecutive ranks on one host, in rank order: (host index in
    ``layout.nodes``, ranks in the run) per run.  O(n)."""
    node = layout.pe_node[np.asarray(mapping, dtype=np.int64)]
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]]) if len(node) else node
    return node[starts], np.diff(np.r_[starts, len(node)])


def hydra_rank_map(layout: Layout, mapping: np.ndarray
                   ) -> tuple[list[str], list[int], list[int]] | None:
    """For a placement that interleaves hosts, Hydra's ``-rankmap`` (MPICH 5.0.2 and
    later) per run of consecutive ranks on one host (:func:`hydra_runs`): the hosts once
    each, in order of their first rank, and per run the index of its host among them
    and its length; None when no host has two runs, or when Hydra's compressed map might
    pass :data:`HYDRA_MAP_LIMIT`.  Hydra compresses the map into blocks of (first node,
    nodes, ranks per node), at most one per run, so the runs bound its length.  O(n)."""
    hosts, lengths = hydra_runs(layout, mapping)
    if len(np.unique(hosts)) == len(hosts):
        return None
    index: dict[int, int] = {}
    ids = [index.setdefault(h, len(index)) for h in hosts.tolist()]
    runs = lengths.tolist()
    if len("(vector,)") + sum(len(f"({i},1,{k}),") for i, k in zip(ids, runs, strict=True)) \
            >= HYDRA_MAP_LIMIT:
        return None
    return [layout.nodes[h] for h in index], ids, runs


def render_hydra_hostfile(layout: Layout, mapping: np.ndarray, **_: object) -> str:
    """Hydra's host file (``HYDRA_HOST_FILE``, Intel MPI's ``I_MPI_HYDRA_HOST_FILE``):
    ``host:n`` per run of consecutive ranks on one host, in rank order; Hydra deals the
    ranks to the lines in order, one proxy per line.  A placement that interleaves hosts
    lists each host once with all its ranks when MPICH can take its rank map
    (:func:`hydra_rank_map`, :func:`render_hydra_rankmap`); else on several lines (never
    on two consecutive ones: runs are maximal), which the TaskProlog hands to no
    launcher (docs/known-limits.md says why).  O(n)."""
    interleaved = hydra_rank_map(layout, mapping)
    if interleaved is not None:
        hosts, ids, runs = interleaved
        counts = np.bincount(ids, weights=runs, minlength=len(hosts)).astype(np.int64)
        return HYDRA_NEEDS_RANK_MAP + "".join(
            f"{h}:{c}\n" for h, c in zip(hosts, counts.tolist(), strict=True))
    hosts_of_runs, lengths = hydra_runs(layout, mapping)
    return "".join(f"{layout.nodes[h]}:{c}\n" for h, c in zip(hosts_of_runs.tolist(),
                                                              lengths.tolist(), strict=True))


def render_hydra_rankmap(layout: Layout, mapping: np.ndarray, **_: object) -> str:
    """MPICH's Hydra configuration file (``HYDRA_CONFIG_FILE``) for a placement that
    interleaves hosts: ``-rankmap (I,1,K),...``, one block per run of K consecutive ranks
    on line I of the host file (:func:`hydra_rank_map`; Hydra's block syntax, which keeps
    the line as short as the map Hydra passes on, far below the 16 KiB it reads of a
    line); empty when the host file alone says it all or the map is too long for
    Hydra.  O(n)."""
    interleaved = hydra_rank_map(layout, mapping)
    if interleaved is None:
        return ""
    _, ids, runs = interleaved
    return "-rankmap " + ",".join(f"({i},1,{k})" for i, k in zip(ids, runs, strict=True)) + "\n"
