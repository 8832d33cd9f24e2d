"""End-to-end: a job with more tasks than cores (``sbatch --overcommit``) on the local
Slurm cluster.

Slurm gives such a job one CPU per node for all its tasks.  Where the site allows it
(``[solver] oversubscribe = "allow"``) rankmap maps the job anyway: the rankfile binds
the ranks that share a node to the cores Slurm gave, mpirun accepts it and every rank
runs where it says, and the report says the job is oversubscribed.  Where the site does
not, the job keeps Slurm's placement with a report saying why, and the nodes stay up.
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


@pytest.fixture(scope="module")
def crowded_profile(slurm_cluster):
    """A 24-rank 3D stencil numbered at random: Slurm's block placement splits it
    badly between the two nodes, so rankmap's placement is applied."""
    import numpy as np

    from mapper import CommGraph
    from mapper.io.mtx_file import write_mtx
    from slurm_plugin.profiles.generators import generate

    store = slurm_cluster.state / "profiles"
    u, v, w = generate("stencil3d", 24).edges()
    perm = np.random.default_rng(24).permutation(24)
    write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=24), store / "crowded24.mtx")
    (store / "crowded24.toml").write_text('ranks = 24\nfile = "crowded24.mtx"\n')
    return "crowded24"


def _allow_oversubscription(c) -> None:
    c.write_config()
    path = c.state / "rankmap.toml"
    text = path.read_text()
    path.write_text(text.replace("max_time_limit = 30.0",
                                 'max_time_limit = 30.0\noversubscribe = "allow"'))


def test_overcommitted_job_is_mapped_where_the_site_allows_it(slurm_cluster, crowded_profile):
    """An unprivileged user's job: 12 tasks on each of two nodes, one CPU each."""
    c = slurm_cluster
    _allow_oversubscription(c)
    try:
        job = c.run_launch_job(MPI_JOB.format(state=c.state), "-O", "-N2", "-n24",
                               f"--comm-profile={crowded_profile}", user="rmuser")
    finally:
        c.write_config()
    rankfile = assert_ranks_ran_where_the_rankfile_says(job, 24)
    assert "rankmap was NOT applied" not in job.output, job.output
    hosts = [h for h, _, _ in rankfile.values()]
    assert sorted(hosts.count(h) for h in set(hosts)) == [12, 12]
    # Slurm gave one CPU per node: every rank of a node is bound to it
    assert len({(h, s, core) for h, s, core in rankfile.values()}) == 2
    assert re.search(r"REPORT:\s+note\s+oversubscribed \(--overcommit\): 24 ranks share 2 "
                     r"task slots on 2 node\(s\), up to 12 ranks per slot", job.output), \
        job.output
    record = json.loads(re.search(r"^RECORD: (.*)$", job.output, re.M).group(1))
    by_name = {p["name"]: p for p in record["placements"]}
    assert record["applied"]
    assert by_name["rankmap"]["objective"] < by_name["block"]["objective"]


def test_overcommitted_job_keeps_slurms_placement_by_default(slurm_cluster, crowded_profile):
    c = slurm_cluster
    c.write_config()
    job = c.wait(c.submit(REPORT_JOB, "-O", "-N2", "-n24",
                          f"--comm-profile={crowded_profile}"))
    assert_fallback(c, job, 'the job is oversubscribed (--overcommit), which this site '
                            'does not map ([solver] oversubscribe = "never")')
