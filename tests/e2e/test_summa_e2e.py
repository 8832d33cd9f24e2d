"""End-to-end: ``--comm-profile=summa-fpm:FILE --rankmap=summa`` on the local Slurm
cluster (two switches s1 = n[1-2], s2 = n[3-4]; fixtures in conftest.py).

The job sees RANKMAP_ARRANGEMENT with one line per task, its report shows the
costs, and mpirun accepts the rankfile (every rank runs where it says); a speeds
file the job's user cannot read falls back, names the reason and drains nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.test_jobs import (
    MPI_JOB,
    REPORT_JOB,
    assert_fallback,
    assert_ranks_ran_where_the_rankfile_says,
)

pytestmark = pytest.mark.slurm

ARRANGEMENT = """
echo "ARRANGEMENT_PATH=$RANKMAP_ARRANGEMENT"
[ -n "$RANKMAP_ARRANGEMENT" ] && sed 's/^/ARR: /' "$RANKMAP_ARRANGEMENT"
true
"""
SUMMA_JOB = MPI_JOB + ARRANGEMENT


@pytest.fixture
def user_files(slurm_cluster):
    """The site allows user files (file:PATH, summa-fpm:PATH) for the test; the
    configuration is restored afterwards."""
    c = slurm_cluster
    c.write_config()
    path = c.state / "rankmap.toml"
    path.write_text(path.read_text().replace("[profiles]\n",
                                             "[profiles]\nallow_user_files = true\n"))
    try:
        yield c
    finally:
        c.write_config()


def speeds_file(c, name: str, n: int, mode: int = 0o644) -> Path:
    path = c.state / "jobs" / name
    # two kinds of node speed, interleaved: the partition mixes both in its columns
    path.write_text("# relative speed of rank r on line r\n" +
                    "".join(f"{3 if r % 3 == 0 else 1}\n" for r in range(n)))
    path.chmod(mode)
    return path


def test_summa_job_gets_its_arrangement_and_a_rankfile_mpirun_accepts(user_files):
    c = user_files
    speeds = speeds_file(c, "speeds16.txt", 16)
    job = c.run_launch_job(SUMMA_JOB.format(state=c.state), "-N4", "--ntasks-per-node=4",
                           f"--comm-profile=summa-fpm:{speeds},size=512", "--rankmap=summa",
                           user="rmuser")
    rankfile = assert_ranks_ran_where_the_rankfile_says(job, 16)
    # the default (block) placement written out: the grouping assumed exactly this
    assert [rankfile[r][0] for r in range(16)] == [f"n{1 + r // 4}" for r in range(16)]
    assert re.search(r"^ARRANGEMENT_PATH=/\S+/job\.\d+/arrangement$", job.output, re.M), \
        job.output
    arr = re.findall(r"^ARR: (.*)$", job.output, re.M)
    body = [line for line in arr if not line.startswith("#")]
    assert body[0] == "16 512", arr
    rows = [list(map(int, line.split())) for line in body[1:]]
    assert [r[0] for r in rows] == list(range(16))  # one line per task, in rank order
    assert sum(r[5] * r[6] for r in rows) == 512 * 512  # the areas fill N x N
    assert "REPORT:   SUMMA arrangement" in job.output, job.output
    for name in ("original", "arranged"):
        assert re.search(rf"^REPORT:   {name}\s+\d+\s+\d+\s+[\d.]+$", job.output, re.M), \
            job.output
    assert "grouping   leaf switch (2 groups" in job.output, job.output


def test_unreadable_speeds_file_falls_back(user_files):
    """The worker reads the file as the job's user: root's private file is refused."""
    c = user_files
    secret = speeds_file(c, "root-only.txt", 8, mode=0o600)
    job = c.wait(c.submit(REPORT_JOB + ARRANGEMENT, "-N2", "--ntasks-per-node=4",
                          f"--comm-profile=summa-fpm:{secret}", "--rankmap=summa",
                          user="rmuser"))
    assert_fallback(c, job, "not readable by the job's user")
    assert "ARRANGEMENT_PATH=\n" in job.output, job.output
