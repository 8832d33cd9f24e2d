/* A program without MPI that probes for it at run time (as libraries that use MPI when
 * it is there do): looks up MPI_Barrier and MPI_Send_c and calls what it finds.
 * Prints "probe: barrier found|none RC, send_c found|none". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

int main(void)
{
    int (*barrier)(intptr_t) = (int (*)(intptr_t))dlsym(RTLD_DEFAULT, "MPI_Barrier");
    void *send_c = dlsym(RTLD_DEFAULT, "MPI_Send_c");
    int rc = barrier ? barrier(0) : -1;
    printf("probe: barrier %s %d, send_c %s\n", barrier ? "found" : "none", rc,
           send_c ? "found" : "none");
    return 0;
}
