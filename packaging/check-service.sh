#!/usr/bin/env bash
# packaging/check-service.sh: starts the installed netchar.service under a real systemd and
# tests it (packaging/service-probe.sh), on a machine whose PID 1 is not systemd (a CI VM,
# a container). Needs root, the netchar package installed, systemd-container (nspawn) and
# overlayfs. Exit 0 only if the probe passed.
#
# How: the host's own root file system, read-only under a throwaway overlay (its upper
# layer on a tmpfs), is booted with systemd-nspawn in a network namespace of its own, into
# netchar-check.target: the base system, then netchar-check.service, which runs the probe
# and ends the container with the probe's exit status. Nothing on the host changes.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -f /lib/systemd/system/netchar.service ] || { echo "check-service.sh: the netchar package is not installed" >&2; exit 2; }
command -v systemd-nspawn >/dev/null || { echo "check-service.sh: no systemd-nspawn (apt-get install systemd-container)" >&2; exit 2; }

work=$(mktemp -d -t netchar-service.XXXXXX)
cleanup() {
    umount "$work/root" 2>/dev/null || true
    umount "$work/layers" 2>/dev/null || true
    rmdir "$work/root" "$work/layers" "$work" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$work/layers" "$work/root"
mount -t tmpfs -o mode=0755,size=512m netchar-check "$work/layers"
mkdir -p "$work/layers/upper" "$work/layers/work"
mount -t overlay netchar-check -o "lowerdir=/,upperdir=$work/layers/upper,workdir=$work/layers/work" "$work/root"

# A machine id of its own (nspawn refuses the host's), and the units that run the probe.
systemd-id128 new >"$work/root/etc/machine-id"
cat >"$work/root/etc/systemd/system/netchar-check.target" <<'EOF'
[Unit]
Description=netchar package check
Requires=basic.target netchar-check.service
After=basic.target netchar-check.service
AllowIsolate=yes
EOF
cat >"$work/root/etc/systemd/system/netchar-check.service" <<'EOF'
[Unit]
Description=netchar package check: start, test and stop netchar.service
After=basic.target
SuccessAction=exit
FailureAction=exit

[Service]
Type=oneshot
ExecStart=/srv/netchar-packaging/service-probe.sh
StandardOutput=journal+console
StandardError=journal+console
EOF

# Ends by itself: the probe's own waits are bounded, and so is the whole boot.
rc=0
timeout --kill-after=10 180 systemd-nspawn --quiet --directory="$work/root" --register=no --keep-unit \
    --link-journal=no --private-network --bind-ro="$PWD/packaging:/srv/netchar-packaging" \
    --boot -- systemd.unit=netchar-check.target systemd.show_status=false </dev/null || rc=$?
echo "check-service.sh: the container ended with status $rc"
exit "$rc"
