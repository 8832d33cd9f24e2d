
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
    assert cfg.hwloc.files == {"n[1-4]": "/etc/rankmap/a.xml"}
    with pytest.raises(ConfigError, match=r"\[hwloc\] files: .*absolute path"):
        parse_config('[hwloc]\nfiles = { "n1" = "a.xml" }\n', "h.toml")
    with pytest.raises(ConfigError, match=r"\[hwloc\] files: 'n\[1-'"):
        parse_config('[hwloc]\nfiles = { "n[1-" = "/a.xml" }\n', "h.toml")


def test_gpus_settings_are_checked():
    cfg = parse_config("", "g.toml")
    assert cfg.gpus.enabled and cfg.gpus.gres_conf == ""
    cfg = parse_config('[gpus]\nenabled = false\ngres_conf = "/etc/slurm/gres.conf"\n', "g.toml")
    assert not cfg.gpus.enabled and cfg.gpus.gres_conf == "/etc/slurm/gres.conf"
    with pytest.raises(ConfigError, match=r"g.toml: \[gpus\] enabled"):
        parse_config('[gpus]\nenabled = "sometimes"\n', "g.toml")
    with pytest.raises(ConfigError, match=r"\[gpus\] gres_conf: .*absolute path"):
        parse_config('[gpus]\ngres_conf = "gres.conf"\n', "g.toml")


def test_every_section_is_read_typed_and_frozen():
    """One typed settings class per section: its fields are exactly the section's keys,
    each value read from a file comes back with its annotated type (list/table/number/
    text/flag), and a setting cannot be changed after the file was checked."""
    import dataclasses
    import typing

    from slurm_plugin.site import config as config_module

    text = ('[solver]\ntime_limit = 3\nlevel_distances = [1, 2, 3, 4]\n'
            '[speeds]\nnodes = { "n[1-2]" = 2 }\n[prolog]\nmax_workers = 2\n')
    cfg = parse_config(text, "site.toml")
    assert list(config_module.SECTIONS) == list(config_module.DEFAULTS)
    for name, cls in config_module.SECTIONS.items():
        settings = getattr(cfg, name)
        assert isinstance(settings, cls)
        hints = typing.get_type_hints(cls)
        assert [f.name for f in dataclasses.fields(cls)] == list(config_module.DEFAULTS[name])
        for f in dataclasses.fields(cls):
            value, kind = getattr(settings, f.name), typing.get_origin(hints[f.name])
            assert isinstance(value, kind or hints[f.name]), (name, f.name, value)
            assert value == cfg.get(name, f.name)
    assert cfg.solver.time_limit == 3.0 and isinstance(cfg.solver.time_limit, float)
    assert cfg.solver.level_distances == [1.0, 2.0, 3.0, 4.0]
    assert cfg.speeds.nodes == {"n[1-2]": 2.0} and cfg.prolog.max_workers == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.solver.time_limit = 1.0  # type: ignore[misc]
    # a default list is each instance's own: changing one changes no other
    first, second = parse_config("", "a.toml"), parse_config("", "b.toml")
    first.general.enabled_partitions.append("x")
    assert second.general.enabled_partitions == ["*"]
