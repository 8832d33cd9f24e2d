"""Every Python package in the tree ships in the wheel (a missing entry breaks only
non-editable installs, i.e. every site install)."""

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for top in ("mapper", "slurm_plugin") for p in (ROOT / top).rglob("__init__.py")}
    assert found <= listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"
