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
 *     calls) of all the above but the nonblocking v-collectives.  An MPI-3 library has
 *     none, but a caller that looks them up at run time (mpi4py's weak references)
 *     finds this library's: they then call the int-count function (a count beyond
 *     INT_MAX aborts; the v-forms convert their arrays, one malloc a call).
 * Not recorded: one-sided (MPI_Put/Get/Accumulate), neighborhood collectives,
 * Alltoallw, the nonblocking large-count v-collectives (MPI_Ialltoallv_c, ...),
 * MPI_Isendrecv(_replace),
 * MPI-4 persistent collectives and partitioned communication, receives (every message
 * is counted once, by its sender).
 *
 * Everything lives in fixed-size structures set up at MPI_Init: no allocation per
 * message (an arena, mapped once, holds the member lists and the v-collective rows; a
 * full table or arena drops the record and counts what was dropped).
 *
 * At MPI_Finalize rank 0 claims the launch's directory $RANKMAP_RECORD_DIR/run.<K> (the
 * lowest K whose mkdir succeeds, so that a job's launches never mix their files) and
 * broadcasts K on MPI_COMM_WORLD; each rank then writes run.<K>/rank.<R> (through a
 * temporary name and a rename, so a file that exists is complete).  With
 * RANKMAP_RECORD_OPENMPI=monitoring an Open MPI program is left to Open MPI's own
 * monitoring components (the TaskProlog switches them on) and not recorded here.
 * Text, one record a line:
 *
 *   rankmap-record 1                      format and version
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
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../preload/mpi_symbol.h"

typedef intptr_t H; /* any MPI handle, at pointer width */

#define FORMAT_VERSION 1
#define DEFAULT_DENSE_LIMIT 65536
#define HASH_SLOTS (1 << 16) /* p2p destinations beyond the dense limit */
#define COMM_SLOTS 1024      /* communicator handles cached */
#define COMM_WINDOW 8
#define MAX_COMMS 256        /* distinct memberships recorded */
#define MAX_COLL 1024        /* collective entries */
#define COLL_SLOTS 2048
#define PREQ_SLOTS 4096      /* persistent send requests */
#define PREQ_WINDOW 8
#define ARENA_BYTES ((size_t)64 << 20) /* member lists and v-rows, mapped once */
#define MPICH_COMM_WORLD ((H)0x44000000)
#define MPICH_INT ((H)0x4c000405)

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

typedef int (*int_h_ip)(H, int *);
typedef int (*int_h_hp)(H, H *);
typedef int (*int_ip)(int *);
typedef int (*int_hp)(H *);

static int abi;
static H world, world_group;
static long wrank = -1, wsize;
static int state; /* 0 not set up, 1 recording, -1 not recording */
static int written;
static __thread int depth; /* >0 inside a wrapped call */
static volatile char lock_flag;

/* point-to-point counters */
static long dense_limit;
static uint64_t *row_bytes, *row_msgs; /* dense: wsize each */
static struct { int32_t key; uint64_t bytes, msgs; } *hash; /* key = world rank + 1 */
static long hash_used;

/* communicators */
struct commrec { int size; long members; uint64_t sum; }; /* members: arena offset, -1 world */
static struct commrec comms[MAX_COMMS];
static int ncomms;
static struct { H handle; int used, inter, local, remote; } cslots[COMM_SLOTS];

/* collectives */
struct coll { int used, op, comm, root; int64_t bytes; uint64_t calls; long row; };
static struct coll colls[COLL_SLOTS];
static int ncolls;

/* persistent sends */
static struct { H req; int used; long dest; int64_t bytes; } preqs[PREQ_SLOTS];

static char *arena;
static size_t arena_used;
static uint64_t drop_bytes, drop_msgs, drop_colls;

static void lock(void)
{
    while (__atomic_test_and_set(&lock_flag, __ATOMIC_ACQUIRE))
        ;
}

static void unlock(void)
{
    __atomic_clear(&lock_flag, __ATOMIC_RELEASE);
}

static void *next(const char *name, void *self)
{
    void *f = rankmap_mpi_symbol(name, self);
    if (!f) {
        fprintf(stderr, "rankmap-record: %s not found after librankmap_record in the link "
                        "order (is this program linked with MPI?)\n", name);
        abort();
    }
    return f;
}

/* The MPI's own PMPI_ function NAME (not wrapped here), looked up once. */
#define PMPI(type, name) ({ static type f_; if (!f_) f_ = (type)next(#name, NULL); f_; })

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

static void *arena_take(size_t bytes)
{
    bytes = (bytes + 7) & ~(size_t)7;
    if (!arena || arena_used + bytes > ARENA_BYTES)
        return NULL;
    void *p = arena + arena_used;
    arena_used += bytes;
    return p;
}

static long env_long(const char *name, long fallback)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return fallback;
    long n = strtol(v, &end, 10);
    return *end || n < 0 ? fallback : n;
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

/* Called with the lock held, after MPI_Init. */
static void setup(void)
{
    const char *dir = getenv("RANKMAP_RECORD_DIR");
    int r = -1, s = 0;
    state = -1;
    if (!dir || !*dir)
        return;
    if (dl_iterate_phdr(standard_abi, NULL)) {
        const char *r = getenv("PMI_RANK"); /* one message, from rank 0 */
        if (!r || !strcmp(r, "0"))
            fprintf(stderr, "rankmap-record: the program uses the MPI standard ABI "
                            "(libmpi_abi), which the recorder does not know: not "
                            "recording\n");
        return;
    }
    /* the global scope's definition first: a program may hold a copy of the object
     * (a copy relocation), and its address is then the canonical handle */
    void *ompi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    if (!ompi_world)
        ompi_world = rankmap_mpi_symbol("ompi_mpi_comm_world", NULL);
    if (ompi_world) {
        const char *mode = getenv("RANKMAP_RECORD_OPENMPI");
        if (mode && !strcmp(mode, "monitoring"))
            return; /* Open MPI's pml/coll monitoring records this program */
        abi = ABI_OMPI;
        world = (H)ompi_world;
    } else {
        abi = ABI_MPICH;
        world = MPICH_COMM_WORLD;
    }
    PMPI(int_h_ip, PMPI_Comm_rank)(world, &r);
    PMPI(int_h_ip, PMPI_Comm_size)(world, &s);
    world_group = 0;
    PMPI(int_h_hp, PMPI_Comm_group)(world, &world_group);
    if (r < 0 || s < 1)
        return;
    wrank = r;
    wsize = s;
    dense_limit = env_long("RANKMAP_RECORD_DENSE_LIMIT", DEFAULT_DENSE_LIMIT);
    arena = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED)
        arena = NULL;
    if (wsize <= dense_limit) {
        row_bytes = arena_take(sizeof(uint64_t) * (size_t)wsize);
        row_msgs = arena_take(sizeof(uint64_t) * (size_t)wsize);
        if (!row_msgs) {
            fprintf(stderr, "rankmap-record: rank %ld: no memory: not recording\n", wrank);
            return;
        }
    } else {
        hash = mmap(NULL, sizeof *hash * HASH_SLOTS, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (hash == MAP_FAILED) {
            hash = NULL;
            fprintf(stderr, "rankmap-record: rank %ld: no memory: not recording\n", wrank);
            return;
        }
    }
    comms[0].size = (int)wsize;
    comms[0].members = -1;
    ncomms = 1;
    state = 1;
}

static int active(void)
{
    if (state == 0) {
        int flag = 0;
        lock();
        if (state == 0) {
            PMPI(int_ip, PMPI_Initialized)(&flag);
            if (flag)
                setup();
        }
        unlock();
    }
    return state == 1;
}

static int64_t type_size(H dt)
{
    int s = 0;
    PMPI(int_h_ip, PMPI_Type_size)(dt, &s);
    return s > 0 ? s : 0;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/* The record of GROUP's membership (world ranks in group order); -1 when it does not
 * fit.  Lock held. */
static int group_record(H group)
{
    typedef int (*translate_fn)(H, int, const int *, H, int *);
    int n = 0;
    PMPI(int_h_ip, PMPI_Group_size)(group, &n);
    if (n < 1)
        return -1;
    size_t mark = arena_used;
    int *out = arena_take(sizeof(int) * (size_t)n), *in = arena_take(sizeof(int) * (size_t)n);
    if (!out || !in) {
        arena_used = mark;
        return -1;
    }
    for (int i = 0; i < n; i++)
        in[i] = i;
    PMPI(translate_fn, PMPI_Group_translate_ranks)(group, n, in, world_group, out);
    arena_used = (size_t)((char *)in - arena); /* give back the input */
    int identity = n == wsize;
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (out[i] < 0 || out[i] >= wsize)
            out[i] = -1; /* MPI_UNDEFINED: not in this world */
        identity &= out[i] == i;
        sum = mix(sum, (uint64_t)(uint32_t)out[i]);
    }
    if (identity) {
        arena_used = mark;
        return 0;
    }
    for (int c = 1; c < ncomms; c++)
        if (comms[c].size == n && comms[c].sum == sum &&
            !memcmp(arena + comms[c].members, out, sizeof(int) * (size_t)n)) {
            arena_used = mark;
            return c;
        }
    if (ncomms == MAX_COMMS) {
        arena_used = mark;
        return -1;
    }
    comms[ncomms].size = n;
    comms[ncomms].members = (long)((char *)out - arena);
    comms[ncomms].sum = sum;
    return ncomms++;
}

/* The cache slot of communicator COMM, filled on first sight.  Lock held. */
static int comm_slot(H comm)
{
    H key = norm(comm);
    size_t start = (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ULL) >> 40) % COMM_SLOTS;
    int free_slot = -1;
    for (int i = 0; i < COMM_WINDOW; i++) {
        size_t k = (start + (size_t)i) % COMM_SLOTS;
        if (cslots[k].used && cslots[k].handle == key)
            return (int)k;
        if (!cslots[k].used && free_slot < 0)
            free_slot = (int)k;
    }
    if (free_slot < 0)
        free_slot = (int)start; /* evict: the records stay, only the handle is forgotten */
    int k = free_slot, inter = 0;
    H group = 0;
    cslots[k].used = 1;
    cslots[k].handle = key;
    PMPI(int_h_ip, PMPI_Comm_test_inter)(comm, &inter);
    cslots[k].inter = inter;
    PMPI(int_h_hp, PMPI_Comm_group)(comm, &group);
    cslots[k].local = group_record(group);
    PMPI(int_hp, PMPI_Group_free)(&group);
    cslots[k].remote = cslots[k].local;
    if (inter) {
        group = 0;
        PMPI(int_h_hp, PMPI_Comm_remote_group)(comm, &group);
        cslots[k].remote = group_record(group);
        PMPI(int_hp, PMPI_Group_free)(&group);
    }
    return k;
}

static void forget_comm(H comm)
{
    H key = norm(comm);
    size_t start = (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ULL) >> 40) % COMM_SLOTS;
    lock();
    for (int i = 0; i < COMM_WINDOW; i++) {
        size_t k = (start + (size_t)i) % COMM_SLOTS;
        if (cslots[k].used && cslots[k].handle == key)
            cslots[k].used = 0;
    }
    unlock();
}

/* The world rank of DEST on COMM (the remote group's for an inter-communicator); -1
 * when it has none.  Lock held. */
static long world_dest(H comm, int dest)
{
    if (dest < 0)
        return -1;
    if (norm(comm) == norm(world))
        return dest < wsize ? dest : -1;
    int rec = cslots[comm_slot(comm)].remote;
    if (rec < 0 || dest >= comms[rec].size)
        return -1;
    if (comms[rec].members < 0)
        return dest;
    return ((int *)(arena + comms[rec].members))[dest];
}

/* Lock held. */
static void add_p2p(long w, int64_t bytes)
{
    if (w < 0) {
        drop_bytes += (uint64_t)bytes;
        drop_msgs++;
        return;
    }
    if (row_bytes) {
        row_bytes[w] += (uint64_t)bytes;
        row_msgs[w]++;
        return;
    }
    size_t k = (size_t)(((uint64_t)w * 0x9e3779b97f4a7c15ULL) >> 32) % HASH_SLOTS;
    for (;;) {
        if (hash[k].key == w + 1)
            break;
        if (hash[k].key == 0) {
            if (hash_used >= HASH_SLOTS * 3 / 4) {
                drop_bytes += (uint64_t)bytes;
                drop_msgs++;
                return;
            }
            hash[k].key = (int32_t)(w + 1);
            hash_used++;
            break;
        }
        k = (k + 1) % HASH_SLOTS;
    }
    hash[k].bytes += (uint64_t)bytes;
    hash[k].msgs++;
}

static void count_send(int64_t count, H dt, int dest, H comm)
{
    if (dest < 0 || count < 0 || !active()) /* MPI_PROC_NULL is negative */
        return;
    int64_t bytes = count * type_size(dt);
    lock();
    add_p2p(world_dest(comm, dest), bytes);
    unlock();
}

/* The collective entry for the key, created when new; NULL when the table is full.
 * A v-entry (ROW) carries one byte counter per member in the arena.  Lock held. */
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
 * (counted as dropped).  Lock held. */
static int coll_comm(H comm)
{
    if (norm(comm) == norm(world))
        return 0;
    int k = comm_slot(comm);
    if (cslots[k].inter || cslots[k].local < 0) {
        drop_colls++;
        return -1;
    }
    return cslots[k].local;
}

/* One call of OP with BYTES (per the table's meaning of OP). */
static void record_coll(int op, H comm, int root, int64_t bytes)
{
    if (!active())
        return;
    lock();
    int c = coll_comm(comm);
    if (c >= 0) {
        struct coll *e = coll_entry(op, c, rooted[op] ? root : -1, bytes, 0);
        if (e)
            e->calls++;
        else
            drop_colls++;
    }
    unlock();
}

/* One call of a v-collective: COUNTS[i] elements of DT for member i. */
static void record_vcoll_at(int op, H comm, int root, const void *counts, int wide, H dt)
{
    if (!active())
        return;
    int64_t size = type_size(dt);
    lock();
    int c = coll_comm(comm);
    if (c >= 0) {
        struct coll *e = coll_entry(op, c, rooted[op] ? root : -1, -1, 1);
        if (e) {
            uint64_t *row = (uint64_t *)(arena + e->row);
            for (int i = 0; i < comms[c].size; i++) {
                int64_t n = wide ? (int64_t)((const long long *)counts)[i]
                                 : (int64_t)((const int *)counts)[i];
                row[i] += (uint64_t)((n > 0 ? n : 0) * size);
            }
            e->calls++;
        } else {
            drop_colls++;
        }
    }
    unlock();
}

/* One call of a v-collective: COUNTS[i] elements of DT for member i (ints). */
static void record_vcoll(int op, H comm, int root, const int *counts, H dt)
{
    record_vcoll_at(op, comm, root, counts, 0, dt);
}

static int comm_rank(H comm)
{
    int r = -1;
    PMPI(int_h_ip, PMPI_Comm_rank)(comm, &r);
    return r;
}

/* persistent sends: request -> (world destination, bytes), looked up at MPI_Start */
static size_t preq_start(H req)
{
    return (size_t)(((uint64_t)norm(req) * 0x9e3779b97f4a7c15ULL) >> 40) % PREQ_SLOTS;
}

static void preq_forget(H req)
{
    size_t s = preq_start(req);
    for (int i = 0; i < PREQ_WINDOW; i++) {
        size_t k = (s + (size_t)i) % PREQ_SLOTS;
        if (preqs[k].used && preqs[k].req == norm(req))
            preqs[k].used = 0;
    }
}

static void preq_remember(H req, int64_t count, H dt, int dest, H comm)
{
    if (dest < 0 || !active())
        return;
    int64_t bytes = (count > 0 ? count : 0) * type_size(dt);
    lock();
    preq_forget(req);
    long w = world_dest(comm, dest);
    size_t s = preq_start(req);
    int stored = 0;
    for (int i = 0; i < PREQ_WINDOW && !stored; i++) {
        size_t k = (s + (size_t)i) % PREQ_SLOTS;
        if (!preqs[k].used) {
            preqs[k].used = 1;
            preqs[k].req = norm(req);
            preqs[k].dest = w;
            preqs[k].bytes = bytes;
            stored = 1;
        }
    }
    if (!stored)
        drop_msgs++; /* its starts go uncounted */
    unlock();
}

static void preq_started(H req)
{
    if (!active())
        return;
    size_t s = preq_start(req);
    lock();
    for (int i = 0; i < PREQ_WINDOW; i++) {
        size_t k = (s + (size_t)i) % PREQ_SLOTS;
        if (preqs[k].used && preqs[k].req == norm(req)) {
            add_p2p(preqs[k].dest, preqs[k].bytes);
            break;
        }
    }
    unlock();
}

static void preq_forget_locked(H req)
{
    if (state != 1)
        return;
    lock();
    preq_forget(req);
    unlock();
}

/* ---- the file ---- */

static int by_key(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static size_t memory_used(void)
{
    return sizeof comms + sizeof cslots + sizeof colls + sizeof preqs + arena_used +
           (hash ? sizeof *hash * HASH_SLOTS : 0);
}

typedef int (*bcast_fn)(void *, int, H, int, H);

/* The launch's run.<K> under dir: rank 0 creates it, every rank learns K (-1: none).
 * Collective over MPI_COMM_WORLD, as MPI_Finalize is. */
static int claim_run(const char *dir)
{
    int k = -1;
    if (wrank == 0) {
        char p[4096];
        for (int i = 0; i < 100000; i++) {
            snprintf(p, sizeof p, "%s/run.%d", dir, i);
            if (mkdir(p, 0755) == 0) {
                k = i;
                break;
            }
            if (errno != EEXIST) {
                fprintf(stderr, "rankmap-record: cannot create %s: %s\n", p, strerror(errno));
                break;
            }
        }
    }
    H type = MPICH_INT;
    if (abi == ABI_OMPI) {
        void *t = dlsym(RTLD_DEFAULT, "ompi_mpi_int");
        type = (H)(t ? t : rankmap_mpi_symbol("ompi_mpi_int", NULL));
    }
    if (!type || PMPI(bcast_fn, PMPI_Bcast)(&k, 1, type, 0, world) != 0)
        return -1;
    return k;
}

static void write_record(void)
{
    const char *base = getenv("RANKMAP_RECORD_DIR");
    char dir[4000], path[4096], tmp[4096], version[8192] = "";
    int len = 0;
    if (written || state != 1 || !base || !*base)
        return;
    written = 1;
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
    } else {
        qsort(hash, HASH_SLOTS, sizeof *hash, by_key); /* empty slots (key 0) first */
        fprintf(f, "p2p %ld\n", hash_used);
        for (long k = 0; k < HASH_SLOTS; k++)
            if (hash[k].key)
                fprintf(f, "%ld %llu %llu\n", (long)hash[k].key - 1,
                        (unsigned long long)hash[k].bytes, (unsigned long long)hash[k].msgs);
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
    fprintf(f, "dropped %llu %llu %llu\nend\n", (unsigned long long)drop_bytes,
            (unsigned long long)drop_msgs, (unsigned long long)drop_colls);
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

/* Defines NAME and PNAME with parameters PARAMS; BODY uses `real`, the next NAME. */
#define WRAP(TYPE, NAME, PARAMS, BODY)                                                     \
    int NAME PARAMS                                                                        \
    {                                                                                      \
        static TYPE real;                                                                  \
        if (!real)                                                                         \
            real = (TYPE)next(#NAME, (void *)NAME);                                        \
        BODY                                                                               \
    }                                                                                      \
    int P##NAME PARAMS                                                                     \
    {                                                                                      \
        static TYPE real;                                                                  \
        if (!real)                                                                         \
            real = (TYPE)next("P" #NAME, (void *)P##NAME);                                 \
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

static void after_init(void)
{
    if (state == 0) {
        lock();
        if (state == 0)
            setup();
        unlock();
    }
}

WRAP(init_fn, MPI_Init, (int *argc, char ***argv), {
    depth++;
    int rc = real(argc, argv);
    if (--depth == 0 && rc == 0)
        after_init();
    return rc;
})

WRAP(init_thread_fn, MPI_Init_thread, (int *argc, char ***argv, int req, int *prov), {
    depth++;
    int rc = real(argc, argv, req, prov);
    if (--depth == 0 && rc == 0)
        after_init();
    return rc;
})

WRAP(finalize_fn, MPI_Finalize, (void), {
    if (depth == 0 && active()) {
        lock();
        depth++; /* the broadcast claiming the run directory is not the program's */
        write_record();
        depth--;
        state = -1;
        unlock();
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
        preq_forget_locked(handle_at(rq, 0)); /* a recycled handle is no send */
    return rc;
})

typedef int (*start_fn)(void *);
typedef int (*startall_fn)(int, void *);
WRAP(start_fn, MPI_Start, (void *rq), GUARDED(preq_started(handle_at(rq, 0)), real(rq)))
WRAP(startall_fn, MPI_Startall, (int n, void *rqs), GUARDED(
    for (int i = 0; i < n; i++) preq_started(handle_at(rqs, i)), real(n, rqs)))
WRAP(start_fn, MPI_Request_free, (void *rq),
     GUARDED(preq_forget_locked(handle_at(rq, 0)), real(rq)))

/* communicators leave the cache when freed (handles are recycled) */
WRAP(start_fn, MPI_Comm_free, (void *comm),
     GUARDED(if (state == 1) forget_comm(handle_at(comm, 0)), real(comm)))
WRAP(start_fn, MPI_Comm_disconnect, (void *comm),
     GUARDED(if (state == 1) forget_comm(handle_at(comm, 0)), real(comm)))

/* collectives (the I-forms take a request pointer more); CB: the bytes of N elements
 * of T, asked of the MPI only while recording */
#define CB(N, T) (state == 1 ? (int64_t)(N) * type_size(T) : 0)

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

/* ---- MPI-4 large-count forms (MPI_Count counts), as mpi4py 4 calls them ---- */

typedef long long C; /* MPI_Count: 64 bits in every ABI here */

/* The MPI's NAME (an _c function), or, when this MPI has none (an MPI-3 library, whose
 * callers may still see this library's definition: mpi4py tests weak symbols), its
 * int-count form, which the wrapper then calls with the count converted. */
static void resolve_c(const char *name, void *self, void **real, void **alt)
{
    if (*real || *alt)
        return;
    *real = rankmap_mpi_symbol(name, self);
    if (!*real) {
        char plain[64];
        snprintf(plain, sizeof plain, "%.*s", (int)strlen(name) - 2, name);
        *alt = next(plain, NULL);
    }
}

static int fits(C n)
{
    if (n > 2147483647LL || n < -2147483647LL - 1) {
        fprintf(stderr, "rankmap-record: a count of %lld for an MPI without large-count "
                        "functions\n", n);
        abort();
    }
    return (int)n;
}

#define WRAPC(TYPE, ITYPE, NAME, PARAMS, ...)                                              \
    int NAME PARAMS                                                                        \
    {                                                                                      \
        static TYPE real;                                                                  \
        static ITYPE alt;                                                                  \
        resolve_c(#NAME, (void *)NAME, (void **)&real, (void **)&alt);                     \
        __VA_ARGS__                                                                        \
    }                                                                                      \
    int P##NAME PARAMS                                                                     \
    {                                                                                      \
        static TYPE real;                                                                  \
        static ITYPE alt;                                                                  \
        resolve_c("P" #NAME, (void *)P##NAME, (void **)&real, (void **)&alt);              \
        __VA_ARGS__                                                                        \
    }

typedef int (*send_c_fn)(const void *, C, H, int, int, H);
typedef int (*isend_c_fn)(const void *, C, H, int, int, H, void *);
#define SEND_C(NAME)                                                                       \
    WRAPC(send_c_fn, send_fn, NAME, (const void *b, C n, H t, int d, int g, H c),          \
          GUARDED(count_send(n, t, d, c),                                                  \
                  real ? real(b, n, t, d, g, c) : alt(b, fits(n), t, d, g, c)))
#define ISEND_C(NAME)                                                                      \
    WRAPC(isend_c_fn, isend_fn, NAME, (const void *b, C n, H t, int d, int g, H c, void *rq), \
          GUARDED(count_send(n, t, d, c),                                                  \
                  real ? real(b, n, t, d, g, c, rq) : alt(b, fits(n), t, d, g, c, rq)))
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
WRAPC(sendrecv_c_fn, sendrecv_fn, MPI_Sendrecv_c,
      (const void *sb, C sn, H st, int d, int sg, void *rb, C rn, H rt, int s, int rg, H c,
       void *status),
      GUARDED(count_send(sn, st, d, c),
              real ? real(sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status)
                   : alt(sb, fits(sn), st, d, sg, rb, fits(rn), rt, s, rg, c, status)))

typedef int (*sendrecv_replace_c_fn)(void *, C, H, int, int, int, int, H, void *);
WRAPC(sendrecv_replace_c_fn, sendrecv_replace_fn, MPI_Sendrecv_replace_c,
      (void *b, C n, H t, int d, int sg, int s, int rg, H c, void *status),
      GUARDED(count_send(n, t, d, c), real ? real(b, n, t, d, sg, s, rg, c, status)
                                           : alt(b, fits(n), t, d, sg, s, rg, c, status)))

#define SEND_INIT_C(NAME)                                                                  \
    WRAPC(isend_c_fn, isend_fn, NAME, (const void *b, C n, H t, int d, int g, H c, void *rq), { \
        int outer = depth++ == 0;                                                          \
        int rc = real ? real(b, n, t, d, g, c, rq) : alt(b, fits(n), t, d, g, c, rq);      \
        depth--;                                                                           \
        if (outer && rc == 0)                                                              \
            preq_remember(handle_at(rq, 0), n, t, d, c);                                   \
        return rc;                                                                         \
    })
SEND_INIT_C(MPI_Send_init_c)
SEND_INIT_C(MPI_Ssend_init_c)
SEND_INIT_C(MPI_Bsend_init_c)
SEND_INIT_C(MPI_Rsend_init_c)

WRAPC(isend_c_fn, isend_fn, MPI_Recv_init_c, (void *b, C n, H t, int s, int g, H c, void *rq), {
    int outer = depth++ == 0;
    int rc = real ? real(b, n, t, s, g, c, rq) : alt(b, fits(n), t, s, g, c, rq);
    depth--;
    if (outer && rc == 0)
        preq_forget_locked(handle_at(rq, 0));
    return rc;
})

typedef int (*bcast_c_fn)(void *, C, H, int, H);
typedef int (*ibcast_c_fn)(void *, C, H, int, H, void *);
WRAPC(bcast_c_fn, bcast_fn, MPI_Bcast_c, (void *b, C n, H t, int root, H c),
      GUARDED(record_coll(OP_BCAST, c, root, CB(n, t)),
              real ? real(b, n, t, root, c) : alt(b, fits(n), t, root, c)))
WRAPC(ibcast_c_fn, ibcast_fn, MPI_Ibcast_c, (void *b, C n, H t, int root, H c, void *rq),
      GUARDED(record_coll(OP_BCAST, c, root, CB(n, t)),
              real ? real(b, n, t, root, c, rq) : alt(b, fits(n), t, root, c, rq)))

typedef int (*reduce_c_fn)(const void *, void *, C, H, H, int, H);
typedef int (*ireduce_c_fn)(const void *, void *, C, H, H, int, H, void *);
WRAPC(reduce_c_fn, reduce_fn, MPI_Reduce_c,
      (const void *s, void *r, C n, H t, H o, int root, H c),
      GUARDED(record_coll(OP_REDUCE, c, root, CB(n, t)),
              real ? real(s, r, n, t, o, root, c) : alt(s, r, fits(n), t, o, root, c)))
WRAPC(ireduce_c_fn, ireduce_fn, MPI_Ireduce_c,
      (const void *s, void *r, C n, H t, H o, int root, H c, void *rq),
      GUARDED(record_coll(OP_REDUCE, c, root, CB(n, t)),
              real ? real(s, r, n, t, o, root, c, rq) : alt(s, r, fits(n), t, o, root, c, rq)))

typedef int (*allreduce_c_fn)(const void *, void *, C, H, H, H);
typedef int (*iallreduce_c_fn)(const void *, void *, C, H, H, H, void *);
#define ALLREDUCE_C(NAME, INAME, OP)                                                       \
    WRAPC(allreduce_c_fn, allreduce_fn, NAME, (const void *s, void *r, C n, H t, H o, H c), \
          GUARDED(record_coll(OP, c, -1, CB(n, t)),                                        \
                  real ? real(s, r, n, t, o, c) : alt(s, r, fits(n), t, o, c)))            \
    WRAPC(iallreduce_c_fn, iallreduce_fn, INAME,                                           \
          (const void *s, void *r, C n, H t, H o, H c, void *rq),                          \
          GUARDED(record_coll(OP, c, -1, CB(n, t)),                                        \
                  real ? real(s, r, n, t, o, c, rq) : alt(s, r, fits(n), t, o, c, rq)))
ALLREDUCE_C(MPI_Allreduce_c, MPI_Iallreduce_c, OP_ALLREDUCE)
ALLREDUCE_C(MPI_Scan_c, MPI_Iscan_c, OP_SCAN)
ALLREDUCE_C(MPI_Exscan_c, MPI_Iexscan_c, OP_EXSCAN)

typedef int (*a2a_c_fn)(const void *, C, H, void *, C, H, H);
typedef int (*ia2a_c_fn)(const void *, C, H, void *, C, H, H, void *);
#define A2A_C(NAME, INAME, OP)                                                             \
    WRAPC(a2a_c_fn, a2a_fn, NAME, (const void *s, C sn, H st, void *r, C rn, H rt, H c),   \
          GUARDED(record_coll(OP, c, -1, CB(rn, rt)),                                      \
                  real ? real(s, sn, st, r, rn, rt, c)                                     \
                       : alt(s, fits(sn), st, r, fits(rn), rt, c)))                        \
    WRAPC(ia2a_c_fn, ia2a_fn, INAME,                                                       \
          (const void *s, C sn, H st, void *r, C rn, H rt, H c, void *rq),                 \
          GUARDED(record_coll(OP, c, -1, CB(rn, rt)),                                      \
                  real ? real(s, sn, st, r, rn, rt, c, rq)                                 \
                       : alt(s, fits(sn), st, r, fits(rn), rt, c, rq)))
A2A_C(MPI_Alltoall_c, MPI_Ialltoall_c, OP_ALLTOALL)
A2A_C(MPI_Allgather_c, MPI_Iallgather_c, OP_ALLGATHER)

typedef int (*gather_c_fn)(const void *, C, H, void *, C, H, int, H);
typedef int (*igather_c_fn)(const void *, C, H, void *, C, H, int, H, void *);
#define ROOTED_C(NAME, INAME, OP, BLOCK)                                                   \
    WRAPC(gather_c_fn, gather_fn, NAME,                                                    \
          (const void *s, C sn, H st, void *r, C rn, H rt, int root, H c),                 \
          GUARDED(if (active()) record_coll(OP, c, root, BLOCK(sn, st, rn, rt, root, c)),  \
                  real ? real(s, sn, st, r, rn, rt, root, c)                               \
                       : alt(s, fits(sn), st, r, fits(rn), rt, root, c)))                  \
    WRAPC(igather_c_fn, igather_fn, INAME,                                                 \
          (const void *s, C sn, H st, void *r, C rn, H rt, int root, H c, void *rq),       \
          GUARDED(if (active()) record_coll(OP, c, root, BLOCK(sn, st, rn, rt, root, c)),  \
                  real ? real(s, sn, st, r, rn, rt, root, c, rq)                           \
                       : alt(s, fits(sn), st, r, fits(rn), rt, root, c, rq)))
ROOTED_C(MPI_Gather_c, MPI_Igather_c, OP_GATHER, gather_block)
ROOTED_C(MPI_Scatter_c, MPI_Iscatter_c, OP_SCATTER, scatter_block)

typedef int (*rsb_c_fn)(const void *, void *, C, H, H, H);
typedef int (*irsb_c_fn)(const void *, void *, C, H, H, H, void *);
WRAPC(rsb_c_fn, rsb_fn, MPI_Reduce_scatter_block_c,
      (const void *s, void *r, C n, H t, H o, H c),
      GUARDED(record_coll(OP_REDUCE_SCATTER_BLOCK, c, -1, CB(n, t)),
              real ? real(s, r, n, t, o, c) : alt(s, r, fits(n), t, o, c)))
WRAPC(irsb_c_fn, irsb_fn, MPI_Ireduce_scatter_block_c,
      (const void *s, void *r, C n, H t, H o, H c, void *rq),
      GUARDED(record_coll(OP_REDUCE_SCATTER_BLOCK, c, -1, CB(n, t)),
              real ? real(s, r, n, t, o, c, rq) : alt(s, r, fits(n), t, o, c, rq)))

/* The blocking large-count v-collectives (MPI_Count counts, MPI_Aint displacements).
 * Under an MPI without them the arrays are converted to int for the int-count function:
 * the one allocation per call the recorder makes, and only there (the nonblocking
 * forms, whose arrays must outlive the call, are not defined: not recorded). */
static int count_members(H comm)
{
    int inter = 0, n = 0;
    PMPI(int_h_ip, PMPI_Comm_test_inter)(comm, &inter);
    if (inter)
        PMPI(int_h_ip, PMPI_Comm_remote_size)(comm, &n);
    else
        PMPI(int_h_ip, PMPI_Comm_size)(comm, &n);
    return n;
}

/* int copies of N counts (long long) and N displacements (MPI_Aint); NULL stays NULL */
static int *narrow(const void *array, int n, int aint)
{
    if (!array)
        return NULL;
    int *out = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!out) {
        fprintf(stderr, "rankmap-record: out of memory\n");
        abort();
    }
    for (int i = 0; i < n; i++)
        out[i] = fits(aint ? (C)((const H *)array)[i] : ((const C *)array)[i]);
    return out;
}

typedef int (*a2av_c_fn)(const void *, const C *, const H *, H, void *, const C *,
                         const H *, H, H);
WRAPC(a2av_c_fn, a2av_fn, MPI_Alltoallv_c,
      (const void *s, const C *sn, const H *sd, H st, void *r, const C *rn, const H *rd,
       H rt, H c), {
    if (depth++ == 0 && active())
        record_vcoll_at(OP_ALLTOALLV, c, -1, in_place(s) ? rn : sn, 1,
                        in_place(s) ? rt : st);
    int rc;
    if (real) {
        rc = real(s, sn, sd, st, r, rn, rd, rt, c);
    } else {
        int n = count_members(c), ip = in_place(s);
        int *a = ip ? NULL : narrow(sn, n, 0), *b = ip ? NULL : narrow(sd, n, 1);
        int *x = narrow(rn, n, 0), *y = narrow(rd, n, 1);
        rc = alt(s, a, b, st, r, x, y, rt, c);
        free(a), free(b), free(x), free(y);
    }
    depth--;
    return rc;
})

typedef int (*agv_c_fn)(const void *, C, H, void *, const C *, const H *, H, H);
WRAPC(agv_c_fn, agv_fn, MPI_Allgatherv_c,
      (const void *s, C sn, H st, void *r, const C *rn, const H *rd, H rt, H c), {
    if (depth++ == 0 && active())
        record_vcoll_at(OP_ALLGATHERV, c, -1, rn, 1, rt);
    int rc;
    if (real) {
        rc = real(s, sn, st, r, rn, rd, rt, c);
    } else {
        int n = count_members(c), *x = narrow(rn, n, 0), *y = narrow(rd, n, 1);
        rc = alt(s, fits(sn), st, r, x, y, rt, c);
        free(x), free(y);
    }
    depth--;
    return rc;
})

typedef int (*gv_c_fn)(const void *, C, H, void *, const C *, const H *, H, int, H);
WRAPC(gv_c_fn, gv_fn, MPI_Gatherv_c,
      (const void *s, C sn, H st, void *r, const C *rn, const H *rd, H rt, int root, H c), {
    if (depth++ == 0 && active())
        record_coll(OP_GATHERV, c, root, comm_rank(c) == root ? 0 : sn * type_size(st));
    int rc;
    if (real) {
        rc = real(s, sn, st, r, rn, rd, rt, root, c);
    } else { /* the counts are significant at the root only */
        int n = count_members(c), *x = narrow(rn, n, 0), *y = narrow(rd, n, 1);
        rc = alt(s, fits(sn), st, r, x, y, rt, root, c);
        free(x), free(y);
    }
    depth--;
    return rc;
})

typedef int (*sv_c_fn)(const void *, const C *, const H *, H, void *, C, H, int, H);
WRAPC(sv_c_fn, sv_fn, MPI_Scatterv_c,
      (const void *s, const C *sn, const H *sd, H st, void *r, C rn, H rt, int root, H c), {
    if (depth++ == 0 && active()) {
        if (comm_rank(c) == root)
            record_vcoll_at(OP_SCATTERV, c, root, sn, 1, st);
        else
            record_coll(OP_SCATTERV, c, root, 0);
    }
    int rc;
    if (real) {
        rc = real(s, sn, sd, st, r, rn, rt, root, c);
    } else {
        int n = count_members(c), *a = NULL, *b = NULL;
        if (comm_rank(c) == root) {
            a = narrow(sn, n, 0);
            b = narrow(sd, n, 1);
        }
        rc = alt(s, a, b, st, r, fits(rn), rt, root, c);
        free(a), free(b);
    }
    depth--;
    return rc;
})

typedef int (*rs_c_fn)(const void *, void *, const C *, H, H, H);
WRAPC(rs_c_fn, rs_fn, MPI_Reduce_scatter_c,
      (const void *s, void *r, const C *rn, H t, H o, H c), {
    if (depth++ == 0 && active())
        record_vcoll_at(OP_REDUCE_SCATTER, c, -1, rn, 1, t);
    int rc;
    if (real) {
        rc = real(s, r, rn, t, o, c);
    } else {
        int *x = narrow(rn, count_members(c), 0);
        rc = alt(s, r, x, t, o, c);
        free(x);
    }
    depth--;
    return rc;
})
