# TensorFlow + Horovod training image for Amazon SageMaker; entry point `train`. Two flavours:
#   CPU (builds anywhere):  docker build --build-arg BASE_IMAGE=<debian:bookworm-slim or a local base> --target cpu -t smtrain:cpu .
#   GPU (CUDA 12.5.1 + cuDNN 9.3, what TensorFlow 2.21's wheel is built with; NCCL, EFA):  docker build --target gpu -t smtrain:gpu .
# TensorFlow's version: requirements/tensorflow-version. The Python stack is built the same way in
# both, by scripts/build-stack.sh (Horovod from source, patched by scripts/patch-horovod-build.py;
# smtrain's native Pipe reader by scripts/build-native.sh); smdebug's readers get an environment of
# their own (/opt/smtrain/smdebug). Only the final stages are shipped, with no compiler, no pip
# cache and no apt lists.
ARG BASE_IMAGE=debian:bookworm-slim
ARG CUDA_DEVEL_IMAGE=nvidia/cuda:12.5.1-cudnn-devel-ubuntu22.04
ARG CUDA_RUNTIME_IMAGE=nvidia/cuda:12.5.1-cudnn-runtime-ubuntu22.04
ARG EFA_INSTALLER_VERSION=1.43.2

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
RUN /opt/smtrain/venv/bin/pip install -q --no-deps --no-build-isolation /src \
 && find /opt/smtrain/venv -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE_IMAGE} AS cpu
ENV DEBIAN_FRONTEND=noninteractive
COPY docker/make-ssh-keys.sh /usr/local/sbin/
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 openmpi-bin openssh-server openssh-client \
      procps iproute2 ca-certificates libcurl4 libexpat1 \
 && rm -rf /var/lib/apt/lists/* \
 && make-ssh-keys.sh
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
# Horovod is compiled against the MPI that runs the job: Amazon's Open MPI from the EFA installer.
FROM ${CUDA_DEVEL_IMAGE} AS gpu-build
ARG EFA_INSTALLER_VERSION
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1
COPY docker/install-efa.sh /usr/local/sbin/
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ make cmake \
      libcurl4-openssl-dev libssl-dev libexpat1-dev nlohmann-json3-dev \
 && install-efa.sh "${EFA_INSTALLER_VERSION}"
COPY requirements/ /src/requirements/
COPY scripts/build-stack.sh scripts/patch-horovod-build.py /src/scripts/
RUN python3 -m venv /opt/smtrain/smdebug \
 && /opt/smtrain/smdebug/bin/pip install -q -r /src/requirements/smdebug.txt \
 && find /opt/smtrain/smdebug -name __pycache__ -prune -exec rm -rf {} +
# NCCL operations for allreduce/allgather/broadcast; kernels for V100, T4, A100, A10G, L4 and H100.
RUN PATH=/opt/amazon/openmpi/bin:$PATH HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED \
    HOROVOD_CUDA_HOME=/usr/local/cuda HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90 \
    /src/scripts/build-stack.sh /usr/bin/python3 /opt/smtrain/venv /src/requirements/stack-gpu.txt
COPY scripts/patch-horovod.py /src/scripts/
RUN /opt/smtrain/venv/bin/python /src/scripts/patch-horovod.py
COPY native/ /src/native/
COPY scripts/build-native.sh /src/scripts/
RUN /src/scripts/build-native.sh /opt/smtrain/venv
COPY pyproject.toml /src/
COPY entrypoint/ /src/entrypoint/
RUN /opt/smtrain/venv/bin/pip install -q --no-deps --no-build-isolation /src \
 && find /opt/smtrain/venv -name __pycache__ -prune -exec rm -rf {} +

FROM ${CUDA_RUNTIME_IMAGE} AS gpu
ARG EFA_INSTALLER_VERSION
ENV DEBIAN_FRONTEND=noninteractive
COPY docker/install-efa.sh docker/make-ssh-keys.sh /usr/local/sbin/
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 openssh-server openssh-client procps iproute2 \
      ca-certificates libcurl4 libexpat1 \
 && install-efa.sh "${EFA_INSTALLER_VERSION}" \
 && rm -rf /var/lib/apt/lists/* \
 && make-ssh-keys.sh
COPY docker/sshd_config /etc/ssh/sshd_config
COPY docker/ssh_config /etc/ssh/ssh_config.d/smtrain.conf
COPY docker/openmpi-mca-params.conf /opt/amazon/openmpi/etc/openmpi-mca-params.conf
COPY docker/nccl.conf /etc/nccl.conf
COPY docker/modeltrainer-hook.sh /opt/smtrain/modeltrainer-hook.sh
COPY --from=gpu-build /opt/smtrain/venv /opt/smtrain/venv
COPY --from=gpu-build /opt/smtrain/smdebug /opt/smtrain/smdebug
ENV PATH=/opt/smtrain/venv/bin:/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:$PATH \
    BASH_ENV=/opt/smtrain/modeltrainer-hook.sh \
    LD_LIBRARY_PATH=/opt/amazon/openmpi/lib:/opt/amazon/efa/lib:/opt/amazon/aws-ofi-nccl/lib:$LD_LIBRARY_PATH \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1 \
    TF_CPP_MIN_LOG_LEVEL=1
WORKDIR /opt/ml/code
CMD ["train"]
