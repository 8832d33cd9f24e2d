"""What Slurm gave the job: nodes in order, task slots per node, cores per task.

The record (:class:`Allocation`) and the parsers that fill it from each source's
text; :mod:`slurm_plugin.slurm.backends` picks the source (backend) and
:func:`~slurm_plugin.slurm.backends.read_allocation` is the one interface over them:

* ``env`` — the prolog's or a job's environment (``SLURM_JOB_NODELIST`` or
  ``SLURM_NODELIST``, ``SLURM_JOB_CPUS_PER_NODE`` such as ``36(x2),24``,
  ``SLURM_TASKS_PER_NODE``, ``SLURM_JOB_NTASKS``).  A slurmd prolog gets neither the
  task count nor tasks per node, so the env backend alone is used only when those are
  present;
* ``scontrol`` — ``scontrol show job -o -d JOBID`` (NumTasks, CPUs/Task, per-node
  CPU_IDs);
* ``squeue`` — ``squeue --json``;
* ``pyslurm`` — when it imports and its version matches the running Slurm (PyPI's
  pyslurm is 25.11 only; older Slurm uses the CLI).

The parsers are pure functions on text, tested on recorded output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ClusterShell.RangeSet import RangeSet, RangeSetException

from mapper.errors import RankmapError

from ..common.hostlist import HostlistError, expand_counts, expand_hostlist


class AllocationError(RankmapError, ValueError):
    """Job data that is missing or inconsistent; the message names the field."""


@dataclass(frozen=True)
class Allocation:
    """A job's allocation, in Slurm's node order."""

    job_id: str | None
    nodes: tuple[str, ...]
    tasks_per_node: tuple[int, ...]
    cpus_per_task: int = 1
    #: the job's ``--threads-per-core`` (``--hint=nomultithread``: 1); None: the nodes'
    threads_per_core: int | None = None
    cpus_per_node: tuple[int, ...] = ()
    cpu_ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    partition: str | None = None
    account: str | None = None
    job_name: str | None = None
    user: str | None = None
    uid: int | None = None
    gid: int | None = None
    #: ``--distribution`` as Slurm spells it (``plane=4``, ``cyclic:block``); None when
    #: the source does not say (a slurmd prolog is not told it)
    distribution: str | None = None
    #: per node, Slurm's indexes of the job's GPUs there (``IDX:`` of ``scontrol show job
    #: -d``); empty when the job has none or the source does not say (env, pyslurm)
    gpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: ``--gpus-per-task`` (TresPerTask ``gres/gpu``); 0: GPUs are not given per task
    gpus_per_task: int = 0

    @property
    def ntasks(self) -> int:
        return sum(self.tasks_per_node)


# -- parsing helpers -------------------------------------------------------------------

def parse_id_ranges(text: str, field: str = "CPU_IDs") -> tuple[int, ...]:
    """``0-3,8,10-11`` → (0, 1, 2, 3, 8, 10, 11), ascending (ClusterShell's RangeSet);
    errors name ``field``, the source's name for the value."""
    if not text.strip():
        return ()
    try:
        return tuple(RangeSet(text).intiter())
    except RangeSetException as exc:
        raise AllocationError(f"{field}: bad CPU id ranges {text!r}: {exc}") from None


def distribute_tasks(ntasks: int, slots: list[int],
                     ntasks_per_node: int | None = None) -> list[int]:
    """Slurm's block layout of ``ntasks`` over nodes with ``slots`` task slots each.

    More tasks than slots happen only to jobs submitted with ``--overcommit``: then, as
    Slurm's ``_task_layout_block`` (src/common/slurm_step_layout.c) does, every slot is
    filled and the rest go one per node in node order, round after round (with
    ``--ntasks-per-node``, that many per node).
    """
    if ntasks_per_node:
        counts = [min(ntasks_per_node, s) for s in slots]
        if sum(counts) < ntasks:  # overcommitted: the per-node count is what Slurm runs
            counts = [ntasks_per_node] * len(slots)
    else:
        counts = list(slots)
        if slots and sum(counts) < ntasks:
            full, extra = divmod(ntasks - sum(counts), len(counts))
            counts = [c + full + (i < extra) for i, c in enumerate(counts)]
    total = 0
    out = []
    for c in counts:
        take = max(0, min(c, ntasks - total))
        out.append(take)
        total += take
    if total < ntasks:
        raise AllocationError(f"{ntasks} tasks do not fit in the node slots {slots}")
    # Slurm gives every allocated node at least one task when it can
    for i, c in enumerate(out):
        if c == 0:
            donor = max(range(len(out)), key=lambda j: out[j])
            if out[donor] > 1:
                out[donor] -= 1
                out[i] = 1
    return out


# -- env backend -----------------------------------------------------------------------

def allocation_from_env(env: Mapping[str, str]) -> Allocation:
    """Allocation from a job or prolog environment (tasks per node must be present)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise AllocationError("environment has no SLURM_JOB_NODELIST or SLURM_NODELIST")
    try:
        nodes = expand_hostlist(nodelist)
        cpus = expand_counts(env["SLURM_JOB_CPUS_PER_NODE"]) \
            if env.get("SLURM_JOB_CPUS_PER_NODE") else []
    except HostlistError as exc:
        raise AllocationError(str(exc)) from None
    cpt = int(env.get("SLURM_CPUS_PER_TASK") or 1)
    tpc = int_or_none(env.get("SLURM_THREADS_PER_CORE"))
    if env.get("SLURM_HINT") == "nomultithread":
        tpc = 1
    if env.get("SLURM_TASKS_PER_NODE"):
        try:
            tasks = expand_counts(env["SLURM_TASKS_PER_NODE"])
        except HostlistError as exc:
            raise AllocationError(f"SLURM_TASKS_PER_NODE: {exc}") from None
    elif env.get("SLURM_JOB_NTASKS") or env.get("SLURM_NTASKS"):
        if not cpus:
            raise AllocationError("SLURM_JOB_CPUS_PER_NODE is needed with SLURM_JOB_NTASKS")
        ntasks = int(env.get("SLURM_JOB_NTASKS") or env["SLURM_NTASKS"])
        tasks = distribute_tasks(ntasks, [c // cpt for c in cpus])
    else:
        raise AllocationError("environment gives no task count (SLURM_TASKS_PER_NODE or "
                              "SLURM_JOB_NTASKS); ask scontrol")
    if len(tasks) != len(nodes) or (cpus and len(cpus) != len(nodes)):
        raise AllocationError(f"{len(nodes)} nodes but {len(tasks)} task counts and "
                              f"{len(cpus)} CPU counts")
    return Allocation(job_id=env.get("SLURM_JOB_ID"), nodes=tuple(nodes),
                      tasks_per_node=tuple(tasks), cpus_per_task=cpt, threads_per_core=tpc,
                      cpus_per_node=tuple(cpus), partition=env.get("SLURM_JOB_PARTITION"),
                      account=env.get("SLURM_JOB_ACCOUNT"), job_name=env.get("SLURM_JOB_NAME"),
                      user=env.get("SLURM_JOB_USER"),
                      uid=int_or_none(env.get("SLURM_JOB_UID")),
                      gid=int_or_none(env.get("SLURM_JOB_GID")),
                      distribution=env_distribution(env))


def env_distribution(env: Mapping[str, str]) -> str | None:
    """``SLURM_DISTRIBUTION`` with the plane size folded in (``plane`` + ``2`` → ``plane=2``)."""
    dist = env.get("SLURM_DISTRIBUTION") or None
    size = env.get("SLURM_DIST_PLANESIZE")
    if dist and dist.startswith("plane") and "=" not in dist.split(":")[0] and size:
        first, _, rest = dist.partition(":")
        dist = f"{first}={size}" + (f":{rest}" if rest else "")
    return dist


def int_or_none(v: str | None) -> int | None:
    try:
        return int(v) if v not in (None, "") else None
    except ValueError:
        return None


# -- scontrol backend ------------------------------------------------------------------

_TOKEN = re.compile(r"(\S+?)=(\S*)")
#: one GPU entry of a node's GRES: gpu[:TYPE]:COUNT(IDX:RANGES) (other gres are skipped)
_GPU_IDX = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:\d+\(IDX:([^)]*)\)")
#: the GPU count of a TresPerTask (gres:gpu:1 in 22.05; gres/gpu=1, gres/gpu:a100=1 later)
_GPUS_PER_TASK = re.compile(r"gres[:/]gpu(?::[^:=,]+)?[:=](\d+)")


def parse_gpu_indexes(text: str, field: str = "GRES") -> tuple[int, ...]:
    """Slurm's indexes of the GPUs in one node's GRES text (``gpu:a100:2(IDX:0,2)``,
    several types joined), ascending; () when it names none."""
    ids: set[int] = set()
    for ranges in _GPU_IDX.findall(text):
        if ranges.strip() and ranges != "N/A":
            ids.update(parse_id_ranges(ranges, field))
    return tuple(sorted(ids))


def parse_gpus_per_task(text: str | None) -> int:
    """The GPUs per task of a TresPerTask text; 0 when it names none."""
    m = _GPUS_PER_TASK.search(text or "")
    return int(m.group(1)) if m else 0


def parse_scontrol_job(text: str) -> Allocation:
    """Parse ``scontrol show job -o -d JOBID`` (one line; ``Nodes= CPU_IDs=`` repeat)."""
    line = next((ln for ln in text.splitlines() if "JobId=" in ln), None)
    if line is None:
        raise AllocationError("scontrol output has no JobId= line")
    fields: dict[str, str] = {}
    cpu_ids: dict[str, tuple[int, ...]] = {}
    gpus: dict[str, tuple[int, ...]] = {}
    pending_nodes: list[str] | None = None
    group: list[str] = []  # the nodes of the last Nodes= group: its GRES= follows CPU_IDs=
    for key, value in _TOKEN.findall(line):
        if key == "Nodes":
            pending_nodes = group = expand_hostlist(value)
        elif key == "CPU_IDs" and pending_nodes is not None:
            ids = parse_id_ranges(value)
            for node in pending_nodes:
                cpu_ids[node] = ids
            pending_nodes = None
        elif key == "GRES" and group:
            ids = parse_gpu_indexes(value)
            for node in group:
                if ids:
                    gpus[node] = ids
            group = []
        else:
            fields.setdefault(key, "" if value == "(null)" else value)
    try:
        nodes = expand_hostlist(fields["NodeList"])
        ntasks = int(fields["NumTasks"])
    except KeyError as exc:
        raise AllocationError(f"scontrol output has no {exc.args[0]}= field") from None
    except (ValueError, HostlistError) as exc:
        raise AllocationError(f"scontrol output: {exc}") from None
    cpt = int(fields.get("CPUs/Task", "1") or 1)
    threads = fields.get("ReqB:S:C:T", "").split(":")[-1]
    tpc = int(threads) if threads.isdigit() and int(threads) > 0 else None
    ntpn = fields.get("NtasksPerN:B:S:C", "0:").split(":")[0]
    per_node = int(ntpn) if ntpn.isdigit() and int(ntpn) > 0 else None
    if cpu_ids and all(n in cpu_ids for n in nodes):
        cpus = [len(cpu_ids[n]) for n in nodes]
    else:
        cpus = []
    slots = [c // cpt for c in cpus] if cpus else [ntasks] * len(nodes)
    tasks = distribute_tasks(ntasks, slots, per_node)
    user, uid = _name_and_id(fields.get("UserId", ""))
    _, gid = _name_and_id(fields.get("GroupId", ""))
    return Allocation(job_id=fields.get("JobId"), nodes=tuple(nodes),
                      tasks_per_node=tuple(tasks), cpus_per_task=cpt, threads_per_core=tpc,
                      cpus_per_node=tuple(cpus), cpu_ids=cpu_ids,
                      partition=fields.get("Partition"),
                      account=fields.get("Account") or None, job_name=fields.get("JobName"),
                      user=user, uid=uid, gid=gid, gpus=gpus,
                      gpus_per_task=parse_gpus_per_task(fields.get("TresPerTask")))


def _name_and_id(text: str) -> tuple[str | None, int | None]:
    m = re.match(r"^([^()]*)\((\d+)\)$", text)
    return (m.group(1), int(m.group(2))) if m else (text or None, None)


# -- squeue --json backend -------------------------------------------------------------

def _number(v) -> int | None:
    """squeue --json numbers are plain in 22.05, {"set":, "number":} in later releases."""
    if isinstance(v, dict):
        return v.get("number") if v.get("set", True) else None
    return v


def parse_squeue_json(text: str, job_id: str) -> Allocation:
    """Parse ``squeue --json`` output for one job."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AllocationError(f"squeue --json: not JSON: {exc}") from None
    job = next((j for j in data.get("jobs", []) if str(j.get("job_id")) == str(job_id)), None)
    if job is None:
        raise AllocationError(f"squeue --json lists no job {job_id}")
    nodes = expand_hostlist(job.get("nodes", ""))
    cpt = _number(job.get("cpus_per_task")) or 1
    ntasks = _number(job.get("tasks")) or _number(job.get("node_count")) or len(nodes)
    cpu_ids: dict[str, tuple[int, ...]] = {}
    cpus: list[int] = []
    alloc = (job.get("job_resources") or {}).get("allocated_nodes")
    if isinstance(alloc, dict):
        alloc = list(alloc.values())
    if isinstance(alloc, list):
        by_name = {a.get("nodename"): a for a in alloc}
        cpus = [_allocated_cpus(by_name.get(n, {})) for n in nodes]
    per_node = _number(job.get("tasks_per_node"))
    slots = [c // cpt for c in cpus] if cpus and all(cpus) else [ntasks] * len(nodes)
    tasks = distribute_tasks(int(ntasks), slots, per_node or None)
    tpc = _number(job.get("threads_per_core"))
    details = job.get("gres_detail") or []
    gpus = {n: ids for n, d in zip(nodes, details, strict=True) if isinstance(d, str)
            and (ids := parse_gpu_indexes(d, "gres_detail"))} \
        if len(details) == len(nodes) else {}
    return Allocation(job_id=str(job_id), nodes=tuple(nodes), tasks_per_node=tuple(tasks),
                      cpus_per_task=int(cpt),
                      threads_per_core=int(tpc) if tpc and 0 < tpc < 0xFFFF else None,
                      cpus_per_node=tuple(cpus) if cpus and all(cpus) else (),
                      cpu_ids=cpu_ids, partition=job.get("partition"),
                      account=job.get("account") or None, job_name=job.get("name"),
                      user=job.get("user_name"), uid=_number(job.get("user_id")),
                      gid=_number(job.get("group_id")), gpus=gpus,
                      gpus_per_task=parse_gpus_per_task(job.get("tres_per_task")))


def _allocated_cpus(entry: dict) -> int:
    """CPUs of one allocated node: ``cpus`` where given, else the allocated cores.

    Slurm 22.05 lists ``sockets: {"0": {"cores": {"2": "allocated", ...}}}``.
    """
    if entry.get("cpus"):
        return int(entry["cpus"])
    sockets = entry.get("sockets") or {}
    return sum(1 for sock in sockets.values() for state in (sock.get("cores") or {}).values()
               if "allocated" in str(state))
