/*
 * librankmap_record: records an MPI application's communication profile, whatever the
 * MPI (Open MPI, MPICH, Intel MPI), with no change to the application.
 *
 * Preloaded with LD_PRELOAD and told where to write by RANKMAP_RECORD_DIR (nothing is
 * recorded, and nothing written, when it is unset or empty).  Like librankmap_bind it
 * is linked against no MPI and includes no MPI header: it defines the MPI_ functions
 * below and their PMPI_ names (Open MPI's Fortran bindings call the latter), finds the
 * MPI's own with dlsym(RTLD_NEXT, ...) or, for an MPI loaded privately (mpi4py), among
 * the loaded objects, and calls the MPI's PMPI_Type_size, PMPI_Comm_rank, ... the same
 * way.  A call made from inside another wrapped call (an MPI whose MPI_X calls PMPI_X)
 * is counted once.
 *
 * It never ends or stalls the program it is loaded into.  A function the MPI lacks is
 * an error code (16, MPI_ERR_OTHER in Open MPI) and one message, never an abort; an MPI
 * function the recorder itself needs but cannot find means nothing is recorded (said
 * once, by rank 0).  A rank that cannot go on recording (no memory) stops, says why
 * on stderr and in its file (the "stopped" line: the merge then calls the recording
 * incomplete), and still takes part in MPI_Finalize's one collective step, so that the
 * other ranks never wait for it.
 *
 * Threads (MPI_THREAD_MULTIPLE): no lock is held across an MPI call, and no MPI call is
 * made under one.  Sends on MPI_COMM_WORLD take no lock at all (atomic adds to the
 * rank's row, or a lock-free hash beyond the dense limit); a send on another
 * communicator reads the communicator cache under a reader lock (readers run
 * together); a new communicator's groups are asked of the MPI with no lock held and
 * entered under the writer lock; collectives and persistent requests update their
 * tables under one mutex (a sleeping lock: a waiter does not burn its core).  The
 * cache is open addressing over COMM_SLOTS handles with tombstones for freed ones, so
 * any number of communicators alive at once, up to 3/4 of the slots, is looked up
 * once; beyond that a communicator's messages are counted as dropped (never looked up
 * again on every send).  The per-call nesting depth is initial-exec TLS.
 *
 * Opaque handles differ between ABIs: Open MPI's are pointers, MPICH's and Intel MPI's
 * ints.  Every handle is taken and passed on as an integer of pointer width (an int
 * argument occupies a whole register or stack slot in the x86-64 and AArch64 calling
 * conventions, so passing it on unchanged is exact); only its low 32 bits are compared
 * under the MPICH ABI, and arrays of handles (MPI_Startall) are read at the ABI's
 * width.  The ABI is found at run time: Open MPI exports ompi_mpi_comm_world, whose
 * address is its MPI_COMM_WORLD; otherwise the MPICH ABI (MPI_COMM_WORLD 0x44000000,
 * MPI_IN_PLACE (void *)-1) is assumed.  The MPI-5 standard ABI (MPICH's libmpi_abi,
 * mpicc_abi) is not known: a program using it is not recorded (a message says so).
 *
 * What is counted, per rank:
 *   - point-to-point sends: bytes and messages per destination world rank for
 *     MPI_Send, Isend, Ssend, Issend, Bsend, Ibsend, Rsend, Irsend, Sendrecv,
 *     Sendrecv_replace, and the persistent Send_init, Ssend_init, Bsend_init,
 *     Rsend_init counted at each MPI_Start/MPI_Startall.  Destinations on another
 *     communicator are translated to world ranks (the remote group for an
 *     inter-communicator); MPI_PROC_NULL is skipped.  Kept in a dense row while the
 *     world has at most RANKMAP_RECORD_DENSE_LIMIT ranks (default 65536), in a fixed
 *     hash of HASH_SLOTS destinations beyond;
 *   - collectives, not expanded: MPI_Bcast, Reduce, Allreduce, Scan, Exscan, Alltoall,
 *     Alltoallv, Allgather, Allgatherv, Gather, Gatherv, Scatter, Scatterv,
 *     Reduce_scatter, Reduce_scatter_block, Barrier and their nonblocking I-forms (as
 *     their blocking form), aggregated per (operation, communicator, root, bytes) with a
 *     call count; the v-forms per (operation, communicator, root) with the bytes per
 *     member summed over the calls.  The bytes are those the shared expansion table
 *     (slurm_plugin/profiles/collectives.py) takes for the operation, read only from
 *     arguments the MPI standard makes significant at this rank (a root's receive
 *     arguments when it gathers in place, and so on).  A communicator is written once
 *     as its members' world ranks (communicators of equal membership share one record),
 *     so the merge expands each collective over its real members.  Collectives on
 *     inter-communicators are not recorded, only counted (the "dropped" line);
 *   - the MPI-4 large-count forms (MPI_Send_c, ..., MPI_Bcast_c, ..., which mpi4py 4
 *     calls) of all the above but the nonblocking v-collectives, only where the MPI has
 *     them: each MPI_X_c is a GNU indirect function whose resolver gives this
 *     library's wrapper when the MPI defines the function and nothing otherwise, so a
 *     program that looks for them at run time (mpi4py's weak references, dlsym) finds
 *     what it would find without the recorder.  PMPI_X_c are plain functions (libmpi
 *     binds its own at load, before this library is relocated, where a resolver could
 *     not run); over an MPI-3 library one returns an error code.
 * Not recorded: one-sided (MPI_Put/Get/Accumulate), neighborhood collectives,
 * Alltoallw, the nonblocking large-count v-collectives (MPI_Ialltoallv_c, ...),
 * MPI_Isendrecv(_replace),
 * MPI-4 persistent collectives and partitioned communication, receives (every message
 * is counted once, by its sender).
 *
 * Everything lives in fixed-size structures set up at MPI_Init: no allocation per
 * message (an arena, mapped once, holds the member lists and the v-collective rows; a
 * full table or arena drops the record and counts what was dropped).  A new
 * communicator's group translation takes one malloc, freed at once.
 *
 * At MPI_Finalize rank 0 claims the launch's directory $RANKMAP_RECORD_DIR/run.<K>: it
 * lists the directory once and creates run.<highest K + 1> (a launch racing for the
 * same K makes it list again, at most MAX_RUN_TRIES times), so that a job's launches
 * never mix their files and the cost is one listing and one mkdir however many runs
 * the directory holds; it broadcasts K on MPI_COMM_WORLD; each rank then writes
 * run.<K>/rank.<R> (through a temporary name and a rename, so a file that exists is
 * complete), with no lock held.  With RANKMAP_RECORD_OPENMPI=monitoring an Open MPI
 * program is left to Open MPI's own monitoring components (the TaskProlog switches
 * them on) and not recorded here.
 * Text, one record a line:
 *
 *   rankmap-record 2                      format and version
 *   abi openmpi|mpich                     handle ABI found at run time
 *   mpi TEXT                              the library's version string (first 200 chars)
 *   rank R                                MPI_COMM_WORLD rank
 *   size N                                MPI_COMM_WORLD size
 *   memory BYTES                          the recorder's own memory in this process
 *   p2p K                                 then K lines, destinations ascending:
 *   DST BYTES MSGS                          point-to-point sends to world rank DST
 *   comms K                               then K lines:
 *   ID world                                a communicator with MPI_COMM_WORLD's members
 *   ID SIZE W_0 .. W_SIZE-1                 its members' world ranks, local rank order
 *                                           (-1: a process outside this world)
 *   coll K                                then K lines:
 *   OP COMM ROOT BYTES CALLS                CALLS calls of OP with BYTES each (ROOT a
 *                                           local rank, or - when OP has none)
 *   vcoll K                               then K lines:
 *   OP COMM ROOT CALLS B_0 .. B_SIZE-1      bytes per member summed over CALLS calls
 *   dropped P2P_BYTES P2P_MSGS COLL_CALLS   what did not fit or could not be translated
 *   stopped TEXT                          only when the rank stopped recording: why
 *   end
 *
 * OP is the name of the operation in the shared table (bcast, reduce, allreduce, scan,
 * exscan, alltoall, alltoallv, allgather, allgatherv, gather, gatherv, scatter,
 * scatterv, reduce_scatter, reduce_scatter_block, barrier).  Sizes are bounded: at
 * most N (or HASH_SLOTS) p2p lines, MAX_COMMS communicator records, MAX_COLL
 * collective lines, and the arena's bytes of member lists and v-rows.
 *
 * Build: make -C slurm_plugin/record OUT=DIR (plain cc; no MPI needed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../preload/mpi_symbol.h"

typedef intptr_t H; /* any MPI handle, at pointer width */

#define FORMAT_VERSION 2
#define DEFAULT_DENSE_LIMIT 65536
#define HASH_SLOTS (1 << 16) /* p2p destinations beyond the dense limit */
#define COMM_SLOTS 2048      /* communicator handles cached (a power of 2) */
#define MAX_COMMS 256        /* distinct memberships recorded */
#define MAX_COLL 1024        /* collective entries */
#define COLL_SLOTS 2048
#define PREQ_SLOTS 4096      /* persistent send requests (a power of 2) */
#define ARENA_BYTES ((size_t)64 << 20) /* member lists and v-rows, mapped once */
#define MAX_RUN_TRIES 16
#define MPICH_COMM_WORLD ((H)0x44000000)
#define MPICH_INT ((H)0x4c000405)
/* what a wrapper returns when the MPI lacks the function: Open MPI's MPI_ERR_OTHER
 * (MPICH's is 15; without an MPI there is no ABI to ask) */
#define NO_MPI_ERROR 16
#define TLS __thread __attribute__((tls_model("initial-exec")))

enum { ABI_OMPI = 1, ABI_MPICH = 2 };
enum op {
    OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_SCAN, OP_EXSCAN, OP_ALLTOALL, OP_ALLTOALLV,
    OP_ALLGATHER, OP_ALLGATHERV, OP_GATHER, OP_GATHERV, OP_SCATTER, OP_SCATTERV,
    OP_REDUCE_SCATTER, OP_REDUCE_SCATTER_BLOCK, OP_BARRIER, N_OPS
};
static const char *op_names[N_OPS] = {
    "bcast", "reduce", "allreduce", "scan", "exscan", "alltoall", "alltoallv",
    "allgather", "allgatherv", "gather", "gatherv", "scatter", "scatterv",
    "reduce_scatter", "reduce_scatter_block", "barrier"};
static const char rooted[N_OPS] = {
    [OP_BCAST] = 1, [OP_REDUCE] = 1, [OP_GATHER] = 1, [OP_GATHERV] = 1, [OP_SCATTER] = 1,
    [OP_SCATTERV] = 1};

/* The recorder's states.  OFF and DONE: nothing is counted and MPI_Finalize is left
 * alone; RECORDING and STOPPED ranks both take part in MPI_Finalize's broadcast (a
 * rank's own failure must never leave the others waiting in it). */
enum { ST_OFF = -1, ST_UNSET = 0, ST_RECORDING = 1, ST_STOPPED = 2, ST_SETTING_UP = 3,
       ST_DONE = 4 };

/* The MPI functions the recorder calls, all found at set-up (none missing once it
 * records). */
static struct {
    int (*comm_rank)(H, int *);
    int (*comm_size)(H, int *);
    int (*comm_group)(H, H *);
    int (*comm_remote_group)(H, H *);
    int (*comm_test_inter)(H, int *);
    int (*group_size)(H, int *);
    int (*group_translate)(H, int, const int *, H, int *);
    int (*group_free)(H *);
    int (*type_size)(H, int *);
    int (*bcast)(void *, int, H, int, H);
} mpi;

static int abi;
static H world, world_group;
static long wrank = -1, wsize;
static int state;                /* atomic: one of ST_ */
static const char *stop_reason;  /* atomic: set once, before state becomes STOPPED */
static TLS int depth;            /* >0 inside a wrapped call */

/* point-to-point counters: atomic adds, no lock */
static long dense_limit;
static uint64_t *row_bytes, *row_msgs; /* dense: wsize each */
static struct { int32_t key; uint64_t bytes, msgs; } *hash; /* key = world rank + 1 */
static long hash_used;

/* membership records: written under comm_lock (writer), never changed once written */
struct commrec { int size; long members; uint64_t sum; }; /* members: arena offset, -1 world */
static struct commrec comms[MAX_COMMS];
static int ncomms;

/* Open addressing from handles (normalised) to what is known of them; 0 empty, 1
 * live, 2 freed (a tombstone, reused by inserts, cleared by a rehash). */
struct hslot {
    H key;
    int32_t st;
    int32_t inter, local, remote; /* communicators: records, -1 not recorded */
    long dest;                    /* persistent sends: world destination */
    int64_t bytes;
};
struct htab { struct hslot *s; size_t n, live, dead; };
static struct hslot comm_slots[COMM_SLOTS], preq_slots[PREQ_SLOTS];
static struct htab comm_tab = {comm_slots, COMM_SLOTS, 0, 0};
static struct htab preq_tab = {preq_slots, PREQ_SLOTS, 0, 0};
static pthread_rwlock_t comm_lock = PTHREAD_RWLOCK_INITIALIZER; /* comm_tab, comms */
static int comm_full;                                            /* atomic */

/* collectives and persistent requests: under table_lock */
struct coll { int used, op, comm, root; int64_t bytes; uint64_t calls; long row; };
static struct coll colls[COLL_SLOTS];
static int ncolls;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER; /* colls, preq_tab */

static char *arena;
static size_t arena_used; /* atomic */
static uint64_t drop_bytes, drop_msgs, drop_colls; /* atomic */

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

/* The rank this process has in its launch, from the launcher's environment (before
 * MPI can say): messages that every rank would print are printed by rank 0 only. */
static int launch_rank_is_0(void)
{
    static const char *names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                  "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return !strcmp(v, "0");
    }
    return 1;
}

/* The MPI's NAME (not this library's SELF), or NULL, said once per function. */
static void *next(const char *name, void *self)
{
    void *f = rankmap_mpi_symbol(name, self);
    if (!f)
        fprintf(stderr, "rankmap-record: %s not found after librankmap_record in the link "
                        "order (is this program linked with MPI?): the call returns an "
                        "error\n", name);
    return f;
}

/* The function in *SLOT, looked up once: NULL when there is none (said once). */
#define MISSING ((void *)1)
static void *lazy(void **slot, const char *name, void *self)
{
    void *f = LOAD(*slot);
    if (!f) {
        f = next(name, self);
        STORE(*slot, f ? f : MISSING);
    }
    return f == MISSING ? NULL : f;
}

static void say_stopped(const char *why)
{
    fprintf(stderr, "rankmap-record: rank %ld: %s: recording stopped (the program runs "
                    "on; this launch's recording will be incomplete)\n", wrank, why);
}

/* Stop recording this rank for good, saying WHY; the program runs on. */
static void stop(const char *why)
{
    const char *none = NULL;
    int expect = ST_RECORDING;
    __atomic_compare_exchange_n(&stop_reason, &none, why, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    if (__atomic_compare_exchange_n(&state, &expect, ST_STOPPED, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        say_stopped(why);
}

static H norm(H h)
{
    return abi == ABI_MPICH ? (H)(uint32_t)h : h;
}

static H handle_at(const void *array, long i)
{
    return abi == ABI_MPICH ? (H)((const uint32_t *)array)[i] : ((const H *)array)[i];
}

static int in_place(const void *buf)
{
    return buf == (abi == ABI_MPICH ? (const void *)-1 : (const void *)1);
}

/* BYTES of the arena (8-aligned), or NULL when it is full.  Lock-free. */
static void *arena_take(size_t bytes)
{
    bytes = (bytes + 7) & ~(size_t)7;
    if (!arena)
        return NULL;
    size_t used = LOAD(arena_used);
    do {
        if (used + bytes > ARENA_BYTES)
            return NULL;
    } while (!__atomic_compare_exchange_n(&arena_used, &used, used + bytes, 1,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return arena + used;
}

static long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return fallback;
    errno = 0;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || errno ? fallback : n;
}

/* dl_iterate_phdr callback: the MPI-5 standard ABI library (MPICH's libmpi_abi) is
 * loaded. */
static int standard_abi(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    name = name ? name + 1 : info->dlpi_name;
    return name && !strncmp(name, "libmpi_abi.so", 13);
}

/* The MPI functions the recorder calls; 0 (and one message) when one is missing. */
static int find_mpi(void)
{
    static const char *names[] = {
        "PMPI_Comm_rank", "PMPI_Comm_size", "PMPI_Comm_group", "PMPI_Comm_remote_group",
        "PMPI_Comm_test_inter", "PMPI_Group_size", "PMPI_Group_translate_ranks",
        "PMPI_Group_free", "PMPI_Type_size", "PMPI_Bcast"};
    void **slots[] = {
        (void **)&mpi.comm_rank, (void **)&mpi.comm_size, (void **)&mpi.comm_group,
        (void **)&mpi.comm_remote_group, (void **)&mpi.comm_test_inter,
        (void **)&mpi.group_size, (void **)&mpi.group_translate, (void **)&mpi.group_free,
        (void **)&mpi.type_size, (void **)&mpi.bcast};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        *slots[i] = rankmap_mpi_symbol(names[i], NULL);
        if (!*slots[i]) {
            if (launch_rank_is_0())
                fprintf(stderr, "rankmap-record: the MPI has no %s: not recording\n",
                        names[i]);
            return 0;
        }
    }
    return 1;
}

/* After MPI_Init, by exactly one thread (state SETTING_UP): decides, the same way on
 * every rank, whether this launch is recorded, and publishes the decision. */
static void setup(void)
{
    const char *dir = getenv("RANKMAP_RECORD_DIR");
    int r = -1, s = 0;
    if (!dir || !*dir) {
        STORE(state, ST_OFF);
        return;
    }
    if (dl_iterate_phdr(standard_abi, NULL)) {
        if (launch_rank_is_0())
            fprintf(stderr, "rankmap-record: the program uses the MPI standard ABI "
                            "(libmpi_abi), which the recorder does not know: not "
                            "recording\n");
        STORE(state, ST_OFF);
        return;
    }
    /* the global scope's definition first: a program may hold a copy of the object
     * (a copy relocation), and its address is then the canonical handle */
    void *ompi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    if (!ompi_world)
        ompi_world = rankmap_mpi_symbol("ompi_mpi_comm_world", NULL);
    if (ompi_world) {
        const char *mode = getenv("RANKMAP_RECORD_OPENMPI");
        if (mode && !strcmp(mode, "monitoring")) {
            STORE(state, ST_OFF); /* Open MPI's pml/coll monitoring records this program */
            return;
        }
        abi = ABI_OMPI;
        world = (H)ompi_world;
    } else {
        abi = ABI_MPICH;
        world = MPICH_COMM_WORLD;
    }
    if (!find_mpi()) {
        STORE(state, ST_OFF);
        return;
    }
    mpi.comm_rank(world, &r);
    mpi.comm_size(world, &s);
    world_group = 0;
    mpi.comm_group(world, &world_group);
    if (r < 0 || s < 1) {
        if (launch_rank_is_0())
            fprintf(stderr, "rankmap-record: MPI_COMM_WORLD gives no rank: not "
                            "recording\n");
        STORE(state, ST_OFF);
        return;
    }
    wrank = r;
    wsize = s;
    dense_limit = env_long("RANKMAP_RECORD_DENSE_LIMIT", DEFAULT_DENSE_LIMIT);
    arena = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED)
        arena = NULL;
    comms[0].size = (int)wsize;
    comms[0].members = -1;
    ncomms = 1;
    const char *failed = NULL;
    if (wsize <= dense_limit) {
        row_bytes = arena_take(sizeof(uint64_t) * (size_t)wsize);
        row_msgs = arena_take(sizeof(uint64_t) * (size_t)wsize);
        if (!row_msgs) {
            row_bytes = row_msgs = NULL;
            failed = "no memory for the point-to-point counters";
        }
    } else {
        hash = mmap(NULL, sizeof *hash * HASH_SLOTS, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (hash == MAP_FAILED) {
            hash = NULL;
            failed = "no memory for the point-to-point counters";
        }
    }
    /* published last: the threads waiting for set-up then read finished counters */
    if (failed) {
        STORE(stop_reason, failed);
        say_stopped(failed);
        STORE(state, ST_STOPPED);
    } else {
        STORE(state, ST_RECORDING);
    }
}

/* The state once set up: the first caller after MPI_Init sets up, the others wait for
 * it (a few MPI queries; no lock of theirs is held meanwhile). */
static int settled_state(void)
{
    int s = LOAD(state), expect = ST_UNSET;
    if (s == ST_UNSET && __atomic_compare_exchange_n(&state, &expect, ST_SETTING_UP, 0,
                                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        setup();
    while ((s = LOAD(state)) == ST_SETTING_UP)
        sched_yield();
    return s;
}

static int recording(void)
{
    return LOAD(state) == ST_RECORDING;
}

static int active(void)
{
    int s = LOAD(state);
    if (s == ST_RECORDING)
        return 1;
    if (s == ST_UNSET) { /* MPI_Init was not seen: record once MPI says it is set up */
        static void *slot;
        typedef int (*initialized_fn)(int *);
        initialized_fn initialized = (initialized_fn)lazy(&slot, "PMPI_Initialized", NULL);
        int flag = 0;
        if (!initialized || initialized(&flag) != 0 || !flag)
            return 0;
    } else if (s != ST_SETTING_UP) {
        return 0;
    }
    return settled_state() == ST_RECORDING;
}

static int64_t type_size(H dt)
{
    int s = 0;
    mpi.type_size(dt, &s);
    return s > 0 ? s : 0;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/* ---- handle tables (open addressing, linear probing); the caller holds its lock ---- */

static size_t ht_start(const struct htab *t, H key)
{
    return (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ULL) >> 32) & (t->n - 1);
}

static struct hslot *ht_find(struct htab *t, H key)
{
    size_t k = ht_start(t, key);
    for (size_t i = 0; i < t->n; i++, k = (k + 1) & (t->n - 1)) {
        struct hslot *s = &t->s[k];
        if (s->st == 0)
            return NULL;
        if (s->st == 1 && s->key == key)
            return s;
    }
    return NULL;
}

static void ht_del(struct htab *t, H key)
{
    struct hslot *s = ht_find(t, key);
    if (s) {
        s->st = 2;
        t->live--;
        t->dead++;
    }
}

/* The live slots placed again, tombstones gone (one malloc; none: left as it is). */
static void ht_rehash(struct htab *t)
{
    struct hslot *copy = malloc(sizeof *copy * (t->live ? t->live : 1));
    size_t m = 0;
    if (!copy)
        return;
    for (size_t k = 0; k < t->n; k++)
        if (t->s[k].st == 1)
            copy[m++] = t->s[k];
    memset(t->s, 0, sizeof *t->s * t->n);
    for (size_t i = 0; i < m; i++) {
        size_t k = ht_start(t, copy[i].key);
        while (t->s[k].st)
            k = (k + 1) & (t->n - 1);
        t->s[k] = copy[i];
    }
    t->dead = 0;
    free(copy);
}

/* KEY's live slot (*FRESH: made now, payload zero); NULL when 3/4 of the slots hold
 * live handles. */
static struct hslot *ht_put(struct htab *t, H key, int *fresh)
{
    struct hslot *s = ht_find(t, key);
    *fresh = 0;
    if (s)
        return s;
    if (t->live + t->dead >= t->n / 4 * 3 && t->dead)
        ht_rehash(t);
    if (t->live + t->dead >= t->n / 4 * 3)
        return NULL;
    size_t k = ht_start(t, key);
    while (t->s[k].st == 1)
        k = (k + 1) & (t->n - 1);
    if (t->s[k].st == 2)
        t->dead--;
    t->s[k] = (struct hslot){.key = key, .st = 1};
    t->live++;
    *fresh = 1;
    return &t->s[k];
}

/* ---- communicators ---- */

/* GROUP's members as world ranks (-1: outside this world), N of them, malloc'ed; NULL
 * when it has none or there is no memory (recording then stops).  MPI calls: no lock
 * may be held. */
static int *group_members(H group, int *n)
{
    *n = 0;
    mpi.group_size(group, n);
    if (*n < 1)
        return NULL;
    int *out = malloc(sizeof(int) * 2 * (size_t)*n);
    if (!out) {
        stop("no memory to translate a communicator's group");
        return NULL;
    }
    int *in = out + *n;
    for (int i = 0; i < *n; i++)
        in[i] = i;
    mpi.group_translate(group, *n, in, world_group, out);
    for (int i = 0; i < *n; i++)
        if (out[i] < 0 || out[i] >= wsize)
            out[i] = -1; /* MPI_UNDEFINED: not in this world */
    return out;
}

/* The record of the membership M (N world ranks in local order): 0 for the world's, an
 * equal one when there is, a new one else; -1 when the records or the arena are full.
 * comm_lock held for writing. */
static int member_record(const int *m, int n)
{
    if (!m)
        return -1;
    int identity = n == wsize;
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        identity &= m[i] == i;
        sum = mix(sum, (uint64_t)(uint32_t)m[i]);
    }
    if (identity)
        return 0;
    for (int c = 1; c < ncomms; c++)
        if (comms[c].size == n && comms[c].sum == sum &&
            !memcmp(arena + comms[c].members, m, sizeof(int) * (size_t)n))
            return c;
    if (ncomms == MAX_COMMS)
        return -1;
    int *copy = arena_take(sizeof(int) * (size_t)n);
    if (!copy)
        return -1;
    memcpy(copy, m, sizeof(int) * (size_t)n);
    comms[ncomms] = (struct commrec){n, (long)((char *)copy - arena), sum};
    return ncomms++;
}

struct comm_info { int inter, local, remote; };

/* What is known of COMM (not MPI_COMM_WORLD): looked up in the cache, or asked of the
 * MPI once (with no lock held) and entered. */
static struct comm_info comm_info(H comm)
{
    struct comm_info ci = {0, -1, -1};
    H key = norm(comm);
    pthread_rwlock_rdlock(&comm_lock);
    struct hslot *s = ht_find(&comm_tab, key);
    if (s)
        ci = (struct comm_info){s->inter, s->local, s->remote};
    pthread_rwlock_unlock(&comm_lock);
    if (s || LOAD(comm_full))
        return ci; /* a full cache: not recorded, and not asked again on every send */
    int inter = 0, nl = 0, nr = 0, *remote = NULL;
    H group = 0;
    mpi.comm_test_inter(comm, &inter);
    mpi.comm_group(comm, &group);
    int *local = group_members(group, &nl);
    mpi.group_free(&group);
    if (inter) {
        group = 0;
        mpi.comm_remote_group(comm, &group);
        remote = group_members(group, &nr);
        mpi.group_free(&group);
    }
    int fresh;
    pthread_rwlock_wrlock(&comm_lock);
    s = ht_put(&comm_tab, key, &fresh);
    if (s && fresh) {
        s->inter = inter;
        s->local = member_record(local, nl);
        s->remote = inter ? member_record(remote, nr) : s->local;
    }
    if (s)
        ci = (struct comm_info){s->inter, s->local, s->remote};
    else
        STORE(comm_full, 1);
    pthread_rwlock_unlock(&comm_lock);
    free(local);
    free(remote);
    return ci;
}

static void forget_comm(H comm)
{
    pthread_rwlock_wrlock(&comm_lock);
    ht_del(&comm_tab, norm(comm));
    STORE(comm_full, 0);
    pthread_rwlock_unlock(&comm_lock);
}

/* The world rank of DEST on COMM (the remote group's for an inter-communicator); -1
 * when it has none. */
static long world_dest(H comm, int dest)
{
    if (dest < 0)
        return -1;
    if (norm(comm) == norm(world))
        return dest < wsize ? dest : -1;
    int rec = comm_info(comm).remote;
    if (rec < 0 || dest >= comms[rec].size)
        return -1;
    if (comms[rec].members < 0)
        return dest;
    return ((int *)(arena + comms[rec].members))[dest];
}

/* ---- point-to-point: lock-free ---- */

static void drop_p2p(int64_t bytes)
{
    ADD(drop_bytes, (uint64_t)bytes);
    ADD(drop_msgs, 1);
}

static void add_p2p(long w, int64_t bytes)
{
    if (w < 0) {
        drop_p2p(bytes);
        return;
    }
    if (row_bytes) {
        ADD(row_bytes[w], (uint64_t)bytes);
        ADD(row_msgs[w], 1);
        return;
    }
    if (!hash) {
        drop_p2p(bytes);
        return;
    }
    int32_t want = (int32_t)(w + 1);
    size_t k = (size_t)(((uint64_t)w * 0x9e3779b97f4a7c15ULL) >> 32) & (HASH_SLOTS - 1);
    for (long i = 0; i < HASH_SLOTS; i++, k = (k + 1) & (HASH_SLOTS - 1)) {
        int32_t key = LOAD(hash[k].key);
        if (key == 0) {
            if (LOAD(hash_used) >= HASH_SLOTS / 4 * 3)
                break;
            if (__atomic_compare_exchange_n(&hash[k].key, &key, want, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                ADD(hash_used, 1);
                key = want;
            }
        }
        if (key == want) {
            ADD(hash[k].bytes, (uint64_t)bytes);
            ADD(hash[k].msgs, 1);
            return;
        }
    }
    drop_p2p(bytes);
}

static void count_send(int64_t count, H dt, int dest, H comm)
{
    if (dest < 0 || count < 0 || !active()) /* MPI_PROC_NULL is negative */
        return;
    add_p2p(world_dest(comm, dest), count * type_size(dt));
}

/* ---- collectives: the table under table_lock ---- */

/* The collective entry for the key, created when new; NULL when the table is full.
 * A v-entry (ROW) carries one byte counter per member in the arena.  table_lock held. */
static struct coll *coll_entry(int op, int comm, int root, int64_t bytes, int row)
{
    uint64_t h = mix(mix(mix(mix(0, (uint64_t)op), (uint64_t)comm), (uint64_t)root),
                     (uint64_t)bytes);
    size_t k = (size_t)(h % COLL_SLOTS);
    for (;;) {
        struct coll *c = &colls[k];
        if (!c->used) {
            if (ncolls == MAX_COLL)
                return NULL;
            long off = -1;
            if (row) {
                void *p = arena_take(sizeof(uint64_t) * (size_t)comms[comm].size);
                if (!p)
                    return NULL;
                memset(p, 0, sizeof(uint64_t) * (size_t)comms[comm].size);
                off = (long)((char *)p - arena);
            }
            *c = (struct coll){1, op, comm, root, bytes, 0, off};
            ncolls++;
            return c;
        }
        if (c->op == op && c->comm == comm && c->root == root && c->bytes == bytes)
            return c;
        k = (k + 1) % COLL_SLOTS;
    }
}

/* The communicator record of an intra-communicator collective; -1 when not recorded
 * (counted as dropped). */
static int coll_comm(H comm)
{
    if (norm(comm) == norm(world))
        return 0;
    struct comm_info ci = comm_info(comm);
    if (ci.inter || ci.local < 0) {
        ADD(drop_colls, 1);
        return -1;
    }
    return ci.local;
}

/* One call of OP with BYTES (per the table's meaning of OP). */
static void record_coll(int op, H comm, int root, int64_t bytes)
{
    if (!active())
        return;
    int c = coll_comm(comm);
    if (c < 0)
        return;
    pthread_mutex_lock(&table_lock);
    struct coll *e = coll_entry(op, c, rooted[op] ? root : -1, bytes, 0);
    if (e)
        e->calls++;
    pthread_mutex_unlock(&table_lock);
    if (!e)
        ADD(drop_colls, 1);
}

/* One call of a v-collective: COUNTS[i] elements of DT for member i (WIDE: MPI_Count
 * counts, else int). */
static void record_vcoll_at(int op, H comm, int root, const void *counts, int wide, H dt)
{
    if (!active())
        return;
    int64_t size = type_size(dt);
    int c = coll_comm(comm);
    if (c < 0)
        return;
    pthread_mutex_lock(&table_lock);
    struct coll *e = coll_entry(op, c, rooted[op] ? root : -1, -1, 1);
    if (e) {
        uint64_t *row = (uint64_t *)(arena + e->row);
        for (int i = 0; i < comms[c].size; i++) {
            int64_t n = wide ? (int64_t)((const long long *)counts)[i]
                             : (int64_t)((const int *)counts)[i];
            row[i] += (uint64_t)((n > 0 ? n : 0) * size);
        }
        e->calls++;
    }
    pthread_mutex_unlock(&table_lock);
    if (!e)
        ADD(drop_colls, 1);
}

/* One call of a v-collective: COUNTS[i] elements of DT for member i (ints). */
static void record_vcoll(int op, H comm, int root, const int *counts, H dt)
{
    record_vcoll_at(op, comm, root, counts, 0, dt);
}

static int comm_rank(H comm)
{
    int r = -1;
    mpi.comm_rank(comm, &r);
    return r;
}

/* ---- persistent sends: request -> (world destination, bytes), counted at MPI_Start ---- */

static void preq_remember(H req, int64_t count, H dt, int dest, H comm)
{
    if (dest < 0 || !active())
        return;
    int64_t bytes = (count > 0 ? count : 0) * type_size(dt);
    long w = world_dest(comm, dest);
    int fresh;
    pthread_mutex_lock(&table_lock);
    struct hslot *s = ht_put(&preq_tab, norm(req), &fresh);
    if (s) {
        s->dest = w;
        s->bytes = bytes;
    }
    pthread_mutex_unlock(&table_lock);
    if (!s)
        ADD(drop_msgs, 1); /* its starts go uncounted */
}

static void preq_started(H req)
{
    if (!active())
        return;
    long w = -2;
    int64_t bytes = 0;
    pthread_mutex_lock(&table_lock);
    struct hslot *s = ht_find(&preq_tab, norm(req));
    if (s) {
        w = s->dest;
        bytes = s->bytes;
    }
    pthread_mutex_unlock(&table_lock);
    if (w != -2)
        add_p2p(w, bytes);
}

static void preq_forget(H req)
{
    if (!recording())
        return;
    pthread_mutex_lock(&table_lock);
    ht_del(&preq_tab, norm(req));
    pthread_mutex_unlock(&table_lock);
}

/* ---- the file ---- */

static int by_key(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static size_t memory_used(void)
{
    return sizeof comms + sizeof comm_slots + sizeof preq_slots + sizeof colls +
           LOAD(arena_used) + (hash ? sizeof *hash * HASH_SLOTS : 0);
}

/* The highest K of DIR's run.K entries (-1: none; -2: DIR cannot be listed). */
static int highest_run(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int hi = -1;
    if (!d)
        return -2;
    while ((e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "run.", 4) || e->d_name[4] < '0' || e->d_name[4] > '9')
            continue;
        errno = 0;
        long k = strtol(e->d_name + 4, &end, 10);
        if (!*end && !errno && k < INT_MAX - 1 && k > hi)
            hi = (int)k;
    }
    closedir(d);
    return hi;
}

/* Rank 0: create DIR/run.K for this launch, K past every run already there; -1 on
 * failure (said). */
static int make_run_dir(const char *dir)
{
    char p[4096];
    for (int attempt = 0; attempt < MAX_RUN_TRIES; attempt++) {
        int k = highest_run(dir);
        if (k == -2) {
            fprintf(stderr, "rankmap-record: cannot list %s: %s\n", dir, strerror(errno));
            return -1;
        }
        snprintf(p, sizeof p, "%s/run.%d", dir, k + 1);
        if (mkdir(p, 0755) == 0)
            return k + 1;
        if (errno != EEXIST) {
            fprintf(stderr, "rankmap-record: cannot create %s: %s\n", p, strerror(errno));
            return -1;
        }
    }
    fprintf(stderr, "rankmap-record: other launches took every run directory tried in "
                    "%s (%d tries): not written\n", dir, MAX_RUN_TRIES);
    return -1;
}

/* The launch's run.<K> under dir: rank 0 creates it, every rank learns K (-1: none).
 * Collective over MPI_COMM_WORLD, as MPI_Finalize is; no lock held. */
static int claim_run(const char *dir)
{
    int k = wrank == 0 ? make_run_dir(dir) : -1;
    H type = MPICH_INT;
    if (abi == ABI_OMPI) {
        void *t = dlsym(RTLD_DEFAULT, "ompi_mpi_int");
        type = (H)(t ? t : rankmap_mpi_symbol("ompi_mpi_int", NULL));
    }
    if (!type || mpi.bcast(&k, 1, type, 0, world) != 0)
        return -1;
    return k;
}

/* Every counter is final: the recorder is DONE and no update is in flight. */
static void quiesce(void)
{
    pthread_mutex_lock(&table_lock);
    pthread_mutex_unlock(&table_lock);
    pthread_rwlock_wrlock(&comm_lock);
    pthread_rwlock_unlock(&comm_lock);
}

static void write_record(const char *why_stopped)
{
    const char *base = getenv("RANKMAP_RECORD_DIR");
    char dir[4000], path[4096], tmp[4096], version[8192] = "";
    int len = 0;
    if (!base || !*base)
        return;
    int run = claim_run(base);
    if (run < 0)
        return;
    snprintf(dir, sizeof dir, "%s/run.%d", base, run);
    typedef int (*libver_fn)(char *, int *);
    libver_fn libver = (libver_fn)rankmap_mpi_symbol("PMPI_Get_library_version", NULL);
    if (libver)
        libver(version, &len);
    version[200] = 0;
    for (char *p = version; *p; p++)
        if (*p == '\n' || *p == '\r') {
            *p = 0;
            break;
        } else if ((unsigned char)*p < 32 || (unsigned char)*p > 126) {
            *p = '?';
        }
    snprintf(path, sizeof path, "%s/rank.%ld", dir, wrank);
    snprintf(tmp, sizeof tmp, "%s/.rank.%ld.tmp", dir, wrank);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "rankmap-record: rank %ld: cannot write %s: %s\n", wrank, tmp,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    fprintf(f, "rankmap-record %d\nabi %s\nmpi %s\nrank %ld\nsize %ld\nmemory %zu\n",
            FORMAT_VERSION, abi == ABI_OMPI ? "openmpi" : "mpich",
            *version ? version : "unknown", wrank, wsize, memory_used());
    if (row_bytes) {
        long k = 0;
        for (long w = 0; w < wsize; w++)
            k += row_msgs[w] > 0;
        fprintf(f, "p2p %ld\n", k);
        for (long w = 0; w < wsize; w++)
            if (row_msgs[w])
                fprintf(f, "%ld %llu %llu\n", w, (unsigned long long)row_bytes[w],
                        (unsigned long long)row_msgs[w]);
    } else if (hash) {
        qsort(hash, HASH_SLOTS, sizeof *hash, by_key); /* empty slots (key 0) first */
        long k = 0;
        for (long i = 0; i < HASH_SLOTS; i++)
            k += hash[i].key != 0;
        fprintf(f, "p2p %ld\n", k);
        for (long i = 0; i < HASH_SLOTS; i++)
            if (hash[i].key)
                fprintf(f, "%ld %llu %llu\n", (long)hash[i].key - 1,
                        (unsigned long long)hash[i].bytes, (unsigned long long)hash[i].msgs);
    } else {
        fprintf(f, "p2p 0\n");
    }
    fprintf(f, "comms %d\n", ncomms);
    for (int c = 0; c < ncomms; c++) {
        if (comms[c].members < 0) {
            fprintf(f, "%d world\n", c);
            continue;
        }
        const int *m = (const int *)(arena + comms[c].members);
        fprintf(f, "%d %d", c, comms[c].size);
        for (int i = 0; i < comms[c].size; i++)
            fprintf(f, " %d", m[i]);
        fputc('\n', f);
    }
    int scalar = 0;
    for (int k = 0; k < COLL_SLOTS; k++)
        scalar += colls[k].used && colls[k].row < 0;
    fprintf(f, "coll %d\n", scalar);
    for (int k = 0; k < COLL_SLOTS; k++) {
        struct coll *c = &colls[k];
        if (!c->used || c->row >= 0)
            continue;
        fprintf(f, "%s %d ", op_names[c->op], c->comm);
        if (c->root < 0)
            fputc('-', f);
        else
            fprintf(f, "%d", c->root);
        fprintf(f, " %lld %llu\n", (long long)c->bytes, (unsigned long long)c->calls);
    }
    fprintf(f, "vcoll %d\n", ncolls - scalar);
    for (int k = 0; k < COLL_SLOTS; k++) {
        struct coll *c = &colls[k];
        if (!c->used || c->row < 0)
            continue;
        fprintf(f, "%s %d ", op_names[c->op], c->comm);
        if (c->root < 0)
            fputc('-', f);
        else
            fprintf(f, "%d", c->root);
        fprintf(f, " %llu", (unsigned long long)c->calls);
        const uint64_t *row = (const uint64_t *)(arena + c->row);
        for (int i = 0; i < comms[c->comm].size; i++)
            fprintf(f, " %llu", (unsigned long long)row[i]);
        fputc('\n', f);
    }
    fprintf(f, "dropped %llu %llu %llu\n", (unsigned long long)LOAD(drop_bytes),
            (unsigned long long)LOAD(drop_msgs), (unsigned long long)LOAD(drop_colls));
    if (why_stopped)
        fprintf(f, "stopped %s\n", why_stopped);
    fprintf(f, "end\n");
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "rankmap-record: rank %ld: cannot write %s: %s\n", wrank, tmp,
                strerror(errno));
        fclose(f);
        unlink(tmp);
        return;
    }
    fclose(f);
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "rankmap-record: rank %ld: cannot rename %s to %s: %s\n", wrank,
                tmp, path, strerror(errno));
        unlink(tmp);
    }
}

/* ---- the wrappers: each MPI_X and PMPI_X calls the MPI's own of the same name ---- */

/* Defines NAME and PNAME with parameters PARAMS; BODY uses `real`, the next NAME (a
 * name the MPI lacks returns NO_MPI_ERROR). */
#define WRAP(TYPE, NAME, PARAMS, BODY)                                                     \
    int NAME PARAMS                                                                        \
    {                                                                                      \
        static void *slot_;                                                                \
        TYPE real = (TYPE)lazy(&slot_, #NAME, (void *)NAME);                               \
        if (!real)                                                                         \
            return NO_MPI_ERROR;                                                           \
        BODY                                                                               \
    }                                                                                      \
    int P##NAME PARAMS                                                                     \
    {                                                                                      \
        static void *slot_;                                                                \
        TYPE real = (TYPE)lazy(&slot_, "P" #NAME, (void *)P##NAME);                        \
        if (!real)                                                                         \
            return NO_MPI_ERROR;                                                           \
        BODY                                                                               \
    }

/* counts (COUNT_STMT) only outside another wrapped call, then calls the MPI */
#define GUARDED(COUNT_STMT, CALL)                                                          \
    {                                                                                      \
        if (depth++ == 0) {                                                                \
            COUNT_STMT;                                                                    \
        }                                                                                  \
        int rc_ = CALL;                                                                    \
        depth--;                                                                           \
        return rc_;                                                                        \
    }

typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);
typedef int (*finalize_fn)(void);

WRAP(init_fn, MPI_Init, (int *argc, char ***argv), {
    depth++;
    int rc = real(argc, argv);
    if (--depth == 0 && rc == 0)
        settled_state();
    return rc;
})

WRAP(init_thread_fn, MPI_Init_thread, (int *argc, char ***argv, int req, int *prov), {
    depth++;
    int rc = real(argc, argv, req, prov);
    if (--depth == 0 && rc == 0)
        settled_state();
    return rc;
})

WRAP(finalize_fn, MPI_Finalize, (void), {
    if (depth == 0) {
        active(); /* sets up, if MPI_Init was not seen */
        int was = __atomic_exchange_n(&state, ST_DONE, __ATOMIC_ACQ_REL);
        if (was == ST_RECORDING || was == ST_STOPPED) {
            const char *why = LOAD(stop_reason);
            quiesce();
            depth++; /* the broadcast claiming the run directory is not the program's */
            write_record(was == ST_RECORDING ? NULL : why ? why : "stopped");
            depth--;
        }
    }
    depth++;
    int rc = real();
    depth--;
    return rc;
})

/* point-to-point */
typedef int (*send_fn)(const void *, int, H, int, int, H);
typedef int (*isend_fn)(const void *, int, H, int, int, H, void *);
#define SEND(NAME)                                                                         \
    WRAP(send_fn, NAME, (const void *b, int n, H t, int d, int g, H c),                    \
         GUARDED(count_send(n, t, d, c), real(b, n, t, d, g, c)))
#define ISEND(NAME)                                                                        \
    WRAP(isend_fn, NAME, (const void *b, int n, H t, int d, int g, H c, void *rq),         \
         GUARDED(count_send(n, t, d, c), real(b, n, t, d, g, c, rq)))
SEND(MPI_Send)
SEND(MPI_Ssend)
SEND(MPI_Bsend)
SEND(MPI_Rsend)
ISEND(MPI_Isend)
ISEND(MPI_Issend)
ISEND(MPI_Ibsend)
ISEND(MPI_Irsend)

typedef int (*sendrecv_fn)(const void *, int, H, int, int, void *, int, H, int, int, H,
                           void *);
WRAP(sendrecv_fn, MPI_Sendrecv,
     (const void *sb, int sn, H st, int d, int sg, void *rb, int rn, H rt, int s, int rg,
      H c, void *status),
     GUARDED(count_send(sn, st, d, c), real(sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status)))

typedef int (*sendrecv_replace_fn)(void *, int, H, int, int, int, int, H, void *);
WRAP(sendrecv_replace_fn, MPI_Sendrecv_replace,
     (void *b, int n, H t, int d, int sg, int s, int rg, H c, void *status),
     GUARDED(count_send(n, t, d, c), real(b, n, t, d, sg, s, rg, c, status)))

/* persistent: remembered at creation, counted at each start */
#define SEND_INIT(NAME)                                                                    \
    WRAP(isend_fn, NAME, (const void *b, int n, H t, int d, int g, H c, void *rq), {       \
        int outer = depth++ == 0;                                                          \
        int rc = real(b, n, t, d, g, c, rq);                                               \
        depth--;                                                                           \
        if (outer && rc == 0)                                                              \
            preq_remember(handle_at(rq, 0), n, t, d, c);                                   \
        return rc;                                                                         \
    })
SEND_INIT(MPI_Send_init)
SEND_INIT(MPI_Ssend_init)
SEND_INIT(MPI_Bsend_init)
SEND_INIT(MPI_Rsend_init)

WRAP(isend_fn, MPI_Recv_init, (void *b, int n, H t, int s, int g, H c, void *rq), {
    int outer = depth++ == 0;
    int rc = real(b, n, t, s, g, c, rq);
    depth--;
    if (outer && rc == 0)
        preq_forget(handle_at(rq, 0)); /* a recycled handle is no send */
    return rc;
})

typedef int (*start_fn)(void *);
typedef int (*startall_fn)(int, void *);
WRAP(start_fn, MPI_Start, (void *rq), GUARDED(preq_started(handle_at(rq, 0)), real(rq)))
WRAP(startall_fn, MPI_Startall, (int n, void *rqs), GUARDED(
    for (int i = 0; i < n; i++) preq_started(handle_at(rqs, i)), real(n, rqs)))
WRAP(start_fn, MPI_Request_free, (void *rq),
     GUARDED(preq_forget(handle_at(rq, 0)), real(rq)))

/* communicators leave the cache when freed (handles are recycled) */
WRAP(start_fn, MPI_Comm_free, (void *comm),
     GUARDED(if (recording()) forget_comm(handle_at(comm, 0)), real(comm)))
WRAP(start_fn, MPI_Comm_disconnect, (void *comm),
     GUARDED(if (recording()) forget_comm(handle_at(comm, 0)), real(comm)))

/* collectives (the I-forms take a request pointer more); CB: the bytes of N elements
 * of T, asked of the MPI only while recording */
#define CB(N, T) (recording() ? (int64_t)(N) * type_size(T) : 0)

typedef int (*bcast_fn)(void *, int, H, int, H);
typedef int (*ibcast_fn)(void *, int, H, int, H, void *);
WRAP(bcast_fn, MPI_Bcast, (void *b, int n, H t, int root, H c),
     GUARDED(record_coll(OP_BCAST, c, root, CB(n, t)),
             real(b, n, t, root, c)))
WRAP(ibcast_fn, MPI_Ibcast, (void *b, int n, H t, int root, H c, void *rq),
     GUARDED(record_coll(OP_BCAST, c, root, CB(n, t)),
             real(b, n, t, root, c, rq)))

typedef int (*reduce_fn)(const void *, void *, int, H, H, int, H);
typedef int (*ireduce_fn)(const void *, void *, int, H, H, int, H, void *);
WRAP(reduce_fn, MPI_Reduce, (const void *s, void *r, int n, H t, H o, int root, H c),
     GUARDED(record_coll(OP_REDUCE, c, root, CB(n, t)),
             real(s, r, n, t, o, root, c)))
WRAP(ireduce_fn, MPI_Ireduce,
     (const void *s, void *r, int n, H t, H o, int root, H c, void *rq),
     GUARDED(record_coll(OP_REDUCE, c, root, CB(n, t)),
             real(s, r, n, t, o, root, c, rq)))

typedef int (*allreduce_fn)(const void *, void *, int, H, H, H);
typedef int (*iallreduce_fn)(const void *, void *, int, H, H, H, void *);
#define ALLREDUCE(NAME, INAME, OP)                                                         \
    WRAP(allreduce_fn, NAME, (const void *s, void *r, int n, H t, H o, H c),               \
         GUARDED(record_coll(OP, c, -1, CB(n, t)), real(s, r, n, t, o, c))) \
    WRAP(iallreduce_fn, INAME, (const void *s, void *r, int n, H t, H o, H c, void *rq),   \
         GUARDED(record_coll(OP, c, -1, CB(n, t)),                        \
                 real(s, r, n, t, o, c, rq)))
ALLREDUCE(MPI_Allreduce, MPI_Iallreduce, OP_ALLREDUCE)
ALLREDUCE(MPI_Scan, MPI_Iscan, OP_SCAN)
ALLREDUCE(MPI_Exscan, MPI_Iexscan, OP_EXSCAN)

/* alltoall and allgather: the block, from the receive arguments (significant at every
 * rank, also with MPI_IN_PLACE, and equal to the send block by the standard) */
typedef int (*a2a_fn)(const void *, int, H, void *, int, H, H);
typedef int (*ia2a_fn)(const void *, int, H, void *, int, H, H, void *);
#define A2A(NAME, INAME, OP)                                                               \
    WRAP(a2a_fn, NAME, (const void *s, int sn, H st, void *r, int rn, H rt, H c),          \
         GUARDED(record_coll(OP, c, -1, CB(rn, rt)),                      \
                 real(s, sn, st, r, rn, rt, c)))                                           \
    WRAP(ia2a_fn, INAME,                                                                   \
         (const void *s, int sn, H st, void *r, int rn, H rt, H c, void *rq),              \
         GUARDED(record_coll(OP, c, -1, CB(rn, rt)),                      \
                 real(s, sn, st, r, rn, rt, c, rq)))
A2A(MPI_Alltoall, MPI_Ialltoall, OP_ALLTOALL)
A2A(MPI_Allgather, MPI_Iallgather, OP_ALLGATHER)

/* gather: the non-roots' send block (the root sends nothing: its receive block);
 * scatter: the root's send block (the others receive it) */
typedef int (*gather_fn)(const void *, int, H, void *, int, H, int, H);
typedef int (*igather_fn)(const void *, int, H, void *, int, H, int, H, void *);
static int64_t gather_block(int64_t sn, H st, int64_t rn, H rt, int root, H c)
{
    return comm_rank(c) == root ? rn * type_size(rt) : sn * type_size(st);
}
static int64_t scatter_block(int64_t sn, H st, int64_t rn, H rt, int root, H c)
{
    return comm_rank(c) == root ? sn * type_size(st) : rn * type_size(rt);
}
#define ROOTED(NAME, INAME, OP, BLOCK)                                                     \
    WRAP(gather_fn, NAME,                                                                  \
         (const void *s, int sn, H st, void *r, int rn, H rt, int root, H c),              \
         GUARDED(if (active()) record_coll(OP, c, root, BLOCK(sn, st, rn, rt, root, c)),   \
                 real(s, sn, st, r, rn, rt, root, c)))                                     \
    WRAP(igather_fn, INAME,                                                                \
         (const void *s, int sn, H st, void *r, int rn, H rt, int root, H c, void *rq),    \
         GUARDED(if (active()) record_coll(OP, c, root, BLOCK(sn, st, rn, rt, root, c)),   \
                 real(s, sn, st, r, rn, rt, root, c, rq)))
ROOTED(MPI_Gather, MPI_Igather, OP_GATHER, gather_block)
ROOTED(MPI_Scatter, MPI_Iscatter, OP_SCATTER, scatter_block)

/* alltoallv: the send counts (the receive counts when in place) */
typedef int (*a2av_fn)(const void *, const int *, const int *, H, void *, const int *,
                       const int *, H, H);
typedef int (*ia2av_fn)(const void *, const int *, const int *, H, void *, const int *,
                        const int *, H, H, void *);
#define A2AV_COUNT                                                                         \
    if (in_place(s))                                                                       \
        record_vcoll(OP_ALLTOALLV, c, -1, rn, rt);                                         \
    else                                                                                   \
        record_vcoll(OP_ALLTOALLV, c, -1, sn, st)
WRAP(a2av_fn, MPI_Alltoallv,
     (const void *s, const int *sn, const int *sd, H st, void *r, const int *rn,
      const int *rd, H rt, H c),
     GUARDED(if (active()) { A2AV_COUNT; }, real(s, sn, sd, st, r, rn, rd, rt, c)))
WRAP(ia2av_fn, MPI_Ialltoallv,
     (const void *s, const int *sn, const int *sd, H st, void *r, const int *rn,
      const int *rd, H rt, H c, void *rq),
     GUARDED(if (active()) { A2AV_COUNT; }, real(s, sn, sd, st, r, rn, rd, rt, c, rq)))

/* allgatherv: every member's block (receive counts); gatherv: a non-root's send
 * block (the root sends nothing: 0) */
typedef int (*agv_fn)(const void *, int, H, void *, const int *, const int *, H, H);
typedef int (*iagv_fn)(const void *, int, H, void *, const int *, const int *, H, H,
                       void *);
WRAP(agv_fn, MPI_Allgatherv,
     (const void *s, int sn, H st, void *r, const int *rn, const int *rd, H rt, H c),
     GUARDED(record_vcoll(OP_ALLGATHERV, c, -1, rn, rt), real(s, sn, st, r, rn, rd, rt, c)))
WRAP(iagv_fn, MPI_Iallgatherv,
     (const void *s, int sn, H st, void *r, const int *rn, const int *rd, H rt, H c,
      void *rq),
     GUARDED(record_vcoll(OP_ALLGATHERV, c, -1, rn, rt),
             real(s, sn, st, r, rn, rd, rt, c, rq)))

typedef int (*gv_fn)(const void *, int, H, void *, const int *, const int *, H, int, H);
typedef int (*igv_fn)(const void *, int, H, void *, const int *, const int *, H, int, H,
                      void *);
#define GATHERV_COUNT                                                                      \
    if (active())                                                                          \
        record_coll(OP_GATHERV, c, root,                                                   \
                    comm_rank(c) == root ? 0 : CB(sn, st))
WRAP(gv_fn, MPI_Gatherv,
     (const void *s, int sn, H st, void *r, const int *rn, const int *rd, H rt, int root,
      H c),
     GUARDED(GATHERV_COUNT, real(s, sn, st, r, rn, rd, rt, root, c)))
WRAP(igv_fn, MPI_Igatherv,
     (const void *s, int sn, H st, void *r, const int *rn, const int *rd, H rt, int root,
      H c, void *rq),
     GUARDED(GATHERV_COUNT, real(s, sn, st, r, rn, rd, rt, root, c, rq)))

/* scatterv: the root's send counts (the others send nothing: 0) */
typedef int (*sv_fn)(const void *, const int *, const int *, H, void *, int, H, int, H);
typedef int (*isv_fn)(const void *, const int *, const int *, H, void *, int, H, int, H,
                      void *);
#define SCATTERV_COUNT                                                                     \
    if (active()) {                                                                        \
        if (comm_rank(c) == root)                                                          \
            record_vcoll(OP_SCATTERV, c, root, sn, st);                                    \
        else                                                                               \
            record_coll(OP_SCATTERV, c, root, 0);                                          \
    }
WRAP(sv_fn, MPI_Scatterv,
     (const void *s, const int *sn, const int *sd, H st, void *r, int rn, H rt, int root,
      H c),
     GUARDED(SCATTERV_COUNT, real(s, sn, sd, st, r, rn, rt, root, c)))
WRAP(isv_fn, MPI_Iscatterv,
     (const void *s, const int *sn, const int *sd, H st, void *r, int rn, H rt, int root,
      H c, void *rq),
     GUARDED(SCATTERV_COUNT, real(s, sn, sd, st, r, rn, rt, root, c, rq)))

/* reduce_scatter: every member's block */
typedef int (*rs_fn)(const void *, void *, const int *, H, H, H);
typedef int (*irs_fn)(const void *, void *, const int *, H, H, H, void *);
WRAP(rs_fn, MPI_Reduce_scatter, (const void *s, void *r, const int *rn, H t, H o, H c),
     GUARDED(record_vcoll(OP_REDUCE_SCATTER, c, -1, rn, t), real(s, r, rn, t, o, c)))
WRAP(irs_fn, MPI_Ireduce_scatter,
     (const void *s, void *r, const int *rn, H t, H o, H c, void *rq),
     GUARDED(record_vcoll(OP_REDUCE_SCATTER, c, -1, rn, t), real(s, r, rn, t, o, c, rq)))

typedef int (*rsb_fn)(const void *, void *, int, H, H, H);
typedef int (*irsb_fn)(const void *, void *, int, H, H, H, void *);
WRAP(rsb_fn, MPI_Reduce_scatter_block, (const void *s, void *r, int n, H t, H o, H c),
     GUARDED(record_coll(OP_REDUCE_SCATTER_BLOCK, c, -1, CB(n, t)),
             real(s, r, n, t, o, c)))
WRAP(irsb_fn, MPI_Ireduce_scatter_block,
     (const void *s, void *r, int n, H t, H o, H c, void *rq),
     GUARDED(record_coll(OP_REDUCE_SCATTER_BLOCK, c, -1, CB(n, t)),
             real(s, r, n, t, o, c, rq)))

typedef int (*barrier_fn)(H);
typedef int (*ibarrier_fn)(H, void *);
WRAP(barrier_fn, MPI_Barrier, (H c), GUARDED(record_coll(OP_BARRIER, c, -1, 0), real(c)))
WRAP(ibarrier_fn, MPI_Ibarrier, (H c, void *rq),
     GUARDED(record_coll(OP_BARRIER, c, -1, 0), real(c, rq)))


/* ---- MPI-4 large-count forms (MPI_Count counts), where the MPI has them ---- */

typedef long long C; /* MPI_Count: 64 bits in every ABI here */

/* Set once this library is relocated and constructed: before, a resolver may not call
 * anything outside this object (the dynamic linker runs the resolvers of objects bound
 * at load, libmpi's included, in its own order). */
static int constructed;
__attribute__((constructor)) static void record_constructed(void)
{
    STORE(constructed, 1);
}

/* An indirect function's resolver, run by the dynamic linker when a program or library
 * refers to NAME (at load, at its first call, or in dlsym): IMPL when the MPI has NAME,
 * else nothing, as without this library (an MPI-3 library has no _c functions, and its
 * callers must see none: mpi4py then counts in int itself).  Before this library is
 * constructed only objects loaded with the program refer to NAME (libmpi itself, a
 * program linked against an MPI that has it): IMPL, which finds the MPI's at its first
 * call. */
static void *if_mpi_has(const char *name, void *impl)
{
    if (!LOAD(constructed))
        return impl;
    return rankmap_mpi_symbol(name, NULL) ? impl : NULL;
}

/* MPI_NAME, an indirect function (what callers look up), and PMPI_NAME, a plain one
 * (libmpi refers to its own PMPI_ names, bound at load before this library is
 * relocated; without the MPI's it returns NO_MPI_ERROR); both as WRAP defines them. */
#define WRAPC(TYPE, NAME, PARAMS, BODY)                                                    \
    static int w_##NAME PARAMS                                                             \
    {                                                                                      \
        static void *slot_;                                                                \
        TYPE real = (TYPE)lazy(&slot_, #NAME, NULL);                                       \
        if (!real)                                                                         \
            return NO_MPI_ERROR;                                                           \
        BODY                                                                               \
    }                                                                                      \
    static TYPE r_##NAME(void) { return (TYPE)if_mpi_has(#NAME, (void *)w_##NAME); }       \
    int NAME PARAMS __attribute__((ifunc("r_" #NAME)));                                    \
    int P##NAME PARAMS                                                                     \
    {                                                                                      \
        static void *slot_;                                                                \
        TYPE real = (TYPE)lazy(&slot_, "P" #NAME, (void *)P##NAME);                        \
        if (!real)                                                                         \
            return NO_MPI_ERROR;                                                           \
        BODY                                                                               \
    }

typedef int (*send_c_fn)(const void *, C, H, int, int, H);
typedef int (*isend_c_fn)(const void *, C, H, int, int, H, void *);
#define SEND_C(NAME)                                                                       \
    WRAPC(send_c_fn, NAME, (const void *b, C n, H t, int d, int g, H c),                   \
          GUARDED(count_send(n, t, d, c), real(b, n, t, d, g, c)))
#define ISEND_C(NAME)                                                                      \
    WRAPC(isend_c_fn, NAME, (const void *b, C n, H t, int d, int g, H c, void *rq),        \
          GUARDED(count_send(n, t, d, c), real(b, n, t, d, g, c, rq)))
SEND_C(MPI_Send_c)
SEND_C(MPI_Ssend_c)
SEND_C(MPI_Bsend_c)
SEND_C(MPI_Rsend_c)
ISEND_C(MPI_Isend_c)
ISEND_C(MPI_Issend_c)
ISEND_C(MPI_Ibsend_c)
ISEND_C(MPI_Irsend_c)

typedef int (*sendrecv_c_fn)(const void *, C, H, int, int, void *, C, H, int, int, H,
                             void *);
WRAPC(sendrecv_c_fn, MPI_Sendrecv_c,
      (const void *sb, C sn, H st, int d, int sg, void *rb, C rn, H rt, int s, int rg, H c,
       void *status),
      GUARDED(count_send(sn, st, d, c), real(sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status)))

typedef int (*sendrecv_replace_c_fn)(void *, C, H, int, int, int, int, H, void *);
WRAPC(sendrecv_replace_c_fn, MPI_Sendrecv_replace_c,
      (void *b, C n, H t, int d, int sg, int s, int rg, H c, void *status),
      GUARDED(count_send(n, t, d, c), real(b, n, t, d, sg, s, rg, c, status)))

#define SEND_INIT_C(NAME)                                                                  \
    WRAPC(isend_c_fn, NAME, (const void *b, C n, H t, int d, int g, H c, void *rq), {      \
        int outer = depth++ == 0;                                                          \
        int rc = real(b, n, t, d, g, c, rq);                                               \
        depth--;                                                                           \
        if (outer && rc == 0)                                                              \
            preq_remember(handle_at(rq, 0), n, t, d, c);                                   \
        return rc;                                                                         \
    })
SEND_INIT_C(MPI_Send_init_c)
SEND_INIT_C(MPI_Ssend_init_c)
SEND_INIT_C(MPI_Bsend_init_c)
SEND_INIT_C(MPI_Rsend_init_c)

WRAPC(isend_c_fn, MPI_Recv_init_c, (void *b, C n, H t, int s, int g, H c, void *rq), {
    int outer = depth++ == 0;
    int rc = real(b, n, t, s, g, c, rq);
    depth--;
    if (outer && rc == 0)
        preq_forget(handle_at(rq, 0));
    return rc;
})

typedef int (*bcast_c_fn)(void *, C, H, int, H);
typedef int (*ibcast_c_fn)(void *, C, H, int, H, void *);
WRAPC(bcast_c_fn, MPI_Bcast_c, (void *b, C n, H t, int root, H c),
      GUARDED(record_coll(OP_BCAST, c, root, CB(n, t)), real(b, n, t, root, c)))
WRAPC(ibcast_c_fn, MPI_Ibcast_c, (void *b, C n, H t, int root, H c, void *rq),
      GUARDED(record_coll(OP_BCAST, c, root, CB(n, t)), real(b, n, t, root, c, rq)))

typedef int (*reduce_c_fn)(const void *, void *, C, H, H, int, H);
typedef int (*ireduce_c_fn)(const void *, void *, C, H, H, int, H, void *);
WRAPC(reduce_c_fn, MPI_Reduce_c, (const void *s, void *r, C n, H t, H o, int root, H c),
      GUARDED(record_coll(OP_REDUCE, c, root, CB(n, t)), real(s, r, n, t, o, root, c)))
WRAPC(ireduce_c_fn, MPI_Ireduce_c,
      (const void *s, void *r, C n, H t, H o, int root, H c, void *rq),
      GUARDED(record_coll(OP_REDUCE, c, root, CB(n, t)), real(s, r, n, t, o, root, c, rq)))

typedef int (*allreduce_c_fn)(const void *, void *, C, H, H, H);
typedef int (*iallreduce_c_fn)(const void *, void *, C, H, H, H, void *);
#define ALLREDUCE_C(NAME, INAME, OP)                                                       \
    WRAPC(allreduce_c_fn, NAME, (const void *s, void *r, C n, H t, H o, H c),              \
          GUARDED(record_coll(OP, c, -1, CB(n, t)), real(s, r, n, t, o, c)))               \
    WRAPC(iallreduce_c_fn, INAME, (const void *s, void *r, C n, H t, H o, H c, void *rq),  \
          GUARDED(record_coll(OP, c, -1, CB(n, t)), real(s, r, n, t, o, c, rq)))
ALLREDUCE_C(MPI_Allreduce_c, MPI_Iallreduce_c, OP_ALLREDUCE)
ALLREDUCE_C(MPI_Scan_c, MPI_Iscan_c, OP_SCAN)
ALLREDUCE_C(MPI_Exscan_c, MPI_Iexscan_c, OP_EXSCAN)

typedef int (*a2a_c_fn)(const void *, C, H, void *, C, H, H);
typedef int (*ia2a_c_fn)(const void *, C, H, void *, C, H, H, void *);
#define A2A_C(NAME, INAME, OP)                                                             \
    WRAPC(a2a_c_fn, NAME, (const void *s, C sn, H st, void *r, C rn, H rt, H c),           \
          GUARDED(record_coll(OP, c, -1, CB(rn, rt)), real(s, sn, st, r, rn, rt, c)))      \
    WRAPC(ia2a_c_fn, INAME, (const void *s, C sn, H st, void *r, C rn, H rt, H c, void *rq), \
          GUARDED(record_coll(OP, c, -1, CB(rn, rt)), real(s, sn, st, r, rn, rt, c, rq)))
A2A_C(MPI_Alltoall_c, MPI_Ialltoall_c, OP_ALLTOALL)
A2A_C(MPI_Allgather_c, MPI_Iallgather_c, OP_ALLGATHER)

typedef int (*gather_c_fn)(const void *, C, H, void *, C, H, int, H);
typedef int (*igather_c_fn)(const void *, C, H, void *, C, H, int, H, void *);
#define ROOTED_C(NAME, INAME, OP, BLOCK)                                                   \
    WRAPC(gather_c_fn, NAME, (const void *s, C sn, H st, void *r, C rn, H rt, int root, H c), \
          GUARDED(if (active()) record_coll(OP, c, root, BLOCK(sn, st, rn, rt, root, c)),  \
                  real(s, sn, st, r, rn, rt, root, c)))                                    \
    WRAPC(igather_c_fn, INAME,                                                             \
          (const void *s, C sn, H st, void *r, C rn, H rt, int root, H c, void *rq),       \
          GUARDED(if (active()) record_coll(OP, c, root, BLOCK(sn, st, rn, rt, root, c)),  \
                  real(s, sn, st, r, rn, rt, root, c, rq)))
ROOTED_C(MPI_Gather_c, MPI_Igather_c, OP_GATHER, gather_block)
ROOTED_C(MPI_Scatter_c, MPI_Iscatter_c, OP_SCATTER, scatter_block)

typedef int (*rsb_c_fn)(const void *, void *, C, H, H, H);
typedef int (*irsb_c_fn)(const void *, void *, C, H, H, H, void *);
WRAPC(rsb_c_fn, MPI_Reduce_scatter_block_c, (const void *s, void *r, C n, H t, H o, H c),
      GUARDED(record_coll(OP_REDUCE_SCATTER_BLOCK, c, -1, CB(n, t)), real(s, r, n, t, o, c)))
WRAPC(irsb_c_fn, MPI_Ireduce_scatter_block_c,
      (const void *s, void *r, C n, H t, H o, H c, void *rq),
      GUARDED(record_coll(OP_REDUCE_SCATTER_BLOCK, c, -1, CB(n, t)),
              real(s, r, n, t, o, c, rq)))

/* The blocking large-count v-collectives (MPI_Count counts, MPI_Aint displacements);
 * the nonblocking ones are not defined (not recorded). */
typedef int (*a2av_c_fn)(const void *, const C *, const H *, H, void *, const C *,
                         const H *, H, H);
WRAPC(a2av_c_fn, MPI_Alltoallv_c,
      (const void *s, const C *sn, const H *sd, H st, void *r, const C *rn, const H *rd,
       H rt, H c),
      GUARDED(if (active()) record_vcoll_at(OP_ALLTOALLV, c, -1, in_place(s) ? rn : sn, 1,
                                            in_place(s) ? rt : st),
              real(s, sn, sd, st, r, rn, rd, rt, c)))

typedef int (*agv_c_fn)(const void *, C, H, void *, const C *, const H *, H, H);
WRAPC(agv_c_fn, MPI_Allgatherv_c,
      (const void *s, C sn, H st, void *r, const C *rn, const H *rd, H rt, H c),
      GUARDED(record_vcoll_at(OP_ALLGATHERV, c, -1, rn, 1, rt),
              real(s, sn, st, r, rn, rd, rt, c)))

typedef int (*gv_c_fn)(const void *, C, H, void *, const C *, const H *, H, int, H);
WRAPC(gv_c_fn, MPI_Gatherv_c,
      (const void *s, C sn, H st, void *r, const C *rn, const H *rd, H rt, int root, H c),
      GUARDED(GATHERV_COUNT, real(s, sn, st, r, rn, rd, rt, root, c)))

typedef int (*sv_c_fn)(const void *, const C *, const H *, H, void *, C, H, int, H);
WRAPC(sv_c_fn, MPI_Scatterv_c,
      (const void *s, const C *sn, const H *sd, H st, void *r, C rn, H rt, int root, H c),
      GUARDED(if (active()) {
                  if (comm_rank(c) == root)
                      record_vcoll_at(OP_SCATTERV, c, root, sn, 1, st);
                  else
                      record_coll(OP_SCATTERV, c, root, 0);
              },
              real(s, sn, sd, st, r, rn, rt, root, c)))

typedef int (*rs_c_fn)(const void *, void *, const C *, H, H, H);
WRAPC(rs_c_fn, MPI_Reduce_scatter_c, (const void *s, void *r, const C *rn, H t, H o, H c),
      GUARDED(record_vcoll_at(OP_REDUCE_SCATTER, c, -1, rn, 1, t), real(s, r, rn, t, o, c)))
