"""gres.conf and the GPU fields of ``scontrol show job -d`` / ``squeue --json``, on
files recorded from the local cluster's fake GPUs (Slurm 22.05, deploy/testcluster:
``--gpus-per-task=1`` jobs) and on gres.conf lines written for each rule."""

import json

import pytest

from slurm_plugin.slurm.allocation import (
    parse_gpu_indexes,
    parse_gpus_per_task,
    parse_scontrol_job,
    parse_squeue_json,
)
from slurm_plugin.slurm.gres import GresError, parse_gres_conf
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "slurm"


def test_scontrol_gives_each_node_its_gpu_indexes_and_the_gpus_per_task():
    alloc = parse_scontrol_job((DATA / "scontrol_job_gpus_per_task.txt").read_text())
    assert alloc.gpus == {"n2": (0, 2, 3), "n3": (0, 1, 2)}
    assert alloc.gpus_per_task == 1
    assert alloc.cpu_ids == {"n2": (0, 4, 5), "n3": (0, 1, 2)}


def test_a_node_group_shares_its_gres_and_uneven_nodes_keep_their_own():
    alloc = parse_scontrol_job((DATA / "scontrol_job_gpus_uneven.txt").read_text())
    assert alloc.gpus == {"n1": (0, 1, 2), "n2": (0,), "n3": (0,)}
    assert alloc.tasks_per_node == (3, 1, 1)


def test_a_job_without_gpus_has_none():
    alloc = parse_scontrol_job((DATA / "scontrol_job_4x4.txt").read_text())
    assert alloc.gpus == {} and alloc.gpus_per_task == 0


@pytest.mark.parametrize("text, want", [
    ("gres:gpu:1", 1), ("gres/gpu=2", 2), ("gres/gpu:a100=3", 3), ("gres/gpu:a100:4", 4),
    ("cpu=2,gres/gpu:h100=1", 1), ("gres/shard=2", 0), ("", 0), (None, 0)])
def test_gpus_per_task_in_every_spelling_of_tres_per_task(text, want):
    assert parse_gpus_per_task(text) == want


def test_gpu_indexes_of_several_types_and_other_gres():
    assert parse_gpu_indexes("gpu:a100:2(IDX:0,2),gpu:v100:1(IDX:5),nic:1(IDX:0)") == (0, 2, 5)
    assert parse_gpu_indexes("nic:1(IDX:0)") == ()
    assert parse_gpu_indexes("gpu:2(IDX:N/A)") == ()


def test_squeue_json_gres_detail_per_node():
    job = {"job_id": 7, "nodes": "n[1-2]", "tasks": 4, "cpus_per_task": 1,
           "gres_detail": ["gpu:a100:2(IDX:0-1)", "gpu:a100:2(IDX:2-3)"],
           "tres_per_task": "gres/gpu:1"}
    alloc = parse_squeue_json(json.dumps({"jobs": [job]}), "7")
    assert alloc.gpus == {"n1": (0, 1), "n2": (2, 3)} and alloc.gpus_per_task == 1


def test_gres_conf_of_the_local_cluster_numbers_gpus_by_line():
    text = (DATA / "gres.conf.testcluster").read_text()
    conf = parse_gres_conf(text, "gres.conf")
    n1 = conf.of("n1")
    assert [g.index for g in n1] == [0, 1, 2, 3]
    assert [g.cores for g in n1] == [(0, 1, 2, 3)] * 2 + [(4, 5, 6, 7)] * 2
    n3 = conf.of("n3")  # wired the other way round
    assert [g.file.rsplit("/", 1)[1] for g in n3] == ["nvidia0", "nvidia1", "nvidia2",
                                                      "nvidia3"]
    assert [g.cores for g in n3] == [(4, 5, 6, 7)] * 2 + [(0, 1, 2, 3)] * 2


def test_gres_conf_ranges_counts_node_lists_and_continuations():
    conf = parse_gres_conf(
        "# comment\n"
        "NodeName=g[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-15  # socket 0\n"
        "NodeName=g[1-2] Name=gpu Type=a100 \\\n  File=/dev/nvidia[2-3] Cores=16-31\n"
        "NodeName=g1 Name=nic File=/dev/infiniband/uverbs0\n"
        "NodeName=c1 Name=gpu Count=2\n"
        "Name=gpu File=/dev/nvidia0\n")
    g2 = conf.of("g2")
    assert [g.file for g in g2] == [f"/dev/nvidia{i}" for i in range(4)]
    assert [g.cores[0] for g in g2] == [0, 0, 16, 16]
    assert [(g.index, g.file, g.cores) for g in conf.of("c1")] == [(0, None, ()),
                                                                  (1, None, ())]
    assert [g.file for g in conf.of("elsewhere")] == ["/dev/nvidia0"]  # node-local file


def test_with_autodetection_gpus_are_numbered_by_file_in_natural_order():
    lines = "".join(f"NodeName=g1 Name=gpu File=/dev/nvidia{i} Cores={i}\n"
                    for i in (10, 2, 1, 0))
    assert [g.file for g in parse_gres_conf("AutoDetect=off\n" + lines).of("g1")] == \
        ["/dev/nvidia10", "/dev/nvidia2", "/dev/nvidia1", "/dev/nvidia0"]
    detected = parse_gres_conf("AutoDetect=nvml\n" + lines).of("g1")
    assert [(g.index, g.file) for g in detected] == [
        (0, "/dev/nvidia0"), (1, "/dev/nvidia1"), (2, "/dev/nvidia2"), (3, "/dev/nvidia10")]
    assert detected[3].cores == (10,)


@pytest.mark.parametrize("line, where", [
    ("NodeName=g[1-2 Name=gpu File=/dev/nvidia0", "NodeName"),
    ("NodeName=g1 Name=gpu File=/dev/nvidia0 Cores=0-x", "Cores"),
    ("NodeName=g1 Name=gpu Count=lots", "Count"),
    ("NodeName=g1 Name=gpu Count=2G", "Count")])
def test_a_bad_gres_line_names_the_file_line_and_field(line, where):
    with pytest.raises(GresError, match=rf"site/gres.conf:2: {where}="):
        parse_gres_conf(f"AutoDetect=off\n{line}\n", "site/gres.conf")
