#!/usr/bin/env bash
# Runs a command on a real cgroup-v2-only kernel: a small QEMU VM under software emulation (TCG; no KVM
# needed) whose root is this host's own root filesystem, shared read-write over virtiofs, so a program built
# here runs in the VM at the same paths, with the same /usr, /lib, /root and work tree.
#
# virtiofs rather than virtio-9p: QEMU's 9p server (since the CVE-2023-2861 fix, in Debian's 7.2 too)
# refuses to create FIFOs and Unix sockets (ENXIO), fails fstat/ftruncate on open files that were unlinked
# (ENOENT), and makes flock and fcntl locks on one file block each other; virtiofs (QEMU's virtiofsd, a
# FUSE server) has none of these, and boots and runs about as fast (the emulated CPU is what is slow).
#
# In the VM: Debian's stock kernel booted with cgroup_no_v1=all, cgroup2 alone at /sys/fs/cgroup (cpuset, cpu,
# io, memory, pids, ... available), fresh proc/sysfs/devtmpfs/devpts, tmpfs on /tmp, /run and /dev/shm,
# loopback up, and a scratch ext4 file system on a real virtio-blk disk at /scratch (TMPDIR=/scratch/tmp,
# SYNERGY_VM_SCRATCH=/scratch) for page-cache and io.max tests. The command runs as root in the caller's
# working directory with PATH, HOME, CI, RUST_BACKTRACE, CARGO_TARGET_DIR, SYNERGY_PYTHON and the variables
# named in SYNERGY_VM_ENV (space-separated) passed through; the VM powers off as soon as it exits.
#
# usage:
#   scripts/cgroup2-vm.sh setup
#       Downloads Debian's qemu-system-x86 (with -common and -data), busybox-static and the kernel package
#       that linux-image-amd64 depends on, unpacks them, installs with apt-get only what is missing of
#       kmod, e2fsprogs and QEMU's shared libraries (xz-utils/zstd too for compressed modules), and builds
#       the initramfs. The QEMU and busybox packages are unpacked, not installed: installing them would
#       replace packages a machine may carry (qemu-system-common conflicts with a newer qemu-utils, as on
#       this project's machines; busybox-static with busybox). Idempotent: everything is kept in
#       ${SYNERGY_VM_CACHE:-/var/cache/synergy/vm} and reused (delete that folder to pick up newer
#       packages). Progress and errors go to stderr only.
#   scripts/cgroup2-vm.sh run [--systemd] [--mem MiB] [--cpus N] [--timeout S] [--disk MiB] -- CMD [ARGS...]
#       Runs setup when needed, boots the VM (2048 MiB, 2 vCPUs, 1024 MiB scratch disk, 600 s for boot and
#       command together by default) and runs CMD in it. CMD's stdout and stderr come, merged, on this
#       script's stdout as they are written; the exit status is CMD's (128+N if a signal killed it), or
#       124 when the time ran out, or 125 when the VM could not be set up, failed to boot or lost CMD's status
#       (a message on stderr says which, with the VM's console log). With --systemd the host's systemd is
#       PID 1 (started on units of the run's own, see write_systemd_units) and CMD runs in a service's
#       cgroup with the system bus up, as on a server; without, a busybox init runs CMD in the root cgroup.
#
# Host side effects: the packages installed above; the cache folder (a run's files live in a folder under
# it and are removed at exit); an empty folder /scratch in the host's root, the mount point of the VM's
# scratch disk. The VM's root is the host's: what CMD writes outside /tmp, /run, /dev and /scratch lands
# on this host.
set -euo pipefail

self="$(readlink -f "${BASH_SOURCE[0]}")"
cache="${SYNERGY_VM_CACHE:-/var/cache/synergy/vm}"
# The kernel modules the VM needs; their dependencies and pre-softdeps are added from modules.dep and
# modules.softdep, and those built into the kernel are skipped (modules.builtin).
wanted_modules=(virtio_pci virtiofs virtio_blk ext4 virtio_console)

say() { echo "cgroup2-vm: $*" >&2; }
die() { say "$*"; exit 125; }

# The cache path goes on the kernel command line and into QEMU options: keep it to characters that need no
# quoting there, and outside the folders that the VM replaces with its own file systems (it must see it).
check_cache_path() {
  mkdir -p "$cache"
  cache="$(readlink -f "$cache")"
  [[ $cache =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "SYNERGY_VM_CACHE='$cache': use an absolute path of [A-Za-z0-9._/+-]"
  case "$cache/" in
    /tmp/* | /run/* | /dev/* | /proc/* | /sys/* | /scratch/*) die "SYNERGY_VM_CACHE='$cache' is not visible in the VM" ;;
  esac
  tools="$cache/tools"
  qemu_bin="$tools/root/usr/bin/qemu-system-x86_64"
  virtiofsd_bin="$tools/root/usr/lib/qemu/virtiofsd"
  busybox_bin="$tools/root/bin/busybox"
}

# apt-get with its chatter kept in a log that is shown only when it fails.
apt_quiet() {
  local log
  log="$(mktemp)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "apt-get $* failed"
  fi
  rm -f "$log"
}

apt_updated=
ensure_packages() {
  local p missing=()
  for p in "$@"; do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  say "installing ${missing[*]}"
  [[ -n $apt_updated ]] || { apt_quiet update; apt_updated=1; }
  apt_quiet install -y --no-install-recommends "${missing[@]}"
}

# Downloads the packages $2... and unpacks them all into $1/root (a new folder, which the caller removes).
download_unpack() {
  local dir="$1" deb
  shift
  # APT::Sandbox::User=root: the download goes to a root-owned folder that the _apt user could not write.
  if ! (cd "$dir" && apt-get -qq -o APT::Sandbox::User=root download "$@" >/dev/null 2>&1); then
    # The lists may be missing or name versions the mirror no longer has.
    apt_quiet update
    apt_updated=1
    (cd "$dir" && apt-get -qq -o APT::Sandbox::User=root download "$@" >/dev/null) || die "cannot download $*"
  fi
  for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
}

# QEMU (virtiofsd is in qemu-system-common) and busybox unpacked into $cache/tools (see the header for
# why not installed). QEMU finds its firmware through -L and its loadable modules (the TCG accelerator is
# one) through QEMU_MODULE_DIR; the shared libraries they need are installed, as ordinary library
# packages that conflict with nothing: qemu-system-x86's, and libcap-ng0 for virtiofsd.
ensure_tools() {
  local build libs
  if [[ -f $tools/complete ]]; then
    # Libraries removed since (apt-get autoremove) come back.
    ldd "$qemu_bin" "$virtiofsd_bin" | grep -q 'not found' || return 0
    mapfile -t libs <"$tools/libs"
    ensure_packages "${libs[@]}"
    return 0
  fi
  say "fetching qemu-system-x86 and busybox-static"
  build="$(mktemp -d "$cache/build.XXXXXX")"
  cleanup_dirs+=("$build")
  [[ -n $apt_updated ]] || { apt_quiet update; apt_updated=1; }
  mapfile -t libs < <(apt-cache depends qemu-system-x86 | awk '$1 == "Depends:" && $2 ~ /^lib/ { print $2 }' | sort -u)
  ((${#libs[@]})) || die "cannot list qemu-system-x86's dependencies"
  libs+=(libcap-ng0)
  ensure_packages "${libs[@]}"
  download_unpack "$build" qemu-system-x86 qemu-system-common qemu-system-data busybox-static
  rm -rf "$tools"
  mv "$build" "$tools"
  rm -f "$tools"/*.deb
  printf '%s\n' "${libs[@]}" >"$tools/libs"
  ! ldd "$qemu_bin" "$virtiofsd_bin" | grep 'not found' >&2 || die "QEMU lacks the shared libraries above"
  "$busybox_bin" true || die "the unpacked busybox does not run"
  touch "$tools/complete"
}

# The real package behind the linux-image-amd64 meta-package, e.g. linux-image-6.1.0-57-amd64.
kernel_package() {
  local pkg
  pkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')"
  if [[ -z $pkg && -z $apt_updated ]]; then
    apt_quiet update
    apt_updated=1
    pkg="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')"
  fi
  [[ -n $pkg ]] || die "cannot tell which package linux-image-amd64 depends on"
  echo "$pkg"
}

# A module's name as modprobe compares them: the file name without .ko[.xz|.zst|.gz], '-' read as '_'.
modname() {
  local b="${1##*/}"
  b="${b%%.ko*}"
  echo "${b//-/_}"
}

# Prints, in load order, the paths (relative to the modules folder $1) of the modules named in $2... and of
# everything they need: each module comes after its hard dependencies (modules.dep) and after the modules
# providing its "softdep pre:" aliases (ext4 and jbd2 ask for crypto-crc32c, which their metadata checksums
# need at mount time: nothing in the VM could load it on demand, as the host's modprobe knows only the
# host's kernel). Built-in modules are left out.
resolve_modules() {
  local mdir="$1" line path name word
  shift
  local -a wanted=("$@") order=() fields pre
  local -A dep_line=() builtin=() soft=() seen=()
  while IFS= read -r line; do
    path="${line%%:*}"
    dep_line[$(modname "$path")]="$line"
  done <"$mdir/modules.dep"
  while IFS= read -r path; do builtin[$(modname "$path")]=1; done <"$mdir/modules.builtin"
  if [[ -f $mdir/modules.softdep ]]; then
    # "softdep MOD pre: A B post: C" gives MOD the pre-list "A B".
    while read -r -a fields; do
      [[ ${fields[0]:-} == softdep && -n ${fields[1]:-} ]] || continue
      pre=()
      local in_pre=
      for word in "${fields[@]:2}"; do
        case "$word" in pre:) in_pre=1 ;; post:) in_pre= ;; *) [[ -z $in_pre ]] || pre+=("$word") ;; esac
      done
      soft[$(modname "${fields[1]}")]="${pre[*]}"
    done <"$mdir/modules.softdep"
  fi
  visit() {
    local n
    n="$(modname "$1")"
    [[ -z ${seen[$n]:-} ]] || return 0
    seen[$n]=1
    [[ -z ${builtin[$n]:-} ]] || return 0
    if [[ -z ${dep_line[$n]:-} ]]; then
      # Not a module's file name: an alias (as softdeps use); every module providing it is visited.
      local m providers
      mapfile -t providers < <(awk -v a="$1" '$1 == "alias" && $2 == a { print $3 }' "$mdir/modules.alias")
      ((${#providers[@]})) || die "kernel module $1 not found"
      for m in "${providers[@]}"; do visit "$m"; done
      return 0
    fi
    local s d
    for s in ${soft[$n]:-}; do visit "$s"; done
    for d in ${dep_line[$n]#*:}; do visit "$d"; done
    order+=("${dep_line[$n]%%:*}")
  }
  for name in "${wanted[@]}"; do visit "$name"; done
  printf '%s\n' "${order[@]}"
}

# Unpacks the kernel package into $cache/kernel/VERSION/: vmlinuz, and the modules the VM loads, decompressed
# (busybox insmod reads only plain .ko files) and named NN-NAME.ko so that a glob gives the load order.
ensure_kernel() {
  local kver
  if [[ -s $cache/kernel/current ]]; then
    kver="$(<"$cache/kernel/current")"
    [[ ! -f $cache/kernel/$kver/complete ]] || return 0
  fi
  local pkg build mdir kdir i=0 rel modules
  pkg="$(kernel_package)"
  kver="${pkg#linux-image-}"
  kdir="$cache/kernel/$kver"
  say "fetching $pkg"
  build="$(mktemp -d "$cache/build.XXXXXX")"
  cleanup_dirs+=("$build")
  download_unpack "$build" "$pkg"
  # Newer packages ship /usr/lib/modules; depmod -b on this host looks under BASE/lib/modules.
  [[ -d $build/root/lib/modules ]] || ln -s usr/lib "$build/root/lib"
  mdir="$build/root/lib/modules/$kver"
  [[ -f $build/root/boot/vmlinuz-$kver && -d $mdir ]] || die "$pkg has no vmlinuz-$kver or modules"
  # Debian's postinst runs depmod; an unpacked package has no modules.dep yet.
  [[ -f $mdir/modules.dep ]] || depmod -b "$build/root" "$kver"
  modules="$(resolve_modules "$mdir" "${wanted_modules[@]}")"
  rm -rf "$kdir"
  mkdir -p "$kdir/modules"
  while IFS= read -r rel; do
    local out
    out="$kdir/modules/$(printf '%02d' "$i")-$(modname "$rel").ko"
    i=$((i + 1))
    case "$rel" in
      *.ko) cp "$mdir/$rel" "$out" ;;
      *.ko.xz) ensure_packages xz-utils && xz -dc "$mdir/$rel" >"$out" ;;
      *.ko.zst) ensure_packages zstd && zstd -qdc "$mdir/$rel" >"$out" ;;
      *.ko.gz) gzip -dc "$mdir/$rel" >"$out" ;;
      *) die "unknown module format: $rel" ;;
    esac
  done <<<"$modules"
  cp "$build/root/boot/vmlinuz-$kver" "$kdir/vmlinuz"
  echo "$pkg $(dpkg-deb -f "$build"/*.deb Version)" >"$kdir/package"
  touch "$kdir/complete"
  echo "$kver" >"$cache/kernel/current.new"
  mv "$cache/kernel/current.new" "$cache/kernel/current"
  rm -rf "$build"
}

# PID 1 of the VM, a busybox script. It reports problems on the console (ttyS0, kept in the run's
# console.log) and powers off; the host then finds no status file and says the VM failed.
init_script() {
  cat <<'EOF'
#!/bin/sh
# PID 1 of the cgroup2 test VM; generated by scripts/cgroup2-vm.sh, which documents it.
export PATH=/bin
R=/newroot
log() { echo "cgroup2-vm init: $*" >/dev/console; }
fail() { log "$*"; sync; poweroff -f; sleep 60; }

mount -t proc -o nosuid,nodev,noexec proc /proc || fail "cannot mount /proc"
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys || fail "cannot mount /sys"
mount -t devtmpfs -o nosuid devtmpfs /dev || fail "cannot mount /dev"
# In dependency order (the names are numbered); a module that cannot load (crc32c_intel without SSE4.2)
# is only reported: what needs it fails below, with its own message.
for m in /lib/modules/*.ko; do
  insmod "$m" 2>/dev/console || log "insmod ${m##*/} failed"
done

run= systemd=
# shellcheck disable=SC2013 # /proc/cmdline is one line of words
for w in $(cat /proc/cmdline); do
  case "$w" in
    synergy_vm_run=*) run="${w#*=}" ;;
    synergy_vm_systemd=1) systemd=1 ;;
  esac
done
[ -n "$run" ] || fail "no synergy_vm_run= on the kernel command line"

# The host's root (virtiofsd on the host serves it).
mount -t virtiofs hostroot $R || fail "cannot mount the host's root (virtiofs)"
mount -t proc -o nosuid,nodev,noexec proc $R/proc || fail "cannot mount proc"
mount -t sysfs -o nosuid,nodev,noexec sysfs $R/sys || fail "cannot mount sysfs"
# cgroup2 alone, with the options systemd mounts it with on a v2-only host.
mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 $R/sys/fs/cgroup ||
  fail "cannot mount cgroup2"
mount -t devtmpfs -o nosuid devtmpfs $R/dev || fail "cannot mount devtmpfs"
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o nosuid,noexec,gid=5,mode=620,ptmxmode=000 devpts $R/dev/pts || fail "cannot mount devpts"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs $R/dev/shm || fail "cannot mount /dev/shm"
# What udev would add: bash's process substitution and many scripts use /dev/fd and /dev/std*.
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs $R/tmp || fail "cannot mount /tmp"
mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs $R/run || fail "cannot mount /run"

# The scratch disk, formatted by the host (inode tables and journal written there, so no lazy-init
# writes in the VM show in io.stat).
i=0
while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
mkdir -p $R/scratch
mount -t ext4 /dev/vda $R/scratch || fail "cannot mount the scratch disk"
mkdir -p $R/scratch/tmp && chmod 1777 $R/scratch/tmp

[ -s $R/etc/hostname ] && hostname -F $R/etc/hostname
ip link set lo up

# CMD's output channel: the virtio serial port named synergy.out, not a tty (no CR added, no kernel
# message mixed in) and some 50 times as fast as an emulated UART. Without udev, found through sysfs.
out=
for p in /sys/class/virtio-ports/*; do
  if [ "$(cat "$p/name" 2>/dev/null)" = synergy.out ]; then out="/dev/${p##*/}"; fi
done
if [ -z "$out" ] || [ ! -c "$out" ]; then fail "no virtio serial port synergy.out"; fi
if [ -n "$systemd" ]; then
  # The host's systemd as PID 1, told to start only the run's own target: its units go in the VM's
  # /run, which outranks /etc and /lib, and nothing of the host's boot is pulled in.
  mkdir -p $R/run/systemd/system
  cp $R$run/units/* $R/run/systemd/system/ || fail "cannot install the run's systemd units"
  echo "$out" >$R/run/synergy-vm-out
  exec switch_root $R /lib/systemd/systemd --unit=synergy-vm.target
fi
# In the background and waited for: a foreground command killed by a signal would have this shell
# print "Killed" into CMD's output.
env -i /bin/chroot $R /bin/sh "$run/cmd.sh" </dev/null >"$out" 2>&1 &
wait $!
echo $? >"$R$run/rc"
sync
poweroff -f
EOF
}

# The initramfs: static busybox with its applet links, the modules, /init. Rebuilt only when one of them
# changed (the stamp hashes all three).
ensure_initramfs() {
  local kver kdir stamp build a
  kver="$(<"$cache/kernel/current")"
  kdir="$cache/kernel/$kver"
  stamp="$({
    init_script
    echo "$kver"
    ls -l "$kdir/modules"
    sha256sum "$busybox_bin"
  } | sha256sum | cut -d' ' -f1)"
  if [[ -f $cache/initramfs.cpio.gz && $(cat "$cache/initramfs.stamp" 2>/dev/null) == "$stamp" ]]; then
    return 0
  fi
  say "building the initramfs"
  build="$(mktemp -d "$cache/build.XXXXXX")"
  cleanup_dirs+=("$build")
  mkdir -p "$build"/root/{bin,dev,proc,sys,newroot,lib/modules}
  cp "$busybox_bin" "$build/root/bin/busybox"
  for a in $("$busybox_bin" --list); do
    [[ $a == busybox ]] || ln -s busybox "$build/root/bin/$a"
  done
  # The kernel opens /dev/console for PID 1's output before anything is mounted.
  mknod -m 600 "$build/root/dev/console" c 5 1
  cp "$kdir"/modules/*.ko "$build/root/lib/modules/"
  init_script >"$build/root/init"
  chmod 755 "$build/root/init"
  (cd "$build/root" && find . | "$busybox_bin" cpio -o -H newc -R 0:0 2>/dev/null | gzip -6) >"$build/initramfs.cpio.gz"
  mv "$build/initramfs.cpio.gz" "$cache/initramfs.cpio.gz"
  echo "$stamp" >"$cache/initramfs.stamp"
  rm -rf "$build"
}

cleanup_dirs=()
cmd_setup() {
  [[ $(id -u) == 0 ]] || die "needs root (apt-get, and virtiofsd's export of / as it is)"
  check_cache_path
  trap 'rm -rf "${cleanup_dirs[@]}"' EXIT
  # One setup at a time; the runs that wait for it then find everything built.
  exec 9>"$cache/.lock"
  flock 9
  # kmod: depmod, as the kernel package carries no modules.dep; e2fsprogs: mkfs.ext4 for the scratch disk;
  # systemd and dbus: PID 1 and the system bus of `run --systemd` (from the host's root, which the VM uses).
  ensure_packages kmod e2fsprogs systemd dbus
  mkdir -p "$cache/kernel" "$cache/runs"
  ensure_tools
  ensure_kernel
  ensure_initramfs
  # The scratch disk's mount point: the VM's root is this host's root.
  mkdir -p /scratch
}

# '...' quoting that any POSIX shell reads back as the same string.
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# True when the variable $1 is in this script's environment (not merely a shell variable).
exported() {
  local d
  d="$(declare -p "$1" 2>/dev/null)" || return 1
  d="${d#declare -}"
  [[ ${d%% *} == *x* ]]
}

# The script the VM runs (with the host's /bin/sh, inside the host's root): the environment, the working
# directory, then CMD through exec, so its status is the VM's.
write_cmd_script() {
  local name arg
  echo "# generated by cgroup2-vm.sh"
  for name in PATH HOME CI RUST_BACKTRACE CARGO_TARGET_DIR SYNERGY_PYTHON ${SYNERGY_VM_ENV:-}; do
    [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "SYNERGY_VM_ENV: '$name' is not a variable name"
    if exported "$name"; then printf 'export %s=%s\n' "$name" "$(shq "${!name}")"; fi
  done
  exported HOME || echo "export HOME=/root"
  exported PATH || echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  echo "export TMPDIR=/scratch/tmp SYNERGY_VM_SCRATCH=/scratch"
  printf 'cd %s || { echo "cgroup2-vm: the working directory %s is not visible in the VM" >&2; exit 125; }\n' \
    "$(shq "$PWD")" "$(shq "$PWD")"
  printf 'exec'
  for arg; do printf ' %s' "$(shq "$arg")"; done
  printf '\n'
}

run_dir='' qemu_pid='' tail_pid='' fsd_pid=''
# Stops what is left of the run, each by its own process id, and removes the run's folder.
stop() {
  [[ -n $1 ]] || return 0
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
run_cleanup() {
  stop "$qemu_pid" # timeout(1), which passes TERM on to QEMU and waits for it
  stop "$fsd_pid"
  stop "$tail_pid"
  if [[ -n $run_dir ]]; then
    rm -rf "$run_dir"
    # virtiofsd's pid file for the run's socket, which it leaves in the host's /run.
    rm -f "/run/virtiofsd/${run_dir//\//.}.virtiofs.sock.pid"
  fi
}

# The units a --systemd run installs in the VM's /run/systemd/system, which outranks the host's /etc and
# /lib: a target of its own, the service that runs CMD, and the system bus (the host's dbus units, but
# without default dependencies). None pulls in sysinit.target, so nothing of the host's boot (tmpfiles,
# utmp, sysusers, random-seed, ...) runs against the host's root it shares. (Starting a bus by hand and
# signalling PID 1 to connect would not do: systemd answers SIGUSR1 by starting the host's dbus.service,
# sysinit.target and all.) CMD runs in the service's cgroup, /system.slice/synergy-vm.service, shared with
# the service's shell as a login shell's is.
write_systemd_units() {
  local dir="$1"
  mkdir -p "$dir"
  cat >"$dir/synergy-vm.target" <<EOF
[Unit]
Description=synergy cgroup2 VM run
DefaultDependencies=no
Requires=synergy-vm.service
After=synergy-vm.service
EOF
  cat >"$dir/dbus.socket" <<EOF
[Unit]
Description=D-Bus System Message Bus Socket (synergy VM)
DefaultDependencies=no

[Socket]
ListenStream=/run/dbus/system_bus_socket
EOF
  cat >"$dir/dbus.service" <<EOF
[Unit]
Description=D-Bus System Message Bus (synergy VM)
DefaultDependencies=no
Requires=dbus.socket
After=dbus.socket

[Service]
Type=notify
NotifyAccess=main
ExecStart=/usr/bin/dbus-daemon --system --address=systemd: --nofork --nopidfile --systemd-activation --syslog-only
EOF
  # An unprivileged user's manager (started with systemctl start user@UID.service), delegated the
  # controllers the host's user@.service delegates, without PAM or logind (neither runs here).
  cat >"$dir/user-runtime-dir@.service" <<EOF
[Unit]
Description=User Runtime Directory /run/user/%i (synergy VM)
DefaultDependencies=no
After=dbus.service
StopWhenUnneeded=yes

[Service]
ExecStart=/lib/systemd/systemd-user-runtime-dir start %i
ExecStop=/lib/systemd/systemd-user-runtime-dir stop %i
Type=oneshot
RemainAfterExit=yes
Slice=user-%i.slice
EOF
  cat >"$dir/user@.service" <<EOF
[Unit]
Description=User Manager for UID %i (synergy VM)
DefaultDependencies=no
After=user-runtime-dir@%i.service dbus.service
Requires=user-runtime-dir@%i.service

[Service]
User=%i
Type=notify
Environment=XDG_RUNTIME_DIR=/run/user/%i
ExecStart=/lib/systemd/systemd --user
Slice=user-%i.slice
KillMode=mixed
$(grep -h '^Delegate=' /lib/systemd/system/user@.service 2>/dev/null || echo 'Delegate=pids memory cpu')
TasksMax=infinity
EOF
  cat >"$dir/synergy-vm.service" <<EOF
[Unit]
Description=synergy cgroup2 VM command
DefaultDependencies=no
Requires=dbus.service
After=dbus.service

[Service]
Type=simple
StandardInput=null
ExecStart=/bin/sh $run_dir/in-systemd.sh
EOF
  cat >"$run_dir/in-systemd.sh" <<'EOF'
# generated by cgroup2-vm.sh: the --systemd run's service (see write_systemd_units)
out="$(cat /run/synergy-vm-out)"
run="$(dirname "$0")"
done_() { echo "$1" >"$run/rc"; sync; systemctl --force --force poweroff; sleep 60; }
i=0
until busctl --system status org.freedesktop.systemd1 >/dev/null 2>&1; do
  i=$((i + 1))
  [ $i -lt 300 ] || { echo "cgroup2-vm: systemd is not on the system bus" >"$out"; done_ 125; }
  sleep 0.1
done
/bin/sh "$run/cmd.sh" </dev/null >"$out" 2>&1
done_ $?
EOF
}

cmd_run() {
  local mem=2048 cpus=2 timeout=600 disk=1024 systemd=
  while (($#)); do
    case "$1" in
      --systemd) systemd=1; shift ;;
      --mem) mem="${2:?--mem needs MiB}"; shift 2 ;;
      --cpus) cpus="${2:?--cpus needs a count}"; shift 2 ;;
      --timeout) timeout="${2:?--timeout needs seconds}"; shift 2 ;;
      --disk) disk="${2:?--disk needs MiB}"; shift 2 ;;
      --) shift; break ;;
      -*) die "run: unknown option $1" ;;
      *) break ;;
    esac
  done
  (($#)) || die "usage: $0 run [--systemd] [--mem MiB] [--cpus N] [--timeout S] [--disk MiB] -- CMD [ARGS...]"
  local v
  for v in "$mem" "$cpus" "$timeout" "$disk"; do [[ $v =~ ^[1-9][0-9]*$ ]] || die "run: '$v' is not a positive integer"; done

  # These are the VM's own there: a command started in them would find other files.
  case "$PWD/" in
    /tmp/* | /run/* | /dev/* | /proc/* | /sys/* | /scratch/*)
      die "run: the working directory $PWD is not shared with the VM (its /tmp, /run, /dev, /proc, /sys and /scratch are its own)" ;;
  esac

  "$self" setup >&2 || die "setup failed"
  check_cache_path
  # Folders of runs whose script was killed outright (SIGKILL leaves no time to clean up).
  local d
  for d in "$cache"/runs/run.*; do
    [[ -f $d/pid ]] && ! kill -0 "$(<"$d/pid")" 2>/dev/null && rm -rf "$d"
  done
  local kver
  kver="$(<"$cache/kernel/current")"

  trap run_cleanup EXIT
  trap 'say "interrupted"; exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  run_dir="$(mktemp -d "$cache/runs/run.XXXXXX")"
  echo $$ >"$run_dir/pid"
  write_cmd_script "$@" >"$run_dir/cmd.sh"
  [[ -z $systemd ]] || write_systemd_units "$run_dir/units"
  # A fresh file system per run: sparse image, so only what is written takes room.
  truncate -s "${disk}M" "$run_dir/scratch.img"
  mkfs.ext4 -q -F -L scratch -E lazy_itable_init=0,lazy_journal_init=0 "$run_dir/scratch.img"
  : >"$run_dir/out.log"

  # virtiofsd serves / from the host as it is (sandbox=chroot: its default, a mount namespace that
  # pivot_roots into the shared folder, cannot pivot into /). cache=auto: metadata kept a second at
  # most, file data dropped when the host changed the file, so a build going on meanwhile is seen.
  # announce_submounts: each host file system under / is a mount of its own in the VM, with its own
  # device number, so inode numbers from two of them never look like one file. virtiofsd leaves by
  # itself when QEMU closes the socket; setpriv --pdeathsig as below.
  setpriv --pdeathsig TERM "$virtiofsd_bin" --socket-path="$run_dir/virtiofs.sock" \
    -o source=/ -o sandbox=chroot -o cache=auto -o announce_submounts -o log_level=err \
    </dev/null >"$run_dir/virtiofsd.log" 2>&1 &
  fsd_pid=$!
  local i
  for ((i = 0; i < 100; i++)); do
    [[ ! -S $run_dir/virtiofs.sock ]] || break
    kill -0 "$fsd_pid" 2>/dev/null || break
    sleep 0.05
  done
  [[ -S $run_dir/virtiofs.sock ]] || { cat "$run_dir/virtiofsd.log" >&2; die "virtiofsd did not start"; }

  # -nodefaults: no VGA, network card or monitor; ttyS0 is the kernel's console (kept for errors), a
  # virtio serial port carries CMD's output alone, so no kernel message can mix into it. qboot is a much
  # quicker firmware than SeaBIOS for a direct kernel boot. mitigations=off: KPTI's page-table switches
  # cost a lot under TCG and a throwaway VM needs none of them. cache=unsafe for the scratch image: it is
  # thrown away. virtiofs needs the guest's memory shared with virtiofsd: a memfd backend.
  # setpriv --pdeathsig: should this script be killed outright, timeout(1) gets TERM and stops QEMU.
  QEMU_MODULE_DIR="$tools/root/usr/lib/x86_64-linux-gnu/qemu" \
    setpriv --pdeathsig TERM timeout --kill-after=10 "$timeout" \
    "$qemu_bin" -nodefaults -no-user-config -display none -no-reboot \
    -machine pc,memory-backend=mem -object "memory-backend-memfd,id=mem,size=${mem}M,share=on" \
    -accel tcg,thread=multi -cpu max -smp "$cpus" -m "$mem" \
    -L "$tools/root/usr/share/qemu" -bios qboot.rom \
    -kernel "$cache/kernel/$kver/vmlinuz" -initrd "$cache/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 mitigations=off systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all synergy_vm_run=$run_dir${systemd:+ synergy_vm_systemd=1}" \
    -serial "file:$run_dir/console.log" \
    -device virtio-serial-pci,id=vser -chardev "file,id=out,path=$run_dir/out.log" \
    -device virtserialport,bus=vser.0,chardev=out,name=synergy.out \
    -chardev "socket,id=fs,path=$run_dir/virtiofs.sock" -device vhost-user-fs-pci,chardev=fs,tag=hostroot \
    -drive "file=$run_dir/scratch.img,format=raw,if=virtio,cache=unsafe,discard=unmap" \
    </dev/null >"$run_dir/qemu.log" 2>&1 &
  qemu_pid=$!
  # Streams CMD's output as it comes; ends shortly after QEMU does (once this script has reaped it).
  tail -n +1 -f -s 0.1 --pid="$qemu_pid" "$run_dir/out.log" &
  tail_pid=$!

  local qrc=0
  wait "$qemu_pid" || qrc=$?
  qemu_pid=
  wait "$tail_pid" || true
  tail_pid=
  stop "$fsd_pid"
  fsd_pid=

  if ((qrc == 124)); then
    say "timed out after ${timeout}s (boot and command together); the end of the VM's console:"
    tail -n 20 "$run_dir/console.log" >&2 || true
    exit 124
  fi
  if [[ -s $run_dir/rc ]]; then
    exit "$(<"$run_dir/rc")"
  fi
  say "the VM stopped without the command's exit status (QEMU exited with $qrc); QEMU and virtiofsd said:"
  tail -n 20 "$run_dir/qemu.log" "$run_dir/virtiofsd.log" >&2 || true
  if [[ -s $run_dir/console.log ]]; then
    say "the end of the VM's console:"
    tail -n 30 "$run_dir/console.log" >&2
  else
    say "nothing on the VM's console: the kernel did not get to start (too little --mem?)"
  fi
  exit 125
}

case "${1:-}" in
  setup) shift; (($# == 0)) || die "usage: $0 setup"; cmd_setup ;;
  run) shift; cmd_run "$@" ;;
  *) die "usage: $0 setup | $0 run [--systemd] [--mem MiB] [--cpus N] [--timeout S] [--disk MiB] -- CMD [ARGS...]" ;;
esac
