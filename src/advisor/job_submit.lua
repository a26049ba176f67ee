-- Synergy's submit-time advisor for Slurm (JobSubmitPlugins=lua), written by `synergy slurm advisor`.
-- See docs/slurm.md, "The submit-time advisor".
--
-- A job that names its profile (--comment=synergy:NAME, or a job name the table lists) and asks for GPUs
-- on one node is given the cores and memory the table holds for that profile, partition and GPU count;
-- the job is told what changed (slurm.log_user) and the reason goes in its admin comment. The table is
-- data (synergy-advisor.tsv beside this script), read on every submission and never executed.
--
-- It fails open: a job with no profile, a missing, stale or unreadable table, a corrupt entry or any error
-- here keeps its own request, and the reason goes in its admin comment. It always returns slurm.SUCCESS.

local TABLE_HEADER = "synergy-advisor-table"
local TABLE_VERSION = "1"
-- Slurm's "not set" values as the Lua plugin passes them (NO_VAL16, NO_VAL, NO_VAL64).
local NO_VAL16 = 65534
local NO_VAL = 4294967294
local NO_VAL64_AT_LEAST = 1e18

-- The table lives beside this script (slurmctld loads it from slurm.conf's directory).
local script_dir = (debug.getinfo(1, "S").source or ""):match("^@(.*/)") or "./"
local TABLE_PATH = script_dir .. "synergy-advisor.tsv"

local function split_tabs(line)
  local fields = {}
  for f in (line .. "\t"):gmatch("([^\t]*)\t") do
    fields[#fields + 1] = f
  end
  return fields
end

local function whole(s)
  if type(s) == "string" and s:match("^%d+$") then
    return tonumber(s)
  end
  return nil
end

-- Reads the table: nil and the reason when it cannot be trusted as a whole; entries it cannot read are
-- recorded in `bad` by profile, so that only jobs of that profile fall back to their own request.
local function read_table()
  local f, err = io.open(TABLE_PATH, "r")
  if not f then
    return nil, "no table (" .. tostring(err) .. ")"
  end
  local t = { sizes = {}, profiles = {}, bad = {}, job_names = {}, default_partition = nil }
  local n, seen_header = 0, false
  for line in f:lines() do
    n = n + 1
    if line ~= "" and line:sub(1, 1) ~= "#" then
      local c = split_tabs(line)
      local kind = c[1]
      if not seen_header then
        if kind ~= TABLE_HEADER then
          f:close()
          return nil, string.format("%s line %d is not a synergy advisor table header", TABLE_PATH, n)
        end
        if c[2] ~= TABLE_VERSION then
          f:close()
          return nil, string.format("%s has table version `%s`; this script reads version %s (regenerate both with synergy slurm advisor)",
            TABLE_PATH, tostring(c[2]), TABLE_VERSION)
        end
        seen_header = true
      elseif kind == "generated" then
        t.generated = whole(c[2])
      elseif kind == "default_partition" then
        t.default_partition = c[2]
      elseif kind == "profile" then
        -- profile NAME CPUS_PER_GPU MEMORY_GIB_PER_GPU BELOW_SHARE MTIME PATH: informational here.
        if c[2] and c[2] ~= "" then
          t.profiles[c[2]] = true
        end
      elseif kind == "job_name" then
        -- job_name PREFIX PROFILE
        if c[2] and c[2] ~= "" and c[3] and c[3] ~= "" then
          t.job_names[#t.job_names + 1] = { prefix = c[2], profile = c[3] }
        end
      elseif kind == "size" then
        -- size PROFILE PARTITION GPUS CPUS MEMORY_MB CPUS_BY MEMORY_BY
        local profile, partition = c[2], c[3]
        local gpus, cpus, mem = whole(c[4]), whole(c[5]), whole(c[6])
        if profile and profile ~= "" then
          local why = nil
          if not partition or partition == "" then
            why = "field `partition` is empty"
          elseif not gpus or gpus < 1 then
            why = string.format("field `gpus` is `%s`, not a whole number of at least 1", tostring(c[4]))
          elseif not cpus or cpus < 1 then
            why = string.format("field `cpus` is `%s`, not a whole number of at least 1", tostring(c[5]))
          elseif not mem or mem < 1 then
            why = string.format("field `memory_mb` is `%s`, not a whole number of at least 1", tostring(c[6]))
          end
          if why then
            t.bad[profile] = t.bad[profile] or string.format("line %d: %s", n, why)
          else
            t.sizes[profile] = t.sizes[profile] or {}
            t.sizes[profile][partition] = t.sizes[profile][partition] or {}
            t.sizes[profile][partition][gpus] = { cpus = cpus, mem = mem, cpus_by = c[7] or "?", mem_by = c[8] or "?" }
          end
        end
      elseif kind == "partition" then
        -- partition NAME NODES GPUS CPUS MEMORY_MB: the shapes it was made for (synergy slurm advisor --check).
      else
        f:close()
        return nil, string.format("%s line %d: unknown row kind `%s`", TABLE_PATH, n, tostring(kind))
      end
    end
  end
  f:close()
  if not seen_header then
    return nil, TABLE_PATH .. " is empty"
  end
  if not t.generated then
    return nil, TABLE_PATH .. " has no valid `generated` line"
  end
  if t.generated > os.time() + 300 then
    return nil, TABLE_PATH .. " was generated in the future (a wrong clock?)"
  end
  return t
end

-- GPUs per node the job asks for: --gres=gpu[:type]:N (tres_per_node, "gres:gpu:N" in 22.05, "gres/gpu:N"
-- later) or --gpus=N on one node (tres_per_job). nil when it asks for none.
local function gpus_of(job_desc)
  local function count(spec)
    if type(spec) ~= "string" or spec == "" then
      return nil
    end
    local total = nil
    for item in spec:gmatch("[^,]+") do
      local name_and_rest = item:gsub("^gres[:/]", "")
      local n = name_and_rest:match("^gpu:(%d+)$") or name_and_rest:match("^gpu:[^:]+:(%d+)$")
      if name_and_rest == "gpu" then
        n = "1"
      end
      if n then
        total = (total or 0) + tonumber(n)
      end
    end
    return total
  end
  return count(job_desc.tres_per_node), count(job_desc.tres_per_job)
end

local function set(v)
  return v ~= nil and v ~= NO_VAL16 and v ~= NO_VAL and not (type(v) == "number" and v >= NO_VAL64_AT_LEAST)
end

local function note(job_desc, text)
  local line = "synergy-advisor: " .. text
  local old = job_desc.admin_comment
  if type(old) == "string" and old ~= "" then
    line = old .. "; " .. line
  end
  job_desc.admin_comment = line:sub(1, 1000)
end

-- The advice for one job: returns the reason it was left alone, or nil once it was resized.
local function advise(job_desc)
  -- Words of the comment: `synergy:NAME` and `synergy-run:...` count only at the start of one.
  local comment = " " .. (job_desc.comment or "")
  if comment:find("%ssynergy%-run:") then
    return "submitted by synergy run, which sized it already: kept as asked", false
  end
  local named = comment:match("%ssynergy:([%w%._%-]+)")
  local t, why = read_table()
  if not t then
    return why .. ": kept as asked", named ~= nil
  end
  local profile = named
  if not profile then
    local name = job_desc.name or ""
    for _, j in ipairs(t.job_names) do
      if name:sub(1, #j.prefix) == j.prefix then
        profile = j.profile
        break
      end
    end
  end
  if not profile then
    return "no profile named (--comment=synergy:NAME or a job name in the table): kept as asked", false
  end
  if t.bad[profile] then
    return string.format("the table's entry for `%s` is corrupt (%s, %s): kept as asked", profile, TABLE_PATH, t.bad[profile]), true
  end
  if not t.sizes[profile] then
    return string.format("profile `%s` is not in %s: kept as asked", profile, TABLE_PATH), true
  end
  local partition = job_desc.partition
  if partition == nil or partition == "" then
    partition = t.default_partition
  end
  if not partition or partition:find(",") then
    return string.format("profile `%s`: partition `%s` is not one partition: kept as asked", profile, tostring(partition)), true
  end
  local per_node, per_job = gpus_of(job_desc)
  local gpus = per_node or per_job
  if not gpus or gpus < 1 then
    return string.format("profile `%s`: the job asks for no GPUs: kept as asked", profile), true
  end
  if (set(job_desc.num_tasks) and job_desc.num_tasks > 1) or (set(job_desc.min_nodes) and job_desc.min_nodes > 1)
      or (per_node == nil and set(job_desc.max_nodes) and job_desc.max_nodes > 1) then
    return string.format("profile `%s`: several tasks or nodes: kept as asked", profile), true
  end
  local size = t.sizes[profile][partition] and t.sizes[profile][partition][gpus]
  if not size then
    return string.format("profile `%s`: no entry for %d GPU(s) on partition `%s`: kept as asked", profile, gpus, partition), true
  end
  local old_cpus = set(job_desc.cpus_per_task) and tostring(job_desc.cpus_per_task) or "default"
  local old_mem = set(job_desc.pn_min_memory) and (tostring(job_desc.pn_min_memory) .. " MB") or "default"
  local keep_mem = type(job_desc.mem_per_tres) == "string" and job_desc.mem_per_tres ~= ""
  local mem_text = keep_mem and "memory kept (--mem-per-gpu)"
    or string.format("%d MB (was %s; %s)", size.mem, old_mem, size.mem_by)
  local msg = string.format("profile `%s`, %d GPU(s) on `%s`: %d cores (was %s; %s), %s",
    profile, gpus, partition, size.cpus, old_cpus, size.cpus_by, mem_text)
  -- Changed last, all together: an error above leaves the request as it was.
  job_desc.cpus_per_task = size.cpus
  -- min_cpus too: cpus_per_task alone leaves the job's CPU count at what sbatch computed from the request.
  job_desc.min_cpus = size.cpus
  if not keep_mem then
    job_desc.pn_min_memory = size.mem
  end
  return nil, true, msg
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local ok, err = pcall(function()
    local kept, tell, msg = advise(job_desc)
    if kept then
      note(job_desc, kept)
      if tell then
        slurm.log_user("synergy: %s", kept)
      end
    else
      note(job_desc, msg)
      slurm.log_user("synergy: %s", msg)
    end
  end)
  if not ok then
    pcall(note, job_desc, "error in the advisor (" .. tostring(err) .. "): kept as asked")
    pcall(slurm.log_info, "synergy-advisor: error: %s", tostring(err))
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

