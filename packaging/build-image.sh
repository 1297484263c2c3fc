#!/usr/bin/env bash
# packaging/build-image.sh BIN [REF]: the OCI image REF (default localhost/netchar:VERSION,
# the name `netchar mesh render` and deploy/kubernetes use) holding BIN, a static netchar
# from packaging/build-static.sh, and nothing else; also saved as the OCI archive
# target/packaging/netchar-image_VERSION_ARCH.tar for `podman load`, `ctr images import`,
# `kind load image-archive` or a registry push. Prints the archive's path on its last line.
#
# Built with buildah from an empty image ("scratch"): no base image is downloaded, and the
# image has no shell, libc or package manager to patch. It runs as UID:GID 65532:65532
# (no user of the host, no /etc/passwd needed), `netchar` is the entrypoint and `server` the
# default command. Needs root or a user set up for rootless buildah. The image's creation
# time and file times are the last commit's (SOURCE_DATE_EPOCH), so the same tree and
# binary give the same image.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:?usage: packaging/build-image.sh BIN [REF]}
version=$(cargo pkgid --locked -p netchar | sed 's/.*[#@]//')
ref=${2:-localhost/netchar:$version}
out=${OUT:-target/packaging}
case $(readelf -hW "$bin" | sed -n 's/^ *Machine: *//p') in
    *X86-64*) arch=amd64 variant= ;;
    AArch64) arch=arm64 variant=v8 ;;
    ARM) arch=arm variant=v7 ;;
    *) echo "build-image.sh: $bin: not an x86-64, AArch64 or ARM executable" >&2; exit 2 ;;
esac
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
repository=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml)

ctr=$(buildah from --arch "$arch" ${variant:+--variant "$variant"} scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah copy --quiet --chmod 0755 "$ctr" "$bin" /usr/bin/netchar >/dev/null
buildah config \
    --arch "$arch" ${variant:+--variant "$variant"} --os linux \
    --entrypoint '["/usr/bin/netchar"]' --cmd '["server"]' \
    --user 65532:65532 --workingdir / --env PATH=/usr/bin \
    --port 5300/tcp --port 5300/udp \
    --label org.opencontainers.image.title=netchar \
    --label "org.opencontainers.image.description=Network performance characterization: netchar's client and server" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$created" \
    --label "org.opencontainers.image.source=$repository" \
    --label "org.opencontainers.image.licenses=MIT OR Apache-2.0" \
    "$ctr"
buildah commit --quiet --format oci --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "$ref" >&2
trap - EXIT

mkdir -p "$out"
archive=$out/netchar-image_${version}_$arch.tar
rm -f "$archive"
buildah push --quiet "$ref" "oci-archive:$archive:$ref" >&2
echo "$archive"
