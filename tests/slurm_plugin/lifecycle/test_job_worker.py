"""The prolog's worker (slurm_plugin.lifecycle.job_worker), called directly without Slurm."""


from tests.helpers.paths import TEST_DATA

HWLOC = TEST_DATA / "hwloc" / "2pkg-2l3-2core-2pu.xml"


def test_worker_reads_hwloc_files_for_the_jobs_nodes(tmp_path):
    from slurm_plugin.lifecycle.job_worker import read_core_groups

    groups = read_core_groups({"n[1-2]": str(HWLOC), "m[1-9]": str(tmp_path / "unused.xml")},
                              ("n2", "x1"))
    assert set(groups) == {"n2"} and groups["n2"].group[2] == 1

