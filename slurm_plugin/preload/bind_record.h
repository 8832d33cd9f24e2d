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

/* One rank's record: host, slot (the rankfile's text), GPUs (Slurm's indexes, "" when
 * the record has no gpu= field) and the NIC nearest them ("" without nic=). */
struct bind_record {
    char host[256];
    char slot[MAX_RECORD];
    char gpus[MAX_RECORD];
    char nic[256];
};

/* Reads record RANK of the bind file into REC (1).  With a message in WHY: 0 when the
 * file or the launch does not fit (every rank meets it), -1 when this rank's record
 * does not. */
static int read_record(const char *path, long rank, long size, struct bind_record *rec,
                       char *why, size_t whylen)
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
    rec->gpus[0] = rec->nic[0] = 0;
    int fields = sscanf(buf, "%ld %255s %4095s gpu=%4095s nic=%255s", &r, rec->host,
                        rec->slot, rec->gpus, rec->nic);
    if (fields < 3 || r != rank) {
        snprintf(why, whylen, "%.300s: record %ld is not rank %ld's", path, rank, rank);
        return -1;
    }
    return 1;
}

/* The header's gpumask=0xM: the --gpu-bind mask under which every task of a step sees
 * all of its node's GPUs (render.py render_bindfile), and gpunode=K, the fewest GPUs the
 * job has on a node (PER_NODE, 0 when absent); "" when the file has none. */
static void read_gpu_mask(const char *path, char *mask, size_t masklen, long *per_node)
{
    if (per_node)
        *per_node = 0;
    char buf[MAX_RECORD + 1];
    mask[0] = 0;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0)
        return;
    ssize_t n = pread(fd, buf, MAX_RECORD, 0);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    const char *m = strstr(buf, " gpumask=0x");
    if (m && strncmp(buf, "rankmap-bind ", 13) == 0) {
        m += 9;
        size_t len = strspn(m + 2, "0123456789abcdefABCDEF") + 2;
        if (len > 2 && len < masklen)
            snprintf(mask, masklen, "%.*s", (int)len, m);
        const char *k = strstr(buf, " gpunode=");
        if (k && per_node)
            *per_node = strtol(k + 9, NULL, 10);
    }
}

/* ---- a rank's GPUs: its device variables narrowed to the GPUs of its record ---------
 *
 * Slurm lists a step's GPUs on the node in SLURM_STEP_GPUS (its GPU indexes, the
 * record's numbering; the batch step's in SLURM_JOB_GPUS) and sets CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
 * ZE_AFFINITY_MASK, GPU_DEVICE_ORDINAL to the same GPUs in the numbering the device
 * runtime sees (the same indexes, or 0..n-1 under a device cgroup: ConstrainDevices).
 * A planned GPU's position in SLURM_STEP_GPUS is therefore its position in each device
 * variable, whatever the numbering; each variable Slurm set is narrowed to those
 * positions.  Nothing changes when a variable does not list the step's GPUs one to one,
 * or a planned GPU is not the step's (Slurm bound the task to other GPUs: a --gpu-bind
 * of the user's), and WHY says so.  RANKMAP_GPUS records what was applied, so that the
 * binder, after the SPANK plugin, does not apply it twice. */

typedef int (*env_get_fn)(void *ctx, const char *name, char *buf, size_t len);
typedef int (*env_set_fn)(void *ctx, const char *name, const char *value);

static const char *gpu_vars[] = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                 "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL", NULL};

#define MAX_GPU_ITEMS 256

/* Splits the comma list TEXT (modified) into at most MAX_GPU_ITEMS items. */
static int gpu_items(char *text, char **items)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(text, ",", &save); p && n < MAX_GPU_ITEMS;
         p = strtok_r(NULL, ",", &save))
        items[n++] = p;
    return n;
}

/* UCX_NET_DEVICES names the rank's NIC (the record's nic=, the one nearest its GPUs),
 * unless the job set it: UCX (Open MPI's and MPICH's UCX layers) then uses that NIC for
 * the rank's network traffic; intra-node transports are not affected. */
static void set_rank_nic(const char *nic, void *ctx, env_get_fn get, env_set_fn set)
{
    char had[256];
    if (!nic[0] || get(ctx, "UCX_NET_DEVICES", had, sizeof had))
        return;
    set(ctx, "UCX_NET_DEVICES", nic);
    set(ctx, "RANKMAP_NIC", nic);
}

/* 1: the variables name PLANNED (a comma list of GPU indexes) now; 0 with WHY: left
 * as they were. */
static int narrow_gpus(const char *planned, void *ctx, env_get_fn get, env_set_fn set,
                       char *why, size_t whylen)
{
    static char step[MAX_RECORD], want[MAX_RECORD], done[MAX_RECORD];
    static char values[4][MAX_RECORD], out[4][MAX_RECORD];
    char *g[MAX_GPU_ITEMS], *p[MAX_GPU_ITEMS], *l[MAX_GPU_ITEMS];
    int present[4] = {0, 0, 0, 0}, any = 0;
    if (get(ctx, "RANKMAP_GPUS", done, sizeof done) && !strcmp(done, planned))
        return 1;
    /* a step's task: its step's GPUs on this node; a process of the batch step (the
     * ranks Open MPI's mpirun starts beside itself): the job's on the batch host */
    const char *list = get(ctx, "SLURM_STEP_ID", step, sizeof step) ? "SLURM_STEP_GPUS"
                                                                      : "SLURM_JOB_GPUS";
    if (!get(ctx, list, step, sizeof step) || !step[0]) {
        snprintf(why, whylen, "no %s in this rank's environment: its GPUs are as Slurm "
                 "set them", list);
        return 0;
    }
    snprintf(want, sizeof want, "%s", planned);
    char stepcopy[MAX_RECORD];
    snprintf(stepcopy, sizeof stepcopy, "%s", step);
    int ng = gpu_items(stepcopy, g), np = gpu_items(want, p);
    int pos[MAX_GPU_ITEMS];
    for (int i = 0; i < np; i++) {
        pos[i] = -1;
        for (int j = 0; j < ng; j++)
            if (!strcmp(p[i], g[j]))
                pos[i] = j;
        if (pos[i] < 0) {
            snprintf(why, whylen, "GPU %s is not among this step's GPUs on the node "
                     "(%s=%.200s; a --gpu-bind or a step of its own?): its GPUs are as "
                     "Slurm set them", p[i], list, step);
            return 0;
        }
    }
    for (int v = 0; gpu_vars[v]; v++) {
        if (!get(ctx, gpu_vars[v], values[v], sizeof values[v]))
            continue;
        char copy[MAX_RECORD];
        snprintf(copy, sizeof copy, "%s", values[v]);
        if (gpu_items(copy, l) != ng) {
            snprintf(why, whylen, "%s=%.100s does not list %s=%.100s one to one: its "
                     "GPUs are as Slurm set them", gpu_vars[v], values[v], list, step);
            return 0;
        }
        size_t used = 0;
        out[v][0] = 0;
        for (int i = 0; i < np; i++) {
            int w = snprintf(out[v] + used, sizeof out[v] - used, "%s%s", i ? "," : "",
                             l[pos[i]]);
            if (w < 0 || (size_t)w >= sizeof out[v] - used) {
                snprintf(why, whylen, "%s would be over %d characters: its GPUs are as "
                         "Slurm set them", gpu_vars[v], MAX_RECORD - 1);
                return 0;
            }
            used += (size_t)w;
        }
        present[v] = any = 1;
    }
    if (!any) {
        snprintf(why, whylen, "Slurm set no device variable (CUDA_VISIBLE_DEVICES, ...) "
                 "for this step: its GPUs are as Slurm set them");
        return 0;
    }
    for (int v = 0; gpu_vars[v]; v++)
        if (present[v])
            set(ctx, gpu_vars[v], out[v]);
    set(ctx, "RANKMAP_GPUS", planned);
    return 1;
}

#endif
