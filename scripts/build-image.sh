#!/usr/bin/env bash
# Build one flavour of the image, here or in CodeBuild (buildspec.yml):
#   scripts/build-image.sh cpu|gpu [--base IMAGE] [docker build options...]
# The base is IMAGE, else $BASE_IMAGE, else debian:bookworm-slim where it can be pulled, else a Debian 12
# base made from this machine's apt mirror (scripts/base-image.sh). Tags: smtrain:<flavour> and
# smtrain:<version>-tf<TensorFlow>-<flavour> (pyproject.toml, requirements/tensorflow-version); more
# options (--build-arg AWS_OFI_NCCL_VERSION=..., -t ...) go to docker build. Prints the build's time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
flavour=${1:-}
case "$flavour" in cpu|gpu) shift ;; *) echo "usage: $0 cpu|gpu [--base IMAGE] [docker build options...]" >&2; exit 2 ;; esac
base=${BASE_IMAGE:-}
if [ "${1:-}" = --base ]; then base=$2; shift 2; fi
if [ -z "$base" ]; then
  if docker image inspect debian:bookworm-slim >/dev/null 2>&1 || docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    base=debian:bookworm-slim
  else
    "$here/scripts/base-image.sh" smtrain-base:bookworm
    base=smtrain-base:bookworm
  fi
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/pyproject.toml")
tf=$(grep -v '^#' "$here/requirements/tensorflow-version" | tr -d '[:space:]')
started=$(date +%s)
echo "build-image: $flavour from $base"
# BuildKit builds only the stages the flavour needs; Docker's classic builder (no buildx) also the ones before it.
buildkit=0
docker buildx version >/dev/null 2>&1 && buildkit=1
DOCKER_BUILDKIT=$buildkit docker build --build-arg BASE_IMAGE="$base" --target "$flavour" \
  -t "smtrain:$flavour" -t "smtrain:$version-tf$tf-$flavour" "$@" "$here"
echo "build-image: smtrain:$version-tf$tf-$flavour ($(docker image inspect -f '{{.Size}}' "smtrain:$flavour") bytes) in $(( $(date +%s) - started )) s"
