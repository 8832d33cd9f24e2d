"""Every Python package in the tree ships in the wheel (a missing entry breaks only
non-editable installs, i.e. every site install)."""

from pathlib import Path

import tomllib

from tests.helpers.paths import REPO

ROOT = REPO


def test_every_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for top in ("mapper", "slurm_plugin") for p in (ROOT / top).rglob("__init__.py")}
    assert found <= listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"


def test_the_sdist_carries_the_cython_sources(tmp_path):
    """A wheel built from the sdist compiles mapper's extensions: every .pyx/.pxd must be
    in it (MANIFEST.in), else pip fails with "mapper/search/_swap.pyx doesn't match any
    files"."""
    import shutil
    import subprocess
    import sys
    import tarfile

    # a clean copy of the tree as git sees it: an egg-info left by an earlier build
    # lists the sources itself and would hide a missing MANIFEST.in
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines()
    src = tmp_path / "src"
    for name in files:
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    built = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)],
                           cwd=src, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        shipped = {Path(*Path(name).parts[1:]) for name in tar.getnames()}
    sources = {p.relative_to(ROOT) for ext in ("*.pyx", "*.pxd")
               for p in (ROOT / "mapper").rglob(ext)}
    assert sources and sources <= shipped, sorted(sources - shipped)
