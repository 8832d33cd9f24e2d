"""GPUs and their cores from real machines' hwloc XML (parse_hwloc_gpus), checked
against an oracle that reads the cpuset bitmasks the tree walk does not use."""

import re
import xml.etree.ElementTree as ET

import pytest

from slurm_plugin.machine.hwloc import HwlocError, parse_hwloc_gpus
from tests.helpers.paths import TEST_DATA

HWLOC = TEST_DATA / "hwloc"
REAL = ("nvidia-dgx2.v3.xml", "2pkg-8core-4gpu-mga.v2.xml", "2pkg-8core-4gpu-mga.v3.xml",
        "power8-4gpu.v2.xml", "2pkg-6core-3gpu-ib.v3.xml")
COMPUTE = {"CUDA", "NVML", "OpenCL", "RSMI", "LevelZero"}


def cpuset(text: str) -> int:
    """hwloc's bitmap text: 32-bit words, most significant first, an empty word 0."""
    return int("".join(word.removeprefix("0x").rjust(8, "0") for word in text.split(",")), 16)


def oracle(text: str) -> dict[str, tuple[int, ...]]:
    """Per GPU bus id (a 3D controller, or a device with a compute runtime's OS device),
    the logical cores whose cpuset meets that of the first ancestor of the GPU that has
    a cpuset (I/O objects have none)."""
    root = ET.fromstring(text)
    parent = {child: obj for obj in root.iter("object") for child in obj.findall("object")}
    cores = [cpuset(c.get("cpuset")) for c in root.iter("object") if c.get("type") == "Core"]
    out = {}
    for dev in root.iter("object"):
        if dev.get("type") != "PCIDev":
            continue
        runtimes = {o.get("subtype") for o in dev.iter("object")} | {
            i.get("value") for i in dev.iter("info") if i.get("name") == "Backend"}
        if not (dev.get("pci_type", "").startswith("0302 ") or runtimes & COMPUTE):
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


def test_a_boards_ati_vga_is_not_a_gpu_and_every_gpu_gets_the_one_infiniband_nic():
    gpus = parse_hwloc_gpus((HWLOC / "2pkg-6core-3gpu-ib.v3.xml").read_text(), "ib")
    assert [g.busid for g in gpus] == ["0000:06:00.0", "0000:11:00.0", "0000:14:00.0"]
    assert {g.nic for g in gpus} == {"mlx4_0:1"}
    # hwloc 2 and 3 number OS device types differently; both give the ConnectX-4
    for name in ("2pkg-8core-4gpu-mga.v2.xml", "2pkg-8core-4gpu-mga.v3.xml"):
        assert {g.nic for g in parse_hwloc_gpus((HWLOC / name).read_text(), name)} == \
            {"mlx5_0:1"}
    assert {g.nic for g in parse_hwloc_gpus((HWLOC / "nvidia-dgx2.v3.xml").read_text())} == {""}


def _dev(busid: str, pci_type: str, inner: str = "") -> str:
    return f'<object type="PCIDev" pci_busid="{busid}" pci_type="{pci_type}">{inner}</object>'


def _nic(busid: str, name: str, active_port: int) -> str:
    osdev = (f'<object type="OSDev" name="{name}" osdev_type="3">'
             f'<info name="Port{active_port}State" value="4"/></object>')
    return _dev(busid, "0207 [15b3:101b] [15b3:0007] 00 00", osdev)


def _switch(*devs: str) -> str:
    return '<object type="Bridge" bridge_type="1-1">' + "".join(devs) + "</object>"


def test_each_gpu_gets_the_nic_behind_its_own_pcie_switch_else_one_of_its_socket():
    """Two sockets: on the first, two PCIe switches each with a GPU and a NIC; on the
    second, a switch with a GPU and a NIC whose port 2 is the active one, and a GPU
    with no NIC beside it, which gets its socket's NIC, not the nearer-numbered one."""
    gpu = "0302 [10de:20b0] [10de:134f] a1 00"
    core = '<object type="Core"><object type="PU"/></object>'
    xml = ('<topology version="2.0"><object type="Machine">'
           f'<object type="Package">{core}{core}<object type="Bridge" bridge_type="0-1">'
           + _switch(_dev("0000:07:00.0", gpu), _nic("0000:0c:00.0", "mlx5_0", 1))
           + _switch(_dev("0000:0f:00.0", gpu), _nic("0000:12:00.0", "mlx5_1", 1))
           + f'</object></object><object type="Package">{core}{core}'
           + '<object type="Bridge" bridge_type="0-1">'
           + _switch(_dev("0000:87:00.0", gpu), _nic("0000:8c:00.0", "mlx5_2", 2))
           + _switch(_dev("0000:90:00.0", gpu))
           + "</object></object></object></topology>")
    gpus = parse_hwloc_gpus(xml, "x")
    assert [(g.cores, g.nic) for g in gpus] == [
        ((0, 1), "mlx5_0:1"), ((0, 1), "mlx5_1:1"), ((2, 3), "mlx5_2:2"), ((2, 3), "mlx5_2:2")]


def test_a_node_without_gpus_has_none_and_bad_files_name_themselves():
    assert parse_hwloc_gpus((HWLOC / "2pkg-2l3-2core-2pu.xml").read_text(), "syn") == ()
    with pytest.raises(HwlocError, match="gpu.xml: not valid XML"):
        parse_hwloc_gpus("<topology><object", "gpu.xml")
    with pytest.raises(HwlocError, match="gpu.xml: no Core objects"):
        parse_hwloc_gpus('<topology><object type="Machine"/></topology>', "gpu.xml")
