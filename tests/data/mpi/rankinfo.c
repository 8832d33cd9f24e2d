/* Prints one line per rank: "rank R host H cpu C", C being the CPU the rank runs on.
 * With --ring BYTES it first passes BYTES to the next rank in a ring (for the
 * Open MPI monitoring importer's tests).  With --affinity the line ends in
 * " allowed LIST", the CPUs the rank may run on after MPI_Init (sched_getaffinity,
 * e.g. "1" or "0-1"): whether it was bound, not only where it happened to run.  With
 * --early-thread a thread started before MPI_Init (as OpenMP runtimes and I/O libraries
 * start theirs) is asked too, and the line ends in " thread LIST", that thread's CPUs
 * after MPI_Init; with --pinned-thread CPU one more thread started before MPI_Init pins
 * itself to CPU (as an OpenMP runtime pins its pool to places) and the line ends in
 * " pinned LIST", its CPUs after MPI_Init.  With --start the line ends in " start LIST",
 * the CPUs the program was started on (its mask on entering main).  With --gpus it ends
 * in " gpus C;R;Z;O": CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK and
 * GPU_DEVICE_ORDINAL as the program started ("-": unset); with --nic it then ends in
 * " nic U", UCX_NET_DEVICES as the program started, and with --mark in " mark M",
 * RANKMAP_GPUS (the GPUs rankmap applied). */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_list.h"

static volatile pid_t early_tid, pinned_tid;
static volatile int done;
static int pin_to = -1;

static void *early_thread(void *arg)
{
    (void)arg;
    early_tid = (pid_t)syscall(SYS_gettid);
    while (!done)
        usleep(1000);
    return NULL;
}

static void *pinned_thread(void *arg)
{
    cpu_set_t set;
    (void)arg;
    CPU_ZERO(&set);
    CPU_SET(pin_to, &set);
    sched_setaffinity(0, sizeof set, &set);
    pinned_tid = (pid_t)syscall(SYS_gettid);
    while (!done)
        usleep(1000);
    return NULL;
}

int main(int argc, char **argv)
{
    int rank, size, affinity = 0, early = 0, start = 0, gpus = 0, nic = 0, mark = 0;
    char host[256], allowed[1024] = "", thread[1024] = "", pinned[1024] = "",
         started[1024] = "", devices[1024] = "", nics[1024] = "";
    pthread_t other, pinner;
    cpu_list(0, started, sizeof started);
    for (int i = 1; i < argc; i++) {
        early |= strcmp(argv[i], "--early-thread") == 0;
        start |= strcmp(argv[i], "--start") == 0;
        gpus |= strcmp(argv[i], "--gpus") == 0;
        nic |= strcmp(argv[i], "--nic") == 0;
        mark |= strcmp(argv[i], "--mark") == 0;
        if (strcmp(argv[i], "--pinned-thread") == 0 && i + 1 < argc)
            pin_to = atoi(argv[i + 1]);
    }
    if (gpus) /* as the program starts: a GPU runtime may read them before MPI_Init */
        snprintf(devices, sizeof devices, " gpus %s;%s;%s;%s",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "-",
                 getenv("ROCR_VISIBLE_DEVICES") ? getenv("ROCR_VISIBLE_DEVICES") : "-",
                 getenv("ZE_AFFINITY_MASK") ? getenv("ZE_AFFINITY_MASK") : "-",
                 getenv("GPU_DEVICE_ORDINAL") ? getenv("GPU_DEVICE_ORDINAL") : "-");
    if (nic)
        snprintf(nics, sizeof nics, " nic %s",
                 getenv("UCX_NET_DEVICES") ? getenv("UCX_NET_DEVICES") : "-");
    if (mark)
        snprintf(nics + strlen(nics), sizeof nics - strlen(nics), " mark %s",
                 getenv("RANKMAP_GPUS") ? getenv("RANKMAP_GPUS") : "-");
    if (early) {
        pthread_create(&other, NULL, early_thread, NULL);
        while (!early_tid)
            usleep(1000);
    }
    if (pin_to >= 0) {
        pthread_create(&pinner, NULL, pinned_thread, NULL);
        while (!pinned_tid)
            usleep(1000);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ring") == 0 && i + 1 < argc && size > 1) {
            int bytes = atoi(argv[++i]);
            char *buf = calloc((size_t)bytes, 1);
            MPI_Sendrecv_replace(buf, bytes, MPI_BYTE, (rank + 1) % size, 0,
                                 (rank + size - 1) % size, 0, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
            free(buf);
        } else if (strcmp(argv[i], "--affinity") == 0) {
            affinity = 1;
        }
    }
    gethostname(host, sizeof host);
    if (affinity)
        cpu_list(0, allowed, sizeof allowed);
    if (early)
        cpu_list(early_tid, thread, sizeof thread);
    if (pin_to >= 0)
        cpu_list(pinned_tid, pinned, sizeof pinned);
    done = 1;
    if (early)
        pthread_join(other, NULL);
    if (pin_to >= 0)
        pthread_join(pinner, NULL);
    printf("rank %d host %s cpu %d%s%s%s%s%s%s%s%s%s%s\n", rank, host, sched_getcpu(),
           affinity ? " allowed " : "", allowed, early ? " thread " : "", thread,
           pin_to >= 0 ? " pinned " : "", pinned, start ? " start " : "", start ? started : "",
           devices, nics);
    MPI_Finalize();
    return 0;
}
