# No "# syntax=" line: it would make BuildKit pull its Dockerfile frontend
# by a tag that moves (docker/dockerfile:1), an input of the release that no
# pin covers; nothing here needs more than the builder's own frontend.
# The base images are build arguments so the same file builds on a normal
# workstation from public images (the defaults) and offline from images built
# locally (see docs/install.md, "The image"). The defaults are tags, which
# move: a release names both bases by digest (name@sha256:...), and
# hack/release.sh refuses one that does not (docs/releasing.md). These two
# lines are the one place the defaults are written: the Makefile and
# hack/release.sh read them from here.
ARG BUILD_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian13:nonroot
# The architecture the image is for (amd64 or arm64). Go cross-compiles,
# so the build stage always runs on the machine that builds (BUILDPLATFORM)
# and nothing runs under emulation. BuildKit sets both from --platform;
# the classic builder (DOCKER_BUILDKIT=0, as e2e/kind/images.sh uses) sets
# neither, so they are build arguments with defaults where they are used:
# linux/amd64 for the build stage and amd64 for the image, unless given as
# --build-arg BUILDPLATFORM=linux/<arch> --build-arg TARGETARCH=<arch>
# (make image passes both). No default here: one would replace BuildKit's.
ARG BUILDPLATFORM
ARG TARGETARCH

FROM --platform=${BUILDPLATFORM:-linux/amd64} ${BUILD_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETARCH
RUN export GOOS=linux GOARCH=${TARGETARCH:-amd64} \
 && go build -ldflags "-s -w -X github.com/rancher/registration-engine/job.Version=${VERSION}" -o /out/registration-engine . \
 && go build -ldflags "-s -w" -o /out/fakecloud ./e2e/cmd/fakecloud

# The fake cloud for the e2e pod: same base, same non-root user.
FROM --platform=linux/${TARGETARCH:-amd64} ${BASE_IMAGE} AS fakecloud
COPY --from=build /out/fakecloud /fakecloud
USER 65532:65532
ENTRYPOINT ["/fakecloud"]

# The engine. The base must carry a CA bundle (distroless/static does) for
# Entra and ARM; it needs no shell.
FROM --platform=linux/${TARGETARCH:-amd64} ${BASE_IMAGE}
# OCI annotations (image-spec annotations.md): what a registry, a scanner
# or `docker inspect` shows. make image passes the version (VERSION), the
# commit (REVISION), the commit's time (CREATED) and the base split into its
# name and digest (BASE_NAME, BASE_DIGEST: BASE_IMAGE is name@sha256:...
# when pinned, and a Dockerfile cannot split a string); without them the
# base's name is BASE_IMAGE as given and its digest is empty.
ARG BASE_IMAGE
ARG BASE_NAME=${BASE_IMAGE}
ARG BASE_DIGEST=
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=
LABEL org.opencontainers.image.title="registration-engine" \
      org.opencontainers.image.description="Registers a Pay-As-You-Go Rancher cluster with SUSE's update infrastructure" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/rancher/registration-engine" \
      org.opencontainers.image.url="https://github.com/rancher/registration-engine" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="SUSE" \
      org.opencontainers.image.base.name="${BASE_NAME}" \
      org.opencontainers.image.base.digest="${BASE_DIGEST}"
COPY --from=build /out/registration-engine /registration-engine
USER 65532:65532
ENTRYPOINT ["/registration-engine"]
