/*
 * The job's bind file and this machine's cores: what a rank's record says and which OS
 * CPUs its slot is.  Read by the binder (librankmap_bind, at MPI_Init) and by the SPANK
 * plugin (in an srun task before it execs, so that the program starts on its cores).
 * Included by both sources (static: each gets its own copy).  The format is described
 * at the top of slurm_plugin/bind/rankmap_bind.c.
 */
#ifndef RANKMAP_BIND_RECORD_H
#define RANKMAP_BIND_RECORD_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_RECORD 4096
#define MAX_CPUS CPU_SETSIZE

/* Whether NAME is an item of the comma-separated LIST (inline: the SPANK plugin has no
 * list to ask). */
static inline int rankmap_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, name, n))
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* RANKMAP_BIND's value V switches rankmap's placement off for a launch or step. */
static int rankmap_off_value(const char *v)
{
    return v && (!strcasecmp(v, "off") || !strcmp(v, "0") || !strcasecmp(v, "no") ||
                 !strcasecmp(v, "false"));
}

/* Reads "/sys/.../FILE" of cpu CPU as an integer; -1 on failure. */
static long sys_cpu_number(int cpu, const char *file)
{
    char path[128], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

/* The first CPU listed in cpu CPU's thread_siblings_list: the core's id here. */
static long core_key(int cpu)
{
    char path[128], buf[256];
    snprintf(path, sizeof path,
             "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cpu;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return cpu;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

struct cpu_info {
    int cpu;
    long package;
    long core;  /* first sibling */
};

static int by_package_core_cpu(const void *a, const void *b)
{
    const struct cpu_info *x = a, *y = b;
    if (x->package != y->package)
        return x->package < y->package ? -1 : 1;
    if (x->core != y->core)
        return x->core < y->core ? -1 : 1;
    return x->cpu - y->cpu;
}

/* Adds to SET the OS CPUs of logical core CORE of logical socket SOCKET; 0 when this
 * machine has no such core. */
static int add_core(cpu_set_t *set, struct cpu_info *cpus, int ncpus, long socket,
                    long core)
{
    long s = -1, c = -1, last_package = LONG_MIN, last_core = LONG_MIN;
    int found = 0;
    for (int i = 0; i < ncpus; i++) {
        if (cpus[i].package != last_package) {
            s++;
            c = -1;
            last_package = cpus[i].package;
            last_core = LONG_MIN;
        }
        if (cpus[i].core != last_core) {
            c++;
            last_core = cpus[i].core;
        }
        if (s == socket && c == core) {
            CPU_SET(cpus[i].cpu, set);
            found = 1;
        }
    }
    return found;
}

static int machine_cpus(struct cpu_info *cpus)
{
    int n = 0;
    DIR *d = opendir("/sys/devices/system/cpu");
    struct dirent *e;
    if (!d)
        return 0;
    while ((e = readdir(d)) && n < MAX_CPUS) {
        char *end;
        if (strncmp(e->d_name, "cpu", 3) || !isdigit((unsigned char)e->d_name[3]))
            continue;
        long cpu = strtol(e->d_name + 3, &end, 10);
        if (*end || cpu >= MAX_CPUS)
            continue;
        long package = sys_cpu_number((int)cpu, "physical_package_id");
        if (package < 0)
            continue; /* offline: no topology directory */
        cpus[n].cpu = (int)cpu;
        cpus[n].package = package;
        cpus[n].core = core_key((int)cpu);
        n++;
    }
    closedir(d);
    qsort(cpus, (size_t)n, sizeof *cpus, by_package_core_cpu);
    return n;
}

/* Parses "S:C[-C|,C]...[;S:...]" into SET; a message in WHY when it cannot. */
static int slot_cpus(const char *slot, cpu_set_t *set, char *why, size_t whylen)
{
    static struct cpu_info cpus[MAX_CPUS];
    int ncpus = machine_cpus(cpus);
    const char *p = slot;
    CPU_ZERO(set);
    if (ncpus == 0) {
        snprintf(why, whylen, "cannot read /sys/devices/system/cpu");
        return 0;
    }
    while (*p) {
        char *end;
        long socket = strtol(p, &end, 10);
        if (end == p || *end != ':') {
            snprintf(why, whylen, "bad slot '%.200s'", slot);
            return 0;
        }
        p = end + 1;
        for (;;) {
            long lo = strtol(p, &end, 10), hi;
            if (end == p) {
                snprintf(why, whylen, "bad slot '%.200s'", slot);
                return 0;
            }
            hi = lo;
            p = end;
            if (*p == '-') {
                hi = strtol(p + 1, &end, 10);
                if (end == p + 1 || hi < lo || hi - lo > MAX_CPUS) {
                    snprintf(why, whylen, "bad slot '%.200s'", slot);
                    return 0;
                }
                p = end;
            }
            for (long core = lo; core <= hi; core++)
                if (!add_core(set, cpus, ncpus, socket, core)) {
                    snprintf(why, whylen, "core %ld of socket %ld does not exist here",
                             core, socket);
                    return 0;
                }
            if (*p != ',')
                break;
            p++;
        }
        if (*p == ';')
            p++;
        else if (*p) {
            snprintf(why, whylen, "bad slot '%.200s'", slot);
            return 0;
        }
    }
    return CPU_COUNT(set) > 0;
}

/* Reads record RANK of the bind file: its host and slot (1).  With a message in WHY: 0
 * when the file or the launch does not fit (every rank meets it), -1 when this rank's
 * record does not. */
static int read_record(const char *path, long rank, long size, char *host, size_t hostlen,
                       char *slot, size_t slotlen, char *why, size_t whylen)
{
    char buf[MAX_RECORD + 1];
    long version, nranks, width, r;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(why, whylen, "cannot open %.300s: %s", path, strerror(errno));
        return 0;
    }
    ssize_t n = pread(fd, buf, 64, 0);
    if (n <= 0) {
        snprintf(why, whylen, "%.300s: empty", path);
        close(fd);
        return 0;
    }
    buf[n] = 0;
    if (sscanf(buf, "rankmap-bind %ld %ld %ld", &version, &nranks, &width) != 3 ||
        version != 1 || width < 8 || width > MAX_RECORD || nranks < 1) {
        snprintf(why, whylen, "%.300s: not a rankmap bind file", path);
        close(fd);
        return 0;
    }
    if (size != nranks) {
        snprintf(why, whylen,
                 "this launch has %ld ranks and the job's placement %ld: the launcher's "
                 "placement is kept", size, nranks);
        close(fd);
        return 0;
    }
    n = pread(fd, buf, (size_t)width, (off_t)width * (rank + 1));
    close(fd);
    if (n != width || buf[width - 1] != '\n') {
        snprintf(why, whylen, "%.300s: record %ld is cut short", path, rank);
        return -1;
    }
    buf[width - 1] = 0;
    char hostbuf[256], slotbuf[MAX_RECORD];
    if (sscanf(buf, "%ld %255s %4095s", &r, hostbuf, slotbuf) != 3 || r != rank) {
        snprintf(why, whylen, "%.300s: record %ld is not rank %ld's", path, rank, rank);
        return -1;
    }
    snprintf(host, hostlen, "%s", hostbuf);
    snprintf(slot, slotlen, "%s", slotbuf);
    return 1;
}

#endif
