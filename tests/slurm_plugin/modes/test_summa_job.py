"""``--comm-profile=summa-fpm[:FILE] --rankmap=summa``: the request, the worker's SUMMA
path (slurm_plugin.modes.summa_job), the files and report it writes, the TaskProlog's
RANKMAP_ARRANGEMENT, every fallback, and the SPANK plugin's lists.

Costs are checked against a brute-force count over the matrix's rows and columns
from the files the job gets (arrangement + rankfile), not against the library's own
band computation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tracemalloc
import types
from pathlib import Path

import numpy as np
import pytest

from mapper.io.summa_files import SummaFileError, parse_speeds, read_arrangement
from slurm_plugin.common.job_conventions import EXPORTS, FILE_NAMES, RANKMAP_KEYWORDS, SUMMA_MODE
from slurm_plugin.lifecycle import prolog
from slurm_plugin.lifecycle.task_prolog import exports
from slurm_plugin.machine.distribution import parse_distribution
from slurm_plugin.machine.layout import build_layout
from slurm_plugin.modes.summa_job import (
    DEFAULT_SIZE,
    SummaInput,
    SummaJobError,
    SummaSpec,
    grouping_level,
    load_summa_input,
    parse_summa_spec,
    plan_summa,
    read_text_file,
    speeds_path,
)
from slurm_plugin.site.config import parse_config
from slurm_plugin.site.request import decide
from slurm_plugin.slurm.allocation import Allocation
from slurm_plugin.slurm.topology import NodeShape, parse_topology_conf
from tests.helpers.fake_pyslurm import fake_pyslurm
from tests.helpers.paths import REPO
from tests.helpers.spank_harness import needs_cc, spank_checker
from tests.helpers.worker_harness import compute_into, in_process_worker, job_request

ROOT = REPO
SPANK_C = ROOT / "slurm_plugin/spank/rankmap_spank.c"
TWO_SWITCHES = ("SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[3-4]\n"
                "SwitchName=top Switches=s[1-2]\n")


def layout_of(nodes: int, tasks: int, topology: str | None = None, sockets: int = 2,
              cores: int = 2):
    names = tuple(f"n{i + 1}" for i in range(nodes))
    tree = parse_topology_conf(topology) if topology else None
    return build_layout(Allocation("7", names, (tasks,) * nodes), NodeShape(sockets, cores, 1),
                        tree, [1, 10, 100, 1000])


# -- brute force from the job's files ------------------------------------------------------

def rankfile_hosts(text: str) -> list[str]:
    rows = re.findall(r"^rank (\d+)=(\S+) slot=", text, re.M)
    assert [int(r) for r, _ in rows] == list(range(len(rows)))
    return [h for _, h in rows]


def owner_grid(arrangement_text: str, tmp_path: Path) -> np.ndarray:
    """N x N array: the rank owning each matrix element; every element exactly once."""
    path = tmp_path / "arr"
    path.write_text(arrangement_text)
    lay = read_arrangement(path)
    grid = np.full((lay.size, lay.size), -1)
    count = np.zeros((lay.size, lay.size), dtype=int)
    for r in range(lay.n):
        ys = slice(lay.row_offset[r], lay.row_offset[r] + lay.height[r])
        xs = slice(lay.col_offset[r], lay.col_offset[r] + lay.width[r])
        grid[ys, xs] = r
        count[ys, xs] += 1
    assert np.all(count == 1), "the rectangles do not tile the matrix exactly once"
    return grid


def brute_costs(grid: np.ndarray, group: list[str]) -> tuple[float, float]:
    """cost_A: per matrix row, the changes of group between neighbouring rectangles
    along the row (each band of rows counted once per row: h·v); cost_B: per column of
    rectangles, the group changes down it times its width (per matrix column: h·w)."""
    g = np.array(group)
    cost_a = cost_b = 0.0
    for y in range(grid.shape[0]):
        owners = [r for i, r in enumerate(grid[y]) if i == 0 or grid[y, i - 1] != r]
        cost_a += sum(g[a] != g[b] for a, b in zip(owners, owners[1:], strict=False))
    for x in range(grid.shape[1]):
        owners = [r for i, r in enumerate(grid[:, x]) if i == 0 or grid[i - 1, x] != r]
        cost_b += sum(g[a] != g[b] for a, b in zip(owners, owners[1:], strict=False))
    return cost_a, cost_b


# -- the request -------------------------------------------------------------------------

def cfg_with(text: str = ""):
    return parse_config(text, "t.toml")


def spank(profile=None, mode=None):
    env = {}
    if profile is not None:
        env["SPANK_RANKMAP_COMM_PROFILE"] = profile
    if mode is not None:
        env["SPANK_RANKMAP_MODE"] = mode
    return env


@pytest.mark.parametrize("profile, mode, want_profile", [
    ("summa-fpm:/home/u/s.txt", "summa", "summa-fpm:/home/u/s.txt"),
    ("summa-fpm", None, "summa-fpm"),          # the profile alone picks the summa mode
    ("summa-fpm:fast", "auto", "summa-fpm:fast"),
    (None, "summa", "summa-fpm"),              # the mode alone: equal speeds
])
def test_request_for_a_summa_job(profile, mode, want_profile):
    req = decide(cfg_with(), spank(profile, mode), "debug")
    assert (req.profile, req.algorithm, req.refusal) == (want_profile, SUMMA_MODE, None)


def test_summa_mode_does_not_take_a_rules_graph_profile():
    cfg = cfg_with('[[rules]]\npartition = "debug"\nprofile = "stencil3d"\n')
    assert decide(cfg, spank(mode="topdown"), "debug").profile == "stencil3d"
    req = decide(cfg, spank(mode="summa"), "debug")
    assert (req.profile, req.algorithm, req.refusal) == ("summa-fpm", "summa", None)


@pytest.mark.parametrize("profile, mode, why", [
    ("stencil3d", "summa", "--rankmap=summa needs --comm-profile=summa-fpm"),
    ("summa-fpm", "topdown+n10", "use --rankmap=summa"),
])
def test_mismatched_summa_requests_are_refused(profile, mode, why):
    req = decide(cfg_with(), spank(profile, mode), "debug")
    assert req is not None and why in req.refusal


def test_rankmap_off_still_wins():
    assert decide(cfg_with(), spank("summa-fpm", "off"), "debug") is None


# -- spec, speeds file, resolution -------------------------------------------------------------

def test_spec_grammar():
    assert parse_summa_spec("summa-fpm") == SummaSpec(None, DEFAULT_SIZE)
    assert parse_summa_spec("summa-fpm:size=64") == SummaSpec(None, 64)
    assert parse_summa_spec("summa-fpm:/a/b.txt,size=128") == SummaSpec("/a/b.txt", 128)
    assert parse_summa_spec("summa-fpm:fast") == SummaSpec("fast", DEFAULT_SIZE)
    for bad, msg in (("summa-fpm:size=0", "positive integer"), ("summa-fpm:size=x", "size="),
                     ("summa-fpm:a,b", "two speeds files"), ("summa-fpm:n=3", "unknown option"),
                     ("stencil3d", "not a SUMMA profile")):
        with pytest.raises(SummaJobError, match=msg):
            parse_summa_spec(bad)


def test_speeds_errors_name_file_and_line():
    assert parse_speeds("# speeds\n1\n\n2.5  # fast\n", "f").tolist() == [1.0, 2.5]
    with pytest.raises(SummaFileError, match=r"^f:3: expected one number \(the speed of rank "
                                            r"1\), got '2 3'"):
        parse_speeds("1\n# x\n2 3\n", "f")
    with pytest.raises(SummaFileError, match=r"^f:2: speed of rank 1 must be positive"):
        parse_speeds("1\n-1\n", "f")
    with pytest.raises(SummaFileError, match=r"^f:1: .*nan|^f:1: speed of rank 0"):
        parse_speeds("nan\n", "f")
    with pytest.raises(SummaFileError, match="no speeds"):
        parse_speeds("# nothing\n", "f")


def test_user_files_follow_the_rules_of_file_profiles(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("1\n2\n")
    with pytest.raises(SummaJobError, match="allow_user_files"):
        speeds_path(str(f), [], allow_user_files=False)
    assert speeds_path(str(f), [], allow_user_files=True) == f
    for bad in ("rel/s.txt", f"{tmp_path}/../x/s.txt"):
        with pytest.raises(SummaJobError, match="absolute path without '..'"):
            speeds_path(bad, [], allow_user_files=True)


def test_store_names_resolve_to_speeds_files_inside_the_store(tmp_path):
    store, other = tmp_path / "store", tmp_path / "other"
    store.mkdir()
    other.mkdir()
    (store / "fast.speeds").write_text("1\n")
    (other / "secret.txt").write_text("1\n")
    (store / "leak.speeds").symlink_to(other / "secret.txt")
    assert speeds_path("fast", [str(store)], False) == store / "fast.speeds"
    with pytest.raises(SummaJobError, match="leads outside the store"):
        speeds_path("leak", [str(store)], False)
    with pytest.raises(SummaJobError, match="no missing.speeds in the profile stores"):
        speeds_path("missing", [str(store)], False)
    with pytest.raises(SummaJobError, match="store name"):
        speeds_path(".hidden", [str(store)], False)


def test_reading_refuses_fifos_and_large_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SummaJobError, match="not a regular file"):
        read_text_file(fifo, 100)  # returns at once: nothing read from the FIFO
    big = tmp_path / "big"
    big.write_text("1\n" * 100)
    with pytest.raises(SummaJobError, match="larger than the site's limit of 10 bytes"):
        read_text_file(big, 10)
    assert read_text_file(big, 0) == "1\n" * 100
    with pytest.raises(SummaJobError, match="no such file"):
        read_text_file(tmp_path / "none", 10)


def test_load_checks_the_rank_count(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("1\n2\n3\n")
    data = load_summa_input(f"summa-fpm:{f},size=99", 3, [], True)
    assert data.speeds.tolist() == [1, 2, 3] and data.size == 99 and data.source == str(f)
    with pytest.raises(SummaJobError, match="3 speeds but the job has 4 tasks"):
        load_summa_input(f"summa-fpm:{f}", 4, [], True)
    eq = load_summa_input("summa-fpm", 5, [], False)
    assert eq.speeds.tolist() == [1.0] * 5 and eq.size == DEFAULT_SIZE


def test_load_refuses_the_first_speed_beyond_the_tasks_without_reading_on(tmp_path):
    """Issue 28: a 66 MB speeds file (33 million lines, under max_file_bytes) took the
    worker to 3.7 GB and the watchdog: every line was split before the count was
    compared.  The first line too many is refused at once, naming it."""
    f = tmp_path / "s.txt"
    f.write_text("# speeds\n1\n2\n3\n4\n5\n")
    with pytest.raises(SummaFileError, match=rf"^{re.escape(str(f))}:6: more than 4 speeds: "
                                             rf"the job has 4 tasks"):
        load_summa_input(f"summa-fpm:{f}", 4, [], True, 1 << 20)
    f.write_text("1\n" * 5_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(SummaFileError, match=r":5: more than 4 speeds"):
            load_summa_input(f"summa-fpm:{f}", 4, [], True, 64 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"  # the file's bytes and text: 20 MB


# -- grouping level ------------------------------------------------------------------------

def test_level_is_the_lowest_network_level_that_splits_the_job():
    names = lambda lay, i: lay.hierarchy.level_names[i]  # noqa: E731
    two_switches = layout_of(4, 4, TWO_SWITCHES)
    assert names(two_switches, grouping_level(two_switches)) == "leaf switch"
    one_switch = layout_of(2, 4, TWO_SWITCHES)  # n1, n2: both under s1
    assert "leaf switch" in one_switch.hierarchy.level_names
    assert names(one_switch, grouping_level(one_switch)) == "node"
    no_tree = layout_of(2, 4)
    assert names(no_tree, grouping_level(no_tree)) == "node"
    one_node = layout_of(1, 4)
    assert names(one_node, grouping_level(one_node)) == "socket"
    assert names(two_switches, grouping_level(two_switches, "node")) == "node"
    with pytest.raises(SummaJobError, match="no leaf switch level"):
        grouping_level(no_tree, "switch")
    with pytest.raises(SummaJobError, match="expected auto"):
        grouping_level(no_tree, "cabinet")


# -- the plan ------------------------------------------------------------------------------

def test_hand_computed_two_nodes_block_and_cyclic(tmp_path):
    """4 equal ranks, 2 nodes x 2 tasks, N = 4: two columns {0,1} | {2,3} of width 2.
    Block puts 0,1 on n1 and 2,3 on n2: every row crosses once (cost_A = 4), no column
    does (cost_B = 0).  Cyclic puts 0,2 on n1 and 1,3 on n2: rows stay inside a node
    (cost_A = 0), each column changes once (cost_B = 2 + 2 = 4).  The rankfile must be
    that placement: the arrangement was computed for it."""
    lay = layout_of(2, 2, sockets=1)
    data = SummaInput(np.ones(4), 4, "equal speeds")
    for dist, hosts, want in (("block", ["n1", "n1", "n2", "n2"], (4, 0)),
                              ("cyclic", ["n1", "n2", "n1", "n2"], (0, 4))):
        plan = plan_summa(lay, data, job_id="7", profile="summa-fpm:size=4",
                          distribution=parse_distribution(dist))
        assert plan.applied
        assert rankfile_hosts(plan.files["rankfile"]) == hosts
        record = json.loads(plan.report_json)
        arranged = record["summa"]["arranged"]
        assert (arranged["cost_A"], arranged["cost_B"]) == want
        assert record["summa"]["column_widths"] == [2, 2]
        grid = owner_grid(plan.files["arrangement"], tmp_path)
        assert brute_costs(grid, hosts) == want
        # no arrangement can do better here (groups per column are fixed): said so
        assert plan.summary.startswith("SUMMA arrangement written: the partitioner's "
                                       "original layout (nothing cheaper found, norm 4.00)")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_arrangement_tiles_the_matrix_and_the_report_costs_are_the_files_costs(tmp_path,
                                                                              seed):
    """16 heterogeneous ranks on 2 switches x 2 nodes: one arrangement line per rank,
    an exact tiling of N x N, and the report's cost_A/cost_B (original and arranged)
    equal to a brute-force count over the rows and columns with the groups of the
    rankfile's hosts (leaf switches: n1,n2 | n3,n4)."""
    lay = layout_of(4, 4, TWO_SWITCHES)
    speeds = np.random.default_rng(seed).uniform(1, 6, 16)
    plan = plan_summa(lay, SummaInput(speeds, 96, "f"), job_id="7", profile="summa-fpm:/f")
    text = plan.files["arrangement"]
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert body[0] == "16 96" and len(body) == 17
    switch = {"n1": "s1", "n2": "s1", "n3": "s2", "n4": "s2"}
    groups = [switch[h] for h in rankfile_hosts(plan.files["rankfile"])]
    record = json.loads(plan.report_json)
    arranged = brute_costs(owner_grid(text, tmp_path), groups)
    assert arranged == (record["summa"]["arranged"]["cost_A"],
                        record["summa"]["arranged"]["cost_B"])
    from mapper.io.summa_files import format_arrangement
    from mapper.summa.tiling import partition

    original = brute_costs(owner_grid(format_arrangement(partition(speeds, 96)), tmp_path),
                           groups)
    assert original == (record["summa"]["original"]["cost_A"],
                        record["summa"]["original"]["cost_B"])
    assert np.hypot(*arranged) <= np.hypot(*original) + 1e-9
    for key in ("cost_A", "cost_B", "norm"):
        assert key in plan.report_text
    assert f"{record['summa']['arranged']['norm']:.2f}" in plan.report_text
    assert f"{record['summa']['original']['norm']:.2f}" in plan.report_text


def test_heterogeneous_two_switch_layout_gets_cheaper():
    """The slides' situation: two clusters, heterogeneous speeds; the arrangement
    reduces the norm (here by more than 10 %)."""
    lay = layout_of(4, 4, TWO_SWITCHES)
    speeds = np.r_[np.full(8, 1.0), np.full(8, 3.0)][np.random.default_rng(3).permutation(16)]
    plan = plan_summa(lay, SummaInput(speeds, 4096, "f"))
    assert plan.result.reduction > 0.10, plan.report_text
    assert "below the partitioner's original layout" in plan.summary


def test_failures_give_a_report_without_files():
    lay = layout_of(2, 2)
    plan = plan_summa(lay, SummaInput(np.ones(3), 64, "f"))
    assert not plan.applied and plan.files == {} and "3 speeds for 4 tasks" in plan.summary
    plan = plan_summa(lay, SummaInput(np.ones(4), 1, "f"))  # N smaller than the columns
    assert not plan.applied and "matrix size 1" in plan.fallback_reason
    assert "The job runs with Slurm's default placement." in plan.report_text
    plan = plan_summa(lay, None, fallback_reason="refused")
    assert json.loads(plan.report_json)["fallback_reason"] == "refused"


# -- the worker, the TaskProlog and the prolog ----------------------------------------------

@pytest.fixture
def job(tmp_path, monkeypatch):
    """A 16-task job on 4 nodes under 2 switches (pyslurm stand-in), its config
    (output_dir tmp/out, user files allowed) and the worker's environment."""
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm())
    (tmp_path / "topology.conf").write_text(TWO_SWITCHES)
    out = tmp_path / "out"
    (out / "job.42").mkdir(parents=True)
    config = tmp_path / "rankmap.toml"
    config.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                      f'[slurm]\nbackend = "pyslurm"\ntopology = "{tmp_path}/topology.conf"\n'
                      f'[profiles]\nstores = ["{tmp_path}"]\nallow_user_files = true\n')
    speeds = tmp_path / "speeds.txt"
    speeds.write_text("# two kinds of node\n" + "".join(f"{1 + 2 * (r % 3 == 0)}\n"
                                                         for r in range(16)))
    env = {"RANKMAP_CONFIG": str(config), "RANKMAP_JOB_DIR": str(out / "job.42"),
           "SLURM_JOB_ID": "42", "PATH": "/nonexistent"}
    return types.SimpleNamespace(tmp=tmp_path, out=out, dir=out / "job.42", env=env,
                                 request=job_request(f"summa-fpm:{speeds},size=512", "summa"),
                                 speeds=speeds, config=config)


def test_worker_writes_arrangement_rankfile_and_report(job, tmp_path):
    result = compute_into(job.env, job.request)
    assert result["applied"] and result["n"] == 16 and result["reason"] is None
    names = sorted(os.listdir(job.dir))
    assert names == sorted(["arrangement", "rankfile", "hostfile", "machinefile",
                            "slurm_hostfile", "bindings", "hydra_hostfile", "hydra_rankmap",
                            "report.txt",
                            "report.json"])
    arrangement = (job.dir / "arrangement").read_text()
    assert len(read_arrangement(job.dir / "arrangement").height) == 16
    hosts = rankfile_hosts((job.dir / "rankfile").read_text())
    assert hosts == [f"n{1 + r // 4}" for r in range(16)]  # block, written out
    record = json.loads((job.dir / "report.json").read_text())
    assert record["applied"] and record["summa"]["size"] == 512
    assert record["summa"]["speeds"] == str(job.speeds)
    switch = {"n1": "s1", "n2": "s1", "n3": "s2", "n4": "s2"}
    got = brute_costs(owner_grid(arrangement, tmp_path), [switch[h] for h in hosts])
    assert got == (record["summa"]["arranged"]["cost_A"], record["summa"]["arranged"]["cost_B"])
    assert "cost_A" in (job.dir / "report.txt").read_text()
    assert result["objective"] == pytest.approx(record["summa"]["arranged"]["norm"])


def test_task_prolog_exports_the_arrangement(job):
    compute_into(job.env, job.request)
    env = {"SLURM_JOB_ID": "42", "RANKMAP_CONFIG": str(job.config)}
    lines = exports(env)
    assert f"export RANKMAP_ARRANGEMENT={job.dir / 'arrangement'}" in lines
    assert f"export RANKMAP_RANKFILE={job.dir / 'rankfile'}" in lines
    assert any(ln.startswith("print rankmap: SUMMA arrangement") for ln in lines), lines
    assert EXPORTS["arrangement"] == "RANKMAP_ARRANGEMENT"
    assert FILE_NAMES["arrangement"] == "arrangement"


def fallback_of(job, request=None):
    result = compute_into(job.env, request or job.request)
    assert not result["applied"] and result["reason"]
    assert sorted(os.listdir(job.dir)) == ["report.json", "report.txt"]
    record = json.loads((job.dir / "report.json").read_text())
    assert record["applied"] is False and record["fallback_reason"] == result["reason"]
    assert "rankmap was NOT applied" in (job.dir / "report.txt").read_text()
    lines = exports({"SLURM_JOB_ID": "42", "RANKMAP_CONFIG": str(job.config)})
    assert not any("RANKMAP_ARRANGEMENT" in ln or "RANKFILE" in ln for ln in lines), lines
    return result["reason"]


def test_bad_speeds_file_falls_back_naming_file_and_line(job):
    job.speeds.write_text("1\n2\nfast\n")
    assert fallback_of(job) == (f"{job.speeds}:3: expected one number (the speed of rank 2), "
                                f"got 'fast'")


def test_wrong_number_of_speeds_falls_back(job):
    job.speeds.write_text("1\n" * 15)
    assert "15 speeds but the job has 16 tasks" in fallback_of(job)


def test_user_file_without_site_permission_falls_back(job):
    job.config.write_text(job.config.read_text().replace("allow_user_files = true",
                                                         "allow_user_files = false"))
    assert "allow_user_files" in fallback_of(job)


def test_summa_mode_with_a_graph_profile_falls_back(job):
    req = decide(cfg_with(), spank("stencil3d", "summa"), "debug")
    reason = fallback_of(job, prolog.worker_request("42", req))
    assert "--rankmap=summa needs --comm-profile=summa-fpm" in reason


def test_store_speeds_file_by_name(job):
    shutil.copy(job.speeds, job.tmp / "mixed.speeds")
    result = compute_into(job.env, job_request("summa-fpm:mixed", "summa"))
    assert result["applied"]
    record = json.loads((job.dir / "report.json").read_text())
    assert record["summa"]["size"] == DEFAULT_SIZE
    assert record["summa"]["speeds"] == str(job.tmp / "mixed.speeds")


def test_prolog_logs_the_fallback_and_exits_zero(job, monkeypatch, restore_prolog_logging):
    """The whole prolog on the batch host with the worker run in-process: a bad file
    is logged with its reason, the job keeps its placement, main() returns 0."""
    log_file = job.tmp / "rankmap.log"
    job.config.write_text(job.config.read_text().replace('log_file = ""',
                                                         f'log_file = "{log_file}"'))
    job.speeds.write_text("1\n0\n")

    monkeypatch.setattr(prolog, "run_worker", in_process_worker)
    shutil.rmtree(job.dir)
    for key in list(os.environ):
        if key.startswith(("SLURM", "SPANK_")):
            monkeypatch.delenv(key)
    for key, value in {"RANKMAP_CONFIG": str(job.config), "SLURM_JOB_ID": "42",
                       "SLURM_NODELIST": "n[1-4]", "SLURMD_NODENAME": "n1",
                       "SPANK_RANKMAP_COMM_PROFILE": f"summa-fpm:{job.speeds}",
                       "SPANK_RANKMAP_MODE": "summa"}.items():
        monkeypatch.setenv(key, value)
    assert prolog.main() == 0
    assert sorted(os.listdir(job.dir)) == ["report.json", "report.txt"]
    log = log_file.read_text()
    assert f"profile summa-fpm:{job.speeds} not applied: {job.speeds}:2: speed of rank 1 " \
           f"must be positive" in log, log


# -- SPANK -----------------------------------------------------------------------------------

def test_the_c_plugin_knows_the_same_rankmap_keywords():
    listed = re.search(r"keywords\[\] = \{([^}]*)\}", SPANK_C.read_text()).group(1)
    assert tuple(re.findall(r'"([a-z]+)"', listed)) == RANKMAP_KEYWORDS


@needs_cc
def test_the_c_plugin_accepts_summa_and_summa_fpm_files(tmp_path):
    check = spank_checker(tmp_path)
    assert check("choice", ["summa", "auto", "off", "topdown+n10", "SUMMA", "summa+n2"]) == \
        [True, True, True, True, False, False]
    assert check("profile", ["summa-fpm", "summa-fpm:/home/u/s.txt",
                             "summa-fpm:/home/u/s.txt,size=8192", "summa-fpm:fast",
                             "summa-fpm:/a/../etc/shadow", "stencil3d:/etc",
                             "file:/x/y.mtx", "summa-fpmx:/a"]) == \
        [True, True, True, True, False, False, True, False]
