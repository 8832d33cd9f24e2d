"""Cache and NUMA groups inside a node, from an hwloc XML (``lstopo --of xml``).

Slurm describes a node as sockets × cores; hwloc also knows the L3 caches (or dies,
or groups) that share a socket.  For each core, in hwloc's logical order — which is
Slurm's socket-major core numbering — this module finds the socket and the cache
group within it, so that :func:`slurm_plugin.machine.layout.build_layout` can add a level
between socket and core.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from mapper.errors import RankmapError

#: hwloc object types that group cores below a package, innermost wins
GROUP_TYPES = ("L3Cache", "Die", "Group", "L2Cache")


class HwlocError(RankmapError, ValueError):
    """An hwloc XML that cannot be used; the message names the file."""


@dataclass(frozen=True)
class CoreGroups:
    """``socket[c]`` and ``group[c]`` (index within its socket) of logical core c."""

    socket: tuple[int, ...]
    group: tuple[int, ...]


def parse_hwloc_xml(text: str, source: str = "hwloc XML") -> CoreGroups:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise HwlocError(f"{source}: not valid XML: {exc}") from None
    sockets: list[int] = []
    groups: list[int] = []
    package_index = -1

    def walk(obj: ET.Element, package: int, group_key: tuple | None) -> None:
        nonlocal package_index
        kind = obj.get("type")
        if kind == "Package":
            package_index += 1
            package, group_key = package_index, None
        elif kind in GROUP_TYPES and package >= 0:
            group_key = (kind, obj.get("gp_index"))
        elif kind == "Core":
            if package < 0:
                raise HwlocError(f"{source}: a core outside any package")
            sockets.append(package)
            groups.append(hash(group_key) if group_key else 0)
            return
        for child in obj.findall("object"):
            walk(child, package, group_key)

    for top in root.findall("object"):
        walk(top, -1, None)
    if not sockets:
        raise HwlocError(f"{source}: no Package/Core objects found")
    # renumber group keys 0, 1, ... within each socket, in core order
    numbered: list[int] = []
    seen: dict[tuple[int, int], int] = {}
    per_socket: dict[int, int] = {}
    for s, g in zip(sockets, groups, strict=True):
        if (s, g) not in seen:
            seen[(s, g)] = per_socket.get(s, 0)
            per_socket[s] = seen[(s, g)] + 1
        numbered.append(seen[(s, g)])
    return CoreGroups(tuple(sockets), tuple(numbered))
