# tomod and tomo in a container. Two variants of one image, chosen by VARIANT:
#   cuda (default)  built on NVIDIA's CUDA 13 development image, run on the matching
#                   runtime image (Ubuntu 24.04); needs the NVIDIA Container Toolkit to
#                   see GPUs (docker run --gpus all), runs on the CPU without them.
#   cpu             built and run on Debian 12; the CPU backend only.
#
#   docker build -t tomoserve .
#   docker build -t tomoserve:cpu --build-arg VARIANT=cpu .
#   docker build -t tomoserve --build-arg CUDA_ARCHITECTURES="80;90" .   # A100 as well
#
# The default command serves TLS on 0.0.0.0:50051 with the certificate, key and tokens
# mounted at /run/secrets/tomoserve (tls.crt, tls.key, tokens), and refuses to start
# without them. deploy/README.md says how to make them, how to add mutual TLS, and how to
# run in plain text where the network is private. Podman and buildah take this file as
# it is (deploy/build-image builds the cpu variant with buildah).

# Base images, fully qualified so that podman and buildah need no short-name alias.
ARG CUDA_VERSION=13.0.0
ARG CUDA_BUILD_IMAGE=docker.io/nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04
ARG CUDA_RUNTIME_IMAGE=docker.io/nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04
ARG DEBIAN_IMAGE=docker.io/library/debian:12-slim
ARG VARIANT=cuda

# ---------------------------------------------------------------------------- build
FROM ${CUDA_BUILD_IMAGE} AS build-cuda
# The CUDA backend is compiled because the image has /usr/local/cuda/bin/nvcc.
# CUDA_ARCHITECTURES: the GPUs the image serves (90 = H100/H200; "80;90" adds A100).
ARG CUDA_ARCHITECTURES=90
ENV TOMO_CMAKE_FLAGS="-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"

FROM ${DEBIAN_IMAGE} AS build-cpu
ENV TOMO_CMAKE_FLAGS="-DTOMO_ENABLE_CUDA=OFF"

FROM build-${VARIANT} AS build
WORKDIR /src
COPY scripts/setup scripts/setup
RUN scripts/setup --build-only && rm -rf /var/lib/apt/lists/*
COPY . .
# BUILD_JOBS: parallel compile jobs (default: every core).
ARG BUILD_JOBS=
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOMO_BUILD_TESTS=OFF \
      ${TOMO_CMAKE_FLAGS} \
 && cmake --build /build --target tomod tomo -j "${BUILD_JOBS:-$(nproc)}"
# The binaries and the shared libraries they need that the runtime image lacks (gRPC,
# protobuf, Abseil, FFTW, SQLite, libmicrohttpd, OpenSSL, DCMTK, ...). glibc, libstdc++
# and libgcc are in both runtime images, the CUDA libraries in NVIDIA's; libcuda and NVML
# come from the host's driver through the NVIDIA Container Toolkit.
RUN mkdir -p /opt/tomoserve/bin /opt/tomoserve/lib \
 && cp /build/bin/tomod /build/bin/tomo /opt/tomoserve/bin/ \
 && strip /opt/tomoserve/bin/* \
 && ldd /opt/tomoserve/bin/* | awk '/=> \//{print $1, $3}' | sort -u | \
    while read -r name path; do \
      case "$name" in \
        linux-vdso*|libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda.so*|libnvidia-ml*|libcudart*|libcufft*) ;; \
        *) cp -L "$path" /opt/tomoserve/lib/ ;; \
      esac; \
    done

# ---------------------------------------------------------------------------- runtime
FROM ${CUDA_RUNTIME_IMAGE} AS runtime-cuda
FROM ${DEBIAN_IMAGE} AS runtime-cpu

FROM runtime-${VARIANT} AS runtime
COPY --from=build /opt/tomoserve /opt/tomoserve
# A fixed numeric user and group, so that Kubernetes' runAsNonRoot can check it and
# volumes and secrets can be prepared for it (chown 10001:10001).
RUN groupadd --system --gid 10001 tomod \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/tomoserve --no-create-home \
      --shell /usr/sbin/nologin tomod \
 && mkdir -p /var/lib/tomoserve/spool /run/secrets/tomoserve \
 && chown -R 10001:10001 /var/lib/tomoserve \
 && LD_LIBRARY_PATH=/opt/tomoserve/lib ldd /opt/tomoserve/bin/tomod /opt/tomoserve/bin/tomo \
      | grep -v -E 'libcuda\.so|libnvidia-ml' | (! grep 'not found')
# TOMO_SERVER and TOMO_TLS_CA are what `tomo` inside the container (the health check,
# `docker exec ... tomo info`) uses: the daemon of this container over TLS, the server
# certificate checked against the CA mounted beside it (the certificate must name
# localhost). A plain-text container sets TOMO_TLS_CA= (empty).
# LD_LIBRARY_PATH keeps the CUDA image's own (where older NVIDIA Container Toolkits mount
# the driver's libraries).
ENV PATH=/opt/tomoserve/bin:$PATH \
    LD_LIBRARY_PATH=/opt/tomoserve/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}} \
    TOMO_SERVER=localhost:50051 \
    TOMO_TLS_CA=/run/secrets/tomoserve/ca.crt
USER 10001:10001
WORKDIR /var/lib/tomoserve
# The spool: uploads, results and the job records (SQLite). Mount a volume here; a
# container started again on it finds its jobs (queued ones stay queued).
VOLUME /var/lib/tomoserve/spool
# 50051: gRPC (TLS). 9473: Prometheus metrics (/metrics, plain HTTP), on the container's
# loopback unless the flags add --metrics_host=0.0.0.0 --allow_insecure_remote and a
# --metrics_token_file (deploy/compose/compose.yaml).
EXPOSE 50051 9473
# SIGTERM drains: health turns NOT_SERVING, running jobs get --drain_timeout (30 s) to
# finish, then go back to the queue for the next start. Give the runtime longer than that
# before it kills (docker run --stop-timeout 60, Kubernetes terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
# The gRPC health service answers without a token; with mutual TLS the check needs a
# client certificate too (TOMO_TLS_CERT, TOMO_TLS_KEY).
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["tomo", "health", "--timeout", "5"]
ENTRYPOINT ["tomod", "--spool_dir=/var/lib/tomoserve/spool"]
CMD ["--listen=0.0.0.0:50051", \
     "--tls_cert_file=/run/secrets/tomoserve/tls.crt", \
     "--tls_key_file=/run/secrets/tomoserve/tls.key", \
     "--tokens_file=/run/secrets/tomoserve/tokens"]
