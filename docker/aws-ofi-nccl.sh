#!/bin/sh
# NCCL's EFA plugin (aws-ofi-nccl) from its release source, against Debian's libfabric and the CUDA
# toolkit of the build stage, into PREFIX (PREFIX/lib/libnccl-net.so). No VERSION: nothing is built
# (PREFIX/lib is left empty) - the image then has no plugin, and train lets NCCL use sockets.
#   docker/aws-ofi-nccl.sh VERSION CUDA_HOME PREFIX        e.g. 1.16.3 /opt/cuda /opt/smtrain/aws-ofi-nccl
set -eu
version=$1 cuda=$2 prefix=$3
mkdir -p "$prefix/lib"
if [ -z "$version" ]; then
  echo "aws-ofi-nccl: no AWS_OFI_NCCL_VERSION given: not built (NCCL will use sockets between hosts)"
  exit 0
fi
apt-get update
apt-get install -y --no-install-recommends libhwloc-dev
work=$(mktemp -d)
curl -fsSL --retry 3 "https://github.com/aws/aws-ofi-nccl/releases/download/v${version}/aws-ofi-nccl-${version}.tar.gz" \
  | tar -xz -C "$work"
cd "$work/aws-ofi-nccl-${version}"
./configure --prefix="$prefix" --with-libfabric=/usr --with-cuda="$cuda" --disable-tests
make -j"$(nproc)"
make install
cd /
rm -rf "$work" /var/lib/apt/lists/*
test -e "$prefix/lib/libnccl-net.so"
