#!/bin/sh
# Runs inside the container that packaging/check-service.sh boots (systemd as its PID 1, the
# installed netchar package, a network namespace of its own): netchar.service must come up
# under its sandbox, answer a test, show the sandbox in force, and stop cleanly on SIGTERM.
set -u
fail() { echo "service-probe: FAIL: $*"; journalctl -u netchar.service --no-pager -o cat; exit 1; }

systemctl start netchar.service || fail "systemctl start netchar.service"
i=0
until ss -Hltn 'sport = :5300' | grep -q .; do
    i=$((i + 1))
    [ "$i" -le 50 ] || fail "nothing listens on TCP port 5300 after 5 s"
    sleep 0.1
done
systemctl is-active --quiet netchar.service || fail "netchar.service is not active"

# The running process: not root, no capabilities, no new privileges.
pid=$(systemctl show -P MainPID netchar.service)
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
capeff=$(awk '/^CapEff:/ { print $2 }' "/proc/$pid/status")
nnp=$(awk '/^NoNewPrivs:/ { print $2 }' "/proc/$pid/status")
echo "service-probe: netchar server pid $pid uid $uid CapEff $capeff NoNewPrivs $nnp"
[ "$uid" != 0 ] || fail "the server runs as root"
[ "$capeff" = 0000000000000000 ] || fail "the server holds capabilities $capeff"
[ "$nnp" = 1 ] || fail "NoNewPrivs is not set"

# A test in each family the sandbox allows, against the packaged configuration.
netchar tcp 127.0.0.1 -t 1 || fail "netchar tcp 127.0.0.1 -t 1"
netchar udp ::1 -t 1 -b 10M || fail "netchar udp ::1 -t 1 -b 10M"
netchar rr 127.0.0.1 -t 1 || fail "netchar rr 127.0.0.1 -t 1"

systemd-analyze security --no-pager netchar.service | tail -n 1

# SIGTERM: the server says it stopped and exits 0, so systemd records a success.
systemctl stop netchar.service
result=$(systemctl show -P Result netchar.service)
status=$(systemctl show -P ExecMainStatus netchar.service)
journalctl -u netchar.service --no-pager -o cat
[ "$result" = success ] && [ "$status" = 0 ] || fail "stopped with Result=$result ExecMainStatus=$status"
journalctl -u netchar.service --no-pager -o cat | grep -q '^netchar server stopped$' ||
    fail "no 'netchar server stopped' line in the journal"
echo "service-probe: OK"
