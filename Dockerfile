# The rentcheck image. `docker compose up` builds and runs it next to PostgreSQL
# (docker-compose.yml); alone: `docker build -t rentcheck .` and
# `docker run -e DATABASE_URL=postgres://… -p 127.0.0.1:8080:8080 rentcheck`.
FROM rust:1-bookworm AS build
WORKDIR /src
# The dependencies first, in a layer of their own that only Cargo.toml and Cargo.lock decide: a
# change to the source or a doc rebuilds rentcheck alone, not the ~400 crates under it. Stub
# sources stand in for the library, the binary, the engine crate and the bench the manifests name;
# their artifacts are removed after, so the real sources (older by mtime than the stubs) are
# compiled for sure.
COPY Cargo.toml Cargo.lock ./
COPY engine/Cargo.toml engine/
COPY .cargo .cargo
RUN mkdir -p server engine/src engine/benches \
    && echo 'fn main() {}' > server/main.rs \
    && touch server/lib.rs engine/src/lib.rs \
    && echo 'fn main() {}' > engine/benches/parsers.rs \
    && cargo build --release --locked --bin rentcheck \
    && rm -rf server engine target/release/rentcheck target/release/.fingerprint/rentcheck-* \
        target/release/deps/rentcheck-* target/release/deps/librentcheck-* \
        target/release/.fingerprint/engine-* target/release/deps/engine-* target/release/deps/libengine-*
COPY . .
RUN cargo build --release --locked --bin rentcheck

FROM debian:bookworm-slim
# curl answers the HEALTHCHECK below; ca-certificates lets an s3:// evidence store use https.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/*
# A user of its own that owns the data dir. A named volume mounted on /data starts as a copy of
# this directory, owner and mode included, so the app can write its generated secret there.
RUN groupadd --system --gid 10001 rentcheck \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --shell /usr/sbin/nologin rentcheck \
    && mkdir -p /data \
    && chown 10001:10001 /data \
    && chmod 0700 /data
COPY --from=build /src/target/release/rentcheck /usr/local/bin/rentcheck
ENV RENTCHECK_DATA_DIR=/data \
    RENTCHECK_ADDR=0.0.0.0:8080
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 10001:10001
VOLUME /data
EXPOSE 8080
# Healthy once the database answers and the migrations are applied.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=12 \
    CMD curl -fsS -o /dev/null http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["rentcheck"]
CMD ["serve"]
