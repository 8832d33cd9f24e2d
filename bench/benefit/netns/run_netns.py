#!/usr/bin/env python3
"""Does rankmap make real MPI jobs faster?  Open MPI across network namespaces.

Optional, root-only bench (not in CI, not a test).  It builds a small switched network
out of Linux network namespaces on this one machine and runs real applications with
Open MPI over it, once with Slurm's block placement and once with the placement of
``rankmap plan``:

* every node is a network namespace ``rmb-<node>`` (hostname ``<node>`` for the
  processes launched there, through ``rsh_agent.sh``: ``ip netns exec`` + ``unshare
  --uts``), with one veth ``eth0`` and an address in 10.77.0.0/24;
* the switches are Linux bridges in namespace ``rmb-fabric``: one per leaf, a spine
  bridge joining the leaves through one veth uplink per leaf;
* links are shaped with ``tc ... tbf`` on both ends (both directions): host links at
  ``--host-rate``, uplinks at (nodes per leaf x host rate) / ``--oversubscription``.
  This kernel has tbf/htb but no netem: bandwidth is shaped, no delay is added;
* ``mpirun`` runs in namespace ``rmb-head`` (on the spine, unshaped; only Open MPI's
  out-of-band traffic uses it) with ``--mca rmaps seq`` and a machinefile (line i = the
  host of rank i), TCP between nodes, shared memory only within a node.

Two wirings of the same node list ``n0 … n{N-1}``: ``tree`` (leaf j holds consecutive
nodes, where block keeps neighbours together) and ``interleaved`` (node i on leaf
i mod L: Slurm's node order alternates between leaves).  Apps: Debian's ``lammps``
(``lmp`` on the classic LJ-melt input ``in.lj``, written here; ``cube`` = the standard
box on a 2x2x2 grid, ``rod`` = the same input stretched along z with ``-var`` so that
LAMMPS picks a 1x1x8 grid) and, with ``--apps``, Debian's ``hpcc``.  rankmap plans with
every profile available: LAMMPS' generated ``stencil3d:PxxPyxPz,periodic`` and, for
every app, one measured by Open MPI's pml monitoring (one extra run, block placement).

Everything (namespaces, processes inside them) is removed on exit, Ctrl-C or SIGTERM;
a stale setup of a killed run is removed at start.  Example (about 2 minutes; add
``--apps lammps-cube lammps-rod hpcc`` for hpcc, about 4 minutes per hpcc run)::

    sudo python3 bench/benefit/netns/run_netns.py --out /tmp/rankmap-netns

``--check`` builds the interleaved network, checks that every rank runs on the host its
machinefile line names and that traffic between two namespaces crosses the veths, and
tears down; ``--dry-run`` prints the commands without running them (no root needed).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
AGENT = HERE / "rsh_agent.sh"
PREFIX = "rmb-"  # every namespace of this bench, so that stale ones are easy to find
FABRIC = PREFIX + "fabric"
HEAD = PREFIX + "head"
HEAD_HOST = "head"
SUBNET = "10.77.0.0/24"
LOCK = Path("/run/rmb-netns-bench.lock")

# The classic 3d Lennard-Jones melt, bench/in.lj of the LAMMPS distribution, unchanged.
IN_LJ = """\
# 3d Lennard-Jones melt

variable\tx index 1
variable\ty index 1
variable\tz index 1

variable\txx equal 20*$x
variable\tyy equal 20*$y
variable\tzz equal 20*$z

units\t\tlj
atom_style\tatomic

lattice\t\tfcc 0.8442
region\t\tbox block 0 ${xx} 0 ${yy} 0 ${zz}
create_box\t1 box
create_atoms\t1 box
mass\t\t1 1.0

velocity\tall create 1.44 87287 loop geom

pair_style\tlj/cut 2.5
pair_coeff\t1 1 1.0 1.0 2.5

neighbor\t0.3 bin
neigh_modify\tdelay 0 every 20 check no

fix\t\t1 all nve

run\t\t100
"""

# LAMMPS shapes: -var scaling of in.lj and the processor grid LAMMPS picks for 8 ranks
# (checked against its "A by B by C MPI processor grid" line on every run).
LAMMPS_SHAPES = {
    "cube": ({"x": "1", "y": "1", "z": "1"}, (2, 2, 2)),
    "rod": ({"x": "0.5", "y": "0.5", "z": "4"}, (1, 1, 8)),
}

# HPL.dat-style input of hpcc (Debian's examples/_hpccinf.txt with N, P, Q filled in).
HPCCINF = """\
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      \t\tNumber of additional problem sizes for PTRANS
1200 10000 30000        \tvalues of N
0                       \tnumber of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       \tvalues of NB
"""
HPCC_METRICS = ("HPL_time", "PTRANS_GBs", "MPIRandomAccess_time",
                "NaturallyOrderedRingBandwidth_GBytes",
                "RandomlyOrderedRingBandwidth_GBytes", "MPIFFT_Gflops")


class BenchError(Exception):
    """A step of the bench failed; the message says which."""


# --------------------------------------------------------------------------- commands

@dataclass
class Shell:
    """Runs commands, or only prints them (--dry-run)."""

    dry: bool = False
    verbose: bool = False

    def run(self, argv: list[str], check: bool = True, capture: bool = True,
            **kw) -> subprocess.CompletedProcess:
        if self.dry or self.verbose:
            print("+ " + shlex.join(argv), flush=True)
        if self.dry:
            return subprocess.CompletedProcess(argv, 0, "", "")
        p = subprocess.run(argv, text=True, capture_output=capture, **kw)
        if check and p.returncode != 0:
            raise BenchError(f"{shlex.join(argv)} exited {p.returncode}: "
                             f"{(p.stderr or '').strip()[-2000:]}")
        return p


def netns_list() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], text=True, capture_output=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def teardown(sh: Shell) -> None:
    """Kill the processes inside this bench's namespaces and delete the namespaces."""
    if sh.dry:
        print("+ (teardown: kill processes in rmb-* namespaces, ip netns del rmb-*)")
        return
    ours = [ns for ns in netns_list() if ns.startswith(PREFIX)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = set()
        for ns in ours:
            out = subprocess.run(["ip", "netns", "pids", ns], text=True,
                                 capture_output=True).stdout
            pids.update(int(p) for p in out.split())
        pids.discard(os.getpid())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if pids and sig == signal.SIGTERM:
            time.sleep(0.5)
    for ns in ours:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# ----------------------------------------------------------------------- the network

@dataclass
class Network:
    """One wiring of nodes n0 … n{N-1} to leaf switches."""

    name: str
    nodes: list[str]
    leaf_of: dict[str, int]
    leaves: int

    def topology_conf(self) -> str:
        lines = []
        for leaf in range(self.leaves):
            members = ",".join(n for n in self.nodes if self.leaf_of[n] == leaf)
            lines.append(f"SwitchName=leaf{leaf} Nodes={members}")
        lines.append(f"SwitchName=spine Switches=leaf[0-{self.leaves - 1}]")
        return "\n".join(lines) + "\n"


def make_network(name: str, nodes: int, leaves: int) -> Network:
    if nodes % leaves:
        raise BenchError(f"{nodes} nodes do not fill {leaves} leaves evenly")
    per_leaf = nodes // leaves
    names = [f"n{i}" for i in range(nodes)]
    if name == "interleaved":
        leaf_of = {n: i % leaves for i, n in enumerate(names)}
    else:
        leaf_of = {n: i // per_leaf for i, n in enumerate(names)}
    return Network(name, names, leaf_of, leaves)


def tbf(sh: Shell, ns: str, dev: str, rate_mbit: float) -> None:
    # burst: at least one 64 KiB GSO packet and 10 ms at the rate, so tbf itself does
    # not throttle below the rate; latency bounds the queue like a switch buffer.
    burst = max(65536, int(rate_mbit * 1e6 / 8 / 100))
    sh.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
            "rate", f"{rate_mbit:g}mbit", "burst", str(burst), "latency", "50ms"])


def build(sh: Shell, net: Network, host_rate: float | None, uplink_rate: float) -> None:
    """Create the namespaces, bridges, veths and shaping of ``net``."""
    ip = ["ip"]
    for ns in [FABRIC, HEAD] + [PREFIX + n for n in net.nodes]:
        sh.run(ip + ["netns", "add", ns])
        sh.run(ip + ["-n", ns, "link", "set", "lo", "up"])
    for br in ["spine"] + [f"leaf{j}" for j in range(net.leaves)]:
        sh.run(ip + ["-n", FABRIC, "link", "add", br, "type", "bridge"])
        sh.run(ip + ["-n", FABRIC, "link", "set", br, "up"])
    for j in range(net.leaves):
        up, down = f"u{j}", f"d{j}"
        sh.run(ip + ["-n", FABRIC, "link", "add", up, "type", "veth", "peer", "name", down])
        sh.run(ip + ["-n", FABRIC, "link", "set", up, "master", f"leaf{j}", "up"])
        sh.run(ip + ["-n", FABRIC, "link", "set", down, "master", "spine", "up"])
        tbf(sh, FABRIC, up, uplink_rate)    # leaf -> spine
        tbf(sh, FABRIC, down, uplink_rate)  # spine -> leaf
    hosts = [(n, PREFIX + n, f"h{i}", f"leaf{net.leaf_of[n]}", f"10.77.0.{i + 1}")
             for i, n in enumerate(net.nodes)]
    hosts.append((HEAD_HOST, HEAD, "hh", "spine", "10.77.0.254"))
    for node, ns, port, bridge, addr in hosts:
        sh.run(ip + ["-n", FABRIC, "link", "add", port, "type", "veth",
                     "peer", "name", "eth0", "netns", ns])
        sh.run(ip + ["-n", FABRIC, "link", "set", port, "master", bridge, "up"])
        sh.run(ip + ["-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0"])
        sh.run(ip + ["-n", ns, "link", "set", "eth0", "up"])
        if host_rate and node != HEAD_HOST:
            tbf(sh, FABRIC, port, host_rate)  # switch -> node
            tbf(sh, ns, "eth0", host_rate)     # node -> switch


def link_tx_bytes(sh: Shell) -> dict[str, int]:
    """tx bytes of every port in the fabric namespace (u* = leaf->spine uplinks)."""
    if sh.dry:
        return {}
    out = sh.run(["ip", "-n", FABRIC, "-j", "-s", "link", "show"]).stdout
    return {d["ifname"]: d["stats64"]["tx"]["bytes"] for d in json.loads(out)
            if "stats64" in d}


# ------------------------------------------------------------------------ MPI runs

def mpirun_argv(np_: int, machinefile: Path, app: list[str], extra: list[str]) -> list[str]:
    mca = {
        "plm_rsh_agent": str(AGENT),
        "plm_rsh_no_tree_spawn": "1",
        "rmaps": "seq",                   # line i of the machinefile = host of rank i
        "btl": "tcp,self,vader",           # vader only between ranks of one hostname
        "btl_tcp_if_include": SUBNET,
        "oob_tcp_if_include": SUBNET,
        "mpi_yield_when_idle": "1",        # 8 ranks share 2 cores: do not spin
    }
    argv = ["mpirun", "-np", str(np_), "--hostfile", str(machinefile), "--bind-to", "none",
            "-x", "OMP_NUM_THREADS=1"]
    for k, v in mca.items():
        argv += ["--mca", k, v]
    return argv + extra + app


def in_head(argv: list[str]) -> list[str]:
    """Run ``argv`` in the head namespace with hostname ``head``."""
    return ["ip", "netns", "exec", HEAD, "unshare", "--uts", "sh", "-c",
            'hostname "$0" && exec "$@"', HEAD_HOST] + argv


def mpi_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               RMB_PREFIX=PREFIX, OMP_NUM_THREADS="1")
    return env


@dataclass
class RunResult:
    wall: float
    metric: float
    cross_leaf: int
    inter_node: int
    extra: dict = field(default_factory=dict)


def run_mpi(sh: Shell, np_: int, machinefile: Path, app: list[str], cwd: Path,
            extra: list[str] | None = None, timeout: float = 600) -> tuple[str, float, int, int]:
    """Run one job; return (stdout, wall seconds, cross-leaf bytes, inter-node bytes)."""
    argv = in_head(mpirun_argv(np_, machinefile, app, extra or []))
    before = link_tx_bytes(sh)
    t0 = time.monotonic()
    p = sh.run(argv, cwd=cwd, env=mpi_env(), timeout=timeout)
    wall = time.monotonic() - t0
    after = link_tx_bytes(sh)
    delta = {k: after[k] - before.get(k, 0) for k in after}
    cross = sum(v for k, v in delta.items() if re.fullmatch(r"u\d+", k))
    inter = sum(v for k, v in delta.items() if re.fullmatch(r"h\d+", k))
    if not sh.dry:
        (cwd / "stdout.txt").write_text(p.stdout or "")
    return p.stdout or "", wall, cross, inter


# ---------------------------------------------------------------------------- apps

@dataclass
class Profile:
    """One profile rankmap plans with: a generator spec, or a store name (measured)."""

    label: str                 # "generated" or "measured": the placement's name suffix
    spec: str                  # rankmap plan --profile
    store: Path | None = None  # rankmap plan --store
    note: str = ""


@dataclass
class App:
    name: str
    workdir: Path
    argv: list[str]
    profiles: list[Profile] = field(default_factory=list)
    measure: bool = True       # add a profile measured with pml monitoring
    grid: tuple[int, int, int] | None = None

    def prepare_rep(self, cwd: Path) -> None:
        if self.name == "hpcc":
            shutil.copy(self.workdir / "hpccinf.txt", cwd / "hpccinf.txt")

    def parse(self, stdout: str, cwd: Path) -> tuple[float | None, dict]:
        """App-reported time (s; None: use the wall time) and extra metrics of a run."""
        if self.name.startswith("lammps"):
            m = re.search(r"(\d+) by (\d+) by (\d+) MPI processor grid", stdout)
            grid = tuple(int(g) for g in m.groups()) if m else None
            if grid != self.grid:
                raise BenchError(f"{self.name}: LAMMPS used processor grid {grid}, the "
                                 f"profile assumes {self.grid} (see {cwd}/stdout.txt)")
            t = re.search(r"Loop time of ([0-9.eE+-]+) on", stdout)
            if not t:
                raise BenchError(f"{self.name}: no 'Loop time' in {cwd}/stdout.txt")
            return float(t.group(1)), {}
        out = (cwd / "hpccoutf.txt").read_text()
        summary = out.split("Begin of Summary section.")[-1]
        vals = dict(re.findall(r"^(\w+)=(\S+)$", summary, re.M))
        if "HPL_time" not in vals:
            raise BenchError(f"hpcc: no summary in {cwd}/hpccoutf.txt")
        # hpcc runs many kernels: its figure of merit here is the whole run's wall time
        return None, {k: float(vals[k]) for k in HPCC_METRICS if k in vals}


def lammps_app(shape: str, out: Path) -> App:
    scale, grid = LAMMPS_SHAPES[shape]
    wd = out / "apps" / f"lammps-{shape}"
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "in.lj").write_text(IN_LJ)
    argv = ["lmp", "-in", str(wd / "in.lj"), "-log", "none"]
    for k, v in scale.items():
        argv += ["-var", k, v]
    spec = "stencil3d:{}x{}x{},periodic".format(*grid)
    gen = Profile("generated", spec, note="LAMMPS' Cartesian grid, z fastest, equal faces")
    return App(f"lammps-{shape}", wd, argv, profiles=[gen], grid=grid)


def hpcc_app(np_: int, n: int, out: Path) -> App:
    p = max(d for d in range(1, int(np_ ** 0.5) + 1) if np_ % d == 0)
    wd = out / "apps" / "hpcc"
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "hpccinf.txt").write_text(HPCCINF.format(n=n, p=p, q=np_ // p))
    return App("hpcc", wd, ["hpcc"])


def measure_profile(sh: Shell, app: App, np_: int, machinefile: Path, rankmap: str,
                    samples: int = 1) -> None:
    """``samples`` runs with Open MPI's pml monitoring, imported into a store for
    rankmap plan: the first as the profile, the others with ``--add-sample`` (rankmap
    then applies a placement only if it beats block under every run)."""
    store = app.workdir / "store"
    name = f"{app.name}-{np_}"
    for i in range(samples):
        cwd = app.workdir / ("monitoring" if i == 0 else f"monitoring.s{i}")
        shutil.rmtree(cwd, ignore_errors=True)
        cwd.mkdir(parents=True)
        app.prepare_rep(cwd)
        prefix = cwd / "prof"
        _, wall, cross, _ = run_mpi(
            sh, np_, machinefile, app.argv, cwd,
            ["--mca", "pml_monitoring_enable", "2",
             "--mca", "pml_monitoring_enable_output", "3",
             "--mca", "pml_monitoring_filename", str(prefix)])
        if not sh.dry:
            print(f"  monitoring run {i + 1}/{samples}: wall {wall:.1f} s, cross-leaf "
                  f"{cross / 1e6:.1f} MB", flush=True)
        sh.run([rankmap, "profile", "import", str(prefix), "--name", name, "--store",
                str(store)] + (["--add-sample"] if i else []))
    note = "Open MPI pml monitoring of one block run, E+I+C"
    if samples > 1:
        note = f"Open MPI pml monitoring of {samples} block runs (samples), E+I+C"
    app.profiles.append(Profile("measured", name, store, note=note))


def stored_profile(app: App, np_: int, store: Path) -> bool:
    """Use the measured profile ``APP-NP`` of ``store`` (``--profile-store``) if it has
    one; True when it did."""
    name = f"{app.name}-{np_}"
    if not (store / f"{name}.toml").is_file():
        return False
    app.profiles.append(Profile("measured", name, store, note=f"from {store}"))
    return True


# ---------------------------------------------------------------------- placements

def block_machinefile(nodes: list[str], slots: int) -> str:
    return "".join(f"{n}\n" * slots for n in nodes)


def plan(sh: Shell, rankmap: str, net: Network, slots: int, prof: Profile,
         outdir: Path) -> dict:
    """``rankmap plan`` for this wiring and profile; its report.json (+ machinefile)."""
    conf = outdir / "topology.conf"
    conf.write_text(net.topology_conf())
    out = outdir / f"plan-{prof.label}"
    argv = [rankmap, "plan", "--nodes", f"n[0-{len(net.nodes) - 1}]",
            "--tasks-per-node", str(slots),
            "--node-info", f"Sockets=1 CoresPerSocket={slots}",
            "--topology-conf", str(conf), "--profile", prof.spec, "--out", str(out)]
    if prof.store:
        argv += ["--store", str(prof.store)]
    print("+ " + shlex.join(argv), flush=True)
    if sh.dry:  # a measured profile does not exist yet: plan nothing, run block only
        return {"machinefile": None, "command": shlex.join(argv), "algorithm": "",
                "placements": [{"name": "rankmap", "saved_vs_default": ""}]}
    p = subprocess.run(argv, text=True, capture_output=True)
    if p.returncode != 0:
        raise BenchError(f"rankmap plan failed: {p.stderr.strip()}")
    report = json.loads((out / "report.json").read_text())
    mf = out / "machinefile"
    report["machinefile"] = mf.read_text() if report.get("applied") and mf.exists() else None
    report["command"] = shlex.join(argv)
    return report


# ------------------------------------------------------------------------- the bench

def measure_case(sh: Shell, args, net: Network, app: App, rankmap: str) -> list[dict]:
    """Plan with every profile of ``app``, run each distinct placement --reps times."""
    np_ = len(net.nodes) * args.slots
    case_dir = args.out / net.name / app.name
    case_dir.mkdir(parents=True, exist_ok=True)
    block_mf = block_machinefile(net.nodes, args.slots)
    placements = {"block": block_mf}      # name -> machinefile text
    runs_as = {"block": "block"}          # name -> the placement whose runs it shares
    info = {"block": {"note": "Slurm's default", "saved": "", "plan_command": ""}}
    for prof in app.profiles:
        name = f"rankmap ({prof.label})"
        report = plan(sh, rankmap, net, args.slots, prof, case_dir)
        mf = report["machinefile"] or block_mf
        same = next((k for k, v in placements.items() if v == mf), None)
        rm = next((p for p in report["placements"] if p["name"] == "rankmap"), {})
        if not report["machinefile"] and "refused" in report.get("summary", ""):
            note = "kept block (same run as block): " + report["summary"].split(
                "was refused: ", 1)[-1]
        elif not report["machinefile"]:
            note = "kept block: nothing beat it (same run as block)"
        elif same:
            note = f"applied ({report['algorithm']}), same placement as {same}"
        else:
            note = f"applied ({report['algorithm']})"
        info[name] = {"note": note, "plan_command": report["command"],
                      "saved": rm.get("saved_vs_default") or "0%"}
        runs_as[name] = same or name
        if not same:
            placements[name] = mf
    files = {}
    for i, (name, text) in enumerate(placements.items()):
        files[name] = case_dir / f"machinefile.{i}"
        files[name].write_text(text)
    if args.plan_only:
        return [{"network": net.name, "app": app.name, "placement": name,
                 "machinefile": placements[shared].split(),
                 "same_as_block": placements[shared] == block_mf, **info[name]}
                for name, shared in runs_as.items()]
    runs: dict[str, list[RunResult]] = {name: [] for name in placements}
    for rep in range(args.hpcc_reps if app.name == "hpcc" else args.reps):
        for i, name in enumerate(placements):  # alternate, so that load drift hits all
            cwd = case_dir / f"placement{i}" / f"rep{rep}"
            shutil.rmtree(cwd, ignore_errors=True)
            cwd.mkdir(parents=True)
            app.prepare_rep(cwd)
            stdout, wall, cross, inter = run_mpi(sh, np_, files[name], app.argv, cwd)
            if sh.dry:
                continue
            metric, extra = app.parse(stdout, cwd)
            metric = wall if metric is None else metric
            runs[name].append(RunResult(wall, metric, cross, inter, extra))
            print(f"  {net.name} {app.name} {name} rep{rep}: wall {wall:.2f} s, app "
                  f"{metric:.3f} s, cross-leaf {cross / 1e6:.1f} MB, inter-node "
                  f"{inter / 1e6:.1f} MB", flush=True)
    if sh.dry:
        return []
    rows = []
    base = runs["block"]
    for name, shared in runs_as.items():
        rs = runs[shared]
        rows.append({
            "network": net.name, "app": app.name, "placement": name,
            "machinefile": placements[shared].split(),
            "wall": [r.wall for r in rs], "app_time": [r.metric for r in rs],
            "cross_leaf_MB": statistics.median(r.cross_leaf for r in rs) / 1e6,
            "inter_node_MB": statistics.median(r.inter_node for r in rs) / 1e6,
            "extra": [r.extra for r in rs],
            "ratio_min": min(r.metric for r in rs) / min(r.metric for r in base),
            "ratio_median": (statistics.median(r.metric for r in rs)
                             / statistics.median(r.metric for r in base)),
            **info[name],
        })
    return rows


def table(rows: list[dict]) -> str:
    head = ("| wiring | app | placement | J saved vs block | cross-leaf MB | app s min "
            "| app s median | ratio to block (min / median) | note |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        lines.append(
            f"| {r['network']} | {r['app']} | {r['placement']} | {r['saved'] or '-'} | "
            f"{r['cross_leaf_MB']:.1f} | {min(r['app_time']):.3f} | "
            f"{statistics.median(r['app_time']):.3f} | "
            f"{r['ratio_min']:.3f} / {r['ratio_median']:.3f} | {r['note']} |")
    return head + "\n".join(lines) + "\n"


def plan_table(rows: list[dict]) -> str:
    """--plan-only: every case's placements, no times."""
    head = ("| wiring | app | placement | J saved vs block | machinefile (rank 0..) | "
            "note |\n|---|---|---|---|---|---|\n")
    lines = [f"| {r['network']} | {r['app']} | {r['placement']} | {r['saved'] or '-'} | "
             f"{' '.join(r['machinefile'])}{' (= block)' if r['same_as_block'] else ''} | "
             f"{r['note']} |" for r in rows]
    return head + "\n".join(lines) + "\n"


def hpcc_table(rows: list[dict]) -> str:
    rows = [r for r in rows if r["app"] == "hpcc"]
    if not rows:
        return ""
    head = ("| wiring | placement | " + " | ".join(HPCC_METRICS) + " |\n|---|---|"
            + "---|" * len(HPCC_METRICS) + "\n")
    lines = []
    for r in rows:
        med = [statistics.median(e[k] for e in r["extra"]) for k in HPCC_METRICS]
        lines.append(f"| {r['network']} | {r['placement']} | "
                     + " | ".join(f"{v:.4g}" for v in med) + " |")
    return ("median of the repetitions (times in s, bandwidths in GB/s):\n\n"
            + head + "\n".join(lines) + "\n")


def check(sh: Shell, args, rankmap: str) -> None:
    """Build the interleaved network; check hostnames and that TCP crosses the veths."""
    net = make_network("interleaved", args.nodes, args.leaves)
    build(sh, net, args.host_rate, uplink_rate(args))
    d = args.out / "check"
    d.mkdir(parents=True, exist_ok=True)
    mf = d / "machinefile"
    order = list(reversed(net.nodes)) * args.slots  # deliberately not block order
    mf.write_text("".join(f"{n}\n" for n in order))
    stdout, wall, cross, inter = run_mpi(
        sh, len(order), mf, ["sh", "-c", 'echo "rank $OMPI_COMM_WORLD_RANK $(hostname)"'], d)
    if sh.dry:
        return
    got = dict(line.split()[1:3] for line in stdout.splitlines() if line.startswith("rank "))
    want = {str(r): n for r, n in enumerate(order)}
    if got != want:
        raise BenchError(f"ranks ran on {got}, machinefile says {want}")
    print(f"ok: {len(order)} ranks on the hosts of their machinefile lines "
          f"(mpirun + launch took {wall:.2f} s)")
    # two ranks on two nodes of one leaf (n0, n{L}): LAMMPS traffic must cross the veths,
    # i.e. Open MPI did not use shared memory between the namespaces
    pair = [net.nodes[0], net.nodes[args.leaves]]
    mf2 = d / "machinefile.pair"
    mf2.write_text("".join(f"{n}\n" for n in pair))
    app = lammps_app("cube", args.out)
    stdout, wall, cross, inter = run_mpi(sh, 2, mf2, app.argv, d)
    print(f"ok: 2-rank LAMMPS on {pair[0]}, {pair[1]} (one leaf): {inter / 1e6:.1f} MB "
          f"through the host links, {cross / 1e6:.2f} MB through uplinks, wall {wall:.2f} s")
    if inter < 1e6:
        raise BenchError("less than 1 MB crossed the host links: shared memory between "
                         "namespaces?")


def uplink_rate(args) -> float:
    if args.uplink_rate:
        return args.uplink_rate
    return args.host_rate * (args.nodes // args.leaves) / args.oversubscription


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4, help="node namespaces (default 4)")
    ap.add_argument("--slots", type=int, default=2, help="ranks per node (default 2)")
    ap.add_argument("--leaves", type=int, default=2, help="leaf switches (default 2)")
    ap.add_argument("--host-rate", type=float, default=100.0,
                    help="host link rate, Mbit/s (default 100; 0 = unshaped); low enough "
                         "that the shaped links, not the 2 shared cores, bound LAMMPS")
    ap.add_argument("--oversubscription", type=float, default=4.0,
                    help="uplink = nodes per leaf x host rate / this (default 4)")
    ap.add_argument("--uplink-rate", type=float, default=0.0,
                    help="uplink rate, Mbit/s (overrides --oversubscription)")
    ap.add_argument("--wirings", nargs="+", default=["tree", "interleaved"],
                    choices=["tree", "interleaved"])
    ap.add_argument("--apps", nargs="+", default=["lammps-cube", "lammps-rod"],
                    choices=["lammps-cube", "lammps-rod", "hpcc"],
                    help="default: the two LAMMPS cases (about 2 minutes); hpcc adds "
                         "about 4 minutes per run")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per placement")
    ap.add_argument("--hpcc-reps", type=int, default=1,
                    help="repetitions of hpcc (default 1: one hpcc run takes about 4 min "
                         "on the shaped links, its b_eff ring test has fixed counts)")
    ap.add_argument("--hpcc-n", type=int, default=800, help="HPL matrix order (default 800)")
    ap.add_argument("--samples", type=int, default=1,
                    help="monitoring runs per app for its measured profile (default 1); "
                         "runs 2.. are added as samples (rankmap profile import "
                         "--add-sample): a placement must beat block under each")
    ap.add_argument("--profile-store", type=Path, default=None, metavar="DIR",
                    help="take the measured profile APP-NP from this store (e.g. a "
                         "previous run's OUT/apps/APP/store) instead of measuring it")
    ap.add_argument("--plan-only", action="store_true",
                    help="plan every case and write its machinefiles and reports, run "
                         "no timed job (measuring profiles still runs the apps)")
    ap.add_argument("--rankmap", default=None, help="rankmap executable (default: the "
                    "repository's .venv/bin/rankmap, else PATH)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/rankmap-netns"))
    ap.add_argument("--check", action="store_true",
                    help="build the interleaved network, check placement and TCP, tear down")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command")
    args = ap.parse_args(argv)
    if args.samples < 1:
        ap.error("--samples must be at least 1")
    if not args.uplink_rate and not args.host_rate:
        ap.error("unshaped host links need an explicit --uplink-rate")
    if "lammps-cube" in args.apps or "lammps-rod" in args.apps:
        if args.nodes * args.slots != 8:
            ap.error("the LAMMPS shapes are for 8 ranks (--nodes x --slots = 8)")
    return args


def on_signal(signum, _frame) -> None:
    # turn SIGTERM/SIGHUP into an exception so that the finally: teardown runs
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sh = Shell(dry=args.dry_run, verbose=args.verbose)
    if os.geteuid() != 0 and not args.dry_run:
        print("run_netns.py needs root (network namespaces, bridges, tc); it changes "
              "nothing without it. Use --dry-run to see the commands.", file=sys.stderr)
        return 2
    missing = [t for t in ("ip", "tc", "unshare", "mpirun")
               + (("lmp",) if any(a.startswith("lammps") for a in args.apps) else ())
               + (("hpcc",) if "hpcc" in args.apps else ()) if not shutil.which(t)]
    if missing and not args.dry_run:
        print(f"missing: {', '.join(missing)} (apt-get install iproute2 util-linux "
              "openmpi-bin lammps hpcc)", file=sys.stderr)
        return 2
    venv = REPO / ".venv" / "bin" / "rankmap"
    rankmap = args.rankmap or (str(venv) if venv.exists() else shutil.which("rankmap"))
    if not rankmap:
        print("no rankmap executable (--rankmap)", file=sys.stderr)
        return 2
    args.out = args.out.resolve()
    if args.profile_store:
        args.profile_store = args.profile_store.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    lock = None
    if not args.dry_run:
        lock = open(LOCK, "w")  # noqa: SIM115 (held for the whole run)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"another run holds {LOCK}", file=sys.stderr)
            return 2
    try:
        teardown(sh)  # a killed run's namespaces
        if args.check:
            check(sh, args, rankmap)
            return 0
        return bench(sh, args, rankmap)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        teardown(sh)
        if lock:
            lock.close()


def bench(sh: Shell, args, rankmap: str) -> int:
    t0 = time.monotonic()
    np_ = args.nodes * args.slots
    up = uplink_rate(args)
    print(f"{args.nodes} nodes x {args.slots} ranks, {args.leaves} leaves; host links "
          f"{args.host_rate or 'unshaped'} Mbit/s, uplinks {up:g} Mbit/s (tbf, no delay)")
    apps = []
    for name in args.apps:
        apps.append(hpcc_app(np_, args.hpcc_n, args.out) if name == "hpcc"
                    else lammps_app(name.split("-")[1], args.out))
    rows: list[dict] = []
    for wiring in args.wirings:
        net = make_network(wiring, args.nodes, args.leaves)
        teardown(sh)
        build(sh, net, args.host_rate, up)
        for app in apps:
            if app.measure and not any(p.label == "measured" for p in app.profiles):
                # the profile (bytes between ranks) does not depend on the wiring
                mf = args.out / "machinefile.monitoring"
                mf.write_text(block_machinefile(net.nodes, args.slots))
                if args.profile_store and stored_profile(app, np_, args.profile_store):
                    print(f"  {app.name}: measured profile from {args.profile_store}")
                else:
                    print(f"  measuring the {app.name} profile (pml monitoring, "
                          f"{args.samples} run(s))", flush=True)
                    measure_profile(sh, app, np_, mf, rankmap, args.samples)
            rows += measure_case(sh, args, net, app, rankmap)
    if sh.dry:
        return 0
    if args.plan_only:
        text = "plans only (no timed runs)\n\n" + plan_table(rows)
        print(text)
        (args.out / "plans.md").write_text(text)
        (args.out / "plans.json").write_text(json.dumps(rows, indent=1))
        return 0
    text = (f"{args.nodes} nodes x {args.slots} ranks, {args.leaves} leaf switches, host "
            f"links {args.host_rate or 'unshaped'} Mbit/s, uplinks {up:g} Mbit/s; "
            f"{args.reps} repetitions (hpcc {args.hpcc_reps}); app s = LAMMPS 'Loop time', "
            "hpcc: mpirun wall time\n\n"
            + table(rows) + "\n" + hpcc_table(rows))
    print()
    print(text)
    (args.out / "results.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}/results.md and results.json; bench took "
          f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
