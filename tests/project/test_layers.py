"""The data flow is visible in the imports (docs/architecture.md): mapper never imports
slurm_plugin; mapper's packages import downwards only (io > mesh | summa > solve >
construction > partitioners > search > objectives > model > errors); slurm_plugin's
packages import downwards only (commands > lifecycle | simulate > modes > outputs |
profiles > machine > site | slurm > common), without cycles; the TaskProlog imports
only common and site.  import-linter checks the contracts in pyproject.toml; a contract
broken on purpose must fail it."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("common", "site", "slurm", "machine", "profiles", "outputs", "modes",
            "simulate", "lifecycle", "commands", "userlib")
MAPPER_LAYERS = ("io", "mesh", "summa", "solve", "construction", "partitioners", "search",
                 "objectives", "model")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out.add(base)
    return out


def lint_imports(cwd: Path, config: Path | None = None) -> subprocess.CompletedProcess:
    args = [str(LINT_IMPORTS), "--no-cache"]
    if config is not None:
        args += ["--config", str(config)]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd),
                               "NO_COLOR": "1"})


def test_mapper_never_imports_slurm_plugin():
    for path in (ROOT / "mapper").rglob("*.py"):
        assert not any(m.startswith("slurm_plugin") for m in imports_of(path)), path


def test_job_lifecycle_imports_no_cli_module():
    for path in (ROOT / "slurm_plugin" / "lifecycle").glob("*.py"):
        bad = [m for m in imports_of(path)
               if "commands" in m.split(".") or m.split(".")[-1].endswith("cli")]
        assert not bad, (path.name, bad)


def test_every_module_sits_in_a_layer():
    """A newcomer finds every module in a package that names its place: nothing but the
    package marker at the top (the libraries users' programs link or import are in
    userlib)."""
    top = sorted(p.name for p in (ROOT / "slurm_plugin").glob("*.py"))
    assert top == ["__init__.py"]
    dirs = {p.name for p in (ROOT / "slurm_plugin").iterdir()
            if p.is_dir() and (p / "__init__.py").exists()}
    assert dirs == set(PACKAGES)


def test_every_mapper_module_sits_in_a_layer():
    """mapper's top level holds only the package marker (the lazy public names) and the
    exception base every layer raises from; everything else is in a layer's package."""
    top = sorted(p.name for p in (ROOT / "mapper").iterdir() if p.is_file()
                 and p.suffix in (".py", ".pyx", ".pxd"))
    assert top == ["__init__.py", "errors.py"]
    dirs = {p.name for p in (ROOT / "mapper").iterdir()
            if p.is_dir() and (p / "__init__.py").exists()}
    assert dirs == set(MAPPER_LAYERS)


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed "
                    "(pip install -e .[test])")
def test_import_contracts_are_kept():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout
    for contract in ("mapper (the solver library) never imports slurm_plugin",
                     "mapper layers import downwards only",
                     "slurm_plugin layers import downwards only",
                     "no import cycles among the modules of any mapper or slurm_plugin "
                     "package",
                     "the TaskProlog (once per task) imports only common and site"):
        assert contract in " ".join(proc.stdout.split()), contract


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed")
@pytest.mark.parametrize("module, line, contract", [
    # a common module reaching up into the machine layer
    ("slurm_plugin/common/job_conventions.py", "from ..machine import layout",
     "slurm_plugin layers import"),
    # the Slurm readers reaching into the site configuration (independent siblings)
    ("slurm_plugin/slurm/allocation.py", "from ..site import config",
     "slurm_plugin layers import"),
    # the TaskProlog pulling in a computing mode (and with it numpy)
    ("slurm_plugin/lifecycle/task_prolog.py", "from ..modes import graph_job",
     "the TaskProlog (once per task) imports only common and site"),
    # the old cycle: the allocation records importing the backend registry
    ("slurm_plugin/slurm/allocation.py", "from . import backends", "no import cycles"),
    # the machine model reaching up into an objective
    ("mapper/model/graph.py", "from ..objectives import qap", "mapper layers import"),
    # an objective reaching up into a search
    ("mapper/objectives/congestion.py", "from ..search import swap", "mapper layers import"),
    # a search reaching up into the solver's presets
    ("mapper/search/swap.py", "from ..solve import presets", "mapper layers import"),
    # the mesh pipeline reaching into SUMMA's (independent siblings)
    ("mapper/mesh/rb.py", "from ..summa import tiling", "mapper layers import"),
    # two modules of one layer importing each other
    ("mapper/objectives/qap.py", "from . import congestion", "no import cycles"),
])
def test_a_broken_contract_fails(tmp_path, module, line, contract):
    """A copy of mapper and slurm_plugin (sources only) with one forbidden import added:
    lint-imports exits non-zero and names the contract."""
    shutil.copytree(ROOT / "slurm_plugin", tmp_path / "slurm_plugin",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "spank", "data"))
    shutil.copytree(ROOT / "mapper", tmp_path / "mapper",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.pyx"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    proc = lint_imports(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr     # the copy keeps them
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    proc = lint_imports(tmp_path)
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0, out
    assert f"{contract}" in out and "BROKEN" in out, out
