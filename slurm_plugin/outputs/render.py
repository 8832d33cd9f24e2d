"""Launcher files from a layout and a rank → slot mapping, rendered with jinja2.

Templates are looked up with a jinja2 ``ChoiceLoader``: the site directory
(``[render] templates_dir``) first, the packaged ``rankmap_templates`` second, so a site
overrides any single file and takes the rest from the package.  A site template can
still reach the packaged version of its own name as ``packaged/<name>`` (for example
``{% include "packaged/rankfile.j2" %}`` plus a site line).  Rendering is pure (strings
out); :mod:`slurm_plugin.common.files` writes them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2
import numpy as np

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


def _packaged(name: str, templates_dir: str | None) -> bool:
    """True when ``name`` resolves to the packaged template (no site override)."""
    if not templates_dir:
        return True
    return not (Path(templates_dir) / name).is_file()


# The packaged rankfile, machinefile and slurm_hostfile templates loop over every rank;
# jinja2 spends about 3 µs per rank and template on them (10 s for the three files at
# 2^20 ranks), so when the site does not override them the same text is built here
# directly.  tests/slurm_plugin/outputs/test_render_report.py checks the two paths
# give identical files.

def _per_rank(layout: Layout, mapping: np.ndarray, per_pe: list[str]) -> list[str]:
    return [per_pe[pe] for pe in np.asarray(mapping).tolist()]


def _host_lines(layout: Layout, mapping: np.ndarray) -> str:
    return "".join(_per_rank(layout, mapping, layout.pe_host_lines))


def render_rankfile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                    algorithm: str = "", job_id: str | None = None) -> str:
    algorithm, job_id = algorithm or "rankmap", job_id or "-"
    if not _packaged("rankfile.j2", templates_dir):
        return render_template("rankfile.j2", templates_dir,
                               ranks=rank_rows(layout, mapping), algorithm=algorithm,
                               job_id=job_id)
    cores = _core_texts(layout)
    slots = [f"{s.host} slot={s.socket}:{c}" for s, c in zip(layout.slots, cores, strict=True)]
    lines = [f"rank {r}={slots[pe]}\n" for r, pe in enumerate(np.asarray(mapping).tolist())]
    return f"# rankmap {algorithm} placement for job {job_id}\n" + "".join(lines)


def render_hostfile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                    **_: object) -> str:
    return render_template("hostfile.j2", templates_dir, hosts=host_rows(layout, mapping))


def render_machinefile(layout: Layout, mapping: np.ndarray, templates_dir: str | None = None,
                       **_: object) -> str:
    if _packaged("machinefile.j2", templates_dir):
        return _host_lines(layout, mapping)
    return render_template("machinefile.j2", templates_dir, ranks=rank_rows(layout, mapping))


def render_slurm_hostfile(layout: Layout, mapping: np.ndarray,
                          templates_dir: str | None = None, **_: object) -> str:
    if _packaged("slurm_hostfile.j2", templates_dir):
        return _host_lines(layout, mapping)
    return render_template("slurm_hostfile.j2", templates_dir,
                           ranks=rank_rows(layout, mapping))


def render_bindfile(layout: Layout, mapping: np.ndarray, **_: object) -> str:
    """The bind file of ``librankmap_bind`` (slurm_plugin/bind/rankmap_bind.c): a header
    ``rankmap-bind 1 NRANKS WIDTH`` and one record ``RANK HOST SOCKET:CORES`` per rank,
    every line padded with spaces to WIDTH bytes (newline included), so that a rank
    reads its own record with one ``pread`` at ``WIDTH * (rank + 1)``.  The slot text is
    the rankfile's.  Not a template: its layout is a contract with the C reader, which
    a site cannot change.  O(n) in the job's ranks."""
    cores = _core_texts(layout)
    slots = [f"{s.host} {s.socket}:{c}" for s, c in zip(layout.slots, cores, strict=True)]
    records = [f"{r} {slots[pe]}" for r, pe in enumerate(np.asarray(mapping).tolist())]
    n = len(records)
    width = max(max((len(r) for r in records), default=0), len(f"rankmap-bind 1 {n} 9999")) + 1
    header = f"rankmap-bind 1 {n} {width}"
    return "".join(line.ljust(width - 1) + "\n" for line in (header, *records))


def render_hydra_hostfile(layout: Layout, mapping: np.ndarray, **_: object) -> str:
    """Hydra's host file (``HYDRA_HOST_FILE``, Intel MPI's ``I_MPI_HYDRA_HOST_FILE``):
    ``host:n`` per run of consecutive ranks on one host, in rank order; Hydra deals the
    ranks to the lines in order, one proxy per line.  A placement that interleaves hosts
    lists a host on several lines (never on two consecutive ones: runs are maximal),
    which the TaskProlog hands to no launcher (docs/known-limits.md says why).  O(n)."""
    node = layout.pe_node[np.asarray(mapping, dtype=np.int64)]
    if len(node) == 0:
        return ""
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    counts = np.diff(np.r_[starts, len(node)])
    return "".join(f"{layout.nodes[h]}:{c}\n" for h, c in zip(node[starts].tolist(),
                                                              counts.tolist(), strict=True))
