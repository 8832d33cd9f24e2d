"""End-to-end on current Slurm releases built from source (issue 15).

Opt-in: runs only with ``RANKMAP_CURRENT_SLURM=1`` (as root), and per release only when
its archive is found: ``RANKMAP_SLURM_25_11_ARCHIVE`` / ``RANKMAP_SLURM_26_05_ARCHIVE``,
else ``../shared/vendor/slurm-25.11.7.tar.gz`` / ``slurm-26.05.3.tar.gz`` next to the
project.  Each release is built once (deploy/testcluster/build_slurm.sh, cached in
/opt/rankmap-slurm/VERSION) and brought up with a topology.yaml (tree as cluster
default, partition ``blocked`` on a block topology) on its own ports and state
directory, so it runs beside the Debian 22.05 cluster of tests/e2e/conftest.py.

What is checked, per release: the topology rankmap reads for a real job in the tree
and in the block partition (through ``scontrol show partition``/``show topology NAME``),
and on 25.11 that the pyslurm backend (PyPI pyslurm 25.11.2, built by
deploy/testcluster/build_pyslurm.sh) and the CLI backend give the same Layout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT.parent / "shared" / "vendor"
RELEASES = {"25.11": ("25.11.7", 18817, 18900), "26.05": ("26.05.3", 19817, 19900)}

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(os.environ.get("RANKMAP_CURRENT_SLURM") != "1",
                                 reason="opt-in: RANKMAP_CURRENT_SLURM=1"),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]

COMPARE = r"""
import json, os, sys
from slurm_plugin.allocation import read_allocation
from slurm_plugin.layout import build_layout
from slurm_plugin.topology_yaml import read_topology_source
from slurm_plugin import pyslurm_backend
job, backend = sys.argv[1], sys.argv[2]
env = dict(os.environ, SLURM_JOB_PARTITION=sys.argv[3])
alloc = read_allocation(job, env, backend)
if backend == "pyslurm":
    shapes = pyslurm_backend.node_shapes(alloc.nodes, env)
else:
    from slurm_plugin.slurmcli import run_slurm
    from slurm_plugin.topology import parse_scontrol_nodes
    shapes = parse_scontrol_nodes(run_slurm(["scontrol", "show", "node", "-o",
                                             ",".join(alloc.nodes)], 10, env))
tree = read_topology_source("auto", 10, env)
layout = build_layout(alloc, shapes, tree, [1, 10, 100, 1000])
print(json.dumps({"slots": [[s.host, s.socket, list(s.cores)] for s in layout.slots],
                  "levels": list(layout.hierarchy.level_names),
                  "bounds": [list(map(int, b)) for b in layout.hierarchy.bounds],
                  "tree": {k: list(v) for k, v in tree.nodes.items()},
                  "alloc": [alloc.nodes, alloc.tasks_per_node, alloc.partition]}))
"""


def _archive(release: str, version: str) -> Path | None:
    env = os.environ.get(f"RANKMAP_SLURM_{release.replace('.', '_')}_ARCHIVE")
    path = Path(env) if env else VENDOR / f"slurm-{version}.tar.gz"
    return path if path.exists() else None


def _run(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="module", params=sorted(RELEASES))
def current(request, tmp_path_factory):
    release = request.param
    version, ctld, slurmd = RELEASES[release]
    archive = _archive(release, version)
    if archive is None:
        pytest.skip(f"no Slurm {version} archive")
    built = _run(["bash", str(ROOT / "deploy/testcluster/build_slurm.sh"), str(archive)])
    assert built.returncode == 0, built.stderr[-2000:]
    prefix = built.stdout.strip().splitlines()[-1]
    state = Path(f"/tmp/rankmap-e2e-{version}")
    up = _run([sys.executable, str(ROOT / "deploy/testcluster/cluster.py"), "up",
               "--slurm-prefix", prefix, "--topology-file", "yaml", "--state-dir", str(state),
               "--ctld-port", str(ctld), "--slurmd-port", str(slurmd)])
    assert up.returncode == 0, up.stderr
    env = {"PATH": f"{prefix}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "SLURM_CONF": str(state / "slurm.conf"), "LC_ALL": "C"}
    pypath = ""
    if release == "25.11":
        wheel = _run(["bash", str(ROOT / "deploy/testcluster/build_pyslurm.sh"), prefix])
        assert wheel.returncode == 0, wheel.stderr[-2000:]
        target = state / "pyslurm-site"
        inst = _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                     str(target), wheel.stdout.strip().splitlines()[-1]])
        assert inst.returncode == 0, inst.stderr
        pypath = str(target)
    try:
        yield {"release": release, "prefix": prefix, "env": env, "pypath": pypath,
               "state": state}
    finally:
        _run([sys.executable, str(ROOT / "deploy/testcluster/cluster.py"), "down",
              "--state-dir", str(state)])


def _running_job(c, partition: str) -> str:
    out = _run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=4", "-p", partition,
                "-o", "/dev/null", "--wrap", "sleep 30"], env=c["env"], cwd="/tmp")
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    for _ in range(60):
        state = _run(["scontrol", "show", "job", "-o", job], env=c["env"]).stdout
        if "JobState=RUNNING" in state:
            return job
        time.sleep(0.5)
    pytest.fail(f"job {job} did not start: {state}")


def _layout(c, job: str, backend: str, partition: str) -> dict:
    env = dict(c["env"], PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), c["pypath"]])))
    # rankmap runs Slurm's commands with a fixed PATH (slurmcli.SLURM_PATH): show it this
    # release's commands in /usr/local/{bin,sbin}, as cluster.py does for the daemons
    st = c["state"]
    mounts = (f"mount --bind {st}/usr-local-bin /usr/local/bin && "
              f"mount --bind {st}/usr-local-sbin /usr/local/sbin && exec \"$0\" \"$@\"")
    out = _run(["unshare", "--mount", "sh", "-c", mounts, sys.executable, "-c", COMPARE, job,
                backend, partition], env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("partition, leaves", [
    ("debug", {"s1": ["n1", "n2"], "s2": ["n3", "n4"]}),
    ("blocked", {"b1": ["n1", "n2"], "b2": ["n3", "n4"]}),
])
def test_topology_of_a_real_job(current, partition, leaves):
    """tree from topology.yaml for the default partition, the block topology for
    ``blocked`` (its Topology=), read for a running job through the CLI backend."""
    job = _running_job(current, partition)
    try:
        got = _layout(current, job, "scontrol", partition)
    finally:
        _run(["scancel", job], env=current["env"])
    assert got["tree"] == leaves
    assert got["alloc"][1] == [4, 4] and got["alloc"][2] == partition
    assert len(got["slots"]) == 8


@pytest.mark.parametrize("partition", ["debug", "blocked"])
def test_pyslurm_and_cli_give_the_same_layout(current, partition):
    if current["release"] != "25.11":
        pytest.skip("PyPI has pyslurm only for 25.11")
    job = _running_job(current, partition)
    try:
        by_cli = _layout(current, job, "scontrol", partition)
        by_pyslurm = _layout(current, job, "pyslurm", partition)
    finally:
        _run(["scancel", job], env=current["env"])
    assert by_pyslurm == by_cli
