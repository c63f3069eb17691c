#!/bin/sh
# The keys for MPI's ssh transport, made when the image is built and never committed: every container
# of one image build trusts exactly that build's root key (the trust model is in docker/sshd_config).
set -eu
mkdir -p /run/sshd /root/.ssh
chmod 700 /root/.ssh
rm -f /etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
ssh-keygen -q -t ed25519 -N "" -f /root/.ssh/id_ed25519
cp /root/.ssh/id_ed25519.pub /root/.ssh/authorized_keys
