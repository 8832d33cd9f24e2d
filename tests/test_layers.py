"""The data flow is visible in the imports: mapper never imports slurm_plugin, and the
job's lifecycle code (prolog, worker, TaskProlog) imports no command-line module."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


def test_mapper_never_imports_slurm_plugin():
    for path in (ROOT / "mapper").rglob("*.py"):
        assert not any(m.startswith("slurm_plugin") for m in imports_of(path)), path


def test_job_lifecycle_imports_no_cli_module():
    for name in ("prolog.py", "job_worker.py", "task_prolog.py"):
        mods = imports_of(ROOT / "slurm_plugin" / name)
        bad = [m for m in mods if m.split(".")[-1] in ("cli", "plan_cli", "config_cli")]
        assert not bad, (name, bad)
