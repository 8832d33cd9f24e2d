"""Cache and NUMA groups inside a node, from an hwloc XML (``lstopo --of xml``).

Slurm describes a node as sockets × cores; hwloc also knows the L3 caches (or dies,
or groups) that share a socket.  For each core, in hwloc's logical order — which is
Slurm's socket-major core numbering — this module finds the socket and the cache
group within it, so that :func:`slurm_plugin.machine.layout.build_layout` can add a level
between socket and core.  :func:`parse_hwloc_gpus` finds the node's GPUs and the cores
each is attached to (its PCI locality), for nodes whose gres.conf gives no ``Cores=``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from mapper.errors import RankmapError

#: hwloc object types that group cores below a package, innermost wins
GROUP_TYPES = ("L3Cache", "Die", "Group", "L2Cache")


#: hwloc objects below the CPU tree: an I/O object's locality is its nearest other ancestor
IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev", "Misc"})
#: (PCI vendor, class) of compute GPUs without a compute OS device in the XML: NVIDIA's
#: VGA and 3D controllers; AMD's and Intel's data-centre ones (display 0380, 3D 0302,
#: AMD's processing accelerators 1200).  A VGA (0300) of another vendor, or AMD's or
#: Intel's, is a GPU only with a compute OS device: boards' management VGAs (Matrox,
#: ASPEED, ATI ES1000) are not.
GPU_CLASSES = frozenset({("10de", "0300"), ("10de", "0302"), ("1002", "0380"),
                         ("1002", "0302"), ("1002", "1200"), ("8086", "0380"),
                         ("8086", "0302")})
#: OS devices (``subtype``, or hwloc 3's ``Backend`` info) of a GPU's compute runtime
COMPUTE_BACKENDS = frozenset({"CUDA", "NVML", "RSMI", "LevelZero", "OpenCL"})
#: hwloc's OpenFabrics OS device type (an RDMA NIC: mlx5_0, hfi1_0): hwloc 2 numbers
#: the types (3), hwloc 3's XML writes them as flags (32)
OPENFABRICS_V2, OPENFABRICS_V3_FLAG = 3, 32


class HwlocError(RankmapError, ValueError):
    """An hwloc XML that cannot be used; the message names the file."""


@dataclass(frozen=True)
class CoreGroups:
    """``socket[c]`` and ``group[c]`` (index within its socket) of logical core c."""

    socket: tuple[int, ...]
    group: tuple[int, ...]


@dataclass(frozen=True)
class HwlocGpu:
    """A GPU of an hwloc XML: its index among the node's GPUs (PCI bus order, which is
    the order NVML and ROCm SMI enumerate and so Slurm's autodetected indexes), PCI bus
    id, model (``PCIDevice`` or ``GPUModel`` info, else the PCI ids), the logical cores
    of its locality, and the RDMA NIC nearest to it (``mlx5_0:1``: device and active
    port, as UCX_NET_DEVICES names it; "" when the node has none)."""

    index: int
    busid: str
    name: str
    cores: tuple[int, ...]
    nic: str = ""


def _parse(text: str, source: str) -> ET.Element:
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise HwlocError(f"{source}: not valid XML: {exc}") from None


def parse_hwloc_xml(text: str, source: str = "hwloc XML") -> CoreGroups:
    """Socket and cache group of each core of an hwloc XML, in logical core order.
    O(objects)."""
    root = _parse(text, source)
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


def _is_gpu(dev: ET.Element) -> bool:
    pci_class, _, rest = (dev.get("pci_type") or "").partition(" [")
    vendor = rest.partition(":")[0].lower()
    if (vendor, pci_class) in GPU_CLASSES:
        return True
    if not pci_class.startswith(("03", "12")):
        return False
    for osdev in dev.iter("object"):
        backends = {osdev.get("subtype")} | {
            info.get("value") for info in osdev.findall("info") if info.get("name") == "Backend"}
        if backends & COMPUTE_BACKENDS:
            return True
    return False


def _rdma_nic(osdev: ET.Element, flags: bool) -> str:
    """``name:port`` of an OpenFabrics OS device (its first active port, else port 1),
    "" for any other OS device."""
    try:
        kind = int(osdev.get("osdev_type", ""))
    except ValueError:
        return ""
    if (kind & OPENFABRICS_V3_FLAG) if flags else kind == OPENFABRICS_V2:
        states = {i.get("name"): i.get("value") for i in osdev.findall("info")}
        port = next((n for n in range(1, 9) if states.get(f"Port{n}State") == "4"), 1)
        return f"{osdev.get('name')}:{port}"
    return ""


def _nearest(path: tuple[int, ...], anchor: int,
             nics: list[tuple[str, tuple[int, ...], int]]) -> str:
    """The NIC sharing the longest run of PCI bridges with ``path`` (the same PCIe
    switch, then the same host bridge), then one of the same locality, then the first
    by name."""
    def shared(other: tuple[int, ...]) -> int:
        n = 0
        while n < min(len(path), len(other)) and path[n] == other[n]:
            n += 1
        return n
    best = min(nics, key=lambda nic: (-shared(nic[1]), nic[2] != anchor, nic[0]),
               default=None)
    return best[0] if best else ""


def parse_hwloc_gpus(text: str, source: str = "hwloc XML") -> tuple[HwlocGpu, ...]:
    """The GPUs of an hwloc XML (hwloc 2 or 3), each with the logical cores below the
    object its PCI tree hangs from (its locality, which ``lstopo`` draws it next to and
    Slurm's autodetection writes as ``Cores=``) and its nearest RDMA NIC.

    A GPU is a PCI device of a compute GPU's vendor and class (:data:`GPU_CLASSES`) or a
    display controller or accelerator that carries a compute OS device (CUDA, NVML,
    RSMI, Level Zero, OpenCL).  Cores are numbered in document order, as
    :func:`parse_hwloc_xml` does, so that the numbers are Slurm's.  The nearest NIC is
    the one whose PCI path from the host shares the most bridges with the GPU's (what
    GPUDirect RDMA wants: the same PCIe switch), then one of the same locality.

    Complexity: O(objects + G · N · depth) for G GPUs and N NICs."""
    root = _parse(text, source)
    flags = (root.get("version") or "").startswith("3")
    core_count = 0
    found: list[tuple[str, str, ET.Element, tuple[int, ...]]] = []
    nics: list[tuple[str, tuple[int, ...], int]] = []
    span: dict[int, tuple[int, int]] = {}

    def walk(obj: ET.Element, anchor: ET.Element, path: tuple[int, ...]) -> None:
        nonlocal core_count
        kind = obj.get("type")
        if kind == "Core":
            core_count += 1
            return
        if kind == "PCIDev" and _is_gpu(obj):
            name = next((i.get("value") for i in obj.iter("info")
                         if i.get("name") in ("PCIDevice", "GPUModel")), None)
            found.append((obj.get("pci_busid") or "", name or obj.get("pci_type", ""),
                          anchor, path))
            return
        if kind == "OSDev":
            nic = _rdma_nic(obj, flags)
            if nic:
                nics.append((nic, path, id(anchor)))
            return
        if kind == "Bridge":
            path = (*path, id(obj))
        elif kind not in IO_TYPES:
            anchor = obj
        first = core_count
        for child in obj.findall("object"):
            walk(child, anchor, path)
        if anchor is obj:
            span[id(obj)] = (first, core_count)

    for top in root.findall("object"):
        walk(top, top, ())
    if not core_count:
        raise HwlocError(f"{source}: no Core objects found")
    found.sort(key=lambda f: f[0])
    return tuple(HwlocGpu(i, busid, name, tuple(range(*span[id(anchor)])),
                          _nearest(path, id(anchor), nics))
                 for i, (busid, name, anchor, path) in enumerate(found))
