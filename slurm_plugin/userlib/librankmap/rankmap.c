/* librankmap: MPI_Comm_split with the reorder file's new rank as the key, and
 * MPI_Dist_graph_create from the group graph file (rankmap.h). */
#include "rankmap.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
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

/* ---- rankmap_dist_graph: the group graph file (rankmap.h) ---------------------------- */

/* A reader of content lines of non-negative integers: '#' starts a comment, blank lines
 * say nothing, numbers are separated by blanks. */
struct reader {
    FILE *f;
    const char *path;
    int line;  /* the line being read (1-based) */
    int *vals; /* the numbers of the last content line */
    size_t cap, max;
};

/* The next content line's numbers into r->vals (at most r->max of them): their count, 0
 * at the end of the file, -1 with "FILE:LINE: reason" in msg.  *at: its line number. */
static int next_line(struct reader *r, int *at, char *msg, size_t len)
{
    size_t count = 0;
    long long v = 0;
    int digits = 0, comment = 0, c;
    for (;;) {
        c = getc(r->f);
        if (c == '#')
            comment = 1;
        if (!comment && c >= '0' && c <= '9') {
            v = v * 10 + (c - '0');
            digits = 1;
            if (v > INT_MAX) {
                snprintf(msg, len, "%s:%d: number out of range 0..%d", r->path, r->line,
                         INT_MAX);
                return -1;
            }
            continue;
        }
        if (!comment && c != EOF && c != '\n' && c != ' ' && c != '\t' && c != '\r' &&
            c != '\v' && c != '\f') {
            snprintf(msg, len, "%s:%d: expected a non-negative integer", r->path, r->line);
            return -1;
        }
        if (digits) { /* a number ends */
            if (count == r->max) {
                snprintf(msg, len, "%s:%d: more than %zu numbers on a line", r->path,
                         r->line, r->max);
                return -1;
            }
            if (count == r->cap) {
                size_t cap = r->cap ? 2 * r->cap : 64;
                if (cap > r->max)
                    cap = r->max;
                int *grown = realloc(r->vals, cap * sizeof *grown);
                if (!grown) {
                    snprintf(msg, len, "%s:%d: out of memory", r->path, r->line);
                    return -1;
                }
                r->vals = grown;
                r->cap = cap;
            }
            r->vals[count++] = (int)v;
            v = 0;
            digits = 0;
        }
        if (c == EOF) {
            if (ferror(r->f)) {
                snprintf(msg, len, "%s: read error", r->path);
                return -1;
            }
            *at = r->line;
            return (int)count;
        }
        if (c == '\n') {
            comment = 0;
            r->line++;
            if (count) {
                *at = r->line - 1;
                return (int)count;
            }
        }
    }
}

struct dg_edge {
    int lo, hi, w, dir, proc;
};

static int dg_edge_cmp(const void *a, const void *b)
{
    const struct dg_edge *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return (x->dir > y->dir) - (x->dir < y->dir);
}

/* The group graph as MPI_Dist_graph_create takes it from one process. */
struct dg {
    int *sources, *degrees, *dests, *weights, *line_of;
    long total;
};

static void dg_free(struct dg *g)
{
    free(g->sources);
    free(g->degrees);
    free(g->dests);
    free(g->weights);
    free(g->line_of);
    memset(g, 0, sizeof *g);
}

/* Every edge i-q is listed on i's line and on q's, once each, with one weight. */
static int dg_check_symmetric(const struct dg *g, const char *path, char *msg, size_t len)
{
    if (g->total == 0)
        return 0;
    struct dg_edge *e = malloc((size_t)g->total * sizeof *e);
    if (!e) {
        snprintf(msg, len, "%s: out of memory", path);
        return -1;
    }
    long k = 0;
    for (int i = 0; g->degrees && k < g->total; i++)
        for (int j = 0; j < g->degrees[i]; j++, k++) {
            int q = g->dests[k];
            e[k] = (struct dg_edge){i < q ? i : q, i < q ? q : i, g->weights[k], i > q, i};
        }
    qsort(e, (size_t)g->total, sizeof *e, dg_edge_cmp);
    int rc = 0;
    for (long a = 0; a < g->total && rc == 0;) {
        long b = a + 1;
        while (b < g->total && e[b].lo == e[a].lo && e[b].hi == e[a].hi)
            b++;
        if (b - a != 2 || e[a].dir == e[a + 1].dir || e[a].w != e[a + 1].w) {
            int p = e[a].proc, q = p == e[a].lo ? e[a].hi : e[a].lo;
            if (b - a > 2 || (b - a == 2 && e[a].dir == e[a + 1].dir))
                snprintf(msg, len, "%s:%d: process %d lists %d twice", path, g->line_of[p],
                         p, q);
            else
                snprintf(msg, len, "%s:%d: process %d lists %d (weight %d) but process %d "
                         "does not list %d with that weight", path, g->line_of[p], p, q,
                         e[a].w, q, p);
            rc = -1;
        }
        a = b;
    }
    free(e);
    return rc;
}

/* Reads and checks the group graph file for a communicator of `size` processes.
 * 0 on success; -1 with "FILE:LINE: reason" in msg otherwise (g is then freed). */
static int dg_read(const char *path, int size, struct dg *g, char *msg, size_t len)
{
    memset(g, 0, sizeof *g);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(msg, len, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    struct reader r = {f, path, 1, NULL, 0, 1 + 2 * (size_t)(size - 1)};
    int rc = -1, at = 0, count = next_line(&r, &at, msg, len);
    long cap = 0;
    if (count == 0)
        snprintf(msg, len, "%s: empty, expected the number of processes", path);
    if (count <= 0)
        goto out;
    if (count != 1 || r.vals[0] != size) {
        if (count != 1)
            snprintf(msg, len, "%s:%d: expected the number of processes alone", path, at);
        else
            snprintf(msg, len, "%s:%d: %d processes, the communicator has %d", path, at,
                     r.vals[0], size);
        goto out;
    }
    g->sources = malloc((size_t)size * sizeof(int));
    g->degrees = malloc((size_t)size * sizeof(int));
    g->line_of = malloc((size_t)size * sizeof(int));
    if (!g->sources || !g->degrees || !g->line_of) {
        snprintf(msg, len, "%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < size; i++) {
        count = next_line(&r, &at, msg, len);
        if (count < 0)
            goto out;
        if (count == 0) {
            snprintf(msg, len, "%s:%d: truncated: %d process lines, the file says %d", path,
                     at, i, size);
            goto out;
        }
        int d = r.vals[0];
        if (d > size - 1 || count != 1 + 2 * d) {
            snprintf(msg, len, "%s:%d: process %d: degree %d with %d numbers after it", path,
                     at, i, d, count - 1);
            goto out;
        }
        if (g->total + d > INT_MAX / 2) {
            snprintf(msg, len, "%s:%d: more than %d edges", path, at, INT_MAX / 2);
            goto out;
        }
        if (g->total + d > cap) {
            long want = cap ? 2 * cap : 64;
            while (want < g->total + d)
                want *= 2;
            int *dests = realloc(g->dests, (size_t)want * sizeof(int));
            if (dests)
                g->dests = dests;
            int *weights = realloc(g->weights, (size_t)want * sizeof(int));
            if (weights)
                g->weights = weights;
            if (!dests || !weights) {
                snprintf(msg, len, "%s:%d: out of memory", path, at);
                goto out;
            }
            cap = want;
        }
        for (int j = 0; j < d; j++) {
            int q = r.vals[1 + 2 * j], w = r.vals[2 + 2 * j];
            if (q >= size || q == i) {
                if (q == i)
                    snprintf(msg, len, "%s:%d: process %d lists itself", path, at, i);
                else
                    snprintf(msg, len, "%s:%d: process %d: neighbour %d out of range 0..%d",
                             path, at, i, q, size - 1);
                goto out;
            }
            g->dests[g->total + j] = q;
            g->weights[g->total + j] = w;
        }
        g->sources[i] = i;
        g->degrees[i] = d;
        g->line_of[i] = at;
        g->total += d;
    }
    count = next_line(&r, &at, msg, len);
    if (count < 0)
        goto out;
    if (count > 0) {
        snprintf(msg, len, "%s:%d: more than %d processes", path, at, size);
        goto out;
    }
    rc = dg_check_symmetric(g, path, msg, len);
out:
    free(r.vals);
    fclose(f);
    if (rc != 0)
        dg_free(g);
    return rc;
}

int rankmap_dist_graph(MPI_Comm comm, MPI_Comm *graph_comm)
{
    int rank, size, inter, rc;
    if (graph_comm)
        *graph_comm = MPI_COMM_NULL;
    if ((rc = MPI_Comm_test_inter(comm, &inter)) != MPI_SUCCESS)
        return rc;
    if (inter) /* every process of an intercommunicator sees it */
        return MPI_ERR_COMM;
    if ((rc = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(comm, &size)) != MPI_SUCCESS)
        return rc;

    /* the process of rank 0 reads the file and gives the whole graph (the seed's Fig. 6) */
    struct dg g;
    memset(&g, 0, sizeof g);
    char msg[512] = "";
    int mine = 0, code;
    if (rank == 0) {
        const char *path = getenv(RANKMAP_DIST_GRAPH_ENV);
        if (!path || !*path)
            mine = RANKMAP_ERR_UNSET;
        else if (dg_read(path, size, &g, msg, sizeof msg) != 0)
            mine = RANKMAP_ERR_FILE;
    }
    if (!graph_comm)
        mine = RANKMAP_ERR_ARG;
    /* every process takes the same branch: the lowest code (all are <= 0) */
    if ((rc = MPI_Allreduce(&mine, &code, 1, MPI_INT, MPI_MIN, comm)) != MPI_SUCCESS) {
        dg_free(&g);
        return rc;
    }
    if (code != 0) {
        if (mine == RANKMAP_ERR_FILE) {
            fprintf(stderr, "rankmap: warning: %s; no distributed-graph communicator\n", msg);
            fflush(stderr);
        }
        dg_free(&g);
        return code;
    }
    /* the other processes give no edges (and rank 0 none when no process has any) */
    int none = 0;
    rc = MPI_Dist_graph_create(comm, rank == 0 ? size : 0, rank == 0 ? g.sources : &none,
                               rank == 0 ? g.degrees : &none, g.total ? g.dests : &none,
                               g.total ? g.weights : MPI_WEIGHTS_EMPTY, MPI_INFO_NULL, 1,
                               graph_comm);
    if (rc != MPI_SUCCESS)
        *graph_comm = MPI_COMM_NULL;
    dg_free(&g);
    return rc;
}
