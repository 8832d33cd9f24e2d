/* An mpiP-style PMPI interposer, preloaded before or after librankmap_record: it
 * defines MPI_Send and MPI_Isend (counting them and calling PMPI_Send, PMPI_Isend) and
 * PMPI_Comm_group (counting it and calling the next one: the calls another preloaded
 * tool makes show here when this library comes after it), and prints its counts to
 * stderr at exit: "interposer: rank R sends S isends I groups G".  Linked against no
 * MPI (handles at pointer width, as librankmap_record takes them). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef intptr_t H;
static long sends, isends, groups;

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
