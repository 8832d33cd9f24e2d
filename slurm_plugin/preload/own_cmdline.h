/*
 * This process's own command line, from /proc/self/cmdline: what a SPANK plugin in srun
 * (given only its plugstack.conf arguments) and the binder in a launcher (a library
 * with no argv of its own) read to judge the launch.  Included by both sources
 * (static: each gets its own copy).
 */
#ifndef RANKMAP_OWN_CMDLINE_H
#define RANKMAP_OWN_CMDLINE_H

#include <stdio.h>
#include <string.h>

/* Splits the command line into ARGV (at most MAX words, pointing into BUF of SIZE
 * bytes); returns the word count, 0 when it cannot be read whole (longer than BUF or
 * MAX words): a caller then judges nothing rather than half a line. */
static int rankmap_own_argv(char *buf, size_t size, char **argv, int max)
{
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, size - 1, f);
    int full = feof(f);
    fclose(f);
    if (!full)
        return 0;
    buf[n] = '\0';
    int argc = 0;
    for (size_t i = 0; i < n && argc < max; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    return argc < max ? argc : 0;
}

#endif
