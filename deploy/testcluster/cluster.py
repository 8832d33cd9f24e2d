#!/usr/bin/env python3
"""A real multi-node Slurm on one machine, for rankmap's tests and for trying it out.

    python3 deploy/testcluster/cluster.py up   [--state-dir DIR] [--prolog PATH] ...
    python3 deploy/testcluster/cluster.py down [--state-dir DIR]
    python3 deploy/testcluster/cluster.py status [--state-dir DIR]
    python3 deploy/testcluster/cluster.py up --slurm-archive slurm-25.11.7.tar.gz \
        --topology-file yaml --ctld-port 17817 --slurmd-port 17900 --state-dir DIR

Starts munge (unless it already runs), slurmctld and one ``slurmd -N nX`` per node on
loopback, each in its own UTS namespace so that ``hostname`` prints the node name.
Topology: two leaf switches s1 (n1, n2) and s2 (n3, n4) under a spine
(``--topology tree``, the default), or with names that do not follow the wiring, s1
(n1, n3) and s2 (n2, n4) (``--topology interleaved``); every node has 2 sockets x 4
cores and 4 fake GPUs (gres ``gpu:fake``: device files under the state directory that
are links to /dev/null; GPUs 0-1 are wired to socket 0 and 2-3 to socket 1 on n1 and
n2, the other way round on n3 and n4, in gres.conf).  Everything lives in the state
directory; ``down`` stops only the
processes ``up`` started (their pid files, checked against /proc/PID/exe) and removes
nothing outside the state directory.  Needs root and Debian's munge, slurmctld, slurmd
and slurm-client.  Use ``export SLURM_CONF=DIR/slurm.conf`` to talk to the cluster.

Another Slurm: ``--slurm-prefix DIR`` (an installed Slurm, e.g. from build_slurm.sh) or
``--slurm-archive slurm-X.Y.Z.tar.gz`` (built once into /opt/rankmap-slurm/X.Y.Z by
deploy/testcluster/build_slurm.sh).  Its daemons run in a private mount namespace in
which /usr/local/bin and /usr/local/sbin show the prefix's commands (plus what was
there), so scripts they start that look for Slurm's commands without ``[slurm]
bin_dir`` (it is the first place rankmap's commands are looked up when set; else PATH,
which a slurmd prolog does not have, then /usr/local/bin) find that Slurm's scontrol,
not Debian's; talk to it with ``PATH=PREFIX/bin:$PATH``.  ``--ctld-port`` and
``--slurmd-port`` (first of four) move the ports so that it runs beside the default
cluster.  ``--topology-file yaml`` (25.05+)
writes a topology.yaml instead of topology.conf: ``tree`` (the ``--topology`` wiring,
cluster default), ``blocks`` (blocks b1=n[1-2], b2=n[3-4], block_sizes 2,4; partition
``blocked``) and ``flat`` (partition ``flatp``); ``--topology-file block`` writes a
topology/block topology.conf with the same blocks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

NODES = ["n1", "n2", "n3", "n4"]
SWITCHES = {"tree": {"s1": ["n1", "n2"], "s2": ["n3", "n4"]},
            "interleaved": {"s1": ["n1", "n3"], "s2": ["n2", "n4"]}}
CTLD_PORT = 16817
SLURMD_PORT0 = 16900
DEFAULT_STATE = "/tmp/rankmap-testcluster"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ClusterError(RuntimeError):
    pass


def slurm_conf(state: Path, opts: argparse.Namespace) -> str:
    topo_plugin = {"conf": "topology/tree", "block": "topology/block", "yaml": ""}[
        getattr(opts, "topology_file", "conf")]
    lines = [
        "ClusterName=rankmaptest",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={getattr(opts, 'ctld_port', CTLD_PORT)}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        *([f"TopologyPlugin={topo_plugin}"] if topo_plugin else []),
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        "SchedulerType=sched/backfill",
        "MinJobAge=300",  # finished jobs stay visible while a test waits on others
        "KillWait=5",
        "InactiveLimit=0",
        "MessageTimeout=20",
        f"StateSaveLocation={state}/ctld",
        f"SlurmdSpoolDir={state}/spool/%n",
        f"SlurmctldPidFile={state}/slurmctld.pid",
        f"SlurmdPidFile={state}/slurmd-%n.pid",
        f"SlurmctldLogFile={state}/slurmctld.log",
        f"SlurmdLogFile={state}/slurmd-%n.log",
        f"TmpFS={state}/tmp/%n",
        "PrologFlags=Alloc",
        "GresTypes=gpu",
    ]
    for key, value in (("Prolog", opts.prolog), ("Epilog", opts.epilog),
                       ("TaskProlog", opts.task_prolog),
                       ("TaskEpilog", getattr(opts, "task_epilog", "")),
                       ("PrologSlurmctld", opts.prolog_slurmctld),
                       ("PlugStackConfig", opts.plugstack)):
        if value:
            lines.append(f"{key}={value}")
    if getattr(opts, "job_submit_lua", ""):  # read from beside slurm.conf
        lines.append("JobSubmitPlugins=lua")
    for i, node in enumerate(NODES):
        lines.append(f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 "
                     f"Port={getattr(opts, 'slurmd_port', SLURMD_PORT0) + i} "
                     "Sockets=2 CoresPerSocket=4 ThreadsPerCore=1 "
                     f"CPUs=8 RealMemory=1000 Gres=gpu:fake:{len(GPU_CORES)} "
                     "State=UNKNOWN")
    lines.append("PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP")
    lines.append("PartitionName=mapped Nodes=n[1-4] MaxTime=INFINITE State=UP")
    if getattr(opts, "topology_file", "conf") == "yaml":
        lines.append("PartitionName=blocked Nodes=n[1-4] MaxTime=INFINITE State=UP "
                     "Topology=blocks")
        lines.append("PartitionName=flatp Nodes=n[1-4] MaxTime=INFINITE State=UP "
                     "Topology=flat")
    return "\n".join(lines) + "\n"


def topology_conf(kind: str = "tree") -> str:
    switches = SWITCHES[kind]
    lines = [f"SwitchName={s} Nodes={','.join(ns)}" for s, ns in switches.items()]
    lines.append(f"SwitchName=spine Switches={','.join(switches)}")
    return "\n".join(lines) + "\n"


BLOCKS = {"b1": ["n1", "n2"], "b2": ["n3", "n4"]}


def topology_yaml(kind: str = "tree") -> str:
    """topology.yaml (Slurm 25.05+): tree (cluster default), blocks, flat."""
    lines = ["---", "- topology: tree", "  cluster_default: true", "  tree:",
             "    switches:", "      - switch: spine",
             f"        children: {','.join(SWITCHES[kind])}"]
    for s, ns in SWITCHES[kind].items():
        lines += [f"      - switch: {s}", f"        nodes: {','.join(ns)}"]
    lines += ["- topology: blocks", "  cluster_default: false", "  block:",
              "    block_sizes:", "      - 2", "      - 4", "    blocks:"]
    for b, ns in BLOCKS.items():
        lines += [f"      - block: {b}", f"        nodes: {','.join(ns)}"]
    lines += ["- topology: flat", "  cluster_default: false", "  flat: true"]
    return "\n".join(lines) + "\n"


def block_conf() -> str:
    """topology.conf for topology/block: the same blocks as topology.yaml's."""
    return "".join(f"BlockName={b} Nodes={','.join(ns)}\n" for b, ns in BLOCKS.items()) + \
        "BlockSizes=2,4\n"


#: per fake GPU of a node, the cores gres.conf wires it to (Slurm's core numbers)
GPU_CORES = ["0-3", "0-3", "4-7", "4-7"]
#: nodes on which the wiring is the other way round (GPU 0 near the second socket)
GPU_REVERSED = ("n3", "n4")


def gres_conf(state: Path) -> str:
    """gres.conf of the fake GPUs: one line per node and GPU (AutoDetect=off: there is
    nothing to detect); their files are made by :func:`fake_gpu_files`."""
    lines = ["AutoDetect=off"]
    for node in NODES:
        cores = GPU_CORES[::-1] if node in GPU_REVERSED else GPU_CORES
        lines += [f"NodeName={node} Name=gpu Type=fake File={state}/dev/{node}/nvidia{i} "
                  f"Cores={c}" for i, c in enumerate(cores)]
    return "\n".join(lines) + "\n"


def fake_gpu_files(state: Path) -> None:
    """Slurm accepts a gres File= only when it is a device: links to /dev/null are."""
    for node in NODES:
        folder = state / "dev" / node
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(len(GPU_CORES)):
            link = folder / f"nvidia{i}"
            if not link.is_symlink():
                link.symlink_to("/dev/null")


def slurm_bin(prefix: str) -> tuple[str, str]:
    """slurmctld and slurmd of the prefix, or Debian's on PATH."""
    if prefix:
        ctld, slurmd = f"{prefix}/sbin/slurmctld", f"{prefix}/sbin/slurmd"
        if not (os.access(ctld, os.X_OK) and os.access(slurmd, os.X_OK)):
            raise ClusterError(f"--slurm-prefix {prefix}: no sbin/slurmctld and sbin/slurmd")
        return ctld, slurmd
    ctld = shutil.which("slurmctld", path=PATH)
    slurmd = shutil.which("slurmd", path=PATH)
    if not ctld or not slurmd:
        raise ClusterError("slurmctld/slurmd not installed (deploy/install-debian-packages.sh)")
    return ctld, slurmd


def _overlay_dirs(state: Path, prefix: str) -> list[tuple[Path, str]]:
    """(directory of symlinks, mount point): what /usr/local/{bin,sbin} show the daemons."""
    out = []
    for sub in ("bin", "sbin"):
        d = state / f"usr-local-{sub}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for src in (Path(f"/usr/local/{sub}"), Path(prefix) / "bin", Path(prefix) / "sbin"):
            if src.is_dir():
                for entry in src.iterdir():
                    link = d / entry.name
                    if link.is_symlink():
                        link.unlink()
                    link.symlink_to(entry)
        out.append((d, f"/usr/local/{sub}"))
    return out


def _daemon_cmd(state: Path, prefix: str, command: str, node: str | None = None) -> list[str]:
    """``unshare`` command line for a daemon: own UTS namespace (hostname = node) and,
    with another Slurm, a private mount namespace showing its commands first."""
    flags = ["--uts"] if node else []
    pre = [f"hostname {node}"] if node else []
    if prefix:
        flags.append("--mount")
        pre = [f"mount --bind {d} {m}" for d, m in _overlay_dirs(state, prefix)] + pre
    if not flags:
        return ["sh", "-c", f"exec {command}"]
    return ["unshare", *flags, "sh", "-c", " && ".join(pre + [f"exec {command}"])]


def _record(state: Path, name: str, pidfile: Path, exe: str) -> None:
    started = _started(state)
    started[name] = {"pidfile": str(pidfile), "exe": os.path.realpath(exe)}
    (state / "started.json").write_text(json.dumps(started, indent=1))


def _started(state: Path) -> dict:
    try:
        return json.loads((state / "started.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _pid_alive(pidfile: str, exe: str) -> int | None:
    try:
        pid = int(Path(pidfile).read_text().split()[0])
        if os.path.realpath(f"/proc/{pid}/exe") == exe:
            return pid
    except (OSError, ValueError, IndexError):
        pass
    return None


def _env(state: Path) -> dict[str, str]:
    prefix = _prefix_of(state)
    path = f"{prefix}/bin:{prefix}/sbin:{PATH}" if prefix else PATH
    return {"PATH": path, "SLURM_CONF": str(state / "slurm.conf"), "LC_ALL": "C"}


def _prefix_of(state: Path) -> str:
    try:
        return (state / "slurm-prefix").read_text().strip()
    except OSError:
        return ""


def _run(args: list[str], state: Path, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=_env(state), capture_output=True, text=True, check=check,
                          timeout=60)


def start_munge(state: Path) -> None:
    if Path("/run/munge/munge.socket.2").exists():
        probe = subprocess.run(["munge", "-n"], capture_output=True, env={"PATH": PATH})
        if probe.returncode == 0:
            return
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    if not Path("/etc/munge/munge.key").exists():
        subprocess.run(["mungekey", "--create"], check=True, env={"PATH": PATH})
        shutil.chown("/etc/munge/munge.key", "munge", "munge")
    subprocess.run(["runuser", "-u", "munge", "--", "munged", "--force"], check=True,
                   env={"PATH": PATH})
    munged = shutil.which("munged", path=PATH) or "/usr/sbin/munged"
    _record(state, "munged", Path("/run/munge/munged.pid"), munged)


def up(opts: argparse.Namespace) -> None:
    state = Path(opts.state_dir)
    if _started(state):
        down(opts)
    state.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(state / "ctld", ignore_errors=True)  # drained states survive restarts
    shutil.rmtree(state / "spool", ignore_errors=True)
    for sub in ["ctld", "spool", "tmp"] + [f"spool/{n}" for n in NODES] + \
               [f"tmp/{n}" for n in NODES]:
        (state / sub).mkdir(parents=True, exist_ok=True)
    prefix = opts.slurm_prefix
    if opts.slurm_archive:
        prefix = build(opts.slurm_archive)
    (state / "slurm-prefix").write_text(prefix + "\n")
    (state / "slurm.conf").write_text(slurm_conf(state, opts))
    fake_gpu_files(state)
    (state / "gres.conf").write_text(gres_conf(state))
    (state / "job_submit.lua").unlink(missing_ok=True)
    if getattr(opts, "job_submit_lua", ""):
        shutil.copyfile(opts.job_submit_lua, state / "job_submit.lua")
    for name in ("topology.conf", "topology.yaml"):
        (state / name).unlink(missing_ok=True)
    if opts.topology_file == "yaml":
        (state / "topology.yaml").write_text(topology_yaml(opts.topology))
    elif opts.topology_file == "block":
        (state / "topology.conf").write_text(block_conf())
    else:
        (state / "topology.conf").write_text(topology_conf(opts.topology))
    start_munge(state)
    ctld, slurmd = slurm_bin(prefix)
    ignore_state = " -i" if prefix else ""
    subprocess.run(_daemon_cmd(state, prefix, f"{ctld}{ignore_state} -f {state}/slurm.conf"),
                   env=_env(state), check=True, timeout=30, capture_output=True, text=True)
    _record(state, "slurmctld", state / "slurmctld.pid", ctld)
    _wait(lambda: _run(["scontrol", "ping"], state, check=False).stdout.count("UP") > 0,
          15, "slurmctld did not answer scontrol ping", state)
    for node in NODES:
        subprocess.run(_daemon_cmd(state, prefix, f"{slurmd} -f {state}/slurm.conf -N {node}",
                                   node), env=_env(state), check=True, timeout=30)
        _record(state, f"slurmd-{node}", state / f"slurmd-{node}.pid", slurmd)
    _wait(lambda: _idle(state), 30, "nodes did not become idle", state)


def build(archive: str) -> str:
    """build_slurm.sh ARCHIVE (cached per version); the installed prefix."""
    script = Path(__file__).with_name("build_slurm.sh")
    proc = subprocess.run(["bash", str(script), archive], capture_output=True, text=True,
                          env={"PATH": PATH, "HOME": os.environ.get("HOME", "/root")})
    if proc.returncode:
        raise ClusterError(f"build_slurm.sh {archive} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def _idle(state: Path) -> bool:
    out = _run(["sinfo", "-h", "-N", "-o", "%N %t"], state, check=False).stdout.split()
    states = dict(zip(out[::2], out[1::2], strict=False))
    return all(states.get(n) in ("idle", "mix", "alloc") for n in NODES)


def _wait(cond, seconds: float, what: str, state: Path) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.3)
    tails = []
    for log in sorted(state.glob("*.log")):
        tails.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace")
                                                     .splitlines()[-15:]))
    raise ClusterError(f"{what} within {seconds:g} s\n" + "\n".join(tails))


def down(opts: argparse.Namespace) -> None:
    state = Path(opts.state_dir)
    started = _started(state)
    order = [k for k in started if k.startswith("slurmd-")] + \
            [k for k in started if k == "slurmctld"] + [k for k in started if k == "munged"]
    for name in order:
        info = started[name]
        pid = _pid_alive(info["pidfile"], info["exe"])
        if pid:
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                if not _pid_alive(info["pidfile"], info["exe"]):
                    break
                time.sleep(0.1)
    (state / "started.json").unlink(missing_ok=True)


def status(opts: argparse.Namespace) -> None:
    state = Path(opts.state_dir)
    for name, info in _started(state).items():
        pid = _pid_alive(info["pidfile"], info["exe"])
        print(f"{name}: {'running, pid ' + str(pid) if pid else 'not running'}")
    print(_run(["sinfo"], state, check=False).stdout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--state-dir", default=os.environ.get("RANKMAP_TESTCLUSTER", DEFAULT_STATE))
    for opt in ("prolog", "epilog", "task-prolog", "task-epilog", "prolog-slurmctld",
                "plugstack"):
        p.add_argument(f"--{opt}", default="", metavar="PATH")
    p.add_argument("--job-submit-lua", default="", metavar="PATH",
                   help="a job_submit.lua (copied beside slurm.conf; JobSubmitPlugins=lua)")
    p.add_argument("--topology", choices=sorted(SWITCHES), default="tree",
                   help="switch wiring (default tree: s1=n[1-2], s2=n[3-4])")
    p.add_argument("--topology-file", choices=["conf", "yaml", "block"], default="conf",
                   help="topology.conf (tree, default), topology.yaml (25.05+: tree, "
                        "blocks, flat) or a topology/block topology.conf")
    p.add_argument("--slurm-prefix", default=os.environ.get("RANKMAP_SLURM_PREFIX", ""),
                   metavar="DIR", help="an installed Slurm to run instead of Debian's")
    p.add_argument("--slurm-archive", default="", metavar="TAR",
                   help="build this Slurm source archive once (build_slurm.sh) and run it")
    p.add_argument("--ctld-port", type=int, default=int(os.environ.get(
        "RANKMAP_CTLD_PORT", CTLD_PORT)), help=f"slurmctld port (default {CTLD_PORT})")
    p.add_argument("--slurmd-port", type=int, default=int(os.environ.get(
        "RANKMAP_SLURMD_PORT", SLURMD_PORT0)),
                   help=f"first of the four slurmd ports (default {SLURMD_PORT0})")
    opts = p.parse_args(argv)
    if os.geteuid() != 0:
        print("cluster.py: must run as root", file=sys.stderr)
        return 2
    try:
        {"up": up, "down": down, "status": status}[opts.action](opts)
    except (ClusterError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        print(f"cluster.py: {exc}\n{detail}", file=sys.stderr)
        return 1
    if opts.action == "up":
        prefix = _prefix_of(Path(opts.state_dir))
        print(f"cluster up: export SLURM_CONF={opts.state_dir}/slurm.conf"
              + (f" PATH={prefix}/bin:$PATH" if prefix else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
