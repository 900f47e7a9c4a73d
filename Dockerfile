# Multi-stage build: compile with the Rust toolchain, ship only the binary on a
# slim Debian runtime as a non-root user.
#   docker build -t sluice .
#   docker run --rm -p 8080:8080 sluice --listen 0.0.0.0:8080 --upstream 10.0.0.5:8000
# `docker stop` sends SIGTERM (the graceful drain) and waits 10 s by default:
# give it more than drain_timeout (`docker stop -t 40`), or lower drain_timeout.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml ./
COPY src ./src
COPY examples ./examples
RUN cargo build --release && strip target/release/sluice

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin sluice
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
COPY examples/sluice.toml /etc/sluice/sluice.toml
USER sluice
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["--config", "/etc/sluice/sluice.toml", "--listen", "0.0.0.0:8080"]
