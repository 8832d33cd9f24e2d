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
 * plugstack.conf:  optional /usr/lib/x86_64-linux-gnu/slurm/rankmap_spank.so [max_time=60]
 * Build against the running Slurm's headers (SPANK plugins are tied to a Slurm major
 * release): see Makefile.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <slurm/spank.h>

SPANK_PLUGIN(rankmap, 1);

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

static int valid_neighbourhood(const char *s)
{
    if (strcasecmp(s, "n2") == 0 || strcasecmp(s, "np") == 0)
        return 1;
    if (strncasecmp(s, "np", 2) == 0)
        return all_digits(s + 2) && atoi(s + 2) >= 2;
    if (strncasecmp(s, "nc", 2) == 0)
        return all_digits(s + 2) && atoi(s + 2) >= 1;
    if (s[0] == 'n' || s[0] == 'N')
        return all_digits(s + 1) && atoi(s + 1) >= 1;
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

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "max_time=", 9) == 0)
            max_time = strtod(av[i] + 9, NULL);
        else
            slurm_error("rankmap: unknown plugstack argument %s (known: max_time=SECONDS)",
                        av[i]);
    }
    for (int i = 0; rankmap_options[i].name; i++) {
        if (spank_option_register(sp, &rankmap_options[i]) != ESPANK_SUCCESS) {
            slurm_error("rankmap: cannot register option --%s", rankmap_options[i].name);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
        return 0;
    if (profile[0])
        spank_job_control_setenv(sp, "RANKMAP_COMM_PROFILE", profile, 1);
    /* the variable keeps its first name: queued jobs carry it across an upgrade */
    if (choice[0])
        spank_job_control_setenv(sp, "RANKMAP_MODE", choice, 1);
    if (time_budget[0])
        spank_job_control_setenv(sp, "RANKMAP_TIME", time_budget, 1);
    if (record[0])
        spank_job_control_setenv(sp, "RANKMAP_RECORD", record, 1);
    return 0;
}
