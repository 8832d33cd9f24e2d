"""The SPANK plugin's option checks (slurm_plugin/spank/rankmap_spank.c), compiled into a
small program with stand-ins for the Slurm calls: ``valid_choice`` and ``valid_profile``
exactly as sbatch runs them, ``plain_step`` and ``place_plain_step`` as srun does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

SPANK_C = REPO / "slurm_plugin/spank/rankmap_spank.c"

HARNESS = r"""
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include "rankmap_spank.c"
spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{ (void)sp; (void)opt; return ESPANK_SUCCESS; }
spank_context_t spank_context(void) { return S_CTX_LOCAL; }
spank_err_t spank_job_control_setenv(spank_t sp, const char *n, const char *v, int o)
{
    (void)sp; (void)o;
    if (getenv("HARNESS_SETENV_FAIL"))
        return ESPANK_ERROR;
    printf("job env %s=%s\n", n, v);
    return ESPANK_SUCCESS;
}
const char *spank_strerror(spank_err_t err) { (void)err; return "stand-in error"; }
void slurm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
spank_err_t spank_getenv(spank_t sp, const char *n, char *buf, int len)
{ (void)sp; (void)n; (void)buf; (void)len; return ESPANK_ENV_NOEXIST; }
spank_err_t spank_setenv(spank_t sp, const char *n, const char *v, int o)
{ (void)sp; (void)n; (void)v; (void)o; return ESPANK_SUCCESS; }
spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{ (void)sp; (void)item; return ESPANK_BAD_ARG; }
int spank_remote(spank_t sp) { (void)sp; return 0; }
int main(int argc, char **argv)
{
    if (strcmp(argv[1], "place") == 0) {  /* what srun's environment becomes */
        const char *names[] = {"SLURM_HOSTFILE", "SLURM_DISTRIBUTION", PLACED_VAR,
                               "SLURM_GPU_BIND", NULL};
        place_plain_step();
        for (int i = 0; names[i]; i++)
            printf("%s=%s\n", names[i], getenv(names[i]) ? getenv(names[i]) : "(unset)");
        return 0;
    }
    if (strcmp(argv[1], "post") == 0) {  /* post PROFILE: what sbatch passes to the job */
        snprintf(profile, sizeof profile, "%s", argv[2]);
        printf("rc %d\n", slurm_spank_init_post_opt(NULL, 0, NULL));
        return 0;
    }
    if (strcmp(argv[1], "init") == 0) {  /* init PLUGSTACK_ARGS...: the site maximum */
        slurm_spank_init(NULL, argc - 2, argv + 2);
        printf("max_time %g\n", max_time);
        return 0;
    }
    if (argv[1][0] == 's') {  /* step JOB_TASKS ENV_TASKS "srun -n 4 ./app" ... */
        for (int i = 4; i < argc; i++) {
            char *words[256], *save = NULL;
            int n = 0;
            for (char *w = strtok_r(argv[i], " ", &save); w && n < 256;
                 w = strtok_r(NULL, " ", &save))
                words[n++] = w;
            printf("%d\n", plain_step(n, words, atol(argv[2]), atol(argv[3])));
        }
        return 0;
    }
    for (int i = 2; i < argc; i++)
        printf("%d\n", argv[1][0] == 'c'   ? valid_choice(argv[i])
                       : argv[1][0] == 'n' ? valid_name(argv[i])
                                           : valid_profile(argv[i]));
    return 0;
}
"""

needs_cc = pytest.mark.skipif(
    not shutil.which("cc") or not Path("/usr/include/slurm/spank.h").is_file(),
    reason="needs a C compiler and Slurm's spank.h")


def spank_checker(tmp_path: Path):
    """``check(kind, values) -> [bool]``: kind "choice" (``--rankmap``), "profile"
    (``--comm-profile``) or "name" (``--rankmap-record``), each value accepted or not by
    the compiled plugin code; kind "step" with values ``JOB_TASKS, ENV_TASKS, "srun ..."
    ...``: whether each srun command line is a plain step of the job
    (``plain_step``)."""
    (tmp_path / "h.c").write_text(HARNESS)
    subprocess.run(["cc", "-w", "-I", str(SPANK_C.parent), "-o", str(tmp_path / "h"),
                    str(tmp_path / "h.c")], check=True)

    def check(kind: str, values: list[str]) -> list[bool]:
        out = subprocess.run([str(tmp_path / "h"), kind, *values], capture_output=True,
                             text=True, check=True).stdout.split()
        return [v == "1" for v in out]
    return check


def srun_environment(tmp_path: Path):
    """``place(env) -> {name: value}``: srun's SLURM_HOSTFILE, SLURM_DISTRIBUTION,
    RANKMAP_SRUN_PLACED and SLURM_GPU_BIND after the plugin's ``place_plain_step`` ran
    in an srun whose command line is a plain ``srun ./app`` and whose environment is
    ``env``."""
    (tmp_path / "h.c").write_text(HARNESS)
    subprocess.run(["cc", "-w", "-I", str(SPANK_C.parent), "-o", str(tmp_path / "h"),
                    str(tmp_path / "h.c")], check=True)

    def place(env: dict[str, str]) -> dict[str, str]:
        out = subprocess.run([str(tmp_path / "h"), "place"], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        return dict(line.split("=", 1) for line in out)
    return place


def spank_program(tmp_path: Path):
    """``run(*args, **env) -> CompletedProcess`` of the compiled harness: ``post PROFILE``
    (slurm_spank_init_post_opt with --comm-profile=PROFILE; ``HARNESS_SETENV_FAIL=1``
    makes spank_job_control_setenv fail) and ``init ARG...`` (slurm_spank_init with the
    plugstack arguments, printing the site maximum it took)."""
    (tmp_path / "h.c").write_text(HARNESS)
    subprocess.run(["cc", "-w", "-I", str(SPANK_C.parent), "-o", str(tmp_path / "h"),
                    str(tmp_path / "h.c")], check=True)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(tmp_path / "h"), *args], env=env, capture_output=True,
                              text=True, check=True)
    return run
