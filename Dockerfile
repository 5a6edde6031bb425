# syntax=docker/dockerfile:1
#
# The break-glass server image: the release binary and the frontend it serves, on a minimal
# runtime (glibc, CA certificates, no shell). Built by the same commands as the scripts:
# scripts/install-tools.sh and `trunk build --release` for the frontend (scripts/dev.sh,
# scripts/test.sh), `cargo build --release -p breakglass-server` for the server.
#
#   docker build -t breakglass-server:dev .
#   docker run --rm -p 8080:8080 breakglass-server:dev --dev --no-clusters
#
# Runs as uid/gid 10001 and writes only to /var/lib/breakglass (the data directory: mount a
# volume) and /tmp, so it works with a read-only root filesystem. No HEALTHCHECK: Kubernetes
# probes /healthz and /readyz (deploy/helm/breakglass). CI: .github/workflows/image.yml.

# Base images, pinned by the digest of their multi-arch index: a tag moves when its publisher
# pushes, a digest does not. CI refuses an unpinned one (scripts/check-pins.py). To move to a
# newer image, read its digest (`docker buildx imagetools inspect rust:1-bookworm`, and the
# same for the runtime) and replace the pin here.
ARG RUST_IMAGE=rust:1-bookworm@sha256:93ce27a88655056a51dbdd8f5f2d7ddc071c7b0070fb288a37b5a285fc83971e
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f

FROM ${RUST_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# npm for scripts/install-tools.sh (wasm-opt and xterm.js come from frontend/package-lock.json).
# Unpinned: build tools of the base image's Debian release, nothing of them reaches the image.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The frontend toolchain first, from the few files it depends on, so a source change reuses it.
ENV BREAKGLASS_CACHE=/opt/breakglass
COPY rust-toolchain.toml Cargo.lock ./
COPY scripts/install-tools.sh scripts/env.sh scripts/
COPY frontend/package.json frontend/package-lock.json frontend/
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/opt/breakglass/tools-build \
    scripts/install-tools.sh
COPY . .
# The frontend into frontend/dist, then the server; the target directory is a build cache, so
# the binary is copied out of it in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    . scripts/env.sh \
    && trunk build --release \
    && cargo build --release --locked -p breakglass-server \
    && install -D -m 0755 target/release/breakglass-server /out/breakglass-server \
    && install -d -m 0700 /out/data

FROM ${RUNTIME_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="breakglass-server" \
      org.opencontainers.image.description="Break-glass for Kubernetes: time-boxed, recorded, policy-fenced shell access to a running pod, from a browser" \
      org.opencontainers.image.source="https://github.com/hangar-platform/breakglass" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/breakglass-server /usr/local/bin/breakglass-server
COPY --from=build /src/frontend/dist /usr/share/breakglass/dist
COPY --from=build --chown=10001:10001 /out/data /var/lib/breakglass
ENV BREAKGLASS_LISTEN=0.0.0.0:8080 \
    BREAKGLASS_DATA_DIR=/var/lib/breakglass \
    BREAKGLASS_STATIC_DIR=/usr/share/breakglass/dist
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/breakglass-server"]
CMD ["serve"]
