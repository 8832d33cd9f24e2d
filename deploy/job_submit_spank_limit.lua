-- Refuse jobs whose SPANK job environment is too large (rankmap README, "Threat model").
--
-- A user's own client-side SPANK plugin can set any number of SPANK_* variables of any
-- size; megabytes of them make slurmd fail to start the prolog, and Slurm drains the
-- node.  Slurm itself sets no limit.  Merge this function into /etc/slurm/job_submit.lua
-- (slurm.conf: JobSubmitPlugins=lua) and call it from slurm_job_submit and
-- slurm_job_modify.  job_desc.spank_job_env is 0-indexed; spank_job_env_size counts it.

SPANK_ENV_LIMIT = 65536  -- bytes of NAME=value entries in all

function spank_env_too_large(job_desc)
   local total = 0
   local n = job_desc.spank_job_env_size or 0
   local env = job_desc.spank_job_env
   for i = 0, n - 1 do
      if env ~= nil and env[i] ~= nil then
         total = total + string.len(env[i])
      end
   end
   return total > SPANK_ENV_LIMIT, total
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   local too_large, total = spank_env_too_large(job_desc)
   if too_large then
      slurm.log_user("SPANK environment of %d bytes is over the site's limit of %d",
                     total, SPANK_ENV_LIMIT)
      return slurm.ERROR
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm_job_submit(job_desc, part_list, modify_uid)
end
