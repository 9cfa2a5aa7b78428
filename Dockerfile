# Two images from one build: `--target manager` (the operator) and
# `--target strata` (the storage engine, default).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.0.0-dev
ARG COMMIT=unknown
ENV CGO_ENABLED=0
RUN go build -trimpath \
      -ldflags "-s -w -X github.com/strata-storage/strata/engine/buildinfo.Version=${VERSION} -X github.com/strata-storage/strata/engine/buildinfo.Commit=${COMMIT}" \
      -o /out/manager . && \
    go build -trimpath \
      -ldflags "-s -w -X github.com/strata-storage/strata/engine/buildinfo.Version=${VERSION} -X github.com/strata-storage/strata/engine/buildinfo.Commit=${COMMIT}" \
      -o /out/strata ./cmd/strata

FROM gcr.io/distroless/static-debian12:nonroot AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

FROM gcr.io/distroless/static-debian12:nonroot AS strata
COPY --from=build /out/strata /strata
USER 65532:65532
ENTRYPOINT ["/strata"]
