"""Slurm host lists and compressed counts.

Host list ranges are expanded by ClusterShell's NodeSet, the HPC standard, one
top-level element at a time, because NodeSet sorts while Slurm's order (node-table
order) is the job's node order and must be kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

from mapper.errors import RankmapError

V = TypeVar("V")


class HostlistError(RankmapError, ValueError):
    """A host list or count list that does not parse."""


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in host list {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise HostlistError(f"unbalanced '[' in host list {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand_hostlist(text: str) -> list[str]:
    """``n[01-04,07],gpu[1-2]`` → n01 n02 n03 n04 n07 gpu1 gpu2, in Slurm's order."""
    hosts: list[str] = []
    for element in _split_top_level(text.strip()):
        try:
            hosts.extend(NodeSet(element))
        except NodeSetParseError as exc:
            raise HostlistError(f"bad host list element {element!r}: {exc}") from None
    return hosts


_COUNT = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_counts(text: str) -> list[int]:
    """Slurm's compressed counts: ``36(x2),24`` → [36, 36, 24]."""
    out: list[int] = []
    for item in text.strip().split(","):
        m = _COUNT.match(item.strip())
        if not m:
            raise HostlistError(f"bad count {item!r} in {text!r} (expected N or N(xR))")
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return out


def fold_hostlist(hosts: list[str]) -> str:
    """``['c1', 'c2', 'c3', 'd']`` → ``c[1-3],d`` (ClusterShell's folding; order is not
    kept, the set is)."""
    return str(NodeSet.fromlist(hosts)) if hosts else ""


def per_node(table: Mapping[str, V], nodes: Iterable[str]) -> dict[str, V]:
    """Each of ``nodes`` that a host list of ``table`` (``{"n[1-16]": value}``, a site's
    per-node-type setting) names, with that list's value; the first list naming a node
    wins.  O(hosts named)."""
    wanted = set(nodes)
    out: dict[str, V] = {}
    for hosts, value in table.items():
        for node in expand_hostlist(hosts):
            if node in wanted:
                out.setdefault(node, value)
    return out
