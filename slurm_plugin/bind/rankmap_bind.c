/*
 * librankmap_bind: binds every MPI rank to the cores rankmap chose for it, whatever
 * the launcher (srun, Open MPI's mpirun, MPICH's or Intel MPI's mpiexec), with no
 * change to the application.
 *
 * The TaskProlog puts this library in LD_PRELOAD and names the job's bind file in
 * RANKMAP_BIND_FILE.  The library defines MPI_Init, MPI_Init_thread and their PMPI_
 * names (Fortran bindings call the latter), finds the MPI's own with
 * dlsym(RTLD_NEXT, ...) and is linked against no MPI: the interposition Darshan and
 * mpiP use (an MPI loaded privately, as mpi4py does, is found among the loaded objects).
 * Around the real call (before it, so that the MPI's shared-memory segments are touched
 * from the right core, and after it, for MPIs that pin inside MPI_Init) it sets the
 * affinity of every thread of the process (those started before MPI_Init too) to the
 * cores of its rank.  It only binds when all of these hold, and otherwise leaves the
 * launcher's binding alone:
 *
 *   - RANKMAP_BIND is not "off" (or 0/no/false): the user's switch for one step;
 *   - the launcher family (below) is in RANKMAP_BIND_LAUNCHERS, when that is set;
 *   - the launcher was given rankmap's hosts (hosts_given: a rankfile, a Hydra host
 *     file, srun's arbitrary distribution), so it did not place the ranks itself;
 *   - the rank and world size come from the launcher's environment: Open MPI's
 *     OMPI_COMM_WORLD_RANK/_SIZE, Hydra's (MPICH, Intel MPI) PMI_RANK/PMI_SIZE (with
 *     MPI_LOCALNRANKS, which srun's pmi2 tasks lack), or
 *     srun's SLURM_PROCID with SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), first found
 *     (families openmpi, hydra, srun);
 *   - the world size equals the job's rank count (a step of another size gets the
 *     launcher's placement: the plan is for the job's ranks, not for any subset);
 *   - the rank runs on the host the plan put it on (gethostname, or Slurm's node
 *     name in SLURMD_NODENAME for srun tasks), so a launcher that did not take the
 *     host list never has its ranks bound to another host's cores;
 *   - every core of the rank's slot exists here.
 *
 * The bind file (rendered by slurm_plugin.outputs.render.render_bindfile) is text in
 * fixed-width records, so a rank reads its own line with one pread, O(1) in the job's
 * size:
 *
 *   rankmap-bind 1 NRANKS WIDTH\n           (the header, padded to WIDTH bytes)
 *   RANK HOST SOCKET:CORES[;SOCKET:CORES]\n  (record r at byte WIDTH * (r + 1))
 *
 * SOCKET:CORES is the Open MPI rankfile's slot: logical socket and logical core
 * indices inside it (hwloc's numbering: sockets by physical package id, cores by
 * their first hardware thread).  They are turned into the OS's CPU numbers from
 * /sys/devices/system/cpu, every hardware thread of a core included.
 *
 * Messages go to stderr, prefixed "rankmap:": rank 0 says why the launch is not bound;
 * a reason of one rank's own (its record, its host, its cores) is said by the first rank
 * of each node that meets one, once per node and launch (first_on_node); with
 * RANKMAP_BIND_VERBOSE=1 every rank also says what it bound.
 *
 * Build: make -C slurm_plugin/bind OUT=DIR (plain cc; no MPI needed).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../preload/bind_record.h"
#include "../preload/mpi_symbol.h"
#include "../preload/own_cmdline.h"

typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);

static int depth; /* >0 inside our own call: an MPI whose MPI_Init calls PMPI_Init */
static int bound_cpus = -1; /* set once per process: -1 not decided, 0 not bound */
static cpu_set_t bound_set;

static int verbose(void)
{
    const char *v = getenv("RANKMAP_BIND_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

static void say(long rank, int always, const char *fmt, ...)
{
    va_list ap;
    char text[1024];
    if (!(always && rank == 0) && !verbose())
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rankmap: rank %ld: %s\n", rank, text);
}

/* Whether this is the first rank of this launch on this node to ask: the ranks a
 * launcher starts on one node share its daemon (orted, prted, hydra_pmi_proxy,
 * slurmstepd) as parent, and only one process can hold an abstract socket name made of
 * the user and that parent; it is held until the process ends, and nothing is left
 * behind.  When the name cannot be tried, every rank answers yes (say rather than
 * hide). */
static int first_on_node(void)
{
    static int first = -1;
    if (first >= 0)
        return first;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return first = 1;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "rankmap-bind-%ld-%ld",
                       (long)getuid(), (long)getppid());
    socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    if (bind(fd, (struct sockaddr *)&addr, size) == 0)
        return first = 1; /* fd stays open: the name is this process's until it ends */
    int taken = errno == EADDRINUSE;
    close(fd);
    return first = !taken;
}

/* A reason of this rank's own (its record, its host, its cores): said once per node and
 * launch, by the first rank there that meets one (first_on_node), rank 0 included, so
 * that a node whose ranks all meet it prints one line, not one per rank. */
static void say_rank(long rank, const char *fmt, ...)
{
    va_list ap;
    char text[1024];
    if (!first_on_node() && !verbose())
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "rankmap: rank %ld: %s%s\n", rank, text,
            verbose() ? "" : " (said once per node: other ranks here may share it)");
}

static int switched_off(void)
{
    return rankmap_off_value(getenv("RANKMAP_BIND"));
}

/* A non-negative decimal integer environment variable; -1 when unset or not one. */
static long env_number(const char *name)
{
    const char *v = getenv(name);
    char *end;
    long n;
    if (!v || !*v)
        return -1;
    errno = 0;
    n = strtol(v, &end, 10);
    if (errno || *end || n < 0)
        return -1;
    return n;
}

/* The rank and world size the launcher gave this process; 0 when none did. */
static int launcher_rank(long *rank, long *size, const char **who, const char **family)
{
    /* rank, size, size if the first is unset, a variable the family always sets */
    static const char *pairs[][5] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, NULL, "openmpi"},
        /* Hydra's proxies set MPI_LOCALNRANKS; srun's pmi2 plugin sets PMI_RANK too,
         * but not that: its tasks are srun's (their SLURM_PROCID is the rank) */
        {"PMI_RANK", "PMI_SIZE", NULL, "MPI_LOCALNRANKS", "hydra"},
        {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", NULL, "srun"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        long r = env_number(pairs[i][0]);
        if (r < 0 || (pairs[i][3] && !getenv(pairs[i][3])))
            continue;
        long s = env_number(pairs[i][1]);
        if (s < 0 && pairs[i][2])
            s = env_number(pairs[i][2]);
        *rank = r;
        *size = s;
        *who = pairs[i][0];
        *family = pairs[i][4];
        return 1;
    }
    return 0;
}

/* The launcher of FAMILY was given rankmap's hosts: Open MPI its rankfile (Open MPI 4.1
 * reads OMPI_MCA_rmaps_rank_file_path; for Open MPI 5 rankmap-prterun sets RANKMAP_BIND=off
 * when it did not add the rankfile), Hydra a host file, srun a host file (arbitrary
 * distribution).  Otherwise the launcher placed the ranks itself, and a job that
 * renumbers them (RANKMAP_REORDER, rankmap_comm) relies on their staying where the
 * launcher put them: binding the ranks that happen to sit on their planned host would
 * break that.  Returns the hint for the user when not. */
static const char *hosts_given(const char *family)
{
    const char *v;
    if (!strcmp(family, "openmpi")) {
        v = getenv("OMPI_MCA_rmaps_rank_file_path");
        return v && *v ? NULL : "Open MPI placed the ranks itself (no rankfile)";
    }
    if (!strcmp(family, "hydra")) {
        if ((v = getenv("HYDRA_HOST_FILE")) && *v)
            return NULL;
        if ((v = getenv("I_MPI_HYDRA_HOST_FILE")) && *v)
            return NULL;
        return "Hydra placed the ranks itself (no HYDRA_HOST_FILE)";
    }
    v = getenv("SLURM_DISTRIBUTION");
    return v && !strncmp(v, "arbitrary", 9)
               ? NULL
               : "srun placed the ranks itself (a step with its own -N, -w, -m or "
                 "--ntasks-per-node, or of another size, keeps Slurm's placement)";
}

/* FAMILY is in the comma list of RANKMAP_BIND_LAUNCHERS (the site's supported
 * launchers); every family when it is unset. */
static int supported(const char *family)
{
    const char *list = getenv("RANKMAP_BIND_LAUNCHERS");
    return !list || rankmap_listed(list, family);
}

/* The plan's host is this one: the kernel's host name (short or full) or, for srun
 * tasks, Slurm's node name. */
static int on_host(const char *host, char *here, size_t herelen)
{
    char name[256];
    const char *node = getenv("SLURMD_NODENAME");
    if (gethostname(name, sizeof name) != 0)
        name[0] = 0;
    name[sizeof name - 1] = 0;
    snprintf(here, herelen, "%s", name);
    if (!strcmp(name, host))
        return 1;
    size_t shortlen = strcspn(name, ".");
    if (strlen(host) == shortlen && !strncmp(name, host, shortlen))
        return 1;
    /* srun sets SLURMD_NODENAME in its tasks; mpirun's ranks may carry the batch
     * node's, so it only counts for a task srun started itself */
    if (node && getenv("SLURM_PROCID") && !getenv("OMPI_COMM_WORLD_RANK") &&
        !getenv("PMI_RANK") && !strcmp(node, host))
        return 1;
    return 0;
}

/* Whether the OpenMP runtime binds the program's threads itself (OMP_PROC_BIND set and
 * not false): it pins each thread, the initial one included, to a place inside the
 * mask the rank started with. */
static int runtime_binds_threads(void)
{
    const char *v = getenv("OMP_PROC_BIND");
    return v && *v && strcasecmp(v, "false") != 0;
}

/* Whether MASK (of thread TID, 0 for the caller) is non-empty and inside SET. */
static int inside(pid_t tid, const cpu_set_t *set, cpu_set_t *mask)
{
    cpu_set_t both;
    if (sched_getaffinity(tid, sizeof *mask, mask) != 0 || CPU_COUNT(mask) == 0)
        return 0;
    CPU_AND(&both, mask, set);
    return CPU_EQUAL(&both, mask);
}

/* SET for every thread of the process: sched_setaffinity(0, ...) binds the calling
 * thread only, and threads started before MPI_Init (an OpenMP runtime's pool, an I/O
 * library's helper) would keep the launcher's mask.  A thread pinned inside SET on its
 * own keeps its pin: one whose mask differs from the calling thread's (a pool thread on
 * its OpenMP place), and with OMP_PROC_BIND any thread inside SET, the calling one
 * too (the runtime pinned it to its first place).  A thread that inherited the
 * launcher's mask gets SET.  The calling thread's result is returned; a thread that
 * ends meanwhile is no error. */
static int bind_threads(const cpu_set_t *set)
{
    cpu_set_t before, mask;
    int known = sched_getaffinity(0, sizeof before, &before) == 0;
    int runtime = runtime_binds_threads();
    int rc = (runtime && inside(0, set, &mask)) ? 0 : sched_setaffinity(0, sizeof *set, set);
    int saved = errno;
    pid_t self = (pid_t)syscall(SYS_gettid);
    DIR *tasks = rc == 0 ? opendir("/proc/self/task") : NULL;
    if (tasks) {
        struct dirent *e;
        while ((e = readdir(tasks))) {
            char *end;
            long tid = strtol(e->d_name, &end, 10);
            if (e->d_name[0] == '.' || *end || tid <= 0 || (pid_t)tid == self)
                continue;
            if (known && inside((pid_t)tid, set, &mask) &&
                (runtime || !CPU_EQUAL(&mask, &before)))
                continue;
            sched_setaffinity((pid_t)tid, sizeof *set, set);
        }
        closedir(tasks);
    }
    errno = saved;
    return rc;
}

/* This process's record in the bind file when the launch is one rankmap placed (see
 * the top of the file): 1 with its rank, host, slot and GPUs.  Otherwise 0, and, unless
 * QUIET, rank 0 (or, for a reason of the rank's own, the first rank of each node) says
 * why. */
static int rank_record(int quiet, long *rank_out, struct bind_record *rec)
{
    char why[512] = "", here[256];
    long rank = -1, size = -1;
    const char *who = NULL, *family = NULL;
    const char *path = getenv("RANKMAP_BIND_FILE");
#define SAY(...) do { if (!quiet) say(__VA_ARGS__); } while (0)
#define SAY_RANK(...) do { if (!quiet) say_rank(__VA_ARGS__); } while (0)
    if (!path || !*path || switched_off())
        return 0;
    if (!launcher_rank(&rank, &size, &who, &family)) {
        SAY(0, 1, "no launcher rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK, "
                  "SLURM_PROCID): not bound");
        return 0;
    }
    *rank_out = rank;
    if (!supported(family)) {
        SAY(rank, 1, "the site does not support %s launches ([launchers] supported): "
                     "not bound", family);
        return 0;
    }
    const char *hint = hosts_given(family);
    if (hint) {
        SAY(rank, 1, "%s: not bound", hint);
        return 0;
    }
    if (size < 0) {
        SAY(rank, 1, "the launcher gave no world size beside %s: not bound", who);
        return 0;
    }
    if (rank >= size) {
        SAY(rank, 1, "rank %ld outside a world of %ld: not bound", rank, size);
        return 0;
    }
    int record = read_record(path, rank, size, rec, why, sizeof why);
    if (record <= 0) {  /* the file's or the launch's reason (0), or this rank's (-1) */
        if (record == 0)
            SAY(rank, 1, "%s", why);
        else
            SAY_RANK(rank, "%s", why);
        return 0;
    }
    if (!on_host(rec->host, here, sizeof here)) {
        SAY_RANK(rank, "runs on %s, the placement put it on %s (the launcher did not take "
                       "rankmap's host list): not bound", here, rec->host);
        return 0;
    }
#undef SAY
#undef SAY_RANK
    return 1;
}

/* Decides once per process whether and where to bind; then (re)applies it. */
static void bind_rank(void)
{
    static struct bind_record rec; /* once per process (bound_cpus), MPI_Init's thread */
    char why[512] = "";
    const char *host = rec.host, *slot = rec.slot, *gpus = rec.gpus;
    long rank = -1;

    if (bound_cpus == 0)
        return;
    if (bound_cpus > 0) { /* re-assert after the MPI's own initialisation (its threads) */
        bind_threads(&bound_set);
        return;
    }
    bound_cpus = 0;
    if (!rank_record(0, &rank, &rec))
        return;
    if (!slot_cpus(slot, &bound_set, why, sizeof why)) {
        say_rank(rank, "slot %.200s on %.200s: %.300s: not bound", slot, host, why);
        return;
    }
    if (bind_threads(&bound_set) != 0) {
        say_rank(rank, "binding to slot %.200s on %.200s failed: %s: not bound", slot, host,
                 strerror(errno));
        return;
    }
    bound_cpus = CPU_COUNT(&bound_set);
    if (verbose()) {
        char list[512] = "";
        size_t used = 0;
        for (int c = 0; c < CPU_SETSIZE && used < sizeof list - 16; c++)
            if (CPU_ISSET(c, &bound_set))
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                         used ? "," : "", c);
        say(rank, 0, "on %s bound to cpus %s (slot %s%s%s)", host, list, slot,
            gpus[0] ? ", gpus " : "", gpus);
    }
}

static int process_env_get(void *ctx, const char *name, char *buf, size_t len)
{
    (void)ctx;
    const char *v = getenv(name);
    if (!v)
        return 0;
    snprintf(buf, len, "%s", v);
    return 1;
}

static int process_env_set(void *ctx, const char *name, const char *value)
{
    (void)ctx;
    return setenv(name, value, 1) == 0;
}

/* A rank of a GPU job: its device variables name its planned GPUs before the program
 * runs (a CUDA or HIP runtime may start before MPI_Init, in a static constructor).  srun
 * tasks come with them done by the SPANK plugin; the ranks of mpirun and mpiexec get
 * them here.  What cannot be done is said once per node (RANKMAP_GPUS_SAID keeps a
 * rank's own children quiet). */
static void set_rank_gpus(void)
{
    static struct bind_record rec; /* the constructor: one thread */
    char why[512] = "";
    long rank = -1;
    /* the batch script's own processes carry SLURM_PROCID=0 but are no step's task */
    if (!getenv("SLURM_STEP_ID") && !getenv("OMPI_COMM_WORLD_RANK") && !getenv("PMI_RANK"))
        return;
    if (!rank_record(1, &rank, &rec) || !rec.gpus[0])
        return;
    set_rank_nic(rec.nic, NULL, process_env_get, process_env_set);
    if (narrow_gpus(rec.gpus, NULL, process_env_get, process_env_set, why, sizeof why) ||
        getenv("RANKMAP_GPUS_SAID"))
        return;
    say_rank(rank, "gpus %s on %s: %s", rec.gpus, rec.host, why);
    setenv("RANKMAP_GPUS_SAID", "1", 1);
}

/* In a launch rankmap places: the daemons its mpirun or mpiexec starts with srun (orted,
 * hydra_pmi_proxy: one task per node) see their node's GPUs of the job, so that each
 * rank's can be narrowed to its own.  Their step inherits the job's GPUs per task (one
 * task: one GPU), so it asks for the GPUs per node instead (the fewest of any node: a
 * node with more keeps the rest from its ranks, which say so), seen by its one task
 * (the mask).  Hydra hands its ranks mpiexec's environment over the proxy's: the batch
 * host's device variables would reach every node, so mpiexec drops them and each rank
 * keeps its proxy's. */
static void widen_daemon_gpus(const char *family)
{
    char mask[64], text[80];
    long per_node = 0;
    read_gpu_mask(getenv("RANKMAP_BIND_FILE"), mask, sizeof mask, &per_node);
    if (!mask[0] || per_node < 1)
        return;
    if (!strcmp(family, "hydra"))
        for (int v = 0; gpu_vars[v]; v++)
            unsetenv(gpu_vars[v]);
    unsetenv("SLURM_GPUS_PER_TASK");
    const char *tres = getenv("SLURM_TRES_PER_TASK");
    if (tres) { /* cpu=2,gres/gpu:1 (Slurm 23.11+): its GPUs go, the rest stays */
        char kept[MAX_RECORD] = "", copy[MAX_RECORD], *save = NULL;
        snprintf(copy, sizeof copy, "%s", tres);
        for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
            if (strncmp(p, "gres/gpu", 8) && strncmp(p, "gres:gpu", 8))
                snprintf(kept + strlen(kept), sizeof kept - strlen(kept), "%s%s",
                         kept[0] ? "," : "", p);
        if (kept[0])
            setenv("SLURM_TRES_PER_TASK", kept, 1);
        else
            unsetenv("SLURM_TRES_PER_TASK");
    }
    snprintf(text, sizeof text, "%ld", per_node);
    setenv("SLURM_GPUS_PER_NODE", text, 1);
    if (getenv("SLURM_GPU_BIND"))
        return;
    snprintf(text, sizeof text, "mask_gpu:%s", mask);
    setenv("SLURM_GPU_BIND", text, 1);
}

/* ---- the launch guard: a launch rankmap does not place gets no host list ----------------
 *
 * Open MPI 4.1's mpirun (orterun) reads the rankfile from OMPI_MCA_rmaps_rank_file_path
 * and Hydra's mpiexec (MPICH, Intel MPI) its host file from HYDRA_HOST_FILE /
 * I_MPI_HYDRA_HOST_FILE, both exported job-wide by the TaskProlog: by themselves they
 * would follow rankmap's list in a launch of another size (its first slots) or under
 * RANKMAP_BIND=off.  This library is preloaded into the launcher too, so before the
 * launcher's main reads its environment a constructor unsets those variables, and sets
 * RANKMAP_BIND=off for its ranks, when the launch is not rankmap's: RANKMAP_BIND=off, an
 * option that places the ranks, several programs (a : b), or a rank count other than the
 * plan's.  Open MPI 5's mpirun goes through rankmap-prterun, whose rule this is
 * (slurm_plugin/lifecycle/prterun_wrapper.py; a test runs one table of cases against
 * both).  A placement that interleaves hosts reaches MPICH as a rank map too
 * (HYDRA_CONFIG_FILE, the job's hydra_rankmap): a Hydra that cannot take it (before MPICH
 * 5.0.2, Intel MPI) would run the ranks in blocks of the host file, so it is given none
 * of them (takes_rank_map). */

/* options by which the user places the ranks, per family (leading dashes stripped for
 * Hydra, which takes one or two) */
static const char *openmpi_placement[] = {
    "--map-by", "-map-by", "--rankfile", "-rankfile", "-rf", "--host", "-host", "-H",
    "--hostfile", "-hostfile", "--machinefile", "-machinefile", "--default-hostfile",
    "--add-host", "--add-hostfile", NULL};
static const char *openmpi_count[] = {"-np", "--np", "-n", "--n", "-c", NULL};
static const char *hydra_placement[] = {"f", "hostfile", "machinefile", "machine", "hosts",
                                        "host", "ppn", "perhost", "rr", "grr", "configfile",
                                        "rankmap", NULL};
static const char *hydra_count[] = {"n", "np", NULL};

static int listed(const char *name, size_t len, const char **list)
{
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == len && !strncmp(name, list[i], len))
            return 1;
    return 0;
}

/* Why the launch ARGV (the launcher's own arguments, argv[0] excluded) of FAMILY
 * ("openmpi" or "hydra") is not rankmap's, for a plan of PLANNED ranks (-1: unknown);
 * NULL when it is.  WHY holds the text. */
static const char *launch_not_rankmaps(const char *family, int argc, char **argv,
                                       long planned, char *why, size_t whylen)
{
    int hydra = !strcmp(family, "hydra");
    const char **placement = hydra ? hydra_placement : openmpi_placement;
    const char **count = hydra ? hydra_count : openmpi_count;
    const char *who = hydra ? "Hydra" : "Open MPI";
    if (switched_off()) {
        snprintf(why, whylen, "RANKMAP_BIND=off: %s places the ranks", who);
        return why;
    }
    long asked = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, ":")) {
            snprintf(why, whylen, "several programs (a : b): %s places the ranks", who);
            return why;
        }
        if (a[0] != '-')
            continue;
        const char *name = hydra ? a + strspn(a, "-") : a;
        size_t len = strcspn(name, "=");
        if (listed(name, len, placement)) {
            snprintf(why, whylen, "the command line places the ranks itself (%.*s): "
                     "rankmap's hosts not given", (int)(len + (size_t)(name - a)), a);
            return why;
        }
        if (asked < 0 && listed(name, len, count)) {
            const char *v = name[len] == '=' ? name + len + 1 : (i + 1 < argc ? argv[i + 1] : "");
            char *end;
            asked = strtol(v, &end, 10);
            if (end == v || *end)
                asked = -2; /* not a number: the launcher will say */
        }
    }
    if (asked >= 0 && planned >= 0 && asked != planned) {
        snprintf(why, whylen, "this launch asks for %ld ranks and the job's placement has "
                 "%ld: %s places the ranks", asked, planned, who);
        return why;
    }
    return NULL;
}

/* The ranks of the plan: the bind file's header; -1 when it cannot be read. */
static long planned_ranks(void)
{
    const char *path = getenv("RANKMAP_BIND_FILE");
    char buf[65];
    long version, nranks, width;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, buf, 64, 0);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return sscanf(buf, "rankmap-bind %ld %ld %ld", &version, &nranks, &width) == 3 ? nranks
                                                                                 : -1;
}

/* The launcher family this process is, from its executable: Open MPI 4's orterun (its
 * mpirun and mpiexec are links to it), Hydra's mpiexec.hydra (MPICH's mpiexec and Intel
 * MPI's mpirun exec it), or NULL. */
static const char *launcher_family(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = 0;
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    if (!strcmp(base, "orterun"))
        return "openmpi";
    if (!strcmp(base, "mpiexec.hydra"))
        return "hydra";
    if (strcmp(base, "mpiexec") && strcmp(base, "mpirun"))
        return NULL;
    /* MPICH may install Hydra as plain mpiexec: Hydra's proxy lies beside it */
    snprintf(exe + (base - exe), sizeof exe - (size_t)(base - exe), "hydra_pmi_proxy");
    return access(exe, X_OK) == 0 ? "hydra" : NULL;
}

/* The OpenMP placement the TaskProlog gave a hybrid job (job_conventions.py
 * OPENMP_EXPORTS): places of one core, built by the OpenMP runtime from the mask a rank
 * starts with.  Hydra's ranks start with their proxy's mask and are bound only at
 * MPI_Init, so their places would span the node: in mpiexec the ones the TaskProlog set
 * (listed in RANKMAP_OMP_SET, value unchanged) are unset, and the ranks' threads keep
 * the mask MPI_Init gives them, the rank's cores. */
static const char *openmp_exports[][2] = {{"OMP_PLACES", "cores"},
                                          {"OMP_PROC_BIND", "close"}};

static void unset_openmp_exports(void)
{
    const char *set = getenv("RANKMAP_OMP_SET");
    if (!set)
        return;
    for (size_t i = 0; i < sizeof openmp_exports / sizeof openmp_exports[0]; i++) {
        const char *name = openmp_exports[i][0], *v = getenv(name);
        if (rankmap_listed(set, name) && v && !strcmp(v, openmp_exports[i][1]))
            unsetenv(name);
    }
}

/* Whether this Hydra takes a rank map (-rankmap, which the job's HYDRA_CONFIG_FILE gives
 * a placement that interleaves hosts): MPICH 5.0.2 and later, whose mpiexec hands each
 * proxy its ranks as --exec-rank; 4.1 to 5.0.1 accept -rankmap but number the ranks
 * round-robin, Intel MPI's has none.  The executable is searched for that option's
 * name (Hydra is linked into it). */
static int takes_rank_map(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct stat st;
    int found = 0;
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            found = memmem(map, (size_t)st.st_size, "--exec-rank", 11) != NULL;
            munmap(map, (size_t)st.st_size);
        }
    }
    close(fd);
    return found;
}

/* HYDRA_CONFIG_FILE names the job's rank map: the file beside RANKMAP_BIND_FILE. */
static int job_rank_map_given(void)
{
    const char *config = getenv("HYDRA_CONFIG_FILE"), *bind = getenv("RANKMAP_BIND_FILE");
    const char *slash = bind ? strrchr(bind, '/') : NULL;
    size_t dir = slash ? (size_t)(slash - bind) : 0;
    return config && slash && !strncmp(config, bind, dir + 1) &&
           !strcmp(config + dir + 1, "hydra_rankmap");
}

__attribute__((constructor)) static void guard_launch(void)
{
    static const char *openmpi_vars[] = {"OMPI_MCA_rmaps_rank_file_path",
                                         "OMPI_MCA_rmaps_rankfile_path", NULL};
    static const char *hydra_vars[] = {"HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE", NULL};
    if (!getenv("RANKMAP_BIND_FILE"))
        return; /* not in a job rankmap placed */
    const char *family = launcher_family();
    if (!family) {
        set_rank_gpus();
        return;
    }
    if (!strcmp(family, "hydra"))
        unset_openmp_exports();
    const char **vars = strcmp(family, "hydra") ? openmpi_vars : hydra_vars;
    /* a HYDRA_CONFIG_FILE of the user's own is theirs, whatever the launch */
    int rank_map = !strcmp(family, "hydra") && job_rank_map_given();
    int given = rank_map;
    for (int i = 0; vars[i]; i++)
        given |= getenv(vars[i]) && *getenv(vars[i]);
    if (!given)
        return;
    static char buf[1 << 16];
    static char *argv[2048];
    int argc = rankmap_own_argv(buf, sizeof buf, argv, 2048);
    char why[512];
    if (rank_map && !takes_rank_map())
        snprintf(why, sizeof why, "this mpiexec cannot take the job's placement, whose "
                 "hosts interleave (it needs MPICH 5.0.2 or later; Intel MPI has no rank "
                 "map): Hydra places the ranks");
    else if (argc < 1 ||
             !launch_not_rankmaps(family, argc - 1, argv + 1, planned_ranks(), why,
                                  sizeof why)) {
        if (!switched_off())
            widen_daemon_gpus(family);
        return;
    }
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    if (rank_map)
        unsetenv("HYDRA_CONFIG_FILE");
    /* Intel MPI's count per host, when it is still the one the TaskProlog set */
    const char *perhost = getenv("I_MPI_PERHOST"), *ours = getenv("RANKMAP_I_MPI_PERHOST");
    if (!strcmp(family, "hydra") && perhost && ours && !strcmp(perhost, ours))
        unsetenv("I_MPI_PERHOST");
    setenv("RANKMAP_BIND", "off", 1); /* and its ranks keep the launcher's binding */
    fprintf(stderr, "rankmap: %s\n", why);
}

/* MPI's error class MPI_ERR_OTHER in MPICH (15; Intel MPI the same) and Open MPI (16):
 * both are nonzero, which is all a caller can test without its MPI's header */
#define NO_MPI_ERROR 16

/* The MPI's own NAME (../preload/mpi_symbol.h), or NULL, said once: a process that
 * calls MPI_Init with no MPI loaded (a weak reference to MPI_Init, which the preload
 * makes non-null) gets an error code back, never an abort. */
static void *next(const char *name, void *self)
{
    static int said;
    void *f = rankmap_mpi_symbol(name, self);
    if (!f && !said++)
        fprintf(stderr, "rankmap: %s: no MPI library in this process defines it (a weak "
                        "reference to MPI, made non-null by librankmap_bind?): returning "
                        "an error\n", name);
    return f;
}

static int init(const char *name, void *self, int *argc, char ***argv)
{
    init_fn real = (init_fn)next(name, self);
    int rc;
    if (!real)
        return NO_MPI_ERROR;
    if (depth++ == 0)
        bind_rank();
    rc = real(argc, argv);
    if (--depth == 0)
        bind_rank();
    return rc;
}

static int init_thread(const char *name, void *self, int *argc, char ***argv,
                       int required, int *provided)
{
    init_thread_fn real = (init_thread_fn)next(name, self);
    int rc;
    if (!real)
        return NO_MPI_ERROR;
    if (depth++ == 0)
        bind_rank();
    rc = real(argc, argv, required, provided);
    if (--depth == 0)
        bind_rank();
    return rc;
}

int MPI_Init(int *argc, char ***argv)
{
    return init("MPI_Init", (void *)MPI_Init, argc, argv);
}

int PMPI_Init(int *argc, char ***argv)
{
    return init("PMPI_Init", (void *)PMPI_Init, argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    return init_thread("MPI_Init_thread", (void *)MPI_Init_thread, argc, argv, required,
                       provided);
}

int PMPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    return init_thread("PMPI_Init_thread", (void *)PMPI_Init_thread, argc, argv, required,
                       provided);
}
