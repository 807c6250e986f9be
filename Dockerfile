# perfgate as a GitHub Docker action (action.yml). Two stages: build with the official Rust image,
# run on slim Debian. TLS is rustls (no OpenSSL in the image); ca-certificates supplies the roots
# that rustls-native-certs reads for https endpoints and the GitHub API.
# Not built in this repository's CI: no Docker engine is available there (see README).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# `perfgate init` embeds the PR workflow example (include_str!).
COPY examples/workflows ./examples/workflows
# No debug info in the shipped binary (the release profile keeps some for local profiling).
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=true
RUN cargo build --locked --release --bin perfgate \
    && cp target/release/perfgate /usr/local/bin/perfgate

FROM debian:bookworm-slim
# ca-certificates is deliberately not pinned: an old root store is worse than a moved version.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 1001 --user-group --create-home --shell /usr/sbin/nologin perfgate
COPY --from=build /usr/local/bin/perfgate /usr/local/bin/perfgate
COPY scripts/action-entrypoint.sh /usr/local/bin/perfgate-action
# Non-root. uid 1001 is the runner user of GitHub-hosted runners, which owns the mounted workspace
# and the $GITHUB_OUTPUT / $GITHUB_STEP_SUMMARY files the action writes.
USER 1001
ENTRYPOINT ["/usr/local/bin/perfgate-action"]
