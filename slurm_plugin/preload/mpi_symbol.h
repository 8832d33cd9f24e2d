/*
 * The MPI's own definition of a function that an LD_PRELOAD library of rankmap
 * (librankmap_bind, librankmap_record) also defines, found without linking against any
 * MPI: the next definition after the calling library (dlsym(RTLD_NEXT)), or, for an MPI
 * loaded privately (mpi4py dlopens libmpi with RTLD_LOCAL, out of RTLD_NEXT's sight),
 * the first loaded object that defines it.  SELF is the caller's own definition, never
 * returned, and the caller's own object is never searched (a library's indirect
 * functions would resolve through it again).  Included by both libraries' sources
 * (static: each gets its own copy).
 */
#ifndef RANKMAP_MPI_SYMBOL_H
#define RANKMAP_MPI_SYMBOL_H

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

struct rankmap_lookup {
    const char *name;
    void *self;
    void *found;
    const char *own; /* the calling library's path */
};

static void *rankmap_mpi_symbol(const char *name, void *self);

/* dl_iterate_phdr callback: NAME in the loaded object INFO, unless it is the caller's. */
static int rankmap_look_in(struct dl_phdr_info *info, size_t size, void *data)
{
    struct rankmap_lookup *l = data;
    void *handle, *f;
    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0] ||
        (l->own && !strcmp(info->dlpi_name, l->own)))
        return 0;
    handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
        return 0;
    f = dlsym(handle, l->name);
    dlclose(handle);
    if (f && f != l->self) {
        l->found = f;
        return 1;
    }
    return 0;
}

/* NAME's MPI definition, or NULL when no loaded object has one. */
static void *rankmap_mpi_symbol(const char *name, void *self)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f || f == self) {
        Dl_info me;
        struct rankmap_lookup l = {name, self, NULL, NULL};
        if (dladdr((void *)rankmap_mpi_symbol, &me))
            l.own = me.dli_fname;
        dl_iterate_phdr(rankmap_look_in, &l);
        f = l.found;
    }
    return f;
}

#endif
