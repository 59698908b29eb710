# kubesched's container image: build with the Rust toolchain, run on a minimal image.
#   docker build -t kubesched:latest .
# See docs/deploy.md.

# The builder's Debian release matches the runtime's (bookworm, glibc 2.36): a binary
# linked against a newer glibc would not start on the older runtime image.
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# --locked: build exactly the dependency versions in Cargo.lock.
RUN cargo build --release --locked -p kubesched \
 && install -D -m 0755 target/release/kubesched /out/kubesched

# distroless/cc: glibc and libgcc for a Rust binary, no shell or package manager;
# the :nonroot tag runs as uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/kubesched /usr/local/bin/kubesched
USER 65532:65532
# --port default (kube-scheduler's): /healthz, /livez, /readyz, /metrics.
EXPOSE 10259
ENTRYPOINT ["/usr/local/bin/kubesched"]
