# The two images of a release, where a Docker daemon exists (`make
# docker-build`): `--target strata` (the engine, default) and `--target
# manager` (the operator, image strata-operator). `make images` builds the
# same images without a daemon (internal/images); TestDockerfileAgrees
# checks that both give the same entrypoint, user, ports, environment and
# labels. The base is assembled by the build, not pulled: users, CA
# certificates and /tmp, nothing else.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0
ARG COMMIT=unknown
ENV CGO_ENABLED=0
RUN go build -trimpath \
      -ldflags "-s -w -buildid= -X github.com/strata-storage/strata/engine/buildinfo.Version=${VERSION} -X github.com/strata-storage/strata/engine/buildinfo.Commit=${COMMIT}" \
      -o /out/manager . && \
    go build -trimpath \
      -ldflags "-s -w -buildid= -X github.com/strata-storage/strata/engine/buildinfo.Version=${VERSION} -X github.com/strata-storage/strata/engine/buildinfo.Commit=${COMMIT}" \
      -o /out/strata ./cmd/strata && \
    go run ./hack/images -base-rootfs /out/base

FROM scratch AS base
COPY --from=build /out/base/ /
COPY --from=build --chown=65532:65532 /out/base/home/nonroot /home/nonroot
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /
USER 65532:65532

FROM base AS manager
ARG VERSION=0.1.0
ARG COMMIT=unknown
COPY --from=build /out/manager /manager
EXPOSE 8081/tcp 8443/tcp 9443/tcp
LABEL org.opencontainers.image.title="strata-operator" \
      org.opencontainers.image.description="Strata Kubernetes operator (Tenant, ServerPool, GatewayPool)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/strata-storage/strata"
ENTRYPOINT ["/manager"]

FROM base AS strata
ARG VERSION=0.1.0
ARG COMMIT=unknown
COPY --from=build /out/strata /strata
EXPOSE 9000/tcp
LABEL org.opencontainers.image.title="strata" \
      org.opencontainers.image.description="Strata storage engine: erasure-coded S3 server and S3-to-POSIX gateway" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/strata-storage/strata"
ENTRYPOINT ["/strata"]
