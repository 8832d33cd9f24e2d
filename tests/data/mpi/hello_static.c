/* A statically linked program (no dynamic loader, so no LD_PRELOAD) and, copied
 * set-user-ID, one the dynamic loader runs in secure mode: both must run as without
 * rankmap's preloads.  Prints "static: ok" and exits 5. */
#include <stdio.h>

int main(void)
{
    printf("static: ok\n");
    return 5;
}
