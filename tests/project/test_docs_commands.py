"""Every ``rankmap`` command the documentation quotes runs (issue 30): the docs cannot
drift from the CLI.

The commands are read from README.md and docs/*.md, not listed here: every line of a
fenced code block and every inline code span that starts with ``rankmap `` (a trailing
backslash joins lines; a ``# comment`` after a command is dropped).  Each runs through
the CLI's entry point (``[project.scripts] rankmap`` of pyproject.toml) in a temporary
directory, in document order, and must exit 0:

* ``[...]`` is optional and taken; ``(a | b)``, ``[a | b]`` and ``a|b`` are
  alternatives, and a command with alternatives runs once per alternative (the i-th
  of every group together; ``...`` is no alternative).
* Capitalised placeholders (FILE, DIR, GRAPH, N, ...) get real values by the
  subcommand and the option before them (``PLACEHOLDERS``): the bundled SUMMA example,
  the recorded Open MPI monitoring files of tests/data, a 512-rank stencil, a torus's
  distance matrix, a mesh, a speeds file.  ``JOBDIR`` is the directory the first
  documented ``rankmap plan --out DIR`` wrote.  Paths under ``/tmp/`` move into the
  temporary directory; a relative path that exists in the project (the SUMMA example)
  is taken from the project.
* A command that only names a subcommand or an option (``rankmap map --json`` in a
  sentence) is completed as ``MENTIONS`` says, mostly with ``--help``, whose output
  must then list every option the mention names.
* ``SKIPPED`` lists, with the reason, what cannot run here.

Finding fewer commands than ``MIN_COMMANDS``, a placeholder without a value, or a
``MENTIONS``/``SKIPPED`` entry the docs no longer quote fails.
"""

from __future__ import annotations

import importlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import tomllib

from tests.helpers.paths import REPO

ROOT = REPO
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DATA = ROOT / "tests" / "data"
MIN_COMMANDS = 30

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE = re.compile(r"(`+)((?:(?!\1).)+?)\1", re.S)
_PLACEHOLDER = re.compile(r"[A-Z]+|…")

#: a command quoted only by name or with one of its options → what completes it
MENTIONS = {
    "rankmap plan": "--out DIR",
    "rankmap record": "--help",
    "rankmap plan --json": "--out DIR",
    "rankmap plan --out DIR": "",                      # runs as written
    "rankmap plan --distribution": "block:block --out DIR",
    "rankmap plan --oversubscribe": "--out DIR",
    "rankmap plan --preset strong": "--out DIR",
    "rankmap map": "--help",
    "rankmap map --json": "--help",
    "rankmap map --preset strong":
        "GRAPH --hierarchy 4:16:8 --distances 1:10:100 --output preset.map",
    "rankmap map GRAPH --arity-file FILE --distances …": "--output arity.map",
    "rankmap evaluate": "--help",
    "rankmap report": "--help",
    "rankmap report --png": "report-mention.png JOBDIR",
    "rankmap partition": "--help",
    "rankmap profile import": "--help",
    "rankmap profile import --add-sample": "--help",
    "rankmap profile import --format smpi-ti": "--help",
    "rankmap simulate": "--help",
    "rankmap simulate --host-speeds": "1 --help",
}

#: commands that cannot run here, and why
SKIPPED = {
    "rankmap profile collect JOB": (
        "needs a recording job's files; tests/slurm_plugin/lifecycle/test_recording_setup.py "
        "collects one, tests/e2e/test_recording_jobs.py after a cancelled job"),
    "rankmap profile collect DIR --name NAME --store S": (
        "needs a directory an MPI launch recorded; tests/slurm_plugin/profiles/"
        "test_recording.py records one with MPICH and collects it"),
    "rankmap record --name lammps-3d -- mpirun -n 64 ./lmp -in in.lj": (
        "runs LAMMPS; tests/slurm_plugin/profiles/test_recording.py runs rankmap record "
        "over mpirun and a real MPI program"),
    "rankmap record --name lammps-3d --store ~/profiles -- mpiexec -n 64 ./lmp -in in.lj": (
        "the same with mpiexec and --store"),
    "rankmap record --name NAME -- mpirun -n 64 ./app": "the front page's synopsis of it",
    "rankmap simulate … --replay T": (
        "a sketch (… stands for the platform options) replaying an SMPI trace that "
        "smpirun -trace-ti records; tests/slurm_plugin/simulate/test_simulate.py replays one"),
    "rankmap summa --layout FILE --arranged FILE --hierarchy 8:4:2 --level 2 --distances "
    "1:10:100 --output ARR --original ORIG --json --exhaustive": (
        "the synopsis's optional parts all taken: --arranged evaluates the arrangement "
        "given, so the CLI refuses a search (--exhaustive) with it; the --speeds run "
        "takes --exhaustive, and does-it-pay.md's example runs --layout with --arranged"),
}

#: (subcommand, option before it or None, placeholder) → value; "{w}" is the workspace
PLACEHOLDERS = {
    ("plan", "--out", "DIR"): "{w}/plan-{k}",
    ("report", None, "JOBDIR"): "{jobdir}",
    ("profile", "--store", "DIR"): "{w}/store",
    ("profile", "--name", "NAME"): "myapp",             # imported by the line before
    ("profile", None, "NAME"): "lammps-3d",            # rankmap profile show NAME: bundled
    ("profile", None, "PREFIX"): "{w}/prof",
    ("profile", "--ntasks", "N"): "32",
    ("profile", "smpi-ti", "T"): "{w}/trace",
    ("summa", "--speeds", "FILE"): "{w}/summa.speeds",
    ("summa", "--size", "N"): "64",
    ("summa", "--layout", "FILE"): "{root}/slurm_plugin/data/summa-example/worst.arr",
    ("summa", "--arranged", "FILE"): "{root}/slurm_plugin/data/summa-example/optimal.arr",
    ("summa", "--groups", "FILE"): "{root}/slurm_plugin/data/summa-example/clusters",
    ("summa", "--output", "ARR"): "{w}/summa-{k}.arr",
    ("summa", "--original", "ORIG"): "{w}/summa-{k}.orig",
    ("map", None, "GRAPH"): "{w}/stencil.mtx",
    ("evaluate", None, "GRAPH"): "{w}/stencil.mtx",
    ("map", "--arity-file", "FILE"): "{w}/arity.txt",
    ("map", "--distances", "…"): "1:10:100",
    ("hwinfo", "--xml", "FILE"): "{root}/tests/data/hwloc/2pkg-2l3-2core-2pu.xml",
    ("hwinfo", "--nodes", "N"): "4",
    ("hwinfo", "--output", "FILE"): "{w}/hwinfo-{k}.txt",
    ("partition", "--speeds", "FILE"): "{w}/plate.speeds",
}


# -- the commands, from the docs ---------------------------------------------------------

def quoted_commands(text: str) -> list[str]:
    """The ``rankmap`` commands of one page: code block lines, then inline code."""
    found = []
    for block in _FENCE.findall(text):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("rankmap "):
                found.append(" ".join(line.split()))
    for _, span in _CODE.findall(_FENCE.sub("", text)):
        span = " ".join(span.split())
        if span.startswith("rankmap "):
            found.append(span)
    return found


def documented_commands() -> list[str]:
    found = [c for page in PAGES for c in quoted_commands(page.read_text(encoding="utf-8"))]
    return list(dict.fromkeys(found))


def expand(command: str) -> list[str]:
    """The runs of one documented form: optional parts taken, one run per alternative."""
    quoted: list[str] = []

    def protect(m):
        quoted.append(m.group(0))
        return f"\0{len(quoted) - 1}\0"

    text = re.sub(r"'[^']*'", protect, command)

    def choose(i: int, counts: list[int]) -> str:
        def pick(options: list[str]) -> str:
            options = [o.strip() for o in options if o.strip() not in ("...", "…")]
            counts.append(len(options))
            return options[min(i, len(options) - 1)]

        out = text
        group = re.compile(r"\[([^\[\]()]*)\]|\(([^\[\]()]*\|[^\[\]()]*)\)")
        while (m := group.search(out)) is not None:
            inner = m.group(1) if m.group(1) is not None else m.group(2)
            out = out[:m.start()] + pick(re.split(r"\s\|\s", inner)) + out[m.end():]
        out = re.sub(r"\S+\|\S+", lambda m: pick(m.group(0).split("|")), out)
        return re.sub(r"\0(\d+)\0", lambda m: quoted[int(m.group(1))], " ".join(out.split()))

    counts: list[int] = []
    first = choose(0, counts)
    return [first] + [choose(i, []) for i in range(1, max(counts, default=1))]


# -- running them ---------------------------------------------------------------------------

def rankmap_main():
    """The function the ``rankmap`` script calls, as pyproject.toml names it."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["rankmap"]
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(out):
            code = rankmap_main()(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return int(code or 0), out.getvalue()


def concrete(command: str, w: Path, k: int, jobdir: Path | None) -> list[str]:
    """argv of one run: placeholders filled, /tmp/ paths in the workspace."""
    argv = shlex.split(command)[1:]
    sub = argv[0]
    fill = {"w": w, "k": k, "root": ROOT, "jobdir": jobdir}
    out = []
    for i, word in enumerate(argv):
        prev = argv[i - 1] if i else None
        prev = prev if prev is not None and prev.startswith("-") or prev == "smpi-ti" else None
        if _PLACEHOLDER.fullmatch(word) and i > 0:
            value = PLACEHOLDERS.get((sub, prev, word))
            assert value is not None, f"{command}: no value for {word} after {prev} ({sub})"
            assert "{jobdir}" not in value or jobdir is not None, f"{command}: no job dir yet"
            word = value.format(**fill)
        elif word.startswith("/tmp/"):
            word = str(w / word[len("/tmp/"):])
        elif "/" in word and not word.startswith("/") and (ROOT / word).exists():
            word = str(ROOT / word)
        out.append(word)
    return out


def write_inputs(w: Path) -> None:
    """The files the documented commands read, made here rather than taken from a store."""
    side = 8  # the 512-rank 3D stencil onto 4:16:8, and an 8x8x8 torus's distances
    idx = np.arange(side ** 3).reshape(side, side, side)
    edges = [(idx[x, y, z], idx[(x + dx) % side, (y + dy) % side, (z + dz) % side])
             for x in range(side) for y in range(side) for z in range(side)
             for dx, dy, dz in ((1, 0, 0), (0, 1, 0), (0, 0, 1))]
    lines = [f"{max(u, v) + 1} {min(u, v) + 1} 1000" for u, v in edges]
    (w / "stencil.mtx").write_text("%%MatrixMarket matrix coordinate real symmetric\n"
                                   f"512 512 {len(lines)}\n" + "\n".join(lines) + "\n")
    coords = np.array(np.unravel_index(np.arange(side ** 3), (side,) * 3)).T
    diff = np.abs(coords[:, None, :] - coords[None, :, :])
    hops = np.minimum(diff, side - diff).sum(axis=2)
    np.savetxt(w / "torus.txt", hops, fmt="%d")
    (w / "arity.txt").write_text("3\n4 16 8\n")
    # a 64x64 grid mesh (METIS, unit weights) and PE speeds for `rankmap partition`
    g = 64
    adj = [[] for _ in range(g * g)]
    for r in range(g):
        for c in range(g):
            v = r * g + c
            for rr, cc in ((r + 1, c), (r, c + 1)):
                if rr < g and cc < g:
                    adj[v].append(rr * g + cc)
                    adj[rr * g + cc].append(v)
    nedges = sum(map(len, adj)) // 2
    (w / "plate.graph").write_text(f"{g * g} {nedges}\n" + "".join(
        " ".join(str(u + 1) for u in nbrs) + "\n" for nbrs in adj))
    (w / "plate.speeds").write_text("0-255 1.0\n256-511 2.0\n")
    # SUMMA: a speed per rank of the bundled example's 10 ranks
    (w / "summa.speeds").write_text("".join(f"{1.0 + (r % 3) * 0.5}\n" for r in range(10)))
    # two recorded Open MPI monitoring runs' files (the same recording twice)
    for f in sorted((DATA / "ompi_monitoring").glob("prof.*.prof")):
        shutil.copy(f, w / f.name)
    # an SMPI time-independent trace of two ranks (SimGrid 3.32's layout)
    (w / "trace_files").mkdir()
    (w / "trace_files/1_rank-1.txt").write_text("0 init\n0 send 1 5 1000 2\n0 finalize\n")
    (w / "trace_files/1_rank-2.txt").write_text("1 init\n1 recv 0 5 1000 2\n1 finalize\n")
    (w / "trace").write_text("trace_files/1_rank-1.txt\ntrace_files/1_rank-2.txt\n")


def can_simulate() -> bool:
    return shutil.which("smpicc") is not None and shutil.which("smpirun") is not None


# -- tests ----------------------------------------------------------------------------------

DOCUMENTED = documented_commands()


def test_the_docs_quote_enough_commands_and_every_exception_is_quoted():
    assert len(DOCUMENTED) >= MIN_COMMANDS, (
        f"only {len(DOCUMENTED)} rankmap commands found in {[p.name for p in PAGES]}: "
        f"{DOCUMENTED}")
    runs = {run for command in DOCUMENTED for run in expand(command)}
    stale = [c for c in [*MENTIONS, *SKIPPED] if c not in runs]
    assert not stale, f"MENTIONS/SKIPPED name commands the docs no longer quote: {stale}"


def test_expand_takes_optional_parts_and_each_alternative():
    assert expand("rankmap x (--a F | --b G [--c H]) [--d] [--e 1|2|...]") == [
        "rankmap x --a F --d --e 1", "rankmap x --b G --c H --d --e 2"]
    assert expand("rankmap map|plan --preset strong") == [
        "rankmap map --preset strong", "rankmap plan --preset strong"]
    assert expand("rankmap simulate --nodes 'n[1-4]' -- /tmp/a") == [
        "rankmap simulate --nodes 'n[1-4]' -- /tmp/a"]


def test_every_documented_command_runs(tmp_path, monkeypatch):
    w = tmp_path
    write_inputs(w)
    monkeypatch.chdir(w)
    monkeypatch.setenv("RANKMAP_CONFIG", str(ROOT / "deploy" / "rankmap.toml.example"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    simulate = can_simulate()
    if simulate:
        subprocess.run(["smpicc", "-O2", "-o", str(w / "halo3d"),
                        str(ROOT / "bench" / "benefit" / "halo3d.c")],
                       check=True, capture_output=True)
    # the job directory that `rankmap report JOBDIR` reads: the documented plan's
    (plan_form,) = [c for c in DOCUMENTED if c == "rankmap plan --out DIR"]
    jobdir = w / "jobdir"
    code, out = run(concrete(plan_form, w, 0, None)[:-1] + [str(jobdir)])
    assert code == 0 and (jobdir / "report.json").is_file(), out

    failures, ran, skipped = [], [], []
    for k, form in enumerate(run_ for c in DOCUMENTED for run_ in expand(c)):
        if form in SKIPPED:
            skipped.append(form)
            continue
        if form.startswith("rankmap simulate") and "--help" not in \
                (form + " " + MENTIONS.get(form, "")) and not simulate:
            skipped.append(f"{form} (no smpicc/smpirun here)")
            continue
        command = f"{form} {MENTIONS.get(form, '')}".strip()
        argv = concrete(command, w, k, jobdir)
        code, out = run(argv)
        ran.append(command)
        # --help exits before argparse looks at the options: the help must list them
        unknown = [o for o in re.findall(r"(?<!\S)--[\w-]+", form) if "--help" in argv
                   and not re.search(re.escape(o) + r"(?![\w-])", out)]
        if code != 0 or unknown:
            failures.append(f"$ rankmap {shlex.join(argv)}\n(documented: {form})\n"
                            f"exit {code}, options not in the help: {unknown}\n{out[-2000:]}")
    print(f"ran {len(ran)} command lines, skipped {skipped}")
    assert not failures, f"{len(failures)} documented commands fail:\n\n" + "\n\n".join(failures)
    assert len(ran) >= MIN_COMMANDS


if __name__ == "__main__":  # pragma: no cover - a listing for reviewing the docs
    for c in DOCUMENTED:
        print(c, "->", expand(c), file=sys.stdout)
