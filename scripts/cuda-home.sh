#!/usr/bin/env bash
# Assemble a CUDA toolkit folder for compiling Horovod's GPU code, from parts every builder reaches:
# NVIDIA's compiler from Debian's non-free `nvidia-cuda-toolkit` and `libnvvm4` (unpacked, not
# installed: they come from a newer Debian than the image's, whose libraries the compiler does not
# need), and the CUDA headers and runtime libraries of the PyPI wheels TensorFlow's GPU wheel pins
# (nvidia-cuda-runtime-cu12, nvidia-cuda-cccl-cu12, nvidia-cuda-nvcc-cu12's crt headers, NCCL).
#
#   scripts/cuda-home.sh DEBIAN_ROOT SITE_PACKAGES OUT
#
# DEBIAN_ROOT: where the .deb files were unpacked (dpkg -x); SITE_PACKAGES: the venv's, with
# nvidia/*; OUT: the toolkit folder (bin, nvvm, include, lib64) to give Horovod as HOROVOD_CUDA_HOME.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 DEBIAN_ROOT SITE_PACKAGES OUT" >&2; exit 2; }
deb=$1 nvidia=$2/nvidia out=$3
toolkit=$deb/usr/lib/nvidia-cuda-toolkit
mkdir -p "$out/bin" "$out/nvvm/bin" "$out/nvvm/lib64" "$out/nvvm/libdevice" "$out/include" "$out/lib64"
cp "$toolkit/bin/nvcc" "$toolkit/bin/cicc" "$out/bin/"
mv "$out/bin/cicc" "$out/nvvm/bin/"
cp -r "$toolkit/bin/crt" "$out/bin/"
for tool in cudafe++ fatbinary nvlink ptxas bin2c nvprune cuobjdump; do cp "$deb/usr/bin/$tool" "$out/bin/"; done
cp "$toolkit/libdevice/libdevice.10.bc" "$out/nvvm/libdevice/"
cp -P "$deb"/usr/lib/x86_64-linux-gnu/libnvvm.so* "$out/nvvm/lib64/"
cat > "$out/bin/nvcc.profile" <<'PROFILE'
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/nvvm/lib64:$(TOP)/lib64:
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib64"
PROFILE
# Headers: the runtime's, CCCL's (cuda_fp16.h, thrust, cub), the compiler's crt headers, NCCL's.
for part in cuda_runtime cuda_cccl cuda_nvcc nccl; do cp -r "$nvidia/$part/include/." "$out/include/"; done
cp "$nvidia"/cuda_runtime/lib/*.a "$out/lib64/"
ln -sf "$nvidia/cuda_runtime/lib/libcudart.so.12" "$out/lib64/libcudart.so"
ln -sf "$nvidia/nccl/lib/libnccl.so.2" "$out/lib64/libnccl.so"
echo "cuda-home: $("$out/bin/nvcc" --version | tail -2 | head -1) in $out"
