"""``rankmap hwinfo``: write the seed's hardware information file.

The file (:mod:`mapper.io.arity_file`, Sudhakar, Adhikari & Ramesh §IV.A.2) lists the
arity of every tree level, root first.  The node's part comes from hwloc (``--xml``
FILE, ``-`` for stdin, or ``lstopo --of xml`` run here when neither source is given):
packages, then the cache/die groups inside a package when there are several
(:mod:`slurm_plugin.machine.hwloc`), then cores — or from a Slurm node description
(``--node-info 'Sockets=2 CoresPerSocket=4'``).  ``--nodes N`` puts N such nodes under
one root.  Levels of arity 1 say nothing and are left out; PEs are cores, as in
rankmap's slots (hardware threads are not counted).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mapper.errors import RankmapError
from mapper.io.arity_file import format_arity_file

from ..machine.hwloc import CoreGroups, parse_hwloc_xml
from ..slurm.topology import parse_node_shape
from .args import positive_int


class HwinfoError(RankmapError, ValueError):
    """A node that the hardware information file cannot describe."""


def add_hwinfo_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hwinfo", help="write a hardware information (arity) file",
                       description="Write the hardware information file (line 1: number "
                                   "of levels; line 2: arity per level, root first) from "
                                   "hwloc's XML or a Slurm node description, for "
                                   "'rankmap map --arity-file'.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--xml", metavar="FILE",
                     help="output of 'lstopo --of xml' ('-': stdin); default: run lstopo")
    src.add_argument("--node-info", metavar="TEXT",
                     help="node shape as in slurm.conf, e.g. 'Sockets=2 CoresPerSocket=4'")
    p.add_argument("--nodes", type=positive_int, default=1,
                   help="number of such nodes under one root (default 1)")
    p.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=_hwinfo)


def node_arities_from_cores(cores: CoreGroups, source: str = "hwloc XML") -> list[int]:
    """[sockets, groups per socket, cores per group] of one node (groups only when a
    socket has several); uneven nodes cannot be written as arities."""
    per_socket = Counter(cores.socket)
    per_group = Counter(zip(cores.socket, cores.group, strict=True))
    groups_per_socket = Counter(s for s, _ in per_group)
    for what, counts in (("cores per socket", per_socket),
                         ("core groups per socket", groups_per_socket),
                         ("cores per group", per_group)):
        if len(set(counts.values())) > 1:
            raise HwinfoError(f"{source}: uneven {what} ({sorted(set(counts.values()))}); "
                              f"the hardware information file needs equal groups per level")
    return [len(per_socket), next(iter(groups_per_socket.values())),
            next(iter(per_group.values()))]


def hwinfo_arities(node: list[int], nodes: int) -> list[int]:
    """Arities, root first: ``nodes`` (when > 1), then the node's levels, arity-1
    levels left out (one level of 1 stays for a single core)."""
    levels = [a for a in ([nodes] + node) if a > 1]
    return levels or [1]


def _hwinfo(args: argparse.Namespace) -> int:
    if args.node_info:
        shape = parse_node_shape(args.node_info)
        node = [shape.sockets, shape.cores_per_socket]
    else:
        text, source = _read_xml(args.xml)
        node = node_arities_from_cores(parse_hwloc_xml(text, source), source)
    out = format_arity_file(hwinfo_arities(node, args.nodes))
    if args.output:
        Path(args.output).write_text(out)
    else:
        sys.stdout.write(out)
    return 0


def _read_xml(path: str | None) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    if path:
        try:
            return Path(path).read_text(), path
        except OSError as exc:
            raise HwinfoError(f"{path}: cannot read: {exc.strerror or exc}") from None
    lstopo = shutil.which("lstopo") or shutil.which("lstopo-no-graphics")
    if not lstopo:
        raise HwinfoError("no lstopo on PATH (install hwloc) — give --xml FILE or "
                          "--node-info 'Sockets=S CoresPerSocket=C'")
    proc = subprocess.run([lstopo, "--of", "xml"], capture_output=True, text=True,
                          check=False, timeout=60)
    if proc.returncode != 0:
        raise HwinfoError(f"{lstopo} --of xml failed: {proc.stderr.strip()[:200]}")
    return proc.stdout, "lstopo --of xml"
