#!/usr/bin/env bash
# Build smtrain's native tf.data op (native/pipe_dataset.cc) against the TensorFlow installed in VENV,
# into VENV/lib/smtrain-native/ with a stamp of its source and TensorFlow version; smtrain.data.native
# loads it from there (and falls back to the Python reader where it is missing or stale).
#
#   scripts/build-native.sh VENV
#
# The image's build stages and scripts/setup.sh run it after the stack; it is checked by loading it.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 VENV" >&2; exit 2; }
venv=$1
here=$(cd "$(dirname "$0")/.." && pwd)
src="$here/native/pipe_dataset.cc"
out="$venv/lib/smtrain-native"
py="$venv/bin/python"

read -r -a cflags <<<"$("$py" -c 'import tensorflow as tf; print(" ".join(tf.sysconfig.get_compile_flags()))' 2>/dev/null)"
read -r -a lflags <<<"$("$py" -c 'import tensorflow as tf; print(" ".join(tf.sysconfig.get_link_flags()))' 2>/dev/null)"
tf_version=$("$py" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)

mkdir -p "$out"
g++ -O3 -shared -fPIC -Wall -Wno-sign-compare "${cflags[@]}" "$src" -o "$out/pipe_ops.so.tmp" "${lflags[@]}"
mv "$out/pipe_ops.so.tmp" "$out/pipe_ops.so"
printf 'source=%s tensorflow=%s\n' "$(sha256sum "$src" | cut -c1-64)" "$tf_version" >"$out/pipe_ops.stamp"
"$py" -c 'import sys, tensorflow as tf; tf.load_op_library(sys.argv[1]).smtrain_pipe_dataset' "$out/pipe_ops.so" 2>/dev/null \
  || { echo "build-native: $out/pipe_ops.so does not load" >&2; exit 1; }
echo "build-native: $out/pipe_ops.so (TensorFlow $tf_version)" >&2
