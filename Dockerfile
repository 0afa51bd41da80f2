# tomod in a container: a CUDA development image builds tomod and tomo, a CUDA runtime
# image runs them. Build:  docker build -t tomoserve .
# Run:    docker run --gpus all -p 50051:50051 -v tomo-spool:/var/lib/tomoserve tomoserve
# See deploy/README.md.
ARG CUDA_VERSION=13.0.0
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
WORKDIR /src
COPY scripts/setup scripts/setup
RUN scripts/setup && rm -rf /var/lib/apt/lists/*
COPY . .
# CUDA_ARCHITECTURES: the GPUs the image serves (90 = H100/H200; e.g. "80;90" for A100 too).
ARG CUDA_ARCHITECTURES=90
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOMO_BUILD_TESTS=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
 && cmake --build build --target tomod tomo -j "$(nproc)"
# Gather the shared libraries the binaries need that the runtime image lacks (gRPC,
# protobuf, Abseil, FFTW, SQLite (libsqlite3.so.0, the runtime of libsqlite3-dev),
# libmicrohttpd (libmicrohttpd.so.12, the metrics endpoint's HTTP server), ...);
# glibc, libstdc++ and the CUDA libraries are there already.
RUN mkdir -p /opt/tomoserve/bin /opt/tomoserve/lib \
 && cp build/bin/tomod build/bin/tomo /opt/tomoserve/bin/ \
 && ldd /opt/tomoserve/bin/* | awk '/=> \//{print $1, $3}' | sort -u | \
    while read -r name path; do \
      case "$name" in \
        linux-vdso*|libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcuda.so*|libcudart*|libcufft*) ;; \
        *) cp -L "$path" /opt/tomoserve/lib/ ;; \
      esac; \
    done

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS runtime
COPY --from=build /opt/tomoserve /opt/tomoserve
ENV PATH=/opt/tomoserve/bin:$PATH \
    LD_LIBRARY_PATH=/opt/tomoserve/lib:$LD_LIBRARY_PATH
RUN useradd --system --create-home --home-dir /var/lib/tomoserve tomod \
 && mkdir -p /var/lib/tomoserve/spool && chown -R tomod /var/lib/tomoserve \
 && ldd /opt/tomoserve/bin/tomod | (! grep 'not found')
USER tomod
VOLUME /var/lib/tomoserve
# 50051: gRPC. 9473: Prometheus metrics (/metrics), on --metrics_host.
EXPOSE 50051 9473
# SIGTERM drains: running jobs get --drain_timeout (30 s) to finish, then go back to the
# queue for the next start. Give `docker stop` more than that (docker run --stop-timeout 45),
# or lower --drain_timeout; its default 10 s ends in SIGKILL, and the interrupted runs then
# count as attempts.
STOPSIGNAL SIGTERM
# Listening beyond loopback in plain text must be asked for explicitly: the container's
# network namespace is the boundary here; put TLS in front or keep the port private.
ENTRYPOINT ["tomod", "--spool_dir", "/var/lib/tomoserve/spool"]
CMD ["--listen", "0.0.0.0:50051", "--metrics_host", "0.0.0.0", "--allow_insecure_remote"]
