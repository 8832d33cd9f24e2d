"""One vocabulary: the algorithm grammar, file names, job ids and SPANK names agree
everywhere they are used."""

import re

import pytest

from mapper.solve.algorithm_names import ALGORITHMS, normalize_algorithm
from mapper.solve.runner import AlgorithmSpec
from slurm_plugin.common.job_conventions import PROFILE_NAME, valid_job_id
from slurm_plugin.site.config import ConfigError, parse_config
from tests.helpers.paths import REPO
from tests.helpers.spank_harness import needs_cc, spank_checker

SPANK_C = REPO / "slurm_plugin/spank/rankmap_spank.c"


def test_the_c_plugin_knows_the_same_constructions():
    text = SPANK_C.read_text()
    listed = re.search(r"constructions\[\] = \{([^}]*)\}", text).group(1)
    assert tuple(re.findall(r'"([a-z]+)"', listed)) == ALGORITHMS


@pytest.mark.parametrize("name", ["topdown+n10", "TopDown+n10", "GREEDYALLC+NP4",
                                  "bottomup+nc2", "identity", "random+n2"])
def test_mapper_and_config_accept_the_same_names(name):
    AlgorithmSpec.parse(name)
    cfg = parse_config(f'[solver]\nalgorithm = "{name}"\n', "t.toml")
    assert cfg.solver.algorithm == normalize_algorithm(name) == name.lower()


@pytest.mark.parametrize("name", ["topdwn", "topdown+n0", "topdown+np1", "topdown+x",
                                  "topdown+n10+n2", ""])
def test_mapper_and_config_refuse_the_same_names(name):
    with pytest.raises(ValueError):
        AlgorithmSpec.parse(name)
    with pytest.raises(ConfigError):
        parse_config(f'[solver]\nalgorithm = "{name}"\n', "t.toml")


@pytest.mark.parametrize("job_id, ok", [("12", True), ("12_3", True), ("12\n", False),
                                        ("../1", False), ("", False), ("1_", False)])
def test_job_id_rule(job_id, ok):
    assert valid_job_id(job_id) is ok


def test_one_definition_of_each_name():
    """The shared names are defined in job_conventions.py only (other modules import them)."""
    root = REPO / "slurm_plugin"
    for path in root.rglob("*.py"):
        if path.name == "job_conventions.py":
            continue
        text = path.read_text()
        assert not re.search(r'^\s*(FILE_NAMES|LAUNCHER_FILES|SPANK_PROFILE)\s*=', text, re.M), \
            path
        assert '"SPANK_RANKMAP_COMM_PROFILE"' not in text, path
        assert "isdigit()" not in text or path.name not in ("task_prolog.py", "jobdir.py"), path


def test_grammar_loads_without_the_solver_and_objective_stays_a_function():
    import subprocess
    import sys

    code = ("import sys, mapper.solve.algorithm_names, slurm_plugin.site.config, "
            "slurm_plugin.lifecycle.task_prolog\n"
            "assert 'numpy' not in sys.modules, 'numpy loaded'\n"
            "from mapper.objectives.qap import evaluate\n"
            "from mapper import objective\n"
            "assert callable(objective), objective\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_public_name_of_mapper_resolves():
    import mapper

    for name in mapper.__all__:
        assert getattr(mapper, name) is not None, name


@needs_cc
def test_the_plugin_and_the_store_accept_the_same_profile_names(tmp_path):
    """--rankmap-record=NAME is checked at submission by the C plugin's valid_name and
    later by PROFILE_NAME (the store's, the TaskProlog's): the same rule."""
    names = ["app", "halo8", "a.b", "A_b+c-d", "-x", "+x", ".hidden", "", "a/b", "a b",
             "../x", "x..y", "é", "a:b", "a,b", "x" * 200, "x" * 201, "a=b", "a\\b"]
    check = spank_checker(tmp_path)
    assert dict(zip(names, check("name", names), strict=True)) == \
        {n: PROFILE_NAME.match(n) is not None for n in names}
