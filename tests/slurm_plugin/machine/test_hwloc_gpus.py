"""GPUs and their cores from real machines' hwloc XML (parse_hwloc_gpus), checked
against an oracle that reads the cpuset bitmasks the tree walk does not use."""

import re
import xml.etree.ElementTree as ET

import pytest

from slurm_plugin.machine.hwloc import HwlocError, parse_hwloc_gpus
from tests.helpers.paths import TEST_DATA

HWLOC = TEST_DATA / "hwloc"
REAL = ("nvidia-dgx2.v3.xml", "2pkg-8core-4gpu-mga.v2.xml", "2pkg-8core-4gpu-mga.v3.xml",
        "power8-4gpu.v2.xml")


def cpuset(text: str) -> int:
    """hwloc's bitmap text: 32-bit words, most significant first, an empty word 0."""
    return int("".join(word.removeprefix("0x").rjust(8, "0") for word in text.split(",")), 16)


def oracle(text: str) -> dict[str, tuple[int, ...]]:
    """Per GPU bus id, the logical cores whose cpuset meets that of the first ancestor
    of the GPU that has a cpuset (I/O objects have none)."""
    root = ET.fromstring(text)
    parent = {child: obj for obj in root.iter("object") for child in obj.findall("object")}
    cores = [cpuset(c.get("cpuset")) for c in root.iter("object") if c.get("type") == "Core"]
    out = {}
    for dev in root.iter("object"):
        pci = dev.get("pci_type", "")
        if dev.get("type") != "PCIDev" or not re.match(r"03.. \[(10de|1002):", pci):
            continue
        anc = parent[dev]
        while anc.get("cpuset") is None:
            anc = parent[anc]
        mask = cpuset(anc.get("cpuset"))
        out[dev.get("pci_busid")] = tuple(i for i, c in enumerate(cores) if c & mask)
    return out


@pytest.mark.parametrize("name", REAL)
def test_each_gpu_gets_the_cores_its_pci_tree_is_local_to(name):
    text = (HWLOC / name).read_text()
    gpus = parse_hwloc_gpus(text, name)
    assert {g.busid: g.cores for g in gpus} == oracle(text)
    assert [g.index for g in gpus] == list(range(len(gpus)))
    assert [g.busid for g in gpus] == sorted(g.busid for g in gpus)


def test_dgx2_gives_16_gpus_in_nvml_order_half_on_each_package():
    text = (HWLOC / "nvidia-dgx2.v3.xml").read_text()
    gpus = parse_hwloc_gpus(text, "dgx2")
    # the XML's own NVML device names are NVML's enumeration, which Slurm's
    # AutoDetect=nvml indexes GPUs by: bus order must agree with it
    nvml = {m.group(1): int(m.group(2)) for m in re.finditer(
        r'pci_busid="([0-9a-f:.]+)"[^>]*>\s*<object type="OSDev"[^>]*name="nvml(\d+)"', text)}
    assert len(nvml) == 16
    assert [nvml[g.busid] for g in gpus] == [g.index for g in gpus]
    assert {g.cores for g in gpus[:8]} == {(0, 1)} and {g.cores for g in gpus[8:]} == {(2, 3)}
    assert gpus[0].name == "Tesla V100-SXM3-32GB-H"


def test_the_boards_management_vga_is_not_a_gpu_and_both_formats_agree():
    v2 = parse_hwloc_gpus((HWLOC / "2pkg-8core-4gpu-mga.v2.xml").read_text(), "v2")
    v3 = parse_hwloc_gpus((HWLOC / "2pkg-8core-4gpu-mga.v3.xml").read_text(), "v3")
    assert v2 == v3
    assert "0000:05:03.0" not in {g.busid for g in v2}      # Matrox G200eW, class 0300
    assert [g.name.split()[0] for g in v2] == ["Tesla", "Tesla", "Tesla", "Tahiti"]


def test_a_node_without_gpus_has_none_and_bad_files_name_themselves():
    assert parse_hwloc_gpus((HWLOC / "2pkg-2l3-2core-2pu.xml").read_text(), "syn") == ()
    with pytest.raises(HwlocError, match="gpu.xml: not valid XML"):
        parse_hwloc_gpus("<topology><object", "gpu.xml")
    with pytest.raises(HwlocError, match="gpu.xml: no Core objects"):
        parse_hwloc_gpus('<topology><object type="Machine"/></topology>', "gpu.xml")
