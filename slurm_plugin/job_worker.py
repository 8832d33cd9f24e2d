"""The per-job computation, run by the prolog in a child process as the job's user.

Reads the allocation and topology from Slurm, loads the profile, computes and writes
the launcher files and the report into the job directory, and prints one JSON status
line.  Every failure becomes a fallback report; the exit status is 0 unless even that
could not be written.  The prolog enforces the time budget from outside by killing
this process.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from mapper.errors import RankmapError

from .allocation import read_allocation
from .config import load_config
from .distribution import parse_distribution
from .files import write_files
from .hostlist import expand_hostlist
from .hwloc import CoreGroups, parse_hwloc_xml
from .layout import Layout, build_layout
from .limits import apply_worker_limits
from .plan import make_plan
from .profiles.store import bundled_store, resolve_profile
from .slurmcli import run_slurm
from .topology import SwitchTree, parse_scontrol_nodes
from .topology_yaml import read_topology_source

#: input and environment problems (a fallback report with the reason); anything else is a
#: bug: still a fallback, with the traceback in the log
USER_FACING = (RankmapError, OSError)


def read_topology(source: str, timeout: float, env: dict[str, str]) -> SwitchTree | None:
    """The switch tree from the configured source; None when there is none.

    Slurm 25.05+ topologies (topology.yaml, per-partition, block) and topology.conf of
    either plugin: :func:`slurm_plugin.topology_yaml.read_topology_source`.
    """
    return read_topology_source(source, timeout, env)


def read_core_groups(files: dict[str, str], nodes: tuple[str, ...]) -> dict[str, CoreGroups]:
    """hwloc cache groups of the job's nodes from the configured XML files."""
    parsed: dict[str, CoreGroups] = {}
    out: dict[str, CoreGroups] = {}
    for hosts, path in files.items():
        members = set(expand_hostlist(hosts)) & set(nodes)
        if not members:
            continue
        if path not in parsed:
            with open(path, encoding="utf-8") as fh:
                parsed[path] = parse_hwloc_xml(fh.read(), path)
        for node in members:
            out.setdefault(node, parsed[path])
    return out


def compute(env: dict[str, str]) -> dict:
    cfg = load_config(env=env)
    job_dir = env["RANKMAP_JOB_DIR"]
    job_id = env.get("SLURM_JOB_ID")
    profile = env["RANKMAP_PROFILE"]
    timeout = cfg.get("slurm", "command_timeout")
    alloc = read_allocation(job_id, env, cfg.get("slurm", "backend"), timeout)
    shapes = parse_scontrol_nodes(run_slurm(["scontrol", "show", "node", "-o",
                                             ",".join(alloc.nodes)], timeout, env))
    tree = read_topology(cfg.get("slurm", "topology"), timeout, env)
    layout = build_layout(alloc, shapes, tree, cfg.get("solver", "level_distances"),
                          read_core_groups(cfg.get("hwloc", "files"), alloc.nodes),
                          cfg.get("hwloc", "cache_distance"))
    graph, reason = None, env.get("RANKMAP_REFUSAL") or None
    if reason is None:
        try:
            graph = resolve_profile(profile, layout.n,
                                    cfg.get("profiles", "stores") + [str(bundled_store())],
                                    cfg.get("profiles", "allow_user_files"),
                                    cfg.get("profiles", "max_file_bytes"))
        except USER_FACING as exc:
            reason = str(exc)
    plan = make_plan(layout, graph, algorithm=env["RANKMAP_ALGORITHM"],
                     time_limit=float(env["RANKMAP_TIME_LIMIT"]), seed=cfg.get("solver", "seed"),
                     files=cfg.get("render", "files"), job_id=job_id, profile=profile,
                     fallback_reason=reason,
                     templates_dir=cfg.get("render", "templates_dir") or None,
                     distribution=parse_distribution(alloc.distribution),
                     distribution_assumed=alloc.distribution is None)
    # launcher files first, the report last: a report saying "applied" implies the files
    write_files(job_dir, plan.files)
    write_files(job_dir, {"report": plan.report_text, "record": plan.report_json})
    result = status(plan.applied, plan.fallback_reason or
                    (plan.summary if plan.kept_default else None), layout,
                    plan.result.objective if plan.result else None,
                    plan.result.seconds if plan.result else None)
    result["notes"] = list(layout.notes)
    result["kept_default"] = plan.kept_default
    return result


def status(applied: bool, reason: str | None, layout: Layout | None = None,
           objective: float | None = None, seconds: float | None = None) -> dict:
    return {"applied": applied, "reason": reason, "n": layout.n if layout else None,
            "objective": objective, "seconds": seconds}


def main() -> int:
    apply_worker_limits()  # RANKMAP_WORKER_MEMORY / _CPU_SECONDS, set by the prolog
    env = dict(os.environ)
    try:
        result = compute(env)
    except USER_FACING as exc:
        result = status(False, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # anything else: still a fallback, with the traceback logged
        result = status(False, f"internal error: {type(exc).__name__}: {exc}")
        result["traceback"] = traceback.format_exc(limit=8)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
