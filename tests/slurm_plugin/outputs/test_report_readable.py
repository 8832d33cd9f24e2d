"""The report people read: one decision sentence, folded node lists, one number style."""

import json

import pytest

from slurm_plugin.machine.layout import build_layout
from slurm_plugin.modes.graph_job import make_plan
from slurm_plugin.outputs.report import human
from slurm_plugin.profiles.generators import generate
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf


def test_report_of_a_2048_node_plan_stays_short():
    conf = "".join(f"SwitchName=l{i} Nodes=c[{32 * i + 1}-{32 * i + 32}]\n" for i in range(64))
    conf += "SwitchName=spine Switches=l[0-63]\n"
    nodes = tuple(f"c{i}" for i in range(1, 2049))
    alloc = Allocation("7", nodes, (4,) * 2048)
    layout = build_layout(alloc, NodeShape(2, 2), parse_topology_conf(conf),
                          [1, 10, 100, 1000])
    plan = make_plan(layout, generate("stencil3d", layout.n), algorithm="topdown+n10",
                     time_limit=60, units="bytes")
    lines = plan.report_text.splitlines()
    assert len(lines) < 40, plan.report_text
    assert "8192 on 2048 node(s): c[1-2048]" in plan.report_text
    assert lines[2].strip() == plan.summary  # the decision comes first, in words
    record = json.loads(plan.report_json)
    assert record["nodes"] == "c[1-2048]" and record["node_count"] == 2048
    assert "e+" not in plan.report_text  # no exponent notation anywhere


@pytest.mark.parametrize("value, unit, text", [
    (1.28e9, "bytes", "1.28 GB"), (907434, "", "907 k"), (12, "bytes", "12 B"),
    (4100, "messages", "4.1 k messages"), (0, "bytes", "0 B"), (12, "messages", "12 messages"),
    (1.5e13, "", "15 T"),
])
def test_human_units(value, unit, text):
    assert human(value, unit) == text


def test_a_gpu_jobs_report_and_bind_file_give_each_rank_its_gpu_next_to_its_cores():
    """gres.conf wires GPUs 0,1 to socket 1 and 2,3 to socket 0: every rank's record
    names one GPU, each GPU once per node, on cores gres.conf wires it to; the report
    lists the same per rank, and the bind file's header carries srun's mask."""
    from dataclasses import replace

    from slurm_plugin.machine.gpus import gpu_bind_mask, job_gpus
    from slurm_plugin.slurm.gres import parse_gres_conf

    gres = parse_gres_conf("".join(
        f"NodeName=g[1-2] Name=gpu File=/dev/nvidia{i} Cores={c}\n"
        for i, c in enumerate(["4-7", "4-7", "0-3", "0-3"])), "gres.conf")
    alloc = Allocation("9", ("g1", "g2"), (4, 4), gpus={"g1": (0, 1, 2, 3), "g2": (0, 1, 2, 3)},
                       gpus_per_task=1)
    gpus, _ = job_gpus(alloc, gres)
    gpus = {n: tuple(g._replace(nic=f"mlx5_{g.index // 2}:1") for g in gs)
            for n, gs in gpus.items()}
    layout = replace(build_layout(alloc, NodeShape(2, 4), None, [1, 10, 100], gpus=gpus),
                     gpu_mask=gpu_bind_mask(alloc, gres))
    plan = make_plan(layout, generate("ring", layout.n), algorithm="greedy", time_limit=5,
                     units="bytes")
    header, *records = plan.files["bindings"].splitlines()
    assert header.split()[4:] == ["gpumask=0xf", "gpunode=4"]
    seen = set()
    for rec in records:
        _, host, slot, gpu, nic = rec.split()
        g = int(gpu.removeprefix("gpu="))
        assert nic == f"nic=mlx5_{g // 2}:1", rec
        socket_, cores = slot.split(":")
        cpus = {int(socket_) * 4 + int(c) for c in cores.split(",")}
        assert cpus <= set(gres.of(host)[g].cores), rec
        seen.add((host, g))
    assert len(seen) == 8
    rows = json.loads(plan.report_json)["gpus"]
    assert {(r["host"], r["gpus"][0]) for r in rows} == seen
    assert {r["nic"] for r in rows} == {"mlx5_0:1", "mlx5_1:1"}
    assert "GPUs per rank" in plan.report_text and "mlx5_1:1" in plan.report_text
