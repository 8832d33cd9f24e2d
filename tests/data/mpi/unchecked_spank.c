/* Test-only SPANK plugin standing in for a user who bypasses rankmap's client-side
 * checks (SPANK options run in the user's own sbatch process, so a user can load a
 * plugstack of their own): it forwards --comm-profile to the prolog unvalidated. */
#include <string.h>
#include <slurm/spank.h>

SPANK_PLUGIN(unchecked, 1);

static char value[4096];

static int opt(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    strncpy(value, optarg ? optarg : "", sizeof value - 1);
    return ESPANK_SUCCESS;
}

struct spank_option spank_options[] = {
    {"comm-profile", "NAME", "unchecked profile name", 1, 0, (spank_opt_cb_f)opt},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_option_register(sp, &spank_options[0]);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (value[0] && (spank_context() == S_CTX_LOCAL || spank_context() == S_CTX_ALLOCATOR))
        spank_job_control_setenv(sp, "RANKMAP_COMM_PROFILE", value, 1);
    return 0;
}
