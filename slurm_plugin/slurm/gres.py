"""The GPUs of each node as Slurm numbers them, from gres.conf(5).

Slurm gives a job GPUs by index (``scontrol show job -d``: ``GRES=gpu:a100:2(IDX:0,2)``)
and the index is the GPU's position in the node's gres list.  gres.conf says which
cores each GPU is wired to (``Cores=``, in Slurm's abstract core numbering, the one of
``CPU_IDs``), which nothing Slurm prints keeps per GPU (``scontrol show node`` merges
them per type into a socket list).  So this module reads gres.conf itself, the file
slurmd reads, and numbers a node's GPUs as slurmd does (src/plugins/gres/gpu/gres_gpu.c):

* with ``AutoDetect=off`` (or none): the node's ``Name=gpu`` lines in file order, a
  ``File=/dev/nvidia[0-3]`` range in its order, a line without ``File=`` counting
  ``Count=`` GPUs;
* with an autodetection plugin (nvml, rsmi, oneapi, nrt, generic): the configured
  GPUs sorted by device file, natural order (``_sort_gpu_by_file``; a ``Links=``
  order, which slurmd applies after, is not modelled and is said).

A pure parser on text: :func:`parse_gres_conf`.  Lines of other gres (``Name=nic``),
``Include`` and unknown keys are skipped, never guessed at.  Complexity: O(lines +
GPUs · nodes per line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ClusterShell.RangeSet import RangeSet, RangeSetException

from mapper.errors import RankmapError

from ..common.hostlist import HostlistError, expand_hostlist


class GresError(RankmapError, ValueError):
    """A gres.conf line that cannot be read; the message names the file and line."""


class GpuDevice(NamedTuple):
    """One GPU of a node: Slurm's index, its device file and its cores (empty when
    gres.conf gives no ``Cores=``)."""

    index: int
    file: str | None
    cores: tuple[int, ...]


@dataclass(frozen=True)
class GresConf:
    """Per node, its GPUs in Slurm's index order; notes on what was not modelled."""

    gpus: dict[str, tuple[GpuDevice, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def of(self, node: str) -> tuple[GpuDevice, ...]:
        """The node's GPUs: its own lines, else the lines without ``NodeName=`` (a
        node-local gres.conf)."""
        return self.gpus.get(node) or self.gpus.get("*", ())


#: a gpu line's Count= above this is an error, not a node (no node has 4096 GPUs)
MAX_GPUS_PER_LINE = 4096

_PAIR = re.compile(r"(\w+)=(\S+)")
_FILE_RANGE = re.compile(r"^(.*)\[([^\]]+)\](.*)$")


def parse_gres_conf(text: str, path: str = "gres.conf") -> GresConf:
    """Each node's GPUs from gres.conf text (see the module docstring for the order)."""
    lines: dict[str, list[tuple[str | None, tuple[int, ...], bool]]] = {}
    links: set[str] = set()
    detect_all = False
    detect: dict[str, bool] = {}
    for number, line in _logical_lines(text):
        pairs = {k.lower(): v for k, v in _PAIR.findall(line)}
        where = f"{path}:{number}"
        nodes = _nodes(pairs.get("nodename"), where)
        if "autodetect" in pairs and "name" not in pairs:
            on = pairs["autodetect"].lower() != "off"
            if nodes == ["*"]:
                detect_all = on
            for node in nodes:
                detect[node] = on
            continue
        if pairs.get("name", "").lower() != "gpu":
            continue
        on = pairs.get("autodetect", "").lower() not in ("", "off")
        cores = _cores(pairs.get("cores", ""), where)
        files = _files(pairs.get("file"), where)
        if not files:
            count = _count(pairs.get("count", "1"), where)
            files = [None] * count
        for node in nodes:
            if on:
                detect[node] = True
            if "links" in pairs:
                links.add(node)
            lines.setdefault(node, []).extend((f, cores, on) for f in files)
    gpus: dict[str, tuple[GpuDevice, ...]] = {}
    for node, entries in lines.items():
        if detect.get(node, detect_all):
            entries = sorted(entries, key=lambda e: _natural(e[0]))
        gpus[node] = tuple(GpuDevice(i, f, c) for i, (f, c, _) in enumerate(entries))
    notes = (f"{path}: Links= on {len(links)} node(s): slurmd orders those GPUs by their "
             "links, rankmap by their files" if links else "",)
    return GresConf(gpus, tuple(n for n in notes if n))


def _logical_lines(text: str):
    """(first line number, text) per logical line: comments dropped, ``\\`` joins."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            yield start, line
    if pending.strip():
        yield start, pending.strip()


def _nodes(value: str | None, where: str) -> list[str]:
    if not value:
        return ["*"]
    try:
        return expand_hostlist(value)
    except HostlistError as exc:
        raise GresError(f"{where}: NodeName={value}: {exc}") from None


def _cores(value: str, where: str) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        return tuple(RangeSet(value).intiter())
    except RangeSetException as exc:
        raise GresError(f"{where}: Cores={value}: {exc}") from None


def _files(value: str | None, where: str) -> list[str]:
    if not value:
        return []
    out: list[str] = []
    for part in _split_outside_brackets(value):
        m = _FILE_RANGE.match(part)
        if not m:
            out.append(part)
            continue
        head, ranges, tail = m.groups()
        try:
            out += [f"{head}{i}{tail}" for i in RangeSet(ranges).striter()]
        except RangeSetException as exc:
            raise GresError(f"{where}: File={value}: {exc}") from None
    return out


def _split_outside_brackets(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in (*parts, current) if p]


def _count(value: str, where: str) -> int:
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", value)
    if not m:
        raise GresError(f"{where}: Count={value} is not a number")
    count = int(m.group(1)) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[m.group(2).lower()]
    if count > MAX_GPUS_PER_LINE:
        raise GresError(f"{where}: Count={value}: more GPUs than one node has "
                        f"(at most {MAX_GPUS_PER_LINE} per line)")
    return count


def _natural(name: str | None) -> tuple:
    """strnatcmp's order (digits compare as numbers); files last when absent."""
    if name is None:
        return (1,)
    return (0, *[(0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", name) if p])
