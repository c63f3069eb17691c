#!/usr/bin/env bash
# Make a local Debian 12 base image when no registry can be reached: debootstrap from this machine's
# own apt mirror (read from its apt sources, never written here), plus this machine's extra CA
# certificates (an HTTPS egress proxy with its own CA needs them for pip inside builds), imported
# into Docker as smtrain-base:bookworm. Idempotent: does nothing when the image exists.
#   scripts/base-image.sh [TAG]
set -euo pipefail
tag=${1:-smtrain-base:bookworm}
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base-image: $tag exists"; exit 0
fi
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list)
root=$(mktemp -d -t smtrain-rootfs-XXXX)
trap 'rm -rf "$root"' EXIT
echo "base-image: debootstrap bookworm from $mirror"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" >/dev/null
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import - "$tag" >/dev/null
echo "base-image: $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
