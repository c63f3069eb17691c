# TensorFlow + Horovod training image for Amazon SageMaker; entry point `train`. Two flavours, each built
# by `scripts/build-image.sh cpu|gpu` (or docker build --build-arg BASE_IMAGE=... --target cpu|gpu):
#   CPU:  TensorFlow's CPU wheel
#   GPU:  TensorFlow's GPU wheel with the CUDA 12, cuDNN 9 and NCCL wheels it pins; Horovod's NCCL operations; EFA
# TensorFlow's version: requirements/tensorflow-version. The Python stack is built the same way in
# both, by scripts/build-stack.sh (Horovod from source, patched by scripts/patch-horovod-build.py;
# smtrain's native Pipe reader by scripts/build-native.sh); smdebug's readers get an environment of
# their own (/opt/smtrain/smdebug). Only the final stages are shipped, with no compiler, no pip
# cache and no apt lists.
ARG BASE_IMAGE=debian:bookworm-slim
ARG NVIDIA_COMPILER_RELEASE=trixie
ARG NVIDIA_COMPILER_VERSION=12.4.131~12.4.1-2
ARG AWS_OFI_NCCL_VERSION=
ARG AWS_OFI_NCCL_SHA256=

# ---------------------------------------------------------------- CPU flavour
FROM ${BASE_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ make cmake \
      openmpi-bin libopenmpi-dev ca-certificates libcurl4-openssl-dev libssl-dev libexpat1-dev nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
COPY requirements/ /src/requirements/
COPY scripts/build-stack.sh scripts/patch-horovod-build.py /src/scripts/
RUN /src/scripts/build-stack.sh /usr/bin/python3 /opt/smtrain/venv /src/requirements/stack.txt
RUN python3 -m venv /opt/smtrain/smdebug \
 && /opt/smtrain/smdebug/bin/pip install -q -r /src/requirements/smdebug.txt \
 && find /opt/smtrain/smdebug -name __pycache__ -prune -exec rm -rf {} +
COPY scripts/patch-horovod.py /src/scripts/
RUN /opt/smtrain/venv/bin/python /src/scripts/patch-horovod.py
# smtrain's native tf.data op for Pipe mode, against this TensorFlow (smtrain.data.native), and s3://
COPY native/ /src/native/
COPY scripts/build-native.sh /src/scripts/
RUN /src/scripts/build-native.sh /opt/smtrain/venv
COPY pyproject.toml /src/
COPY entrypoint/ /src/entrypoint/
# gevent's own test suite (gevent comes with sagemaker-training) ships TLS private keys: not shipped
RUN /opt/smtrain/venv/bin/pip install -q --no-deps --no-build-isolation /src \
 && rm -rf /opt/smtrain/venv/lib/python3.11/site-packages/gevent/tests \
 && find /opt/smtrain/venv -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE_IMAGE} AS cpu
ENV DEBIAN_FRONTEND=noninteractive
# No ssh key in the image: openssh-server's host keys go; train makes each container's and each job's
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 openmpi-bin openssh-server openssh-client \
      procps iproute2 ca-certificates libcurl4 libexpat1 \
 && rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_*
COPY docker/sshd_config /etc/ssh/sshd_config
COPY docker/ssh_config /etc/ssh/ssh_config.d/smtrain.conf
COPY docker/openmpi-mca-params.conf /etc/openmpi/openmpi-mca-params.conf
COPY docker/modeltrainer-hook.sh /opt/smtrain/modeltrainer-hook.sh
COPY --from=build /opt/smtrain/venv /opt/smtrain/venv
COPY --from=build /opt/smtrain/smdebug /opt/smtrain/smdebug
# BASH_ENV: SDK v3's ModelTrainer starts the container with its own bash script; that bash runs `train`
ENV PATH=/opt/smtrain/venv/bin:$PATH \
    BASH_ENV=/opt/smtrain/modeltrainer-hook.sh \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1 \
    TF_CPP_MIN_LOG_LEVEL=1
WORKDIR /opt/ml/code
CMD ["train"]

# ---------------------------------------------------------------- GPU flavour
# From the same Debian base, with parts every builder reaches: TensorFlow's GPU wheel with the CUDA,
# cuDNN and NCCL wheels it pins (requirements/stack-gpu.txt); Horovod's NCCL operations compiled in the
# build stage only, with NVIDIA's compiler from Debian's non-free section of the next release
# (NVIDIA_COMPILER_RELEASE/VERSION; docker/nvidia-compiler.sh, scripts/cuda-home.sh) for V100 to H100
# (sm_70-sm_90, and sm_90 PTX that newer GPUs compile at load); Debian's Open MPI and libfabric with its
# EFA provider (rdma-core's libefa). NCCL's EFA plugin, aws-ofi-nccl, is built from its release source
# where the builder reaches it (AWS_OFI_NCCL_VERSION, checked against AWS_OFI_NCCL_SHA256); without it NCCL
# uses sockets between hosts.
FROM ${BASE_IMAGE} AS gpu-build
ARG NVIDIA_COMPILER_RELEASE
ARG NVIDIA_COMPILER_VERSION
ARG AWS_OFI_NCCL_VERSION
ARG AWS_OFI_NCCL_SHA256
# Horovod's library loads the NCCL wheel's libnccl.so.2 from the library path, as in the shipped stage
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 \
    LD_LIBRARY_PATH=/opt/smtrain/venv/lib/python3.11/site-packages/nvidia/nccl/lib
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ make cmake \
      openmpi-bin libopenmpi-dev libfabric-dev ca-certificates curl libcurl4-openssl-dev libssl-dev libexpat1-dev \
      nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
COPY docker/nvidia-compiler.sh /src/docker/
RUN /src/docker/nvidia-compiler.sh /opt/nvidia-compiler "$NVIDIA_COMPILER_RELEASE" "$NVIDIA_COMPILER_VERSION"
COPY requirements/ /src/requirements/
COPY scripts/build-stack.sh scripts/patch-horovod-build.py scripts/cuda-home.sh /src/scripts/
RUN HOROVOD_GPU_OPERATIONS=NCCL NVIDIA_COMPILER_ROOT=/opt/nvidia-compiler HOROVOD_CUDA_HOME=/opt/cuda \
    HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90 \
    /src/scripts/build-stack.sh /usr/bin/python3 /opt/smtrain/venv /src/requirements/stack-gpu.txt
COPY docker/aws-ofi-nccl.sh /src/docker/
RUN /src/docker/aws-ofi-nccl.sh "$AWS_OFI_NCCL_VERSION" "$AWS_OFI_NCCL_SHA256" /opt/cuda /opt/smtrain/aws-ofi-nccl
RUN python3 -m venv /opt/smtrain/smdebug \
 && /opt/smtrain/smdebug/bin/pip install -q -r /src/requirements/smdebug.txt \
 && find /opt/smtrain/smdebug -name __pycache__ -prune -exec rm -rf {} +
COPY scripts/patch-horovod.py /src/scripts/
RUN /opt/smtrain/venv/bin/python /src/scripts/patch-horovod.py
COPY native/ /src/native/
COPY scripts/build-native.sh /src/scripts/
RUN /src/scripts/build-native.sh /opt/smtrain/venv
COPY pyproject.toml /src/
COPY entrypoint/ /src/entrypoint/
# gevent's own test suite (gevent comes with sagemaker-training) ships TLS private keys: not shipped
RUN /opt/smtrain/venv/bin/pip install -q --no-deps --no-build-isolation /src \
 && rm -rf /opt/smtrain/venv/lib/python3.11/site-packages/gevent/tests \
 && find /opt/smtrain/venv -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE_IMAGE} AS gpu
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 openmpi-bin openssh-server openssh-client \
      procps iproute2 ca-certificates libcurl4 libexpat1 libfabric1 ibverbs-providers \
 && rm -rf /var/lib/apt/lists/* /etc/ssh/ssh_host_*
COPY docker/sshd_config /etc/ssh/sshd_config
COPY docker/ssh_config /etc/ssh/ssh_config.d/smtrain.conf
COPY docker/openmpi-mca-params.conf /etc/openmpi/openmpi-mca-params.conf
COPY docker/nccl.conf /etc/nccl.conf
COPY docker/modeltrainer-hook.sh /opt/smtrain/modeltrainer-hook.sh
COPY --from=gpu-build /opt/smtrain/venv /opt/smtrain/venv
COPY --from=gpu-build /opt/smtrain/smdebug /opt/smtrain/smdebug
COPY --from=gpu-build /opt/smtrain/aws-ofi-nccl /opt/smtrain/aws-ofi-nccl
# NCCL: the one libnccl.so.2 of the nvidia-nccl-cu12 wheel, for TensorFlow and Horovod alike; its EFA
# plugin where the image has one (libnccl-net.so on LD_LIBRARY_PATH, which NCCL loads itself).
ENV PATH=/opt/smtrain/venv/bin:$PATH \
    BASH_ENV=/opt/smtrain/modeltrainer-hook.sh \
    LD_LIBRARY_PATH=/opt/smtrain/venv/lib/python3.11/site-packages/nvidia/nccl/lib:/opt/smtrain/aws-ofi-nccl/lib \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1 \
    TF_CPP_MIN_LOG_LEVEL=1
WORKDIR /opt/ml/code
CMD ["train"]
