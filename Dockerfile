# syntax=docker/dockerfile:1
#
# The edge container image (docs/deploying.md, "Container image and systemd
# unit"):
#
#   docker build -t edge .
#   docker run --rm -p 8080:8080 -e EDGE_KEY_SECRET -e EDGE_ADMIN_TOKEN edge \
#     serve -config /etc/edge/policies.hcl -listen 0.0.0.0:8080 -upstream http://app:9000
#
# BuildKit (Docker's builder since 23.0; buildah and podman too) runs it: the
# RUN lines keep Go's module and build caches in --mount=type=cache mounts.
#
# cmd/edge/dockerfile_test.go builds the binary as the build stage's RUN line
# does and runs the final stage's ENTRYPOINT + CMD and HEALTHCHECK, with the
# files where the COPY lines put them: no container daemon is needed to test
# what the image runs.

# ---- Build: a static binary (no cgo, so no libc to ship). ----------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The build context includes .git (see .dockerignore), so that `edge version`
# names the commit. Building from a directory that is not a git checkout
# needs nothing; from a git worktree (whose .git points outside the
# context), pass --build-arg GOFLAGS=-buildvcs=false.
ARG GOFLAGS
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/edge ./cmd/edge

# ---- Run: distroless static, non-root. ------------------------------------
# distroless/static has no shell, libc or package manager, but does have
# what a static Go binary needs from a filesystem: CA certificates
# (/etc/ssl/certs/ca-certificates.crt, for rediss:// and https:// origins),
# tzdata, and /etc/passwd with the nonroot user (65532). scratch would need
# all three copied in by hand.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/edge /usr/local/bin/edge
# The shipped policy. Mount your own over it (-v ./policies.hcl:/etc/edge/policies.hcl:ro).
COPY policies.hcl /etc/edge/policies.hcl
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# The public listener. The admin listener (/readyz, /metrics, the admin API)
# stays on the policy's admin_listen, 127.0.0.1:9901: loopback of the
# container, reached by the HEALTHCHECK (which runs inside it) and by
# `docker exec`, never published.
EXPOSE 8080
# `edge health` probes /readyz on the policy's admin_listen; it passes while
# the store is degraded (add -strict to fail it: a fleet sharing one sick
# Redis would then be restarted all at once), and fails while the store
# refuses the node (a wrong password, an ACL: every login would be 503),
# so a rollout with a mistyped secret stops at its first container.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/edge", "health", "-config", "/etc/edge/policies.hcl"]
ENTRYPOINT ["/usr/local/bin/edge"]
# The shipped policy's upstream is http://127.0.0.1:9000: an origin in the
# same network namespace (a sidecar in the pod). Elsewhere add
# -upstream http://ORIGIN:PORT, or mount a policy that names it.
CMD ["serve", "-config", "/etc/edge/policies.hcl", "-listen", "0.0.0.0:8080"]
