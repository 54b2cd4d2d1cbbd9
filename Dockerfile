FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin rentcheck

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/rentcheck /usr/local/bin/rentcheck
USER nobody
EXPOSE 8080
ENTRYPOINT ["rentcheck"]
CMD ["serve"]
