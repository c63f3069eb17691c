#!/bin/sh
# NVIDIA's CUDA compiler (nvcc, cicc, ptxas, fatbinary, nvlink, libnvvm, libdevice) from Debian's
# non-free section of the next release, unpacked - not installed - into DIR, for the GPU flavour's
# build stage only (scripts/cuda-home.sh puts it together with the CUDA wheels' headers). The apt
# entry for that release is made from the image's own apt sources (the same mirror) and removed after.
#   docker/nvidia-compiler.sh DIR RELEASE VERSION      e.g. /opt/nvidia-compiler trixie 12.4.131~12.4.1-2
set -eu
dir=$1 release=$2 version=$3
uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$uri" ] || uri=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list)
entry=/etc/apt/sources.list.d/smtrain-nvidia-compiler.list
echo "deb $uri $release non-free" > "$entry"
apt-get update
work=$(mktemp -d)
cd "$work"
apt-get download "nvidia-cuda-toolkit=$version" "libnvvm4=$version"
mkdir -p "$dir"
for deb in ./*.deb; do dpkg-deb -x "$deb" "$dir"; done
cd /
rm -rf "$work" "$entry" /var/lib/apt/lists/*
test -x "$dir/usr/lib/nvidia-cuda-toolkit/bin/nvcc"
