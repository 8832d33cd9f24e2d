/* Fault injection for the recorder's tests, preloaded before librankmap_record: on the
 * rank named by FAIL_MMAP_RANK (PMI_RANK or OMPI_COMM_WORLD_RANK), an anonymous
 * MAP_NORESERVE mapping of exactly FAIL_MMAP_BYTES fails with ENOMEM, as when the
 * node is out of memory; every other mapping is the C library's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*next)(void *, size_t, int, int, int, off_t);
    const char *want = getenv("FAIL_MMAP_RANK"), *bytes = getenv("FAIL_MMAP_BYTES");
    const char *rank = getenv("PMI_RANK");
    if (!rank)
        rank = getenv("OMPI_COMM_WORLD_RANK");
    if (want && bytes && rank && !strcmp(want, rank) && len == strtoull(bytes, NULL, 10) &&
        (flags & MAP_ANONYMOUS) && (flags & MAP_NORESERVE)) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    if (!next)
        next = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    return next(addr, len, prot, flags, fd, off);
}
