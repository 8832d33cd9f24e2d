"""The prolog's worker (slurm_plugin.lifecycle.job_worker), called directly without Slurm."""


from tests.helpers.paths import TEST_DATA

HWLOC = TEST_DATA / "hwloc" / "2pkg-2l3-2core-2pu.xml"


def test_worker_reads_hwloc_files_for_the_jobs_nodes(tmp_path):
    from slurm_plugin.lifecycle.job_worker import read_core_groups

    groups = read_core_groups({"n[1-2]": str(HWLOC), "m[1-9]": str(tmp_path / "unused.xml")},
                              ("n2", "x1"))
    assert set(groups) == {"n2"} and groups["n2"].group[2] == 1



def test_gpus_take_their_cores_from_gres_conf_else_from_the_nodes_hwloc_xml(tmp_path):
    from slurm_plugin.lifecycle.job_worker import read_gpus
    from slurm_plugin.site.config import parse_config
    from slurm_plugin.slurm.allocation import Allocation

    xml = TEST_DATA / "hwloc" / "2pkg-8core-4gpu-mga.v2.xml"   # GPU 0 on package 0, 1-3 on 1
    gres = tmp_path / "gres.conf"
    gres.write_text("AutoDetect=off\nNodeName=n1 Name=gpu File=/dev/nvidia[0-3]\n"
                    "NodeName=n2 Name=gpu File=/dev/nvidia0 Cores=8-15\n"
                    "NodeName=n2 Name=gpu File=/dev/nvidia[1-3] Cores=0-7\n")
    cfg = parse_config(f'[gpus]\ngres_conf = "{gres}"\n'
                       f'[hwloc]\nfiles = {{ "n[1-2]" = "{xml}" }}\n', "r.toml")
    alloc = Allocation("1", ("n1", "n2"), (4, 4), gpus={"n1": (0, 1, 2, 3), "n2": (0, 3)},
                       gpus_per_task=1)
    gpus, notes, mask = read_gpus(cfg, alloc, {})
    assert [g.cores for g in gpus["n1"]] == [tuple(range(8))] + [tuple(range(8, 16))] * 3
    assert [g.cores for g in gpus["n2"]] == [tuple(range(8, 16)), tuple(range(8))]
    assert mask == 0xf and not notes
    assert {g.nic for g in gpus["n1"] + gpus["n2"]} == {"mlx5_0:1"}   # the XML's ConnectX-4
    off = parse_config(f'[gpus]\ngres_conf = "{gres}"\nnics = false\n'
                       f'[hwloc]\nfiles = {{ "n[1-2]" = "{xml}" }}\n', "r.toml")
    assert {g.nic for g in read_gpus(off, alloc, {})[0]["n1"]} == {""}

    gres.unlink()
    gpus, notes, _ = read_gpus(cfg, alloc, {})
    assert gpus["n2"][1].cores == tuple(range(8, 16))          # the XML's, for GPU 3
    assert any("gres.conf" in n for n in notes)

    no_indexes = Allocation("1", ("n1",), (4,), gpus_per_task=1)
    assert read_gpus(cfg, no_indexes, {})[0] == {}
    assert "gave no GPU indexes" in read_gpus(cfg, no_indexes, {})[1][0]
