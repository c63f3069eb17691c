# TensorFlow + Horovod training image for Amazon SageMaker; entry point `train`.
#   CPU flavour (builds anywhere):  docker build --build-arg BASE_IMAGE=<debian:bookworm or a local base> -t smtrain:cpu .
# The GPU flavour (CUDA/cuDNN/NCCL/EFA base) is not written yet.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ make cmake \
      openmpi-bin libopenmpi-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY requirements/ /src/requirements/
RUN python3 -m venv /opt/smtrain/venv \
 && /opt/smtrain/venv/bin/pip install --no-cache-dir -q pip==24.3.1 setuptools==75.6.0 wheel==0.45.1 \
 && /opt/smtrain/venv/bin/pip install --no-cache-dir -q -r /src/requirements/stack.txt \
 && /opt/smtrain/venv/bin/pip install --no-cache-dir -q --no-deps tf-keras==2.18.0 \
 && HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
    /opt/smtrain/venv/bin/pip install --no-cache-dir -q --no-build-isolation horovod==0.28.1
COPY pyproject.toml /src/
COPY entrypoint/ /src/entrypoint/
RUN /opt/smtrain/venv/bin/pip install --no-cache-dir -q --no-deps --no-build-isolation /src \
 && find /opt/smtrain/venv -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE_IMAGE} AS cpu
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 openmpi-bin openssh-server openssh-client \
      procps iproute2 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh \
 && rm -f /etc/ssh/ssh_host_* && ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key \
 && ssh-keygen -q -t ed25519 -N "" -f /root/.ssh/id_ed25519 \
 && cp /root/.ssh/id_ed25519.pub /root/.ssh/authorized_keys
COPY docker/sshd_config /etc/ssh/sshd_config
COPY docker/ssh_config /etc/ssh/ssh_config.d/smtrain.conf
COPY docker/openmpi-mca-params.conf /etc/openmpi/openmpi-mca-params.conf
COPY --from=build /opt/smtrain/venv /opt/smtrain/venv
ENV PATH=/opt/smtrain/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1 \
    TF_CPP_MIN_LOG_LEVEL=1
WORKDIR /opt/ml/code
CMD ["train"]
