/* The CPUs thread TID (0: the caller) may run on, as a list such as "0-1" or "0,2": what
 * the test programs beside this file print (rankinfo.c, omp_rankinfo.c). */
#ifndef RANKMAP_TEST_CPU_LIST_H
#define RANKMAP_TEST_CPU_LIST_H

#include <sched.h>
#include <stdio.h>
#include <sys/types.h>

static void cpu_list(pid_t tid, char *out, size_t len)
{
    cpu_set_t set;
    size_t used = 0;
    out[0] = '\0';
    if (sched_getaffinity(tid, sizeof set, &set) != 0) {
        snprintf(out, len, "?");
        return;
    }
    for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
            last++;
        used += (size_t)snprintf(out + used, len - used, used ? ",%d" : "%d", c);
        if (last > c && used < len)
            used += (size_t)snprintf(out + used, len - used, "-%d", last);
        c = last;
    }
}

#endif
