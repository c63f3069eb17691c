#!/bin/sh
# NCCL's EFA plugin (aws-ofi-nccl) from its release source, against Debian's libfabric and the CUDA
# toolkit of the build stage, into PREFIX (PREFIX/lib/libnccl-net.so). No VERSION: nothing is built
# (PREFIX/lib is left empty) - the image then has no plugin, and train lets NCCL use sockets. A VERSION
# needs SHA256, the release tarball's sha256: the tarball is checked against it before it is unpacked.
#   docker/aws-ofi-nccl.sh VERSION SHA256 CUDA_HOME PREFIX   e.g. 1.16.3 <64 hex digits> /opt/cuda /opt/smtrain/aws-ofi-nccl
set -eu
version=$1 sha256=$2 cuda=$3 prefix=$4
mkdir -p "$prefix/lib"
if [ -z "$version" ]; then
  echo "aws-ofi-nccl: no AWS_OFI_NCCL_VERSION given: not built (NCCL will use sockets between hosts)"
  exit 0
fi
if ! printf '%s\n' "$sha256" | grep -Eqx '[0-9a-f]{64}'; then
  echo "aws-ofi-nccl: AWS_OFI_NCCL_VERSION=$version needs AWS_OFI_NCCL_SHA256, the sha256 of" \
    "aws-ofi-nccl-$version.tar.gz (64 hex digits), got '$sha256'" >&2
  exit 2
fi
apt-get update
apt-get install -y --no-install-recommends libhwloc-dev
work=$(mktemp -d)
curl -fsSL --retry 3 -o "$work/source.tar.gz" \
  "https://github.com/aws/aws-ofi-nccl/releases/download/v${version}/aws-ofi-nccl-${version}.tar.gz"
if ! printf '%s  %s\n' "$sha256" "$work/source.tar.gz" | sha256sum -c - >/dev/null; then
  echo "aws-ofi-nccl: aws-ofi-nccl-$version.tar.gz does not have the sha256 AWS_OFI_NCCL_SHA256 gives" >&2
  exit 3
fi
tar -xzf "$work/source.tar.gz" -C "$work"
cd "$work/aws-ofi-nccl-${version}"
./configure --prefix="$prefix" --with-libfabric=/usr --with-cuda="$cuda" --disable-tests
make -j"$(nproc)"
make install
cd /
rm -rf "$work" /var/lib/apt/lists/*
test -e "$prefix/lib/libnccl-net.so"
