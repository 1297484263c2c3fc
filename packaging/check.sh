#!/usr/bin/env bash
# packaging/check.sh: builds what docs/install.md offers and proves that each one runs.
#   1. the static binary (build-static.sh): no interpreter, no library; `netchar -t 1` runs
#   2. ARM boards: the C responder cross-built with Debian's gcc for arm64 and armhf, run
#      under qemu-user and measured by netchar; with NETCHAR_PACKAGING_CROSS=1 also netchar
#      itself for aarch64 and armv7 (needs their Rust standard library), run the same way,
#      and its arm64 and armhf packages through lintian
#   3. the Debian package (build-deb.sh): lintian, install, the unit checked and run under
#      systemd (check-service.sh), the packaged server by hand as an unprivileged user,
#      remove and purge
#   4. the OCI image (build-image.sh): its layer holds the binary; podman runs it as a
#      server and as a client, without capabilities
# Each artifact's size is compared with the one docs/install.md gives (check_size).
# Runs as root (dpkg, overlay mounts, podman); .ci/run installs the tools. A step whose tool is
# missing is skipped with a line saying so, and fails instead under NETCHAR_REQUIRE_ALL=1.
# Ports: 15390-15393 on loopback; the packaged server's 5300 only in network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "== packaging: $* (at ${SECONDS} s)"; }
fail() { echo "packaging/check.sh: FAIL: $*" >&2; exit 1; }
# have TOOL PACKAGE WHAT: true if TOOL is there; else skip WHAT, or fail under NETCHAR_REQUIRE_ALL=1.
have() {
    command -v "$1" >/dev/null && return 0
    if [ "${NETCHAR_REQUIRE_ALL:-0}" = 1 ]; then
        fail "$3 needs $1 (apt-get install $2), and NETCHAR_REQUIRE_ALL=1"
    fi
    echo "packaging/check.sh: SKIP $3: no $1 (apt-get install $2)"
    return 1
}
[ "$(id -u)" = 0 ] || fail "run as root (dpkg -i, overlay mounts, podman)"

work=$(mktemp -d -t netchar-packaging.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    podman rm -f netchar-check-server >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# wait_for FILE TEXT: until FILE has a line starting with TEXT (at most 10 s).
wait_for() {
    for _ in $(seq 100); do
        grep -q "^$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$1" >&2 || true
    fail "no line '$2' in $1 after 10 s"
}

# The dist profile as Cargo.toml has it (the shipped build), or CI's binary, the test build's
# linked static (FROM_TEST_BUILD=1, build-static.sh): docs/install.md gives the sizes of both,
# the second as "WHAT of CI's build N MB".
case "${FROM_TEST_BUILD:-0}" in
    1) build=" of CI's build" ;;
    *) build="" ;;
esac

# check_size WHAT BYTES: docs/install.md gives WHAT's size (of this build) as "WHAT N MB" (10^6
# bytes); it must be within 10% of BYTES, the size just built, so that the page follows the
# binary's growth.
check_size() {
    set -- "$1$build" "$2"
    local documented
    documented=$(tr '\n' ' ' <docs/install.md | grep -o "$1 [0-9.]* MB" | head -n 1 | sed 's/.* \([0-9.]*\) MB/\1/')
    [ -n "$documented" ] || fail "docs/install.md gives no size for the $1 (\"$1 N MB\")"
    local measured
    measured=$(awk -v b="$2" 'BEGIN { printf "%.1f", b / 1e6 }')
    awk -v d="$documented" -v b="$2" 'BEGIN { exit !(b >= d * 1e6 * 0.9 && b <= d * 1e6 * 1.1) }' ||
        fail "docs/install.md gives the $1 as $documented MB, it is $measured MB ($2 bytes): write $measured there"
    echo "size of the $1: $2 bytes ($measured MB; docs/install.md: $documented MB)"
}

# ---- 1. The static binary
step "static binary (build-static.sh)"
bin=$(packaging/build-static.sh | tail -n 1)
[ -x "$bin" ] || fail "build-static.sh made no binary"
# glibc's ldd says "statically linked" for a static PIE, "not a dynamic executable" otherwise.
ldd_out=$(ldd "$bin" 2>&1 || true)
echo "ldd $bin: $ldd_out"
case $ldd_out in
    *"statically linked"* | *"not a dynamic executable"*) ;;
    *) fail "ldd lists libraries for $bin" ;;
esac
check_size "static binary" "$(stat -c %s "$bin")"
# README's first command, 1 s per test: every test must run.
"$bin" -t 1 | tee "$work/quick.txt"
for t in "tcp up" "tcp down" "tcp bidir" "udp 1G" "udp max" "tcp rr" "udp rr"; do
    grep -q "^$t " "$work/quick.txt" || fail "netchar -t 1 printed no '$t' row"
done

# ---- 2. ARM boards
step "ARM Linux boards: the responder for arm64 and armhf under qemu-user"
# measure_responder QEMU BINARY: the netchar client's tcp, udp and rr against it.
measure_responder() {
    "$1" "$2" --port 15390 >"$work/responder.log" 2>&1 &
    pids+=($!)
    wait_for "$work/responder.log" "netchar-responder .* listening"
    "$bin" tcp 127.0.0.1:15390 -t 1 || fail "netchar tcp against $2"
    "$bin" udp 127.0.0.1:15390 -t 1 -b 10M || fail "netchar udp against $2"
    "$bin" rr 127.0.0.1:15390 -t 1 || fail "netchar rr against $2"
    kill "${pids[-1]}"
    wait "${pids[-1]}" 2>/dev/null || true
}
for board in "aarch64-linux-gnu qemu-aarch64-static" "arm-linux-gnueabihf qemu-arm-static"; do
    set -- $board
    if have "$1-gcc" "gcc-$1" "the $1 responder" && have "$2" qemu-user-static "running $1 binaries"; then
        make -s -C responder CC="$1-gcc" BUILD="build/$1" CFLAGS="-O2 -static" >/dev/null
        readelf -hW "responder/build/$1/netchar-responder" | grep -E '^ *(Class|Machine):'
        measure_responder "$2" "responder/build/$1/netchar-responder"
    fi
done
if [ "${NETCHAR_PACKAGING_CROSS:-0}" = 1 ]; then
    step "netchar for aarch64 and armv7 (NETCHAR_PACKAGING_CROSS=1)"
    # Release builds for the targets (the test build is the host's): sizes without a suffix.
    [ "${FROM_TEST_BUILD:-0}" != 1 ] || fail "NETCHAR_PACKAGING_CROSS=1 builds the ARM binaries as a release does: run it without FROM_TEST_BUILD=1"
    for cross in "aarch64-unknown-linux-gnu qemu-aarch64-static" "armv7-unknown-linux-gnueabihf qemu-arm-static"; do
        set -- $cross
        cross_bin=$(packaging/build-static.sh "$1" | tail -n 1)
        check_size "${1%%-*} binary" "$(stat -c %s "$cross_bin")"
        "$2" "$cross_bin" -t 1 || fail "$2 $cross_bin -t 1"
        # Its package, the man pages written by the host's binary.
        cross_deb=$(GEN_BIN=$bin packaging/build-deb.sh "$cross_bin" | tail -n 1)
        dpkg-deb --field "$cross_deb" Package Version Architecture
        if have lintian lintian "lintian"; then
            lintian --pedantic --fail-on error,warning,pedantic "$cross_deb" || fail "lintian $cross_deb"
        fi
    done
fi

# ---- 3. The Debian package
if have dpkg-deb dpkg "the Debian package"; then
    step "Debian package (build-deb.sh)"
    deb=$(packaging/build-deb.sh "$bin" | tail -n 1)
    dpkg-deb --info "$deb"
    dpkg-deb --contents "$deb"
    check_size "Debian package" "$(stat -c %s "$deb")"
    if have lintian lintian "lintian"; then
        lintian --pedantic --fail-on error,warning,pedantic --info "$deb" || fail "lintian $deb"
        echo "lintian: no error, warning or pedantic tag"
    fi

    step "dpkg -i"
    dpkg -i "$deb" || fail "dpkg -i $deb"
    for f in /usr/bin/netchar /etc/netchar/server.toml /lib/systemd/system/netchar.service \
        /usr/share/man/man1/netchar.1.gz /usr/share/man/man1/netchar-server.1.gz \
        /usr/share/bash-completion/completions/netchar /usr/share/zsh/vendor-completions/_netchar \
        /usr/share/fish/vendor_completions.d/netchar.fish /usr/share/doc/netchar/copyright; do
        [ -e "$f" ] || fail "the package installed no $f"
    done
    dpkg-query -W -f='${Conffiles}\n' netchar | grep -q '^ /etc/netchar/server.toml ' ||
        fail "/etc/netchar/server.toml is not a conffile"
    /usr/bin/netchar --version

    # Every key the configuration documents, uncommented, must be one the server takes (each
    # listener on its documented port, in a network namespace of its own).
    sed 's/^# \([a-z][a-z0-9-]* = \)/\1/' /etc/netchar/server.toml >"$work/every-key.toml"
    printf 'ci:%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$work/keys"
    unshare --net sh -c "ip link set lo up && exec timeout -s TERM 3 /usr/bin/netchar server \
        --config $work/every-key.toml --psk-file $work/keys" >"$work/every-key.log" 2>&1 || true
    cat "$work/every-key.log"
    grep -q '^tests only for the 1 user(s)' "$work/every-key.log" ||
        fail "the server did not start with every key of server.toml uncommented"

    if have systemd-analyze systemd "the unit's checks"; then
        step "systemd-analyze verify and security"
        systemd-analyze verify /lib/systemd/system/netchar.service || fail "systemd-analyze verify"
        systemd-analyze security --no-pager --offline=yes /lib/systemd/system/netchar.service | tail -n 1 |
            tee "$work/exposure.txt"
        grep -Eq ' (OK|SAFE) ' "$work/exposure.txt" || fail "exposure worse than OK"
    fi

    step "the packaged server by hand: the packaged config, an unprivileged user, no capabilities"
    # In a network namespace of its own, so that its port 5300 meets no other server.
    unshare --net bash -euc '
        ip link set lo up
        setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
            --no-new-privs /usr/bin/netchar server --config /etc/netchar/server.toml 2>"$1" &
        server=$!
        for _ in $(seq 100); do grep -q "^no authentication" "$1" && break; sleep 0.1; done
        ss -Hltn "sport = :5300" | grep -q . || { echo "nothing listens on 5300"; cat "$1"; exit 1; }
        ss -Hlun "sport = :5300" | grep -q . || { echo "no UDP socket on 5300"; cat "$1"; exit 1; }
        /usr/bin/netchar tcp 127.0.0.1 -t 1
        /usr/bin/netchar udp ::1 -t 1 -b 10M
        kill -TERM "$server"
        wait "$server"
        cat "$1"
    ' bash "$work/by-hand.log" || fail "the packaged server, run by hand"

    if have systemd-nspawn systemd-container "netchar.service under systemd"; then
        step "netchar.service under systemd (check-service.sh)"
        packaging/check-service.sh || fail "netchar.service under systemd"
    fi

    step "dpkg -r, dpkg -P"
    dpkg -r netchar || fail "dpkg -r netchar"
    [ ! -e /usr/bin/netchar ] && [ ! -e /lib/systemd/system/netchar.service ] || fail "dpkg -r left files"
    [ -e /etc/netchar/server.toml ] || fail "dpkg -r removed the conffile (only a purge should)"
    dpkg -P netchar || fail "dpkg -P netchar"
    [ ! -e /etc/netchar ] || fail "dpkg -P left /etc/netchar"
    ! dpkg-query -W netchar 2>/dev/null | grep -q . || fail "dpkg still knows netchar after the purge"
fi

# ---- 4. The OCI image
if have buildah buildah "the OCI image"; then
    step "OCI image (build-image.sh)"
    archive=$(packaging/build-image.sh "$bin" | tail -n 1)
    check_size "image archive" "$(stat -c %s "$archive")"
    version=$(cargo pkgid --locked -p netchar | sed 's/.*[#@]//')
    ref=localhost/netchar:$version
    if command -v podman >/dev/null; then
        check_size "container image" "$(podman image inspect --format '{{.Size}}' "$ref")"
    fi
    # The archive users load: its one layer must hold this very binary, and nothing else.
    mkdir -p "$work/oci" "$work/layer"
    tar -xf "$archive" -C "$work/oci"
    layer=$(python3 - "$work/oci" <<'EOF'
import json, sys
root = sys.argv[1]
blob = lambda d: f"{root}/blobs/{d.split(':')[0]}/{d.split(':')[1]}"
manifest = json.load(open(blob(json.load(open(f"{root}/index.json"))["manifests"][0]["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))
assert config["config"]["User"] == "65532:65532", config["config"]["User"]
assert config["config"]["Entrypoint"] == ["/usr/bin/netchar"], config["config"]["Entrypoint"]
labels = config["config"]["Labels"]
for key in ("version", "revision", "created", "source", "licenses", "title"):
    assert labels.get(f"org.opencontainers.image.{key}"), key
print(blob(manifest["layers"][0]["digest"])) if len(manifest["layers"]) == 1 else sys.exit("layers: %d" % len(manifest["layers"]))
EOF
    ) || fail "the image's configuration"
    tar -xf "$layer" -C "$work/layer"
    (cd "$work/layer" && find . -type f) | grep -qvx './usr/bin/netchar' && fail "the layer holds more than usr/bin/netchar"
    cmp "$bin" "$work/layer/usr/bin/netchar" || fail "the layer's netchar is not the static binary"
    "$work/layer/usr/bin/netchar" --version

    if have podman podman "running the image"; then
        step "podman run: the image as a server and as a client"
        # This machine's root lacks CAP_SYS_RESOURCE, so podman's default limits (nofile,
        # nproc above the current ones) cannot be set, and crun refuses a hybrid cgroup
        # hierarchy: modest explicit limits, and runc there. Elsewhere the defaults do.
        run_opts=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
        if [ -d /sys/fs/cgroup/unified ] && have runc runc "podman on a hybrid cgroup hierarchy"; then
            run_opts+=(--runtime runc)
        fi
        podman run --rm "${run_opts[@]}" "$ref" --version
        # No capability, read-only root, the image's own non-root user; host network, so that
        # no bridge or firewall rule is made.
        podman run -d --name netchar-check-server "${run_opts[@]}" --network host --cap-drop all \
            --read-only --security-opt no-new-privileges "$ref" server -B 127.0.0.1 -p 15391 >/dev/null
        for _ in $(seq 100); do
            podman logs netchar-check-server 2>&1 | grep -q '^no authentication' && break
            sleep 0.1
        done
        [ "$(podman top netchar-check-server huser | tail -n 1 | tr -d ' ')" = 65532 ] ||
            fail "the image's server does not run as 65532"
        "$bin" tcp 127.0.0.1:15391 -t 1 || fail "host client against the image's server"
        podman run --rm "${run_opts[@]}" --network host --cap-drop all --read-only "$ref" \
            udp 127.0.0.1:15391 -t 1 -b 10M || fail "the image's client against the image's server"
        podman stop -t 10 netchar-check-server >/dev/null
        podman logs netchar-check-server 2>&1
        code=$(podman inspect -f '{{.State.ExitCode}}' netchar-check-server)
        [ "$code" = 0 ] || fail "the image's server exited $code on SIGTERM"
        podman rm netchar-check-server >/dev/null
    fi
fi

step "done"
echo "packaging/check.sh: every step passed"
