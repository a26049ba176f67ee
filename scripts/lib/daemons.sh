# Sourced by the Slurm scripts (slurm-setup.sh, slurm-nodes.sh, slurm-advisor-ctld.sh): whether the daemon a
# pid file names still runs, and stopping it. The caller defines say().

# alive PIDFILE NAME...: the pid in PIDFILE is a running process called one of NAME. A pid file can outlive
# its daemon (a machine restored from a snapshot keeps /run) and its pid can belong to anything by now: a
# bare `kill -0` took such a process for the daemon, which was then never started (or, on stop, killed it).
alive() {
  local pidfile="$1" pid comm name
  shift
  [ -s "$pidfile" ] || return 1
  pid="$(cat "$pidfile")"
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  for name in "$@"; do [ "$comm" = "$name" ] && return 0; done
  return 1
}

# in_netns PIDFILE NETNS: the process whose pid is in PIDFILE runs in network namespace NETNS
# (/run/netns/NETNS), so it is that node's daemon and not another's.
in_netns() {
  [ "$(stat -L -c %i "/proc/$(cat "$1")/ns/net" 2>/dev/null)" = "$(stat -L -c %i "/run/netns/$2" 2>/dev/null)" ]
}

# stop_daemon LABEL PIDFILE NAME...: if the pid in PIDFILE is a running process called one of NAME, SIGTERM it
# and wait up to 10 s for it to exit (then SIGKILL); the pid file goes either way.
stop_daemon() {
  local label="$1" pidfile="$2" pid
  shift 2
  if ! alive "$pidfile" "$@"; then rm -f "$pidfile"; return 0; fi
  pid="$(cat "$pidfile")"
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -f "$pidfile"
  say "stopped $label (pid $pid)"
}
