"""End-to-end: ``--comm-profile=mesh:NAME`` on the local Slurm cluster (two switches
s1 = n[1-2], s2 = n[3-4]; fixtures in conftest.py), as the unprivileged user.

The job sees RANKMAP_PARTITION with one line per mesh vertex whose values are the
job's ranks, its report compares rankmap's decomposition with METIS + block, and mpirun
accepts the rankfile (every rank runs where it says); a mesh entry with a malformed
weights file falls back, names the file and line, and exports no partition.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.e2e.test_jobs import (
    MPI_JOB,
    REPORT_JOB,
    assert_fallback,
    assert_ranks_ran_where_the_rankfile_says,
)

pytestmark = pytest.mark.slurm

PARTITION = """
echo "PARTITION_PATH=$RANKMAP_PARTITION"
if [ -n "$RANKMAP_PARTITION" ]; then
  echo "PARTITION_LINES=$(wc -l < "$RANKMAP_PARTITION")"
  echo "PARTITION_VALUES=$(sort -n -u "$RANKMAP_PARTITION" | tr '\\n' ' ')"
fi
true
"""
ROWS = COLS = 40


@pytest.fixture(scope="module")
def mesh_store(slurm_cluster):
    """A 40 x 40 grid mesh (METIS, vertex weights 1-3) and the same grid as .mtx with a
    weights file broken on line 5, both kind = "mesh" entries of the cluster's store."""
    from mapper import CommGraph
    from mapper.io.mesh_file import write_mesh_metis
    from mapper.io.mtx_file import write_mtx
    from mapper.mesh.mesh import mesh_from_graph

    idx = np.arange(ROWS * COLS).reshape(ROWS, COLS)
    u = np.r_[idx[:, :-1].ravel(), idx[:-1, :].ravel()]
    v = np.r_[idx[:, 1:].ravel(), idx[1:, :].ravel()]
    graph = CommGraph.from_edges(u, v, np.ones(len(u)), n=ROWS * COLS)
    store = slurm_cluster.state / "profiles"
    write_mesh_metis(mesh_from_graph(graph, 1.0 + np.arange(ROWS * COLS) % 3),
                     store / "plate.graph")
    (store / "plate.toml").write_text('kind = "mesh"\ndescription = "40 x 40 grid"\n'
                                      'file = "plate.graph"\n')
    write_mtx(graph, store / "broken.mtx")
    lines = ["1 1\n"] * (ROWS * COLS)
    lines[4] = "1 x\n"
    (store / "broken.weights").write_text("".join(lines))
    (store / "broken.toml").write_text('kind = "mesh"\nfile = "broken.mtx"\n'
                                       'weights = "broken.weights"\n')
    return store


def test_mesh_job_gets_its_partition_and_a_rankfile_mpirun_accepts(slurm_cluster,
                                                                    mesh_store):
    c = slurm_cluster
    job = c.run_launch_job(MPI_JOB.format(state=c.state) + PARTITION, "-N4",
                           "--ntasks-per-node=4", "--comm-profile=mesh:plate", user="rmuser")
    assert_ranks_ran_where_the_rankfile_says(job, 16)
    assert re.search(r"^PARTITION_PATH=/\S+/job\.\d+/partition$", job.output, re.M), \
        job.output
    lines = int(re.search(r"^PARTITION_LINES=(\d+)$", job.output, re.M).group(1))
    assert lines == ROWS * COLS, job.output
    values = re.search(r"^PARTITION_VALUES=(.*)$", job.output, re.M).group(1).split()
    assert sorted(map(int, values)) == list(range(16)), job.output
    assert re.search(r"REPORT:   mesh partition (applied|written)", job.output), job.output
    for row in ("rankmap", "metis\\+block"):
        assert re.search(rf"^REPORT:   {row}\s+\*?\s+[\d.e+]+\s+[\d.e+]+", job.output, re.M), \
            job.output
    assert "REPORT:   time       read" in job.output, job.output


def test_malformed_weights_file_falls_back(slurm_cluster, mesh_store):
    c = slurm_cluster
    job = c.wait(c.submit(REPORT_JOB + PARTITION, "-N2", "--ntasks-per-node=4",
                          "--comm-profile=mesh:broken", user="rmuser"))
    assert_fallback(c, job, f"{mesh_store / 'broken.weights'}:5: non-numeric entry")
    assert "PARTITION_PATH=\n" in job.output, job.output
