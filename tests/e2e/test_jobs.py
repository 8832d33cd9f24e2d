"""End-to-end: real sbatch jobs on the local Slurm cluster with rankmap installed.

Every job prints what it saw (environment, the rankfile, the report) and what its
ranks did; the assertions read that output, rankmap's log and sinfo.
"""

from __future__ import annotations

import grp
import pwd
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.paths import TEST_DATA

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[2]

MPI_JOB = """
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# this machine has 2 real cores; Open MPI is shown the emulated nodes' 2x4 layout
export OMPI_MCA_hwloc_base_topo_file={state}/topo-2x4.xml
echo "RANKFILE_PATH=$OMPI_MCA_rmaps_rankfile_path"
echo "REPORT_PATH=$RANKMAP_REPORT"
[ -n "$OMPI_MCA_rmaps_rankfile_path" ] && sed 's/^/RF: /' "$OMPI_MCA_rmaps_rankfile_path"
[ -n "$RANKMAP_REPORT" ] && sed 's/^/REPORT: /' "$RANKMAP_REPORT"
[ -n "$RANKMAP_REPORT" ] && echo "RECORD: $(tr -d '\n' < "${{RANKMAP_REPORT%.txt}}.json")"
# a launch that hangs is ended (the harness then submits a new job: run_launch_job)
timeout -k 10 90 mpirun --report-bindings {state}/bin/rankinfo 2>&1
echo "MPIRUN_RC=$?"
"""

REPORT_JOB = """
echo "RANKFILE_PATH=$OMPI_MCA_rmaps_rankfile_path"
echo "SLURM_HOSTFILE=$SLURM_HOSTFILE"
[ -n "$RANKMAP_REPORT" ] && sed 's/^/REPORT: /' "$RANKMAP_REPORT"
true
"""


def rankfile_of(output: str) -> dict[int, tuple[str, int, int]]:
    """rank -> (host, socket, core) from the RF: lines the job printed."""
    out = {}
    for m in re.finditer(r"^RF: rank (\d+)=(\S+) slot=(\d+):(\d+)$", output, re.M):
        out[int(m.group(1))] = (m.group(2), int(m.group(3)), int(m.group(4)))
    return out


def assert_ranks_ran_where_the_rankfile_says(job, nranks: int) -> dict:
    """Each rank's real host and CPU, and the binding Open MPI reports, against the
    rankfile the job printed; returns the rankfile.  Open MPI sees the emulated 2x4
    layout; binding to cores 0 and 1 (which exist here) succeeds and is reported as an
    empty set, so there the CPU the rank ran on is checked instead."""
    assert job.state == "COMPLETED", job.output
    assert "MPIRUN_RC=0" in job.output, job.output
    rankfile = rankfile_of(job.output)
    assert sorted(rankfile) == list(range(nranks))
    ran = {int(r): (h, int(cpu)) for r, h, cpu in
           re.findall(r"^rank (\d+) host (\S+) cpu (\d+)", job.output, re.M)}
    bound = {int(r): (h, b.strip()) for h, r, b in
             re.findall(r"\[(\w+):\d+\] MCW rank (\d+) bound to (.*)$", job.output, re.M)}
    assert len(ran) == nranks and len(bound) == nranks, job.output
    for rank, (host, socket, core) in rankfile.items():
        global_core = socket * 4 + core
        assert ran[rank][0] == host, f"rank {rank} ran on {ran[rank][0]}, rankfile: {host}"
        assert bound[rank][0] == host
        if bound[rank][1] == ":":
            assert ran[rank][1] == global_core, f"rank {rank} on cpu {ran[rank][1]}"
        else:
            assert bound[rank][1].startswith(f"SK{socket}:CR{global_core}:"), bound[rank]
    return rankfile


@pytest.fixture(scope="module")
def scrambled_profiles(slurm_cluster):
    """Stencils whose ranks are numbered at random: Slurm's block placement is poor for
    them, so rankmap's placement is applied (on a plain stencil block can be optimal,
    and then the job rightly keeps it)."""
    import numpy as np

    from mapper import CommGraph
    from mapper.io.mtx_file import write_mtx
    from slurm_plugin.profiles.generators import generate

    store = slurm_cluster.state / "profiles"
    for n, spec in ((16, "stencil3d"), (8, "stencil2d")):
        u, v, w = generate(spec, n).edges()
        perm = np.random.default_rng(n).permutation(n)
        write_mtx(CommGraph.from_edges(perm[u], perm[v], w, n=n), store / f"scrambled{n}.mtx")
        (store / f"scrambled{n}.toml").write_text(f'ranks = {n}\nfile = "scrambled{n}.mtx"\n')
    return store


def test_mpirun_ranks_run_where_the_rankfile_says(slurm_cluster, scrambled_profiles):
    c = slurm_cluster
    job = c.run_launch_job(MPI_JOB.format(state=c.state), "-N4", "--ntasks-per-node=4",
                           "--comm-profile=scrambled16")
    rankfile = assert_ranks_ran_where_the_rankfile_says(job, 16)
    assert len({h for h, _, _ in rankfile.values()}) == 4
    assert "REPORT: " in job.output and "rankmap was NOT applied" not in job.output
    assert re.search(r"REPORT:\s+rankmap \*\s+\S+", job.output)


def test_interleaved_switches_ranks_run_where_the_solver_chose(slurm_cluster):
    """Node names that do not follow the wiring (s1 = n1,n3; s2 = n2,n4): the rankfile's
    J, recomputed from the cluster's topology.conf by the independent evaluator,
    equals the report's, beats Slurm's block, and every rank runs where it says."""
    from slurm_plugin.profiles.generators import generate
    from tests.helpers import independent_eval as ie

    c = slurm_cluster
    c.restart(topology="interleaved")
    try:
        conf = (c.state / "topology.conf").read_text()
        assert "Nodes=n1,n3" in conf
        job = c.run_launch_job(MPI_JOB.format(state=c.state), "-N4", "--ntasks-per-node=8",
                               "--comm-profile=stencil3d")
    finally:
        c.restart(topology="tree")
    rankfile = assert_ranks_ran_where_the_rankfile_says(job, 32)
    u, v, w = generate("stencil3d", 32).edges()
    edges = list(zip(u.tolist(), v.tolist(), w.tolist(), strict=True))
    distances = [1.0, 10.0, 100.0, 1000.0]  # the site default
    ours = ie.objective(edges, {r: (h, s) for r, (h, s, _) in rankfile.items()}, conf,
                        distances)
    nodes = ["n1", "n2", "n3", "n4"]
    block = ie.objective(edges, ie.slurm_block_cyclic(nodes, {n: {0: 4, 1: 4} for n in nodes}),
                         conf, distances)
    import json

    record = json.loads(re.search(r"^RECORD: (.*)$", job.output, re.M).group(1))
    reported = {p["name"]: p["objective"] for p in record["placements"]}
    assert ours == pytest.approx(reported["rankmap"]), job.output
    assert block == pytest.approx(reported["block"]), job.output
    assert ours < block


def test_srun_arbitrary_distribution_follows_the_hostfile(slurm_cluster, scrambled_profiles):
    c = slurm_cluster
    c.write_config(export_slurm_hostfile=True)
    try:
        script = REPORT_JOB + """
[ -n "$SLURM_HOSTFILE" ] && sed 's/^/HF: /' "$SLURM_HOSTFILE"
srun -n 8 bash -c 'echo "TASK $SLURM_PROCID $(hostname)"'
"""
        job = c.wait(c.submit(script, "-N4", "--ntasks-per-node=2",
                              "--comm-profile=scrambled8"))
    finally:
        c.write_config()
    assert job.state == "COMPLETED", job.output
    expected = re.findall(r"^HF: (\S+)$", job.output, re.M)
    tasks = {int(r): h for r, h in re.findall(r"^TASK (\d+) (\S+)$", job.output, re.M)}
    assert len(expected) == 8 and len(tasks) == 8, job.output
    assert [tasks[r] for r in range(8)] == expected


def test_spank_options_are_listed_and_checked_at_submission(slurm_cluster):
    c = slurm_cluster
    help_run = c.run(["sbatch", "--help"])
    for option in ("--comm-profile=NAME", "--rankmap=CHOICE", "--rankmap-time=SECONDS"):
        assert help_run.stdout.count(option) == 1, help_run.stdout
    # each option registered once: no "provided by both" warning in every slurmd start,
    # batch step and srun
    for log in c.state.glob("slurmd-n*.log"):
        assert "provided by both" not in log.read_text(), log
    for bad, msg in (("--rankmap-time=-1", "positive number of seconds"),
                     ("--rankmap-time=100", "above this site's maximum of 60"),
                     ("--rankmap=topdwn", "expected auto, off, summa, a preset (fast, eco, "),
                     ("--comm-profile=a/b", "'/' only in file:/PATH and")):
        proc = c.run(["sbatch", bad, "--wrap", "true"], check=False)
        assert proc.returncode != 0 and msg in proc.stderr, (bad, proc.stderr)


def test_job_without_flag_outside_rules_is_untouched(slurm_cluster):
    c = slurm_cluster
    job = c.wait(c.submit(REPORT_JOB + "ls " + str(c.state / "out") + " | sed 's/^/DIR: /'\n",
                          "-N2", "--ntasks-per-node=2", "-p", "debug"))
    assert job.state == "COMPLETED", job.output
    assert "RANKFILE_PATH=\n" in job.output and "REPORT:" not in job.output
    assert f"DIR: job.{job.job_id}" not in job.output


def test_site_rule_maps_a_job_without_flags(slurm_cluster):
    c = slurm_cluster
    job = c.wait(c.submit(REPORT_JOB, "-N2", "--ntasks-per-node=4", "-p", "mapped"))
    assert job.state == "COMPLETED", job.output
    assert "REPORT:   profile    stencil3d" in job.output
    # 8 ranks of a 2x2x2 stencil on 2 nodes: block is optimal, and the job keeps it
    assert "REPORT:   Slurm's block placement kept" in job.output, job.output
    assert "RANKFILE_PATH=\n" in job.output


FAULTS = {
    "missing profile": (["--comm-profile=nosuch"], "not found in the profile stores"),
    "corrupt profile": (["--comm-profile=corrupt"], "corrupt.mtx"),
    "wrong rank count": (["--comm-profile=eight"], "is for 8 ranks but the job has 16"),
    # 1 ns, a budget no solver run meets: a quiet machine solved these 16 ranks within
    # 0.001 s, and the job rightly kept its mapping
    "time budget": (["--comm-profile=stencil3d", "--rankmap-time=1e-9"], "time budget"),
}


@pytest.fixture(scope="module")
def fault_profiles(slurm_cluster):
    store = slurm_cluster.state / "profiles"
    (store / "corrupt.toml").write_text('ranks = 16\nfile = "corrupt.mtx"\n')
    (store / "corrupt.mtx").write_text("%%MatrixMarket matrix coordinate real general\n"
                                       "16 16 2\n1 2 5\nthis is not a number\n")
    (store / "eight.toml").write_text('ranks = 8\nfile = "eight.mtx"\n')
    (store / "eight.mtx").write_text("%%MatrixMarket matrix coordinate real general\n"
                                     "8 8 1\n1 2 5\n")
    return store


def assert_fallback(c, job, reason: str) -> None:
    assert job.state == "COMPLETED", job.output
    assert "RANKFILE_PATH=\n" in job.output, "a rankfile was exported despite the failure"
    assert "rankmap was NOT applied" in job.output and reason in job.output, job.output
    assert re.search(rf"job {job.job_id}: .*{re.escape(reason)}", c.log_text()), c.log_text()
    states = c.node_states()
    assert all(s in ("idle", "mixed", "allocated") for s in states.values()), states


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_falls_back_to_default_placement(slurm_cluster, fault_profiles, fault):
    c = slurm_cluster
    args, reason = FAULTS[fault]
    job = c.wait(c.submit(REPORT_JOB, "-N4", "--ntasks-per-node=4", *args))
    assert_fallback(c, job, reason)


def test_unsafe_output_directory_falls_back(slurm_cluster):
    c = slurm_cluster
    unsafe = c.state / "world-writable"  # no sticky bit: any user could swap job dirs
    unsafe.mkdir(exist_ok=True)
    unsafe.chmod(0o777)
    c.write_config(output_dir=str(unsafe))
    try:
        job = c.wait(c.submit(REPORT_JOB, "-N2", "--ntasks-per-node=2",
                              "--comm-profile=ring"))
    finally:
        c.write_config()
    assert_fallback(c, job, "cannot use output directory")


def test_path_traversal_profile_name_is_refused_by_the_prolog(slurm_cluster):
    c = slurm_cluster
    # sbatch with rankmap's plugin refuses it at submission ...
    refused = c.run(["sbatch", "--comm-profile=../../etc/passwd", "--wrap", "true"],
                    check=False)
    assert refused.returncode != 0 and "--comm-profile" in refused.stderr
    # ... and a user who loads an unchecking plugin client-side still gets no further
    lib = c.state / "lib" / "unchecked_spank.so"
    source = TEST_DATA / "mpi/unchecked_spank.c"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    plugstack = c.state / "plugstack-unchecked.conf"
    plugstack.write_text(f"required {lib}\n")
    conf = (c.state / "slurm.conf").read_text()
    user_conf = c.state / "slurm-user.conf"
    user_conf.write_text(re.sub(r"PlugStackConfig=\S+", f"PlugStackConfig={plugstack}", conf))
    job = c.wait(c.submit(REPORT_JOB, "-N2", "--ntasks-per-node=2",
                          "--comm-profile=../../etc/passwd",
                          env={"SLURM_CONF": str(user_conf)}))
    assert_fallback(c, job, "is not allowed")


def test_the_sites_job_submit_rule_refuses_a_huge_spank_environment(slurm_cluster):
    """What no prolog can defend (README, Threat model): megabytes of SPANK variables from
    a user's own client-side plugin stop slurmd from starting any prolog.  The shipped
    job_submit.lua rule refuses such a job at submission; a normal one still runs."""
    c = slurm_cluster
    lib = c.state / "lib" / "unchecked_spank.so"
    source = TEST_DATA / "mpi/unchecked_spank.c"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    plugstack = c.state / "plugstack-unchecked.conf"
    plugstack.write_text(f"required {lib}\n")
    c.restart(job_submit_lua=str(ROOT / "deploy/job_submit_spank_limit.lua"))
    try:
        user_conf = c.state / "slurm-user.conf"
        conf = (c.state / "slurm.conf").read_text()
        user_conf.write_text(re.sub(r"PlugStackConfig=\S+", f"PlugStackConfig={plugstack}",
                                    conf))
        huge = "x" * 70000
        refused = c.run(["sbatch", f"--comm-profile={huge}", "--wrap", "true"],
                        env={**c.env, "SLURM_CONF": str(user_conf)}, check=False)
        assert refused.returncode != 0, refused
        assert "over the site's limit of 65536" in refused.stderr, refused.stderr[-500:]
        job = c.wait(c.submit(REPORT_JOB, "-N1", "-n2", "--comm-profile=ring"))
        assert job.state == "COMPLETED", job
    finally:
        c.restart()
    assert all(state == "idle" for state in c.node_states().values()), c.node_states()


def test_twenty_jobs_at_once_all_run_and_leave_no_files(slurm_cluster):
    c = slurm_cluster
    ids = [c.submit(REPORT_JOB, "-N1", "-n2", "--comm-profile=ring") for _ in range(20)]
    jobs = [c.wait(j, timeout=180) for j in ids]
    assert all(j.state == "COMPLETED" for j in jobs), [j.state for j in jobs]
    # two ranks on one node: every placement is as good as Slurm's, which each job keeps
    assert all("rankmap: Slurm's block placement kept" in j.output for j in jobs), \
        [j.output[:300] for j in jobs]
    # epilogs have run once the jobs are gone; allow them a moment
    for _ in range(50):
        # the node's worker slots (lock files) stay; nothing of any job does
        left = [p.name for p in (c.state / "out").iterdir()
                if not p.name.startswith(".worker-slot.")]
        if not left:
            break
        time.sleep(0.2)
    assert left == []


def test_a_job_that_outlives_its_wait_is_cancelled(slurm_cluster):
    """The harness itself: a hung job fails its own test and leaves its nodes, so the
    tests after it do not wait behind it (a CI run once lost four tests that way)."""
    c = slurm_cluster
    job = c.wait(c.submit("sleep 600\n", "-N1", "-n1"), timeout=3)
    assert "not finished after 3 s" in job.output, job.output
    left = c.run(["squeue", "-h", "-j", job.job_id, "-o", "%T"], check=False).stdout.strip()
    assert left in ("", "CANCELLED", "COMPLETED"), left


def test_a_hung_launch_is_retried_in_a_new_job_and_a_failed_one_is_not(slurm_cluster):
    """The harness itself: a launcher that ``timeout`` ended is run again in a new job
    (a CI run lost a test to an mpirun that hung once); one that fails, or hangs every
    time, is reported as it is."""
    c = slurm_cluster
    marker = c.state / "jobs" / f"hang.{time.monotonic_ns()}"
    hangs_once = (f'if [ -e {marker} ]; then echo "LAUNCH_RC=0"; else touch {marker}\n'
                  'timeout -k 1 1 sleep 30; echo "LAUNCH_RC=$?"; fi\n')
    job = c.run_launch_job(hangs_once, "-N1", "-n1")
    assert job.state == "COMPLETED" and "LAUNCH_RC=0" in job.output, job.output
    first = re.match(r"\(retried after job\(s\) (\d+)\)\n", job.output)
    assert first and int(first.group(1)) < int(job.job_id), job.output

    always = 'timeout -k 1 1 sleep 30; echo "LAUNCH_RC=$?"\n'
    job = c.run_launch_job(always, "-N1", "-n1", tries=2)
    assert "LAUNCH_RC=124" in job.output and job.output.count("retried after") == 1

    fails = 'false; echo "LAUNCH_RC=$?"\n'
    job = c.run_launch_job(fails, "-N1", "-n1")
    assert "LAUNCH_RC=1" in job.output and "retried" not in job.output, job.output


def test_prolog_slurmctld_computes_into_a_shared_directory(slurm_cluster, scrambled_profiles):
    """PrologSlurmctld computes; the nodes' TaskProlog finds the files.  The profile is a
    scrambled stencil, which Slurm's block placement serves badly whatever cores the job
    gets: Slurm 24.11 gives -N2 --ntasks-per-node=4 the cores 0-3 of socket 0 (22.05
    spread them over both sockets), and block is then already optimal for a ring, so
    the job rightly kept it and wrote no rankfile (seen in the Debian 13 root)."""
    c = slurm_cluster
    c.write_config()
    text = (c.state / "rankmap.toml").read_text().replace(
        'grace_seconds = 30.0', 'grace_seconds = 30.0\ncompute_on = "slurmctld"')
    (c.state / "rankmap.toml").write_text(text)
    # PrologSlurmctld gets no SLURM_CONF; this cluster's config is not in the default place
    ctld = c.state / "bin" / "prolog_slurmctld.sh"
    ctld.write_text((c.state / "bin" / "prolog.sh").read_text().replace(
        "RANKMAP_CONFIG=", f"SLURM_CONF={c.state / 'slurm.conf'} RANKMAP_CONFIG="))
    ctld.chmod(0o755)
    c.restart(prolog_slurmctld=str(ctld))
    try:
        job = c.wait(c.submit(REPORT_JOB, "-N2", "--ntasks-per-node=4",
                              "--comm-profile=scrambled8"))
    finally:
        c.write_config()
        c.restart()
    assert job.state == "COMPLETED", job.output
    assert re.search(r"RANKFILE_PATH=/\S+/job\.\d+/rankfile", job.output), job.output
    assert "REPORT:   profile    scrambled8" in job.output


def test_unprivileged_users_job_gets_its_placement(slurm_cluster, scrambled_profiles):
    """A normal user's job: the TaskProlog and the dropped-privilege worker run from the
    site install, every rank runs where the rankfile says, and the job's files are
    the user's own and private, in a directory of root's that the user cannot add to."""
    c = slurm_cluster
    script = MPI_JOB.format(state=c.state) + (
        'stat -c "DIR %U %G %a" "$(dirname "$RANKMAP_REPORT")"\n'
        'stat -c "FILE %U %a" "$RANKMAP_REPORT" "$RANKMAP_RANKFILE"\nid -un\n'
        'touch "$(dirname "$RANKMAP_REPORT")/planted" 2>/dev/null || echo "CANNOT ADD"\n')
    job = c.run_launch_job(script, "-N4", "--ntasks-per-node=4", "--comm-profile=scrambled16",
                           user="rmuser")
    assert_ranks_ran_where_the_rankfile_says(job, 16)
    assert "\nrmuser\n" in job.output and "TaskProlog failed" not in job.output
    group = grp.getgrgid(pwd.getpwnam("rmuser").pw_gid).gr_name
    assert f"DIR root {group} 750" in job.output, job.output
    assert "CANNOT ADD" in job.output, job.output
    assert job.output.count("FILE rmuser 600") == 2, job.output
    log_mode = (c.state / "rankmap.log").stat().st_mode & 0o777
    assert not log_mode & 0o007, oct(log_mode)  # users cannot read root's log


def test_unprivileged_users_preset_job(slurm_cluster, scrambled_profiles):
    """``--rankmap=strong`` from a normal user: the SPANK plugin accepts the preset, the
    worker runs it, the report says what it ran, and the ranks run where it says."""
    c = slurm_cluster
    job = c.run_launch_job(MPI_JOB.format(state=c.state), "-N4", "--ntasks-per-node=4",
                           "--comm-profile=scrambled16", "--rankmap=strong", user="rmuser")
    assert_ranks_ran_where_the_rankfile_says(job, 16)
    assert "preset strong: " in job.output, job.output
    assert "rankmap was NOT applied" not in job.output, job.output


def test_other_users_cannot_read_a_running_jobs_files(slurm_cluster, scrambled_profiles):
    c = slurm_cluster
    marker = c.state / "jobs" / f"paths.{time.monotonic_ns()}"
    script = f'echo "$RANKMAP_REPORT $RANKMAP_RANKFILE" > {marker}\nsleep 20\n'
    job_id = c.submit(script, "-N2", "--ntasks-per-node=4", "--comm-profile=scrambled8",
                      user="rmuser")
    try:
        for _ in range(150):
            if marker.exists() and marker.read_text().strip():
                break
            time.sleep(0.2)
        paths = marker.read_text().split()
        assert len(paths) == 2, paths
        for path in paths:
            own = c.run(["runuser", "-u", "rmuser", "--", "cat", path], check=False)
            other = c.run(["runuser", "-u", "rmother", "--", "cat", path], check=False)
            assert own.returncode == 0 and own.stdout, own.stderr
            assert other.returncode != 0 and "Permission denied" in other.stderr
    finally:
        c.run(["scancel", job_id], check=False)
        c.wait(job_id)


def test_unprivileged_users_fault_falls_back_with_a_report(slurm_cluster):
    c = slurm_cluster
    job = c.wait(c.submit(REPORT_JOB, "-N2", "--ntasks-per-node=2", "--comm-profile=nosuch",
                          user="rmother"))
    assert_fallback(c, job, "not found in the profile stores")
