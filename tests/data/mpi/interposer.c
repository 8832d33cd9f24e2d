/* An mpiP-style PMPI interposer, preloaded before or after librankmap_record: it
 * defines MPI_Send and MPI_Isend (counting them and calling PMPI_Send, PMPI_Isend) and
 * PMPI_Comm_group (counting it and calling the next one: the calls another preloaded
 * tool makes show here when this library comes after it), and prints its counts to
 * stderr at exit: "interposer: rank R sends S isends I groups G".  Linked against no
 * MPI (handles at pointer width, as librankmap_record takes them).
 *
 * With INTERPOSER_HOLD_GROUPS=1, a PMPI_Comm_group called by any thread but the
 * process's first waits, before calling the MPI, until the program calls
 * interposer_release() (a tool that blocks in an MPI call: whoever called it must hold
 * no lock another thread's MPI calls need). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef intptr_t H;
static long sends, isends, groups;
static int released;

void interposer_release(void)
{
    __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
}

int PMPI_Send(const void *, int, H, int, int, H);
int PMPI_Isend(const void *, int, H, int, int, H, void *);

int MPI_Send(const void *b, int n, H t, int d, int g, H c)
{
    __atomic_fetch_add(&sends, 1, __ATOMIC_RELAXED);
    return PMPI_Send(b, n, t, d, g, c);
}

int MPI_Isend(const void *b, int n, H t, int d, int g, H c, void *rq)
{
    __atomic_fetch_add(&isends, 1, __ATOMIC_RELAXED);
    return PMPI_Isend(b, n, t, d, g, c, rq);
}

int PMPI_Comm_group(H c, H *g)
{
    static int (*next)(H, H *);
    if (!next)
        next = (int (*)(H, H *))dlsym(RTLD_NEXT, "PMPI_Comm_group");
    __atomic_fetch_add(&groups, 1, __ATOMIC_RELAXED);
    const char *hold = getenv("INTERPOSER_HOLD_GROUPS");
    if (hold && *hold == '1' && syscall(SYS_gettid) != getpid())
        while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
            usleep(1000);
    return next(c, g);
}

__attribute__((destructor)) static void report(void)
{
    const char *r = getenv("PMI_RANK");
    if (!r)
        r = getenv("OMPI_COMM_WORLD_RANK");
    fprintf(stderr, "interposer: rank %s sends %ld isends %ld groups %ld\n", r ? r : "?",
            sends, isends, groups);
}
