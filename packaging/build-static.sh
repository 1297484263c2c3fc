#!/usr/bin/env bash
# packaging/build-static.sh [TARGET]: netchar as one static executable, for TARGET
# (default x86_64-unknown-linux-gnu; also aarch64-unknown-linux-gnu, armv7-unknown-linux-gnueabihf).
# Prints the binary's path (target/TARGET/dist/netchar) on its last line.
#
# Static on the GNU target: `-C target-feature=+crt-static` links glibc in, so the binary
# needs nothing from the system but the kernel (docs/install.md). The flag is given for the
# target only (CARGO_TARGET_<TRIPLE>_RUSTFLAGS with --target): build scripts and proc macros,
# which run on the build machine, stay dynamic, as they must. The `dist` profile is
# Cargo.toml's: release code (fat LTO, one code unit), no debug info, symbols stripped. Cargo's
# CARGO_PROFILE_DIST_* variables override it.
#
# FROM_TEST_BUILD=1 (CI, host target only): instead of a release build, the binary of the test
# build (`cargo test --no-run`, the dev profile, with the same RUSTFLAGS and workspace wrapper
# as that build) linked static: `cargo rustc` compiles the netchar binary crate alone again,
# with crt-static and its symbols stripped, and takes every library and dependency from the
# test build, so CI compiles the code once instead of once per profile. CI checks that the
# static binary builds, runs and packages, not the release's optimisation (.ci/run); the binary
# is target/debug/netchar (where the tests' own binary was: run it after them).
#
# A cross TARGET needs the Rust standard library for it (`rustup target add TARGET`) and
# Debian's cross gcc as the linker (gcc-aarch64-linux-gnu, gcc-arm-linux-gnueabihf, with
# libc6-dev-arm64-cross / libc6-dev-armhf-cross for the static libc). RUSTC may name another
# compiler that has that library (docs/install.md, "Cross builds").
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-x86_64-unknown-linux-gnu}
case $target in
    x86_64-unknown-linux-gnu) linker=${LINKER:-} ;;
    aarch64-unknown-linux-gnu) linker=${LINKER:-aarch64-linux-gnu-gcc} ;;
    armv7-unknown-linux-gnueabihf) linker=${LINKER:-arm-linux-gnueabihf-gcc} ;;
    *)
        echo "build-static.sh: $target: not one of x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu, armv7-unknown-linux-gnueabihf" >&2
        exit 2
        ;;
esac

# The standard library for the target must be there before cargo starts: say so plainly.
libdir=$(${RUSTC:-rustc} --print target-libdir --target "$target")
if ! compgen -G "$libdir/libstd-*.rlib" >/dev/null; then
    echo "build-static.sh: no Rust standard library for $target in $libdir;" \
        "install it with 'rustup target add $target' (needs the network) or see docs/install.md, \"Cross builds\"" >&2
    exit 2
fi
if [ -n "$linker" ] && ! command -v "$linker" >/dev/null; then
    echo "build-static.sh: no linker $linker for $target (Debian: apt-get install gcc-${linker%-gcc})" >&2
    exit 2
fi

target_dir=$(cargo metadata --format-version 1 --no-deps --locked | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
if [ "${FROM_TEST_BUILD:-0}" = 1 ]; then
    if [ "$target" != x86_64-unknown-linux-gnu ]; then
        echo "build-static.sh: FROM_TEST_BUILD=1 links the host's test build; $target needs a build of its own" >&2
        exit 2
    fi
    cargo rustc --locked --profile dev -p netchar --bin netchar -- -C target-feature=+crt-static -C strip=symbols >&2
    bin=${target_dir:-target}/debug/netchar
else
    triple=$(echo "$target" | tr 'a-z-' 'A-Z_')
    export "CARGO_TARGET_${triple}_RUSTFLAGS=-C target-feature=+crt-static"
    if [ -n "$linker" ]; then
        export "CARGO_TARGET_${triple}_LINKER=$linker"
    fi
    cargo build --locked --profile dist --target "$target" -p netchar >&2
    bin=${target_dir:-target}/$target/dist/netchar
fi

# Static means no program interpreter and no shared library needed (readelf reads any
# architecture's ELF, where ldd runs only the host's).
if readelf -lW "$bin" | grep -q 'INTERP' || readelf -dW "$bin" | grep -q '(NEEDED)'; then
    echo "build-static.sh: $bin is not static:" >&2
    readelf -dW "$bin" | grep '(NEEDED)' >&2 || true
    exit 1
fi
echo "$bin"
