-- Pass-through job_submit.lua (JobSubmitPlugins=lua): every job is kept exactly as submitted. Installed by
-- scripts/slurm-setup.sh and scripts/slurm-advisor-ctld.sh beside slurm.conf, because slurmctld 22.05 exits
-- at start when the plugin is on and the script is missing; `synergy slurm advisor --out DIR` replaces it
-- with the advisor (docs/slurm.md, "The submit-time advisor").
function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end
