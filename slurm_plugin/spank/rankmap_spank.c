/*
 * rankmap SPANK plugin: the sbatch/srun/salloc options users set.
 *
 *   --comm-profile=NAME      communication profile: a store name or a generator spec
 *                            such as stencil3d or stencil3d:4x4x4; summa-fpm[:FILE]
 *                            for --rankmap=summa
 *   --rankmap=auto|off|summa|fast|eco|strong|ALG   a keyword (summa: the SUMMA job
 *                            mode), a preset, or an algorithm such as topdown+n10
 *   --rankmap-time=SECONDS   solver time budget (rejected above the site maximum)
 *   --rankmap-record=NAME    record the job's communication into the user's profile NAME
 *                            (a new profile, or one more sample of it); the job is mapped
 *                            with NAME when it exists and has no --comm-profile
 *
 * Values are checked at submission (local/allocator context) and passed to the job's
 * prolog, epilog and PrologSlurmctld with spank_job_control_setenv() as
 * SPANK_RANKMAP_COMM_PROFILE, SPANK_RANKMAP_MODE, SPANK_RANKMAP_TIME and
 * SPANK_RANKMAP_RECORD (Slurm adds
 * the SPANK_ prefix; tasks see SLURM_SPANK_RANKMAP_*).  "file:/PATH" names a user's own
 * profile file and "summa-fpm:/PATH" a user's own speeds file; "/" is accepted only
 * there, ".." nowhere.
 *
 * In srun (local context) it also gives a plain `srun ./app` the job's placement: when
 * the TaskProlog exported RANKMAP_SRUN_HOSTFILE (a mapped job whose site supports srun)
 * and srun's own command line asks for the job's task count with no option that picks
 * nodes, tasks or their layout, slurm_spank_init sets SLURM_HOSTFILE to that file before
 * srun reads its environment (srun then distributes the tasks as listed, "arbitrary").
 * Every other srun -- another size, -N, -w, the daemon launches of Open MPI and Hydra,
 * RANKMAP_BIND=off, a SLURM_HOSTFILE of the user's -- is left as it is.  The steps it
 * placed carry RANKMAP_SRUN_PLACED=1, and in each of their tasks slurm_spank_task_init
 * (remote context, before the program is executed) binds the task to its record's cores,
 * so that the program starts on them (an OpenMP runtime reads its mask at start).
 *
 * plugstack.conf:  optional /usr/lib/x86_64-linux-gnu/slurm/rankmap_spank.so [max_time=60]
 * Build against the running Slurm's headers (SPANK plugins are tied to a Slurm major
 * release): see Makefile.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <slurm/spank.h>

#include "../preload/bind_record.h"
#include "../preload/own_cmdline.h"

SPANK_PLUGIN(rankmap, 1);

/* set by srun for the steps it placed (slurm_plugin/common/job_conventions.py SRUN_PLACED_VAR) */
#define PLACED_VAR "RANKMAP_SRUN_PLACED"

#define MAX_VALUE 200

static char profile[MAX_VALUE + 1];
static char choice[MAX_VALUE + 1]; /* --rankmap=CHOICE */
static char time_budget[64];
static char record[MAX_VALUE + 1];
static double max_time = 0.0; /* 0: no site maximum given here */

/* the algorithm grammar of mapper/solve/algorithm_names.py (case-insensitive); a test compares the lists */
static const char *constructions[] = {"identity", "random", "greedy", "greedyallc",
                                      "topdown", "bottomup", "ohtma", "matching", NULL};

/* the presets of mapper/solve/algorithm_names.py PRESETS (case-insensitive); a test compares the lists */
static const char *presets[] = {"fast", "eco", "strong", NULL};

/* --rankmap values that are not algorithms (slurm_plugin/common/job_conventions.py
 * RANKMAP_KEYWORDS; a test compares the lists) */
static const char *keywords[] = {"auto", "off", "summa", NULL};

/* Store names and generator specs; "file:/abs/path" and "summa-fpm:/abs/path" only for
 * a user's own file, which the prolog reads with the user's identity when the site
 * allows it. */
static int valid_profile(const char *v)
{
    size_t n = strlen(v);
    int is_file = strncmp(v, "file:/", 6) == 0 || strncmp(v, "summa-fpm:/", 11) == 0;
    if (n == 0 || n > MAX_VALUE)
        return 0;
    if (strstr(v, "..") || v[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (!(isalnum(c) || c == '.' || c == '_' || c == ':' || c == ',' || c == '+' ||
              c == '-' || c == '=' || (is_file && c == '/')))
            return 0;
    }
    return 1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* S is a decimal number of at least MIN, of any length (as the Python side reads it;
 * atoi's overflow is undefined) */
static int number_at_least(const char *s, long min)
{
    if (!all_digits(s))
        return 0;
    while (s[0] == '0' && s[1])
        s++;
    return strlen(s) > 9 || strtol(s, NULL, 10) >= min;
}

static int valid_neighbourhood(const char *s)
{
    if (strcasecmp(s, "n2") == 0 || strcasecmp(s, "np") == 0)
        return 1;
    if (strncasecmp(s, "np", 2) == 0)
        return number_at_least(s + 2, 2);
    if (strncasecmp(s, "nc", 2) == 0)
        return number_at_least(s + 2, 1);
    if (s[0] == 'n' || s[0] == 'N')
        return number_at_least(s + 1, 1);
    return 0;
}

static int valid_choice(const char *v)
{
    char buf[MAX_VALUE + 1];
    for (int i = 0; keywords[i]; i++)
        if (strcmp(v, keywords[i]) == 0)
            return 1;
    for (int i = 0; presets[i]; i++)
        if (strcasecmp(v, presets[i]) == 0)
            return 1;
    if (strlen(v) > MAX_VALUE)
        return 0;
    strcpy(buf, v);
    char *plus = strchr(buf, '+');
    if (plus)
        *plus = '\0';
    int known = 0;
    for (int i = 0; constructions[i]; i++)
        if (strcasecmp(buf, constructions[i]) == 0)
            known = 1;
    if (!known)
        return 0;
    return plus ? valid_neighbourhood(plus + 1) : 1;
}

static int opt_profile(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (!optarg || !valid_profile(optarg)) {
        slurm_error("rankmap: --comm-profile=%s: a profile name or generator spec "
                    "(letters, digits and . _ : , + - =; '/' only in file:/PATH and "
                    "summa-fpm:/PATH; no '..'; at most %d characters)",
                    optarg ? optarg : "", MAX_VALUE);
        return ESPANK_BAD_ARG;
    }
    strcpy(profile, optarg);
    return ESPANK_SUCCESS;
}

static int opt_choice(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (!optarg || !valid_choice(optarg)) {
        slurm_error("rankmap: --rankmap=%s: expected auto, off, summa, a preset (fast, eco, "
                    "strong) or an algorithm "
                    "CONSTRUCTION[+NEIGHBOURHOOD] (identity, random, greedy, greedyallc, "
                    "topdown, bottomup, ohtma, matching; n<d>, nc<d>, np, np<block>, n2), "
                    "e.g. topdown+n10",
                    optarg ? optarg : "");
        return ESPANK_BAD_ARG;
    }
    strcpy(choice, optarg);
    return ESPANK_SUCCESS;
}

/* A store name (slurm_plugin/common/job_conventions.py PROFILE_NAME): letters, digits
 * and . _ + -, not starting with '.'. */
static int valid_name(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > MAX_VALUE || v[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (!(isalnum(c) || c == '.' || c == '_' || c == '+' || c == '-'))
            return 0;
    }
    return 1;
}

static int opt_record(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (!optarg || !valid_name(optarg)) {
        slurm_error("rankmap: --rankmap-record=%s: a profile name (letters, digits and "
                    ". _ + -, not starting with '.'; at most %d characters)",
                    optarg ? optarg : "", MAX_VALUE);
        return ESPANK_BAD_ARG;
    }
    strcpy(record, optarg);
    return ESPANK_SUCCESS;
}

static int opt_time(int val, const char *optarg, int remote)
{
    char *end = NULL;
    (void)val;
    (void)remote;
    errno = 0;
    double t = optarg ? strtod(optarg, &end) : -1.0;
    if (!optarg || errno || end == optarg || *end != '\0' || !(t > 0.0) ||
        strlen(optarg) >= sizeof(time_budget)) {
        slurm_error("rankmap: --rankmap-time=%s: expected a positive number of seconds",
                    optarg ? optarg : "");
        return ESPANK_BAD_ARG;
    }
    if (max_time > 0.0 && t > max_time) {
        slurm_error("rankmap: --rankmap-time=%s is above this site's maximum of %g seconds",
                    optarg, max_time);
        return ESPANK_BAD_ARG;
    }
    strcpy(time_budget, optarg);
    return ESPANK_SUCCESS;
}

/* Registered in slurm_spank_init, not exported as the spank_options symbol: Slurm
 * registers an exported table by itself, and doing both printed "option provided by
 * both rankmap_spank.so and rankmap_spank.so" on every sbatch, srun and slurmd start. */
static struct spank_option rankmap_options[] = {
    {"comm-profile", "NAME",
     "rankmap: communication profile (store name or generator, e.g. stencil3d; "
     "summa-fpm[:FILE] with --rankmap=summa)", 1, 0,
     (spank_opt_cb_f)opt_profile},
    {"rankmap", "CHOICE", "rankmap: auto, off, summa, fast, eco, strong, or an algorithm such as topdown+n10", 1, 0,
     (spank_opt_cb_f)opt_choice},
    {"rankmap-time", "SECONDS", "rankmap: solver time budget (capped by the site)", 1, 0,
     (spank_opt_cb_f)opt_time},
    {"rankmap-record", "NAME",
     "rankmap: record this job's MPI communication as your profile NAME, which later "
     "jobs name with --comm-profile", 1, 0, (spank_opt_cb_f)opt_record},
    SPANK_OPTIONS_TABLE_END};

/* ---- a plain srun gets the job's placement ------------------------------------------ */

/* srun's long options that take a required argument (Slurm 25.11 src/common/slurm_opt.c;
 * a test compares the list with the running srun's --help), so that "--mpi pmix" is not
 * mistaken for the program. */
static const char *srun_long_with_arg[] = {
    "accel-bind", "account", "acctg-freq", "bcast-exclude", "begin", "chdir", "cluster",
    "cluster-constraint", "clusters", "comment", "constraint", "container", "container-id",
    "context", "core-spec", "cores-per-socket", "cpu-bind", "cpu-freq", "cpus-per-gpu",
    "cpus-per-task", "deadline", "delay-boot", "dependency", "distribution", "epilog",
    "error", "exclude", "export", "extra", "extra-node-info", "gid", "gpu-bind", "gpu-freq",
    "gpus", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags",
    "het-group", "hint", "input", "job-name", "jobid", "licenses", "mail-type", "mail-user",
    "mcs-label", "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "mpi",
    "msg-timeout", "network", "nodefile", "nodelist", "nodes", "ntasks", "ntasks-per-core",
    "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "ntasks-per-tres",
    "open-mode", "output", "pack-group", "partition", "prefer", "priority", "profile",
    "prolog", "qos", "relative", "reservation", "resources", "segment", "signal",
    "slurmd-debug", "sockets-per-node", "switches", "task-epilog", "task-prolog",
    "tasks-per-node", "thread-spec", "threads", "threads-per-core", "time", "time-min",
    "tmp", "tres-bind", "tres-per-task", "uid", "wait", "wckey", NULL};

/* srun's short options that take an argument (idem) */
static const char srun_short_with_arg[] = "ABCDFGJLMNSTWabcdeimnopqrtwx";

/* options that choose the step's nodes, tasks or their layout: such a step is the user's
 * own (or a launcher daemon's) and keeps srun's placement */
static const char *srun_layout_long[] = {
    "nodes", "nodelist", "exclude", "nodefile", "distribution", "relative",
    "ntasks-per-node", "ntasks-per-socket", "ntasks-per-core", "ntasks-per-gpu",
    "ntasks-per-tres", "tasks-per-node", "cpus-per-task", "het-group", "pack-group",
    "jobid", "no-allocate", "extra-node-info", "sockets-per-node", "cores-per-socket",
    "threads-per-core", "spread-job", "use-min-nodes", "multi-prog", NULL};
static const char srun_layout_short[] = "NwxFmrcBZ";

static int in_list(const char *name, const char **list)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(name, list[i]) == 0)
            return 1;
    return 0;
}

/* getopt_long takes any unambiguous prefix of a long option: the full name, or NULL
 * when the prefix names none or several (the caller then leaves the step alone) */
static const char *long_option(const char *given, size_t len)
{
    static const char *no_arg[] = {"label", "kill-on-bad-exit", "unbuffered", "quiet",
                                   "verbose", "overlap", "exact", "exclusive", "overcommit",
                                   "no-kill", "wait-all-nodes", "disable-status",
                                   "preserve-env", "pty", "quit-on-interrupt",
                                   "test-only", "immediate", "oversubscribe", "hold",
                                   "contiguous", "reboot", "send-libs", "help", "usage",
                                   "version", "x11", "propagate", "external-launcher",
                                   "mpi-combine", "oom-kill-step", "bcast", "compress",
                                   NULL};
    const char **lists[] = {srun_long_with_arg, srun_layout_long, no_arg};
    const char *found = NULL;
    for (int l = 0; l < 3; l++)
        for (int i = 0; lists[l][i]; i++) {
            const char *name = lists[l][i];
            if (strncmp(name, given, len) != 0)
                continue;
            if (strlen(name) == len)
                return name;
            if (found && strcmp(found, name) != 0)
                found = "";  /* ambiguous */
            else if (!found)
                found = name;
        }
    return (found && found[0]) ? found : NULL;
}

/* Whether srun's own arguments (argv[1..argc-1], up to its program) run a step rankmap
 * places: the task count is ``job_tasks`` (given by -n/--ntasks, else the job's
 * SLURM_NTASKS, ``env_tasks``), and no option picks the step's nodes, tasks or layout.
 * An option it cannot read (an unknown or ambiguous name) leaves the step alone. */
static int plain_step(int argc, char **argv, long job_tasks, long env_tasks)
{
    long tasks = env_tasks;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, ":") == 0)
            return 0;  /* a heterogeneous step */
        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
            break;  /* the program */
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            const char *name = long_option(a + 2, len);
            if (!name)
                return 0;
            const char *value = eq ? eq + 1 : NULL;
            if (!eq && in_list(name, srun_long_with_arg))
                value = (i + 1 < argc) ? argv[++i] : NULL;
            if (strcmp(name, "ntasks") == 0) {
                char *end;
                tasks = value ? strtol(value, &end, 10) : -1;
                if (!value || *end)
                    return 0;
            } else if (in_list(name, srun_layout_long)) {
                return 0;
            }
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            if (strchr(srun_layout_short, *c))
                return 0;
            if (!strchr(srun_short_with_arg, *c))
                continue;
            const char *value = c[1] ? c + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (*c == 'n') {
                char *end;
                tasks = value ? strtol(value, &end, 10) : -1;
                if (!value || *end)
                    return 0;
            }
            break;  /* the rest of the word was the argument */
        }
    }
    return tasks > 0 && tasks == job_tasks;
}

/* the host file's lines: one per task */
static long hostfile_tasks(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long lines = 0;
    int c, last = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n' && last != '\n')
            lines++;
        last = c;
    }
    if (last != '\n')
        lines++;
    fclose(f);
    return lines;
}

/* In srun: SLURM_HOSTFILE for a plain step of a mapped job (see the top of the file). */
static void place_plain_step(void)
{
    /* "SLURM_HOSTFILE=$RANKMAP_MACHINEFILE srun", the line of earlier releases, in a job
     * rankmap did not map: an empty SLURM_HOSTFILE, which srun would take as a file
     * named "" ("Hostlist is empty!"); it never means anything else */
    const char *given = getenv("SLURM_HOSTFILE");
    if (given && !given[0])
        unsetenv("SLURM_HOSTFILE");
    unsetenv(PLACED_VAR); /* a step inside a placed step's task is not placed by it */
    const char *hostfile = getenv("RANKMAP_SRUN_HOSTFILE");
    if (!hostfile || hostfile[0] != '/' || getenv("SLURM_STEP_ID") ||
        rankmap_off_value(getenv("RANKMAP_BIND")))
        return;
    /* the line of earlier releases names the job's own host file: placed as well */
    const char *mine = getenv("SLURM_HOSTFILE");
    const char *machinefile = getenv("RANKMAP_MACHINEFILE");
    int typed = mine && (!strcmp(mine, hostfile) || (machinefile && !strcmp(mine, machinefile)));
    if (mine && !typed)
        return; /* the user's own host file */
    static char buf[1 << 16];
    static char *argv[1024];
    int argc = rankmap_own_argv(buf, sizeof(buf), argv, 1024);
    const char *ntasks = getenv("SLURM_NTASKS");
    long env_tasks = ntasks ? strtol(ntasks, NULL, 10) : -1;
    if (argc < 1 || !plain_step(argc, argv, hostfile_tasks(hostfile), env_tasks))
        return;
    if (typed || (setenv("SLURM_HOSTFILE", hostfile, 1) == 0 &&
                  setenv("SLURM_DISTRIBUTION", "arbitrary", 1) == 0))
        setenv(PLACED_VAR, "1", 1);
    else
        return;
    /* GPU ranks: every task sees its node's GPUs of the step, and slurm_spank_task_init
     * narrows them to the rank's (Slurm's --gpus-per-task binding would give task i the
     * node's i-th GPU, whatever its cores); a --gpu-bind of the user's wins (srun takes
     * its option over the variable) and the binder then says the GPUs are Slurm's */
    char mask[64];
    read_gpu_mask(getenv("RANKMAP_BIND_FILE"), mask, sizeof mask, NULL);
    if (mask[0] && !getenv("SLURM_GPU_BIND")) {
        char bind[80];
        snprintf(bind, sizeof bind, "mask_gpu:%s", mask);
        setenv("SLURM_GPU_BIND", bind, 1);
    }
}

static int spank_env_get(void *sp, const char *name, char *buf, size_t len)
{
    return spank_getenv((spank_t)sp, name, buf, (int)len) == ESPANK_SUCCESS;
}

static int spank_env_set(void *sp, const char *name, const char *value)
{
    return spank_setenv((spank_t)sp, name, value, 1) == ESPANK_SUCCESS;
}

/* In an srun task, before it execs (remote context, after Slurm's own binding): a task
 * of a step place_plain_step placed runs from its first instruction on the cores of its
 * record in the bind file, so that what reads the mask before MPI_Init (an OpenMP
 * runtime building OMP_PLACES, a program's first threads) sees them.  Anything that
 * does not fit leaves the task as Slurm bound it: the binder, at MPI_Init, says why. */
static void bind_placed_task(spank_t sp)
{
    char placed[8], off[16], path[4096], node[256];
    if (spank_getenv(sp, PLACED_VAR, placed, sizeof placed) != ESPANK_SUCCESS ||
        strcmp(placed, "1") != 0)
        return;
    if (spank_getenv(sp, "RANKMAP_BIND", off, sizeof off) == ESPANK_SUCCESS &&
        rankmap_off_value(off))
        return;
    if (spank_getenv(sp, "RANKMAP_BIND_FILE", path, sizeof path) != ESPANK_SUCCESS ||
        spank_getenv(sp, "SLURMD_NODENAME", node, sizeof node) != ESPANK_SUCCESS)
        return;
    uint32_t rank, size;
    if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &size) != ESPANK_SUCCESS)
        return;
    static struct bind_record rec; /* slurmstepd's task process: one thread */
    char why[512];
    cpu_set_t set;
    if (read_record(path, (long)rank, (long)size, &rec, why, sizeof why) != 1 ||
        strcmp(rec.host, node) != 0)
        return;
    /* the binder in the program says why when this does not apply */
    if (rec.gpus[0]) {
        set_rank_nic(rec.nic, sp, spank_env_get, spank_env_set);
        narrow_gpus(rec.gpus, sp, spank_env_get, spank_env_set, why, sizeof why);
    }
    if (slot_cpus(rec.slot, &set, why, sizeof why))
        sched_setaffinity(0, sizeof set, &set);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_remote(sp) == 1)
        bind_placed_task(sp);
    return 0; /* never fail a task */
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "max_time=", 9) == 0) {
            char *end = NULL;
            errno = 0;
            double t = strtod(av[i] + 9, &end);
            /* a bad value is said and ignored: failing here would fail every srun */
            if (errno || end == av[i] + 9 || *end || !(t > 0.0))
                slurm_error("rankmap: plugstack argument %s: expected a positive number of "
                            "seconds; no maximum is applied", av[i]);
            else
                max_time = t;
        } else
            slurm_error("rankmap: unknown plugstack argument %s (known: max_time=SECONDS)",
                        av[i]);
    }
    for (int i = 0; rankmap_options[i].name; i++) {
        if (spank_option_register(sp, &rankmap_options[i]) != ESPANK_SUCCESS) {
            slurm_error("rankmap: cannot register option --%s", rankmap_options[i].name);
            return -1;
        }
    }
    /* before srun reads SLURM_HOSTFILE (src/srun/opt.c _opt_env, after spank_init) */
    if (spank_context() == S_CTX_LOCAL)
        place_plain_step();
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
        return 0;
    /* the variable keeps its first name (RANKMAP_MODE): queued jobs carry it across an
     * upgrade */
    const struct { const char *option, *var, *value; } pass[] = {
        {"comm-profile", "RANKMAP_COMM_PROFILE", profile},
        {"rankmap", "RANKMAP_MODE", choice},
        {"rankmap-time", "RANKMAP_TIME", time_budget},
        {"rankmap-record", "RANKMAP_RECORD", record},
    };
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        if (!pass[i].value[0])
            continue;
        spank_err_t rc = spank_job_control_setenv(sp, pass[i].var, pass[i].value, 1);
        if (rc != ESPANK_SUCCESS) {
            /* the job would run without what the user asked for: refuse it, saying why */
            slurm_error("rankmap: --%s=%s cannot be passed to the job (%s): not submitted",
                        pass[i].option, pass[i].value, spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}
