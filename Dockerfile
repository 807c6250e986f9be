# perfgate's container image, for GitLab CI, Jenkins and Kubernetes (the GitHub Action runs the
# binary on the runner's host and never uses it). .github/workflows/release.yml builds it for
# linux/amd64 and linux/arm64 from the release's own static musl binaries, staged in the build
# context as dist/linux-ARCH/perfgate: nothing is compiled here, and no step runs on the target
# platform, so the multi-arch build needs no emulation. TLS is rustls (no OpenSSL); the CA roots
# come from Debian's ca-certificates, installed on the build platform and copied in.

FROM --platform=$BUILDPLATFORM debian:bookworm-slim AS certs
# ca-certificates is deliberately not pinned: an old root store is worse than a moved version.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A shell stays in the image: GitLab CI and Jenkins run their job scripts with it.
FROM debian:bookworm-slim
ARG TARGETARCH
COPY --from=certs /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY dist/linux-${TARGETARCH}/perfgate /usr/local/bin/perfgate
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# Non-root, by number (no useradd: nothing runs on the target platform at build time).
USER 1001:1001
ENTRYPOINT ["/usr/local/bin/perfgate"]
CMD ["--help"]
