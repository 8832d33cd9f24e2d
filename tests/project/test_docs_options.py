"""Every spelling of ``--comm-profile``, ``--rankmap`` and ``--rankmap-time`` that
README.md documents is requested and computed by the prolog's path (issue 29, item 1).

The forms are read from the README itself, not listed here, so a spelling added to the
documentation is tested without touching this file: the option forms in inline code
and on ``sbatch`` lines of code blocks (the options of one code span are one job, e.g.
``--comm-profile=summa-fpm[:FILE][,size=N] --rankmap=summa``), and the values a table
row lists for its option (the generators of ``--comm-profile=NAME``).  ``[...]`` is
optional, ``\\|`` separates alternatives, and the capitalised placeholders (FILE, N,
NAME, ...) get real values of this test's job: a speeds file, a bundled profile, a mesh
entry of a store in tmp_path.  Finding no forms, or a placeholder without a value, fails.

Each concrete job goes the prolog's way without Slurm: the SPANK variables through
``request.decide`` (as ``prolog.handle_job`` calls it), then the request through the
worker's computation in-process against the pyslurm stand-in, as
tests/slurm_plugin/modes/test_summa_job.py does; the report must say the placement was
computed (a mapping may keep Slurm's placement on its merits).  ``--rankmap=off`` must
leave the job alone, and a pair the README calls mismatched must be refused.  The SPANK
plugin's checks (what sbatch runs first) must accept every value.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mapper.io.mesh_file import write_mesh_metis
from slurm_plugin.common.job_conventions import (
    MESH_MODE,
    MESH_PREFIX,
    SPANK_PROFILE,
    SPANK_RANKMAP,
    SPANK_TIME,
    SUMMA_MODE,
)
from slurm_plugin.lifecycle import job_worker
from slurm_plugin.lifecycle.prolog import worker_request
from slurm_plugin.lifecycle.worker_protocol import WorkerRequest
from slurm_plugin.modes.summa_job import DEFAULT_SIZE, SummaJobError, SummaSpec, parse_summa_spec
from slurm_plugin.profiles.generators import GeneratorError, parse_spec
from slurm_plugin.profiles.store import ProfileError, ProfileStore, bundled_store
from slurm_plugin.site.config import load_config
from slurm_plugin.site.request import MappingRequest, decide, is_summa_profile
from tests.helpers.fake_pyslurm import fake_pyslurm
from tests.helpers.paths import REPO
from tests.helpers.spank_harness import needs_cc, spank_checker
from tests.slurm_plugin.modes.test_mesh_job import grid_mesh

ROOT = REPO
#: the README and the pages of docs/ (issue 30 moved the user documentation there)
README = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: SPANK option → the prolog's variable for it
SPANK_VARS = {"--comm-profile": SPANK_PROFILE, "--rankmap": SPANK_RANKMAP,
              "--rankmap-time": SPANK_TIME}
_OPTION = re.compile(r"(--comm-profile|--rankmap-time|--rankmap)=(\S+)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE = re.compile(r"`([^`]+)`")
_CELL = re.compile(r"(?<!\\)\|")
_PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])[A-Z]+(?![a-z0-9])")
#: fake_pyslurm's nodes run 4 tasks each; 16 tasks unless the profile fixes the count
TASKS_PER_NODE, DEFAULT_TASKS = 4, 16


# -- the forms, from the README ------------------------------------------------------------

def documented_jobs(text: str) -> list[tuple[tuple[str, str], ...]]:
    """The README's option forms, one tuple of (option, value) per documented job, in
    order of appearance and without repeats; placeholders and brackets left as written."""
    jobs: list[tuple[tuple[str, str], ...]] = []
    spans = [line for block in _FENCE.findall(text) for line in block.splitlines()
             if line.lstrip().startswith("sbatch")]
    prose = _FENCE.sub("", text)
    spans += _CODE.findall(prose)
    for span in spans:
        job = tuple(_OPTION.findall(span))
        if job:
            jobs.append(job)
    for line in prose.splitlines():  # | `--OPT=...` | meaning with `value`s |
        cells = [c.strip() for c in _CELL.split(line.strip())[1:-1]]
        if len(cells) < 2:
            continue
        head = _OPTION.fullmatch(cells[0].strip("`"))
        if head is None:
            continue
        jobs += [((head.group(1), value),) for value in _CODE.findall(cells[1])
                 if not re.search(r"\s", value)]  # `rankmap profile list` is a command
    jobs = list(dict.fromkeys(jobs))
    seen = {option for job in jobs for option, _ in job}
    # a README the patterns no longer match must fail here, not test nothing
    assert seen == set(SPANK_VARS), (f"README.md: documented forms found for {sorted(seen)}, "
                                     f"expected all of {sorted(SPANK_VARS)}")
    assert len(jobs) >= 10, f"README.md: only {len(jobs)} option forms found: {jobs}"
    return jobs


def expand(value: str) -> list[str]:
    """``a\\|b`` → a, b; ``x[:FILE][,size=N]`` → x, x:FILE, x,size=N, x:FILE,size=N."""
    out = []
    for alternative in value.split("\\|"):
        m = re.search(r"\[([^\[\]]*)\]", alternative)
        if m is None:
            out.append(alternative)
            continue
        for inner in ("", m.group(1)):
            out += expand(alternative[:m.start()] + inner + alternative[m.end():])
    return out


def job_id(job: tuple[tuple[str, str], ...]) -> str:
    return " ".join(f"{option}={value}" for option, value in job)


def mismatched(text: str, job: tuple[tuple[str, str], ...]) -> bool:
    """The README presents this pair as a mismatch the prolog refuses."""
    spelled = r"\s+".join(re.escape(f"{o}={v}") for o, v in job)
    return re.search(r"mismatched pair[^`]{0,40}`" + spelled + "`", text) is not None


README_TEXT = "\n\n".join(path.read_text(encoding="utf-8") for path in README)
JOBS = documented_jobs(README_TEXT)


# -- placeholders and the job ----------------------------------------------------------------

@pytest.fixture
def site(tmp_path, monkeypatch):
    """A profile store in tmp_path with a mesh entry (``plate``) and a speeds file
    (``mixed.speeds``), the same speeds as a user's file, and the placeholder values."""
    store = tmp_path / "store"
    store.mkdir()
    write_mesh_metis(grid_mesh(12, 12, weights=True), store / "plate.graph")
    (store / "plate.toml").write_text('kind = "mesh"\nfile = "plate.graph"\n')
    speeds = tmp_path / "speeds.txt"
    speeds.write_text("# two kinds of node\n" + "".join(f"{1 + 2 * (r % 3 == 0)}\n"
                                                         for r in range(DEFAULT_TASKS)))
    shutil.copy(speeds, store / "mixed.speeds")
    values = {
        "NAME": ["lammps-3d"],          # a bundled profile (README: the example job)
        "MESH_NAME": ["plate"],         # NAME after mesh:, the store's mesh entry
        "FILE": [str(speeds), "mixed"],  # a user's file, a store's NAME.speeds
        "N": ["512"],
        "M": ["rms", "rb", "archaware-elt-sparse"],  # the methods the README spells out
        "E": ["0.05"],
        "ALGORITHM": ["topdown+n10"],
        "SECONDS": ["2"],
        "A": ["A"],                     # npb-mg:class=A: NPB's class letter, as written
    }
    for name in ("lammps-3d", "plate"):  # the values must exist, or the jobs prove nothing
        assert (bundled_store() / f"{name}.toml").is_file() or (store / f"{name}.toml").is_file()
    return tmp_path, store, values


def substitute(value: str, values: dict[str, list[str]]) -> Iterator[str]:
    """Every concrete spelling of ``value`` (one already expanded by :func:`expand`)."""
    names = _PLACEHOLDER.findall(value)
    choices = []
    for m in _PLACEHOLDER.finditer(value):
        key = "MESH_NAME" if m.group() == "NAME" and \
            value[:m.start()].endswith(MESH_PREFIX) else m.group()
        assert key in values, (f"README.md documents {value!r}: no test value for the "
                               f"placeholder {m.group()!r}; add one to the site fixture")
        choices.append(values[key])
    parts = _PLACEHOLDER.split(value)
    for combo in itertools.product(*choices):
        yield "".join(p + (combo[i] if i < len(names) else "") for i, p in enumerate(parts))


def concrete_jobs(job: tuple[tuple[str, str], ...], values: dict[str, list[str]]
                  ) -> list[dict[str, str]]:
    """The SPANK variables of every concrete job ``job`` documents."""
    per_option = [[(option, v) for e in expand(value) for v in substitute(e, values)]
                  for option, value in job]
    return [{SPANK_VARS[o]: v for o, v in combo} for combo in itertools.product(*per_option)]


def with_companion(spank: dict[str, str]) -> dict[str, str]:
    """A documented ``--rankmap`` or ``--rankmap-time`` alone asks for nothing: the job
    also gives a profile (``summa`` needs none, its default is ``summa-fpm``)."""
    if SPANK_PROFILE not in spank and spank.get(SPANK_RANKMAP) not in ("summa", "off"):
        return {**spank, SPANK_PROFILE: "ring"}
    return spank


def tasks_for(profile: str | None) -> int:
    """The task count a profile fixes (a store entry's ``ranks``, a generator's AxBxC),
    else 16: the README's examples are jobs of their own size."""
    if profile is None:
        return DEFAULT_TASKS
    try:
        return ProfileStore([bundled_store()]).find(profile).ranks
    except ProfileError:
        pass
    try:
        dims = parse_spec(profile).dims
    except GeneratorError:
        return DEFAULT_TASKS
    return int(np.prod(dims)) if dims else DEFAULT_TASKS


def run_job(tmp_path: Path, store: Path, spank: dict[str, str], job: int, monkeypatch
            ) -> tuple[MappingRequest | None, dict | None]:
    """The prolog's request for ``spank`` on a job sized for its profile (half the nodes
    under each of two leaf switches), and the report the worker writes for it (None
    when the request leaves the job alone)."""
    tasks = tasks_for(spank.get(SPANK_PROFILE))
    nodes = max(2, -(-tasks // TASKS_PER_NODE))
    assert nodes * TASKS_PER_NODE == tasks, f"{tasks} tasks do not fill {TASKS_PER_NODE}-task nodes"
    monkeypatch.setitem(sys.modules, "pyslurm", fake_pyslurm(nodes))
    half = nodes // 2
    topology = tmp_path / f"topology-{nodes}.conf"
    topology.write_text(f"SwitchName=s1 Nodes=n[1-{half}]\nSwitchName=s2 "
                        f"Nodes=n[{half + 1}-{nodes}]\nSwitchName=top Switches=s[1-2]\n")
    out = tmp_path / "out"
    config = tmp_path / f"rankmap-{nodes}.toml"
    config.write_text(f'[general]\noutput_dir = "{out}"\nlog_file = ""\n'
                      f'[slurm]\nbackend = "pyslurm"\ntopology = "{topology}"\n'
                      f'[profiles]\nstores = ["{store}"]\nallow_user_files = true\n')
    env = {"RANKMAP_CONFIG": str(config), "SLURM_JOB_ID": str(job),
           "SLURM_NODELIST": f"n[1-{nodes}]", "SLURMD_NODENAME": "n1", **spank}
    request = decide(load_config(env=env), env, None)
    if request is None:
        return None, None
    # what prolog.run_worker hands its child; in-process, where the pyslurm stand-in is
    child = {**env, "PATH": "/nonexistent"}
    return request, worker_record(child, worker_request(str(job), request))


def worker_record(child: dict[str, str], request: WorkerRequest) -> dict:
    """The report.json of the worker's computation (the files it sends the prolog)."""
    return json.loads(job_worker.compute(request, child).files["report_json"])


@pytest.mark.parametrize("job", JOBS, ids=[job_id(j) for j in JOBS])
def test_every_documented_form_is_requested_and_computed(job, site, monkeypatch):
    tmp_path, store, values = site
    concrete = concrete_jobs(job, values)
    assert concrete, job
    for number, spank in enumerate(concrete, start=100):
        spank = with_companion(spank)
        request, record = run_job(tmp_path, store, spank, number, monkeypatch)
        what = f"{job_id(job)} as {spank}"
        if spank.get(SPANK_RANKMAP) == "off":  # documented: leaves the job alone
            assert request is None, what
            continue
        assert request is not None and record is not None, what
        if mismatched(README_TEXT, job):  # documented: the job keeps Slurm's placement
            assert request.refusal and record["fallback_reason"] == request.refusal, what
            assert record["applied"] is False, what
            continue
        assert request.refusal is None, f"{what}: refused: {request.refusal}"
        assert record["fallback_reason"] is None, f"{what}: {record['fallback_reason']}"
        # a mapping job whose solver finds nothing better keeps Slurm's placement on its
        # merits (origin "baseline", no fallback); SUMMA and mesh jobs get their files
        assert record["applied"] or record.get("origin") == "baseline", f"{what}: {record}"
        if request.mode in (SUMMA_MODE, MESH_MODE):
            assert record["applied"], f"{what}: {record}"
        if SPANK_TIME in spank:
            assert request.time_limit == float(spank[SPANK_TIME]), what


@needs_cc
def test_the_spank_plugin_accepts_every_documented_form(site):
    tmp_path, _, values = site
    check = spank_checker(tmp_path)
    profiles, modes = set(), set()
    for job in JOBS:
        for spank in concrete_jobs(job, values):
            profiles.add(spank.get(SPANK_PROFILE))
            modes.add(spank.get(SPANK_RANKMAP))
    profiles, modes = sorted(profiles - {None}), sorted(modes - {None})
    assert dict(zip(profiles, check("profile", profiles), strict=True)) == \
        dict.fromkeys(profiles, True)
    assert dict(zip(modes, check("choice", modes), strict=True)) == dict.fromkeys(modes, True)


def test_the_forms_include_the_summa_spellings():
    """The README's SUMMA form expands to the four spellings the issue names."""
    forms = {v for job in JOBS for o, value in job if o == "--comm-profile"
             for v in expand(value)}
    assert {"summa-fpm", "summa-fpm:FILE", "summa-fpm,size=N",
            "summa-fpm:FILE,size=N"} <= forms, forms


def test_the_summa_spellings_parse_to_their_file_and_size():
    assert parse_summa_spec("summa-fpm") == SummaSpec(None, DEFAULT_SIZE)
    assert parse_summa_spec("summa-fpm,size=1024") == SummaSpec(None, 1024)
    assert parse_summa_spec("summa-fpm:size=1024") == SummaSpec(None, 1024)  # older spelling
    assert parse_summa_spec("summa-fpm:/a/s.txt") == SummaSpec("/a/s.txt", DEFAULT_SIZE)
    assert parse_summa_spec("summa-fpm:mixed,size=64") == SummaSpec("mixed", 64)
    assert is_summa_profile("summa-fpm,size=1024") and not is_summa_profile("summa-fpmx")
    assert not is_summa_profile("summa") and not is_summa_profile("summa-fpmx:/a")
    for bad, msg in (("summa-fpm,/a/s.txt", "a speeds file follows 'summa-fpm:'"),
                     ("summa-fpm,size=0", "positive integer"),
                     ("summa-fpmx,size=8", "not a SUMMA profile")):
        with pytest.raises(SummaJobError, match=msg):
            parse_summa_spec(bad)
