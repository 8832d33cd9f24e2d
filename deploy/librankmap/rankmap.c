/* librankmap: MPI_Comm_split with the reorder file's new rank as the key (rankmap.h). */
#include "rankmap.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The new rank of `rank` from the reorder file at `path`, after checking that the file
 * is a permutation of 0..size-1 (one rank per line, '#' comments, blank lines).
 * hash: FNV-1a of the ranks in file order, to compare the files processes read.
 * 0 on success; -1 with "FILE:LINE: reason" in msg otherwise. */
static int read_key(const char *path, int rank, int size, int *key, uint64_t *hash,
                    char *msg, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, len, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    char *seen = calloc((size_t)size, 1);
    if (!seen) {
        fclose(f);
        snprintf(msg, len, "%s: out of memory", path);
        return -1;
    }
    char line[128];
    int lineno = 0, count = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(msg, len, "%s:%d: line too long", path, lineno);
            rc = -1;
            break;
        }
        char *comment = strchr(line, '#');
        if (comment)
            *comment = '\0';
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            continue;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (end == p || *end || errno) {
            snprintf(msg, len, "%s:%d: expected a rank", path, lineno);
            rc = -1;
        } else if (count >= size) {
            snprintf(msg, len, "%s:%d: more than %d ranks (the communicator's size)", path,
                     lineno, size);
            rc = -1;
        } else if (v < 0 || v >= size) {
            snprintf(msg, len, "%s:%d: rank %ld out of range 0..%d", path, lineno, v,
                     size - 1);
            rc = -1;
        } else if (seen[v]) {
            snprintf(msg, len, "%s:%d: rank %ld appears twice", path, lineno, v);
            rc = -1;
        } else {
            seen[v] = 1;
            *hash = (*hash ^ (uint64_t)v) * 1099511628211ULL;
            if (count == rank)
                *key = (int)v;
            count++;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(msg, len, "%s: read error", path);
        rc = -1;
    }
    if (rc == 0 && count < size) {
        snprintf(msg, len, "%s:%d: %d ranks, the communicator has %d", path, lineno, count,
                 size);
        rc = -1;
    }
    free(seen);
    fclose(f);
    return rc;
}

int rankmap_comm(MPI_Comm base, MPI_Comm *reordered)
{
    int rank, size, rc;
    if ((rc = MPI_Comm_rank(base, &rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(base, &size)) != MPI_SUCCESS)
        return rc;
    const char *path = getenv(RANKMAP_ENV);
    if (!path || !*path)
        return MPI_Comm_dup(base, reordered);

    char msg[512] = "";
    int key = rank;
    uint64_t hash = 14695981039346656037ULL;
    int ok = read_key(path, rank, size, &key, &hash, msg, sizeof msg) == 0;
    /* every process takes the same branch; the lowest rank that failed reports */
    int mine = ok ? size : rank, lowest;
    if ((rc = MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, base)) != MPI_SUCCESS)
        return rc;
    if (lowest < size) {
        if (rank == lowest) {
            fprintf(stderr, "rankmap: warning: %s; keeping the launcher's rank order\n", msg);
            fflush(stderr);
        }
        return MPI_Comm_dup(base, reordered);
    }
    /* node-local copies of the file could differ: then the keys are no permutation and
     * MPI_Comm_split would quietly order ties by base rank.  max(h) == min(h)? */
    unsigned long long both[2] = {hash, ~hash}, top[2];
    if ((rc = MPI_Allreduce(both, top, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, base))
        != MPI_SUCCESS)
        return rc;
    if (top[0] != ~top[1]) {
        if (rank == 0) {
            fprintf(stderr, "rankmap: warning: %s: the processes read different files; "
                    "keeping the launcher's rank order\n", path);
            fflush(stderr);
        }
        return MPI_Comm_dup(base, reordered);
    }
    return MPI_Comm_split(base, 0, key, reordered);
}
