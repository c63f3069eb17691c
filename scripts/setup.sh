#!/usr/bin/env bash
# Set up everything the project needs on a fresh Debian 12 machine, as root; idempotent.
#
#   scripts/setup.sh            # apt packages + the Python environment + this checkout installed in it
#
# The virtual environment lives outside the checkout ($SMTRAIN_VENV, default /opt/smtrain/venv) so that
# fresh clones (CI) reuse it: it is rebuilt only when requirements/ or this script's stack section change.
# A second run that finds everything in place takes seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
venv=${SMTRAIN_VENV:-/opt/smtrain/venv}
apt_packages=(
  python3 python3-venv python3-dev g++ make cmake          # horovod and sagemaker-training compile C/C++
  openmpi-bin libopenmpi-dev openssh-server openssh-client # MPI and its transport
  iproute2 procps psmisc util-linux                        # network namespaces, process tools for tests
  docker.io debootstrap                                    # the image: an engine, and a base image from the mirror
  docker-compose                                           # the SageMaker SDKs' local mode runs the image with it
  libcurl4-openssl-dev libssl-dev libexpat1-dev nlohmann-json3-dev  # the s3:// file system (native/s3/)
  chromium                                                 # headless, the profiler report's rendering test
)

log() { printf 'setup: %s\n' "$*" >&2; }

install_apt_packages() {
  local missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

fingerprint() { sha256sum | cut -c1-16; }

# What forces a full rebuild (Horovod compiles against this TensorFlow): the TF version and the recipe.
core_fingerprint() {
  cat "$here/requirements/tensorflow-version" "$here/scripts/build-stack.sh" "$here/scripts/patch-horovod-build.py" \
    | fingerprint
}
# What an incremental `pip install` brings up to date.
packages_fingerprint() { cat "$here"/requirements/*.txt | fingerprint; }

build_core() {
  "$here/scripts/build-stack.sh" /usr/bin/python3 "$venv" "$here/requirements/stack.txt" "$here/requirements/dev.txt"
  install_oracles
}

# Test oracles whose own pins conflict with the stack: without their dependencies (requirements/oracles.txt).
install_oracles() { "$venv/bin/python" -m pip install -q --no-deps -r "$here/requirements/oracles.txt"; }

# The native Pipe reader, the demultiplexer's record framer and s3:// (about a minute): when a source changed.
# A new TensorFlow rebuilds the whole stack (the core fingerprint), which removes them with the old environment.
build_native_if_changed() {
  local want
  want="source=$(sha256sum "$here/native/pipe_dataset.cc" | cut -c1-64) frames=$(sha256sum "$here/native/record_frames.cc" | cut -c1-64)"
  want+=" s3=$(cat "$here"/native/s3/*.cc "$here"/native/s3/*.h "$here"/native/s3/loader/*.cc | sha256sum | cut -c1-64)"
  grep -q "^$want " "$venv/lib/smtrain-native/pipe_ops.stamp" 2>/dev/null && return 0
  log "building the native Pipe reader, record framer and s3:// file system (about a minute)"
  "$here/scripts/build-native.sh" "$venv"
}

# Packages whose pins conflict with the stack's and with each other, each in a virtual environment of
# its own beside it, rebuilt when its requirements change: the SageMaker SDKs (v2 and v3) as users
# install them, for the local-mode tests; smdebug's readers (as in the image); moto's S3 server for the
# s3:// tests and benchmark.
install_side_environments() {
  local name requirements want
  for name in sdk2:tests/sdk/requirements-sdk2.txt sdk3:tests/sdk/requirements-sdk3.txt smdebug:requirements/smdebug.txt \
    moto:tests/s3/requirements-moto.txt; do
    requirements="$here/${name#*:}" name=${name%%:*}
    want=$(fingerprint <"$requirements")
    [ "$(cat "/opt/smtrain/$name/.fingerprint" 2>/dev/null)" = "$want" ] && continue
    log "installing ${requirements#"$here"/} in /opt/smtrain/$name"
    rm -rf "/opt/smtrain/$name"
    /usr/bin/python3 -m venv "/opt/smtrain/$name"
    "/opt/smtrain/$name/bin/python" -m pip install -q -r "$requirements"
    echo "$want" >"/opt/smtrain/$name/.fingerprint"
  done
}

main() {
  [ "$(id -u)" -eq 0 ] || { log "run as root (it installs apt packages)"; exit 1; }
  install_apt_packages
  local core packages
  core=$(core_fingerprint)
  packages=$(packages_fingerprint)
  if [ "$(cat "$venv/.core-fingerprint" 2>/dev/null)" != "$core" ]; then
    log "building the Python stack in $venv (first time: several minutes, Horovod compiles)"
    build_core
    echo "$core" >"$venv/.core-fingerprint"
    echo "$packages" >"$venv/.packages-fingerprint"
  elif [ "$(cat "$venv/.packages-fingerprint" 2>/dev/null)" != "$packages" ]; then
    log "updating packages in $venv"
    "$venv/bin/python" -m pip install -q -r "$here/requirements/stack.txt" -r "$here/requirements/dev.txt"
    install_oracles
    echo "$packages" >"$venv/.packages-fingerprint"
  fi
  # Horovod's Keras API on tf_keras: idempotent, about two seconds (it checks the patched modules import).
  "$venv/bin/python" "$here/scripts/patch-horovod.py" >/dev/null
  build_native_if_changed
  install_side_environments
  # This checkout itself: pure Python, a few seconds. setuptools' build folder is removed first: it
  # keeps modules that were moved or deleted since, and would install them again.
  rm -rf "$here/build/lib" "$here"/build/bdist.*
  "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation --force-reinstall "$here"
  log "ready: $venv ($("$venv/bin/python" -c 'import horovod, tensorflow as tf; print("tensorflow", tf.__version__, "horovod", horovod.__version__)' 2>/dev/null))"
}

main "$@"
