# A container image of one of Tidewater's job binaries (any example: --build-arg BIN=...).
#
#   docker build -t tidewater-job --build-arg BIN=streaming_wordcount .
#   docker run --rm tidewater-job --runner native --workers 2 --records 24000
#
# Multi-stage: the toolchain builds the binary; the runtime image is Debian slim with
# the binary alone, run as an unprivileged user. deploy/kubernetes/ runs it as a
# cluster of processes (docs/deploying.md).
FROM rust:1-bookworm AS build
ARG BIN=wordcount
WORKDIR /src
COPY . .
# The same command .ci/deploy-check --build runs.
RUN cargo build --release --locked -p tidewater-examples --bin "$BIN" \
    && cp "target/release/$BIN" /job

FROM debian:bookworm-slim
COPY --from=build /job /usr/local/bin/job
# The bundled sample text, for the word count's default input.
COPY examples/data/ /src/examples/data/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/job"]
