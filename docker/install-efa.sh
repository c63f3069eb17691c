#!/bin/sh
# Install the EFA user-space software (libfabric, rdma-core, Amazon's Open MPI 4 in /opt/amazon/openmpi
# and the aws-ofi-nccl plugin in /opt/amazon/aws-ofi-nccl) from AWS's pinned installer, as AWS documents
# for containers: no kernel module (the host has it), no ulimit files, no device check (no lspci here).
#   docker/install-efa.sh VERSION
set -eu
version=$1
work=$(mktemp -d)
apt-get update
apt-get install -y --no-install-recommends curl ca-certificates
curl -fsSL --retry 3 "https://efa-installer.amazonaws.com/aws-efa-installer-${version}.tar.gz" | tar -xz -C "$work"
(cd "$work/aws-efa-installer" && ./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify)
rm -rf "$work" /var/lib/apt/lists/*
test -x /opt/amazon/openmpi/bin/mpirun
ls /opt/amazon/aws-ofi-nccl/lib*/libnccl-net*.so >/dev/null
