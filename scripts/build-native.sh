#!/usr/bin/env bash
# Build smtrain's native tf.data op (native/pipe_dataset.cc) against the TensorFlow installed in VENV,
# into VENV/lib/smtrain-native/ with a stamp of its sources and TensorFlow version; smtrain.data.native
# loads it from there (and falls back to the Python reader where it is missing or stale). Beside it,
# the demultiplexer's record framer (native/record_frames.cc, no TensorFlow; smtrain.data.frames), and
# the s3:// file system (native/s3/: TensorFlow's C plugin interface over libcurl, OpenSSL and expat)
# with the small library in site-packages/tensorflow-plugins/ that registers it as TensorFlow is imported.
#
#   scripts/build-native.sh VENV
#
# The image's build stages and scripts/setup.sh run it after the stack; each library is checked by loading it.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 VENV" >&2; exit 2; }
venv=$1
here=$(cd "$(dirname "$0")/.." && pwd)
src="$here/native/pipe_dataset.cc"
frames_src="$here/native/record_frames.cc"
out="$venv/lib/smtrain-native"
py="$venv/bin/python"

read -r -a cflags <<<"$("$py" -c 'import tensorflow as tf; print(" ".join(tf.sysconfig.get_compile_flags()))' 2>/dev/null)"
read -r -a lflags <<<"$("$py" -c 'import tensorflow as tf; print(" ".join(tf.sysconfig.get_link_flags()))' 2>/dev/null)"
tf_version=$("$py" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
plugins="$("$py" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')/tensorflow-plugins"

mkdir -p "$out" "$plugins"
g++ -O3 -shared -fPIC -Wall "$frames_src" -o "$out/record_frames.so.tmp"
mv "$out/record_frames.so.tmp" "$out/record_frames.so"
g++ -O3 -shared -fPIC -Wall -Wno-sign-compare "${cflags[@]}" "$src" -o "$out/pipe_ops.so.tmp" "${lflags[@]}"
mv "$out/pipe_ops.so.tmp" "$out/pipe_ops.so"
g++ -O2 -shared -fPIC -Wall "${cflags[@]}" "$here"/native/s3/*.cc -o "$out/s3_filesystem.so.tmp" "${lflags[@]}" \
  -lcurl -lcrypto -lexpat
mv "$out/s3_filesystem.so.tmp" "$out/s3_filesystem.so"
g++ -O2 -shared -fPIC -Wall "${cflags[@]}" -DSMTRAIN_S3_PLUGIN="\"$out/s3_filesystem.so\"" \
  "$here/native/s3/loader/register.cc" -o "$plugins/libsmtrain_s3.so.tmp" "${lflags[@]}" -l:libtensorflow_cc.so.2
mv "$plugins/libsmtrain_s3.so.tmp" "$plugins/libsmtrain_s3.so"
printf 'source=%s frames=%s s3=%s tensorflow=%s\n' "$(sha256sum "$src" | cut -c1-64)" \
  "$(sha256sum "$frames_src" | cut -c1-64)" "$(cat "$here"/native/s3/*.cc "$here"/native/s3/*.h "$here"/native/s3/loader/*.cc \
  | sha256sum | cut -c1-64)" "$tf_version" >"$out/pipe_ops.stamp"
"$py" -c 'import sys, tensorflow as tf; tf.load_op_library(sys.argv[1]).smtrain_pipe_dataset' "$out/pipe_ops.so" 2>/dev/null \
  || { echo "build-native: $out/pipe_ops.so does not load" >&2; exit 1; }
"$py" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1]).smtrain_frame_stops' "$out/record_frames.so" \
  || { echo "build-native: $out/record_frames.so does not load" >&2; exit 1; }
# s3:// answers (with an error of S3's, not "not implemented") once TensorFlow is imported
"$py" -c '
import tensorflow as tf
try:
    tf.io.gfile.exists("s3://")
except tf.errors.UnimplementedError:
    raise SystemExit(1)
except tf.errors.OpError:
    pass' 2>/dev/null || { echo "build-native: $plugins/libsmtrain_s3.so does not register $out/s3_filesystem.so" >&2; exit 1; }
echo "build-native: $out/pipe_ops.so (TensorFlow $tf_version), $out/record_frames.so, $out/s3_filesystem.so" >&2
