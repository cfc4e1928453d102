# syntax=docker/dockerfile:1
# The Cortex MCP server (cortex-mcp), built from this repository.
#
#   docker build -t cortex-mcp .
#   docker run --rm -p 127.0.0.1:8765:8765 -e CORTEX_HTTP_TOKEN=... cortex-mcp --http 0.0.0.0:8765
#
# docker-compose.yml runs it next to a pgvector PostgreSQL.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
# C and C++ toolchains for the crates with native parts (ring, aws-lc, the bundled SQLite,
# the tokenizers used by local embeddings).
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake pkg-config perl \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p cortex-mcp --locked \
    && install -D -m 0755 target/release/cortex-mcp /out/cortex-mcp

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 cortex \
    && useradd --system --uid 10001 --gid cortex --home-dir /home/cortex --create-home cortex
COPY --from=build /out/cortex-mcp /usr/local/bin/cortex-mcp
USER cortex:cortex
WORKDIR /home/cortex
ENV RUST_LOG=info
EXPOSE 8765
ENTRYPOINT ["/usr/local/bin/cortex-mcp"]
CMD ["--http", "0.0.0.0:8765"]
