"""End-to-end: a site [network] (a torus hop matrix instead of the switch tree) on the
local Slurm cluster.

A job gets a rankfile computed on the torus (OHTMA by default), mpirun accepts it and
every rank runs where it says; the report carries hop-bytes.  A network that does not
name one of the job's nodes leaves the job with Slurm's placement, a report saying why,
and the node up.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.test_jobs import (
    MPI_JOB,
    REPORT_JOB,
    assert_fallback,
    assert_ranks_ran_where_the_rankfile_says,
)

pytestmark = pytest.mark.slurm

#: a ring of the four test nodes whose order is not the names' order
TORUS = """
[network]
kind = "torus"
dims = [4]
nodes = "{nodes}"
"""


@pytest.fixture(scope="module")
def hop_profile(slurm_cluster):
    """A 3D stencil whose ranks are numbered at random: Slurm's block placement is
    poor for it, so the placement computed on the torus is applied."""
    import numpy as np

    from mapper import CommGraph
    from mapper.io.mtx_file import write_mtx
    from slurm_plugin.profiles.generators import generate

    store = slurm_cluster.state / "profiles"
    u, v, w = generate("stencil3d", 16).edges()
    perm = np.random.default_rng(116).permutation(16)
    write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=16), store / "hopscrambled16.mtx")
    (store / "hopscrambled16.toml").write_text('ranks = 16\nfile = "hopscrambled16.mtx"\n')
    return "hopscrambled16"


def test_torus_network_job_gets_a_rankfile_mpirun_accepts(slurm_cluster, hop_profile):
    """An unprivileged user's job on a [network] torus."""
    c = slurm_cluster
    c.write_config(extra=TORUS.format(nodes="n1,n3,n2,n4"))
    try:
        job = c.run_launch_job(MPI_JOB.format(state=c.state), "-N4", "--ntasks-per-node=4",
                               f"--comm-profile={hop_profile}", user="rmuser")
    finally:
        c.write_config()
    rankfile = assert_ranks_ran_where_the_rankfile_says(job, 16)
    assert len({h for h, _, _ in rankfile.values()}) == 4
    assert "rankmap was NOT applied" not in job.output, job.output
    assert re.search(r"REPORT:\s+algorithm\s+ohtma\+n10", job.output), job.output
    assert "REPORT:   note       network: torus [4]" in job.output
    assert re.search(r"REPORT:\s+network hops \(bytes x hops", job.output), job.output
    record = json.loads(re.search(r"^RECORD: (.*)$", job.output, re.M).group(1))
    assert record["applied"] and record["hop_metrics"]
    by_name = {p["name"]: p for p in record["placements"]}
    assert by_name["rankmap"]["objective"] < by_name["block"]["objective"]
    # a ring of 4: no two nodes are more than 2 hops apart
    assert 0 < by_name["rankmap"]["hops"]["max_hops"] <= 2


def test_node_outside_the_network_keeps_slurms_placement(slurm_cluster, hop_profile):
    c = slurm_cluster
    c.write_config(extra=TORUS.format(nodes="n1,n2,n3"))
    try:
        job = c.wait(c.submit(REPORT_JOB, "-N4", "--ntasks-per-node=4",
                              f"--comm-profile={hop_profile}"))
    finally:
        c.write_config()
    # no rankfile, the reason in the report and the log, every node still up
    assert_fallback(c, job, "node(s) n4 of the job are not in the [network] topology")
