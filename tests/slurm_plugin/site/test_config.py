
import pytest

from slurm_plugin.commands.cli import main as cli_main
from slurm_plugin.site.config import ConfigError, load_config, parse_config
from slurm_plugin.site.request import decide
from tests.helpers.paths import REPO

EXAMPLE = REPO / "deploy" / "rankmap.toml.example"


def test_shipped_example_loads_and_equals_the_defaults():
    cfg = load_config(str(EXAMPLE))
    defaults = parse_config("", "<none>")
    assert cfg.values == defaults.values
    solver = dict(cfg.sources["solver"])
    # the example leaves algorithm unset: it is the default preset's
    assert solver.pop("algorithm") == "[solver] default_preset"
    assert all(src == str(EXAMPLE) for src in solver.values())


@pytest.mark.parametrize("text,msg", [
    ('[solver]\ntime_limit = "abc"\n', r"x.toml: \[solver\] time_limit: must be a positive"),
    ("[solver]\ntime_limt = 3\n", r"x.toml: \[solver\] unknown key 'time_limt'"),
    ("[solvr]\n", r"x.toml: unknown section \[solvr\]"),
    ("[solver\n", r"x.toml: TOML syntax error: .*line 1"),
    ('[solver]\nalgorithm = "topdwn"\n', "unknown algorithm 'topdwn'"),
    ("[solver]\nlevel_distances = [10, 1]\n", "must not decrease"),
    ('[render]\nfiles = ["rankfile", "pdf"]\n', "unknown file 'pdf'"),
    ('[general]\noutput_dir = "relative"\n', "absolute path"),
    ("[solver]\ntime_limit = 50\n", "must not exceed max_time_limit"),
    ('[[rules]]\npartition = "x"\n', r"\[\[rules\]\] #1: a rule needs a profile"),
    ('[[rules]]\nprofile = "x"\ncolour = 1\n', "unknown key 'colour'"),
])
def test_config_errors_name_the_file_and_key(text, msg):
    with pytest.raises(ConfigError, match=msg):
        parse_config(text, "x.toml")


def test_config_check_prints_sources(tmp_path, capsys):
    cfg = tmp_path / "site.toml"
    cfg.write_text('[solver]\nalgorithm = "greedy+np"\n')
    assert cli_main(["config", "check", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert f'algorithm = "greedy+np"    # {cfg}' in out
    assert 'time_limit = 5.0    # default' in out
    cfg.write_text("[solver]\nseed = -1\n")
    assert cli_main(["config", "check", "--config", str(cfg)]) == 2
    assert "[solver] seed: must be a non-negative integer" in capsys.readouterr().err



def test_config_check_summarises_speeds(tmp_path, capsys):
    cfg = tmp_path / "site.toml"
    cfg.write_text('[speeds]\nnodes = { "n[1-4]" = 2.0 }\nfeatures = { gpu = 3.0 }\n')
    assert cli_main(["config", "check", "--config", str(cfg)]) == 0
    assert ("# [speeds] 1 host list(s) naming 4 node(s), 1 feature(s); other nodes have "
            "speed 1.0") in capsys.readouterr().out


RULES = """
[general]
enabled_partitions = ["batch", "cfd*"]
[solver]
max_time_limit = 10.0
[[rules]]
partition = "cfd*"
job_name = "lmp*"
profile = "lammps-3d"
algorithm = "greedy+n10"
"""


def test_requests_from_flags_and_rules():
    cfg = parse_config(RULES, "r.toml")
    assert decide(cfg, {}, "batch") is None  # no flag, no rule: untouched
    r = decide(cfg, {}, "cfd2", job_name="lmp-run")
    assert (r.profile, r.algorithm, r.origin) == ("lammps-3d", "greedy+n10", "rule")
    assert decide(cfg, {}, "cfd2", job_name="other") is None
    r = decide(cfg, {"SPANK_RANKMAP_COMM_PROFILE": "ring", "SPANK_RANKMAP_TIME": "99",
                     "SPANK_RANKMAP_MODE": "bottomup"}, "batch")
    assert (r.profile, r.algorithm, r.time_limit, r.refusal) == ("ring", "bottomup", 10.0,
                                                                 None)
    assert decide(cfg, {"SPANK_RANKMAP_COMM_PROFILE": "ring", "SPANK_RANKMAP_MODE": "off"},
                  "batch") is None
    r = decide(cfg, {"SPANK_RANKMAP_COMM_PROFILE": "ring"}, "gpu")
    assert "not enabled on partition 'gpu'" in r.refusal


def test_hwloc_files_are_checked():
    cfg = parse_config('[hwloc]\nfiles = { "n[1-4]" = "/etc/rankmap/a.xml" }\n', "h.toml")
    assert cfg.get("hwloc", "files") == {"n[1-4]": "/etc/rankmap/a.xml"}
    with pytest.raises(ConfigError, match=r"\[hwloc\] files: .*absolute path"):
        parse_config('[hwloc]\nfiles = { "n1" = "a.xml" }\n', "h.toml")
    with pytest.raises(ConfigError, match=r"\[hwloc\] files: 'n\[1-'"):
        parse_config('[hwloc]\nfiles = { "n[1-" = "/a.xml" }\n', "h.toml")
