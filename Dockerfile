# syntax=docker/dockerfile:1
# The base images are build arguments so the same file builds on a normal
# workstation from public images (the defaults) and offline from images built
# locally (see README.md, "Building the image offline").
ARG BUILD_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian13:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -ldflags "-s -w -X github.com/rancher/registration-engine/job.Version=${VERSION}" -o /out/registration-engine . \
 && go build -ldflags "-s -w" -o /out/fakecloud ./e2e/cmd/fakecloud

# The fake cloud for the e2e pod: same base, same non-root user.
FROM ${BASE_IMAGE} AS fakecloud
COPY --from=build /out/fakecloud /fakecloud
USER 65532:65532
ENTRYPOINT ["/fakecloud"]

# The engine. The base must carry a CA bundle (distroless/static does) for
# Entra and ARM; it needs no shell.
FROM ${BASE_IMAGE}
COPY --from=build /out/registration-engine /registration-engine
USER 65532:65532
ENTRYPOINT ["/registration-engine"]
