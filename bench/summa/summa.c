/* summa: heterogeneous SUMMA (C = A·B, N×N) on a column-based partition, for the
 * topology-aware arrangement of Malik, Rychkov, Lastovetsky, Quintin, "Topology-aware
 * optimization of communications for parallel matrix multiplication on hierarchical
 * heterogeneous HPC platforms", HCW/IPDPSW 2014, doi:10.1109/IPDPSW.2014.10
 * (shared/seeds/malik-et-al-topology-aware-summa.txt), communication flow "FPM-BR:
 * ring".
 *
 * Usage: summa [-a FILE] [-b PANEL] [-r] [-v]
 *   -a  arrangement file (default: $RANKMAP_ARRANGEMENT), format below
 *   -b  panel width: pivot columns of A / rows of B moved per step (default 64)
 *   -r  real arithmetic: fill A and B, multiply, check C = A·B against a serial
 *       product of each rank's rectangle; prints "summa-verify ok" or
 *       "summa-verify FAILED <wrong entries>" (small N only: O(N³/p) per rank)
 *   -v  every rank prints "rank R host H column C position P rows R0+H cols C0+W"
 *
 * Arrangement file (comments from '#' to the end of a line, anywhere):
 *   <nranks> <N>
 *   <rank> <column> <position> <row_offset> <col_offset> <height> <width>   (nranks lines)
 * Rank r owns rows [row_offset, row_offset+height) × cols [col_offset, col_offset+width)
 * of A, B and C.  Columns are numbered left to right (column c+1 starts where column c
 * ends), positions top to bottom (position p+1 starts where p ends); the rectangles
 * tile the matrix exactly.  A bad file stops every rank with "summa: FILE:LINE: why".
 *
 * Algorithm.  Step k moves panel [k, k+b) (cut at the partition's column boundaries, so
 * that the pivot columns of A lie in one partition column pc):
 *   A: the rows are cut into bands at every rectangle's top and bottom; a band has one
 *      owner per column.  The band's piece of A's pivot panel (band height × b) starts
 *      at its owner in column pc and is passed along the band's owners in column order,
 *      both ways from pc (pc → pc+1 → … → last, and pc → pc-1 → … → 0).
 *   B: in every column, the rows [k, k+b) of B are cut at the column's rectangle
 *      boundaries; each piece (rows × column width) starts at its owner and is passed
 *      along the column's ranks in position order, both ways from the owner.
 *   Then every rank updates its rectangle: C += A(rows, panel) · B(panel, cols),
 *   declared to SMPI as 2·h·w·b flops (smpi_execute_flops; run with
 *   --cfg=smpi/simulate-computation:no, nothing else is charged), and computed for
 *   real only with -r.
 * Why a chain passed both ways and not a closed ring: the slides' costs count h, the
 * inter-cluster transfers of a band or column, as the cluster changes between
 * neighbours in column (position) order — they list h = 1 and h = 3, impossible for a
 * closed ring, which crosses between clusters an even number of times.  With the chain
 * every neighbour link carries each piece exactly once, so the inter-cluster volume of
 * the run is N·(cost_A + cost_B) elements: the slides' cost, times N.
 *
 * Messages are nonblocking: a rank posts all receives of a step, sends what it owns,
 * forwards each piece when it arrives (MPI_Waitany), then computes; no barrier inside
 * the loop.  Rank 0 prints "rankmap-sim-time SECONDS": MPI_Wtime of the step loop
 * between two barriers (bench/benefit/sim_common.h).  Without -r, buffers come from
 * SMPI_SHARED_MALLOC (the data are not meaningful) and only the panels are allocated.
 *
 * Cost per rank and step: O(bands + column length) messages; parsing O(p log p + p·C).
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../benefit/sim_common.h"

typedef struct {
  int column, position, row, col, height, width, line;
} Rect;

typedef struct {
  int n, nranks, ncols;
  Rect *rect;       /* by rank */
  int *col_start;   /* ncols + 1: first index of each column in by_col */
  int *by_col;      /* ranks sorted by (column, position) */
  int nbands;
  int *band_top;    /* nbands + 1 row boundaries */
  int *band_owner;  /* nbands × ncols: owner of band j in column c */
} Layout;

static int world_rank;

/* Rank 0 prints the message (other ranks would print the same), then all stop. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
  if (world_rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    fputs("summa: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
  }
  /* every rank reaches the same verdict (they all read the same file), so all stop
   * cleanly with status 2 (SMPI's MPI_Abort lets smpirun exit with 0), after rank 0
   * has printed */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  exit(2);
}

static void *xcalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size);
  if (!p) { /* one rank only: no barrier, say who */
    fprintf(stderr, "summa: rank %d: out of memory\n", world_rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

/* Next line with content (comments stripped) into buf; 0 at end of file. */
static int next_line(FILE *f, char *buf, int size, int *lineno)
{
  while (fgets(buf, size, f)) {
    ++*lineno;
    char *hash = strchr(buf, '#');
    if (hash)
      *hash = '\0';
    for (char *s = buf; *s; s++)
      if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
        return 1;
  }
  return 0;
}

static int cmp_int(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static const Rect *sort_rects; /* for cmp_colpos */
static int cmp_colpos(const void *a, const void *b)
{
  const Rect *x = &sort_rects[*(const int *)a], *y = &sort_rects[*(const int *)b];
  if (x->column != y->column)
    return (x->column > y->column) - (x->column < y->column);
  return (x->position > y->position) - (x->position < y->position);
}

/* Read and check the arrangement; every error names the file and line. */
static void read_layout(const char *path, int size, Layout *L)
{
  FILE *f = fopen(path, "r");
  if (!f)
    die("%s: cannot open the arrangement file", path);
  char buf[1024];
  int lineno = 0, end;
  if (!next_line(f, buf, sizeof buf, &lineno))
    die("%s: empty file (expected '<nranks> <N>')", path);
  if (sscanf(buf, "%d %d %n", &L->nranks, &L->n, &end) != 2 || buf[end] != '\0')
    die("%s:%d: expected '<nranks> <N>'", path, lineno);
  if (L->nranks < 1 || L->n < 1)
    die("%s:%d: nranks and N must be positive", path, lineno);
  if (L->nranks != size)
    die("%s:%d: arrangement for %d ranks, but the job has %d", path, lineno, L->nranks, size);
  L->rect = xcalloc(L->nranks, sizeof(Rect));
  for (int i = 0; i < L->nranks; i++)
    L->rect[i].line = 0;
  for (int i = 0; i < L->nranks; i++) {
    if (!next_line(f, buf, sizeof buf, &lineno))
      die("%s: %d rank lines, expected %d", path, i, L->nranks);
    int v[7];
    if (sscanf(buf, "%d %d %d %d %d %d %d %n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &end) != 7 || buf[end] != '\0')
      die("%s:%d: expected 7 integers: rank column position row_offset col_offset height "
          "width", path, lineno);
    if (v[0] < 0 || v[0] >= L->nranks)
      die("%s:%d: rank %d is not in [0, %d)", path, lineno, v[0], L->nranks);
    Rect *r = &L->rect[v[0]];
    if (r->line)
      die("%s:%d: rank %d already given on line %d", path, lineno, v[0], r->line);
    *r = (Rect){v[1], v[2], v[3], v[4], v[5], v[6], lineno};
    if (r->column < 0 || r->position < 0 || r->row < 0 || r->col < 0)
      die("%s:%d: column, position and offsets must not be negative", path, lineno);
    if (r->height < 1 || r->width < 1)
      die("%s:%d: height and width must be positive", path, lineno);
    if ((long)r->row + r->height > L->n || (long)r->col + r->width > L->n)
      die("%s:%d: rectangle rows %d+%d, cols %d+%d leaves the %dx%d matrix", path, lineno,
          r->row, r->height, r->col, r->width, L->n, L->n);
  }
  if (next_line(f, buf, sizeof buf, &lineno))
    die("%s:%d: more than %d rank lines", path, lineno, L->nranks);
  fclose(f);

  /* columns and positions: rank order by (column, position) */
  L->ncols = 0;
  for (int i = 0; i < L->nranks; i++)
    if (L->rect[i].column + 1 > L->ncols)
      L->ncols = L->rect[i].column + 1;
  L->by_col = xcalloc(L->nranks, sizeof(int));
  L->col_start = xcalloc(L->ncols + 1, sizeof(int));
  for (int i = 0; i < L->nranks; i++)
    L->by_col[i] = i;
  sort_rects = L->rect;
  qsort(L->by_col, L->nranks, sizeof(int), cmp_colpos);
  int next_col = 0; /* where the next column must start */
  for (int c = 0, i = 0; c < L->ncols; c++) {
    L->col_start[c] = i;
    if (i == L->nranks || L->rect[L->by_col[i]].column != c)
      die("%s: column %d has no rectangle (columns are numbered 0..%d)", path, c,
          L->ncols - 1);
    const Rect *first = &L->rect[L->by_col[i]];
    if (first->col != next_col)
      die("%s:%d: column %d starts at matrix column %d, expected %d (the end of column %d)",
          path, first->line, c, first->col, next_col, c - 1);
    int next_row = 0, last_line = first->line;
    for (int p = 0; i < L->nranks && L->rect[L->by_col[i]].column == c; i++, p++) {
      const Rect *r = &L->rect[L->by_col[i]];
      if (r->position != p)
        die("%s:%d: column %d has position %d where position %d was expected (positions "
            "are 0, 1, ... without gaps or repeats)", path, r->line, c, r->position, p);
      if (r->col != first->col || r->width != first->width)
        die("%s:%d: column %d: cols %d+%d differ from line %d's %d+%d", path, r->line, c,
            r->col, r->width, first->line, first->col, first->width);
      if (r->row != next_row)
        die("%s:%d: column %d position %d starts at row %d, expected %d", path, r->line, c,
            p, r->row, next_row);
      next_row = r->row + r->height;
      last_line = r->line;
    }
    if (next_row != L->n)
      die("%s:%d: column %d covers rows [0, %d), not all %d (this is its last rectangle)",
          path, last_line, c, next_row, L->n);
    next_col = first->col + first->width;
    if (c == L->ncols - 1 && next_col != L->n)
      die("%s:%d: the columns cover matrix columns [0, %d), not all %d (this is the last "
          "column)", path, first->line, next_col, L->n);
  }
  L->col_start[L->ncols] = L->nranks;

  /* bands: rows cut at every rectangle's top; owner of each band in each column */
  int *tops = xcalloc(L->nranks + 1, sizeof(int));
  for (int i = 0; i < L->nranks; i++)
    tops[i] = L->rect[i].row;
  tops[L->nranks] = L->n;
  qsort(tops, L->nranks + 1, sizeof(int), cmp_int);
  L->nbands = 0;
  for (int i = 1; i <= L->nranks; i++)
    if (tops[i] != tops[L->nbands])
      tops[++L->nbands] = tops[i];
  L->band_top = tops;
  L->band_owner = xcalloc((size_t)L->nbands * L->ncols, sizeof(int));
  for (int c = 0; c < L->ncols; c++) {
    int i = L->col_start[c];
    for (int j = 0; j < L->nbands; j++) {
      while (L->rect[L->by_col[i]].row + L->rect[L->by_col[i]].height <= tops[j])
        i++;
      L->band_owner[(size_t)j * L->ncols + c] = L->by_col[i];
    }
  }
}

/* Deterministic small integers: products and sums stay exact in double. */
static double a_entry(int i, int j) { return (double)((i * 7 + j * 3) % 11 - 5); }
static double b_entry(int i, int j) { return (double)((i * 5 + j * 2) % 13 - 6); }

typedef struct {
  double *buf;  /* where the piece lives in the receiver's panel */
  int count;    /* doubles */
  int tag;
  int from, to; /* upstream (receive) and downstream (forward) ranks, -1: none */
} Piece;

int main(int argc, char **argv)
{
  int size, panel = 64, real = 0, verbose = 0;
  const char *path = getenv("RANKMAP_ARRANGEMENT");
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-a") && i + 1 < argc)
      path = argv[++i];
    else if (!strcmp(argv[i], "-b") && i + 1 < argc)
      panel = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r"))
      real = 1;
    else if (!strcmp(argv[i], "-v"))
      verbose = 1;
    else
      die("unknown argument %s\nusage: summa [-a FILE] [-b PANEL] [-r] [-v]", argv[i]);
  }
  if (!path || !*path)
    die("no arrangement: give -a FILE or set RANKMAP_ARRANGEMENT");
  if (panel < 1)
    die("-b must be a positive panel width");
  Layout L;
  read_layout(path, size, &L);
  const Rect me = L.rect[world_rank];
  const int h = me.height, w = me.width, C = L.ncols;
  if (verbose) {
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    printf("rank %d host %s column %d position %d rows %d+%d cols %d+%d\n", world_rank, host,
           me.column, me.position, me.row, h, me.col, w);
  }

  /* my bands (rows of A I receive or send) and my column's ranks */
  int band0 = 0, nmine = 0;
  while (L.band_top[band0 + 1] <= me.row)
    band0++;
  while (band0 + nmine < L.nbands && L.band_top[band0 + nmine] < me.row + h)
    nmine++;
  const int *colranks = &L.by_col[L.col_start[me.column]];
  const int colsize = L.col_start[me.column + 1] - L.col_start[me.column];

  double *a = NULL, *b = NULL, *c = NULL, *apanel, *bpanel;
  if (real) {
    a = xcalloc((size_t)h * w, sizeof(double));
    b = xcalloc((size_t)h * w, sizeof(double));
    c = xcalloc((size_t)h * w, sizeof(double));
    for (int i = 0; i < h; i++)
      for (int j = 0; j < w; j++) {
        a[(size_t)i * w + j] = a_entry(me.row + i, me.col + j);
        b[(size_t)i * w + j] = b_entry(me.row + i, me.col + j);
      }
    apanel = xcalloc((size_t)h * panel, sizeof(double));
    bpanel = xcalloc((size_t)panel * w, sizeof(double));
  } else {
    apanel = ALLOC((size_t)h * panel * sizeof(double));
    bpanel = ALLOC((size_t)panel * w * sizeof(double));
  }
  Piece *pieces = xcalloc(nmine + colsize, sizeof(Piece));
  MPI_Request *rreq = xcalloc(nmine + colsize, sizeof(MPI_Request));
  MPI_Request *sreq = xcalloc(2 * (nmine + colsize), sizeof(MPI_Request));
  int *rpiece = xcalloc(nmine + colsize, sizeof(int));

  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int k = 0; k < L.n;) {
    int pc = 0;
    while (L.rect[L.by_col[L.col_start[pc]]].col + L.rect[L.by_col[L.col_start[pc]]].width <= k)
      pc++;
    const Rect *pivot = &L.rect[L.by_col[L.col_start[pc]]];
    const int kb = (pivot->col + pivot->width - k < panel) ? pivot->col + pivot->width - k
                                                           : panel;
    int np = 0, nr = 0, ns = 0;
    /* A: my bands, passed along the band's owners in column order, both ways from pc */
    for (int j = band0; j < band0 + nmine; j++) {
      const int *own = &L.band_owner[(size_t)j * C];
      int rows = L.band_top[j + 1] - L.band_top[j];
      Piece *p = &pieces[np++];
      p->buf = apanel + (size_t)(L.band_top[j] - me.row) * kb;
      p->count = rows * kb;
      p->tag = j;
      int mc = me.column;
      if (mc == pc) {
        if (real)
          for (int i = 0; i < rows; i++)
            memcpy(p->buf + (size_t)i * kb,
                   a + (size_t)(L.band_top[j] - me.row + i) * w + (k - me.col),
                   kb * sizeof(double));
        if (mc > 0)
          MPI_Isend(p->buf, p->count, MPI_DOUBLE, own[mc - 1], p->tag, MPI_COMM_WORLD,
                    &sreq[ns++]);
        if (mc < C - 1)
          MPI_Isend(p->buf, p->count, MPI_DOUBLE, own[mc + 1], p->tag, MPI_COMM_WORLD,
                    &sreq[ns++]);
        np--;
        continue;
      }
      p->from = own[mc > pc ? mc - 1 : mc + 1];
      p->to = mc > pc ? (mc < C - 1 ? own[mc + 1] : -1) : (mc > 0 ? own[mc - 1] : -1);
    }
    /* B: rows [k, k+kb) of my column, cut at its rectangles, passed along the column in
     * position order, both ways from each piece's owner */
    for (int q = 0; q < colsize; q++) {
      const Rect *o = &L.rect[colranks[q]];
      int lo = o->row > k ? o->row : k;
      int hi = o->row + o->height < k + kb ? o->row + o->height : k + kb;
      if (lo >= hi)
        continue;
      Piece *p = &pieces[np++];
      p->buf = bpanel + (size_t)(lo - k) * w;
      p->count = (hi - lo) * w;
      p->tag = L.nbands + q;
      int mp = me.position;
      if (mp == q) {
        if (real)
          memcpy(p->buf, b + (size_t)(lo - me.row) * w, (size_t)p->count * sizeof(double));
        if (mp > 0)
          MPI_Isend(p->buf, p->count, MPI_DOUBLE, colranks[mp - 1], p->tag, MPI_COMM_WORLD,
                    &sreq[ns++]);
        if (mp < colsize - 1)
          MPI_Isend(p->buf, p->count, MPI_DOUBLE, colranks[mp + 1], p->tag, MPI_COMM_WORLD,
                    &sreq[ns++]);
        np--;
        continue;
      }
      p->from = colranks[mp > q ? mp - 1 : mp + 1];
      p->to = mp > q ? (mp < colsize - 1 ? colranks[mp + 1] : -1)
                     : (mp > 0 ? colranks[mp - 1] : -1);
    }
    for (int i = 0; i < np; i++) {
      MPI_Irecv(pieces[i].buf, pieces[i].count, MPI_DOUBLE, pieces[i].from, pieces[i].tag,
                MPI_COMM_WORLD, &rreq[nr]);
      rpiece[nr++] = i;
    }
    for (int done = 0; done < nr; done++) {
      int idx;
      MPI_Waitany(nr, rreq, &idx, MPI_STATUS_IGNORE);
      const Piece *p = &pieces[rpiece[idx]];
      if (p->to >= 0)
        MPI_Isend(p->buf, p->count, MPI_DOUBLE, p->to, p->tag, MPI_COMM_WORLD, &sreq[ns++]);
    }
    MPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE);
    /* C(h×w) += Apanel(h×kb) · Bpanel(kb×w) */
    sim_compute(2.0 * h * w * kb);
    if (real)
      for (int i = 0; i < h; i++)
        for (int t = 0; t < kb; t++) {
          double x = apanel[(size_t)i * kb + t];
          for (int j = 0; j < w; j++)
            c[(size_t)i * w + j] += x * bpanel[(size_t)t * w + j];
        }
    k += kb;
  }
  sim_report(world_rank, t0);

  if (real) {
    long wrong = 0, total;
    for (int i = 0; i < h; i++)
      for (int j = 0; j < w; j++) {
        double s = 0;
        for (int t = 0; t < L.n; t++)
          s += a_entry(me.row + i, t) * b_entry(t, me.col + j);
        wrong += s != c[(size_t)i * w + j];
      }
    MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) {
      if (total)
        printf("summa-verify FAILED %ld\n", total);
      else
        printf("summa-verify ok\n");
    }
    free(a);
    free(b);
    free(c);
    free(apanel);
    free(bpanel);
  } else {
    FREE(apanel);
    FREE(bpanel);
  }
  free(pieces);
  free(rreq);
  free(sreq);
  free(rpiece);
  free(L.rect);
  free(L.by_col);
  free(L.col_start);
  free(L.band_top);
  free(L.band_owner);
  MPI_Finalize();
  return 0;
}
