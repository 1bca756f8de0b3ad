# registration-engine — run `make help` for the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO            ?= go
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN           := $(CURDIR)/bin
LDFLAGS       := -s -w -X github.com/rancher/registration-engine/job.Version=$(VERSION)
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
CACHE_DIR     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/registration-engine
# Pinned Go tools (staticcheck, cyclonedx-gomod), built once per version into
# the cache so that a fresh clone does not build them again.
TOOLS_DIR     ?= $(CACHE_DIR)/tools/$(shell $(GO) env GOVERSION)
STATICCHECK_BIN := $(TOOLS_DIR)/staticcheck-$(lastword $(subst @, ,$(STATICCHECK)))
# The Kubernetes versions the tests run on: the newest AKS supports (every
# tier) and the oldest it still supports, as LTS (the control-plane tier's
# LTS_TESTS). docs/development.md, "Kubernetes versions", says why these two.
K8S_VERSION   ?= 1.37.2
K8S_TESTBIN   ?= $(CACHE_DIR)/k8s-testbin/v$(K8S_VERSION)
K8S_LTS_VERSION ?= 1.34.4
K8S_LTS_TESTBIN ?= $(CACHE_DIR)/k8s-testbin/v$(K8S_LTS_VERSION)
# What the control-plane tier runs again on the LTS version (make e2e-lts):
# the engine's Kubernetes surface (its Secret, Lease, CoreDNS edits, RBAC,
# Events, the CronJob's Job), the CoreDNS admission policy (its cost limits
# are the oldest version's) and the real operator registering from its
# Secret.
LTS_TESTS     ?= ^(TestCluster|TestOperator|TestEngineRBAC|TestChartInstall|TestStatus|TestCoreDNSAdmissionPolicy|TestCoreDNSAdmissionPolicyLongCorefile|TestCoreDNSAdmissionPolicyCleanupCopy)$$
# Where an end-to-end test runs. Every top-level test of E2E_PKGS runs in
# `make test` on K8S_VERSION, except those LONG_TESTS names: they run in
# `make e2e-long` (same version, same packages), which .ci/run runs. A new
# test lands in `make test`; name it here when it takes more than a minute
# on a warm two-core machine (`make test`'s budget is 6 minutes warm).
# docs/development.md, "Tests", says which command proves what.
LONG_TESTS    ?= ^(TestOperatorRecovery|TestRetryCronJobSleepsWhileRegistered|TestDailyCostOfARegisteredCluster)$$
# make test runs E2E_MAIN_PKGS in two go test processes side by side, each
# with its own control plane: E2E_SPLIT_TESTS in one, the rest in the
# other. Most of an end-to-end test's time is spent waiting on timers (the
# operator's, the Job controller's back-off, CoreDNS's reload), so two
# cores carry both: the package takes about 150 s instead of 205-256 s (see
# docs/development.md, "Tests"). A new test lands in the second process.
E2E_SPLIT_TESTS ?= ^(TestOperator|TestOperatorBehindAProxy|TestChartInstallFirstContact)$$
# The test tiers, by package path. UNIT_PKGS: the product's packages (no
# built binary, no control plane). HARNESS_PKGS: the end-to-end helpers whose
# own tests need neither (e2e/kind's suite is behind the build tag e2e, so
# here only its script checks run). E2E_PKGS: the suites on the built
# binaries and a real control plane: the product's (E2E_MAIN_PKGS) and the
# end-to-end harness's own (E2E_HARNESS_PKGS). make test runs the unit tiers,
# then E2E_HARNESS_PKGS, beside E2E_MAIN_PKGS: most of an end-to-end test's
# time is spent waiting on timers, so two cores carry both.
# `make tiers` fails when a package is in none of them, or in two.
UNIT_PKGS     := . ./job/... ./providers/... ./internal/... ./manifests/... ./hack/...
HARNESS_PKGS  := ./e2e/fakecloud/... ./e2e/cmd/... ./e2e/kind/...
E2E_MAIN_PKGS := ./e2e
E2E_HARNESS_PKGS := ./e2e/harness ./e2e/controlplane ./e2e/sccoperator
E2E_PKGS      := $(E2E_MAIN_PKGS) $(E2E_HARNESS_PKGS)
SCC_OPERATOR_DIR ?= $(CACHE_DIR)/scc-operator
SCC_OPERATOR_COMMITS ?=
HELM_VERSION  ?= 3.22.0
HELM_DIR      ?= $(CACHE_DIR)/helm/v$(HELM_VERSION)
# CoreDNS at the version kubeadm deploys for K8S_VERSION: coredns-bin.sh
# finds the version, builds it once and prints the binary's path. Expanded
# only by the recipes that use it.
COREDNS_BIN    = $(shell CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_VERSION) e2e/scripts/coredns-bin.sh 2>/dev/null)
# promtool, from Debian's prometheus package (e2e/scripts/promtool-bin.sh):
# the chart's PrometheusRule is unit-tested with it.
PROMTOOL_BIN   = $(shell CACHE_DIR=$(CACHE_DIR) e2e/scripts/promtool-bin.sh 2>/dev/null)
FAULT         ?=
FUZZTIME      ?= 30s
IMAGE         ?= registration-engine:latest
FAKECLOUD_IMAGE ?= registration-engine-fakecloud:latest
# The image's bases: by default the Dockerfile's (its ARG lines, the one
# place they are written), which hack/release.sh reads too.
BUILD_IMAGE   ?= $(shell sed -n 's/^ARG BUILD_IMAGE=//p' Dockerfile)
BASE_IMAGE    ?= $(shell sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
# The architectures `make image` builds, each as $(IMAGE)-<arch>; the chart's
# `architectures` value lists what the installed image carries. Offline bases
# built on this machine exist for its architecture only: IMAGE_ARCHS=amd64.
IMAGE_ARCHS   ?= amd64 arm64
# Where the build stage runs: this machine. Go cross-compiles for each
# architecture (GOARCH), so nothing runs under emulation.
BUILD_PLATFORM ?= linux/$(shell $(GO) env GOARCH)

export CGO_ENABLED := 0

.PHONY: help
help: ## show the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/registration-engine and bin/fakecloud (static)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/registration-engine .
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/fakecloud ./e2e/cmd/fakecloud

.PHONY: demo
demo: build ## run the engine once against the bundled fake cloud (FAULT=help lists the faults)
	@e2e/scripts/demo.sh "$(FAULT)"

.PHONY: test
test: pins tiers testbin scc-operator helm coredns sbom-tool promtool ## the contributor's loop: unit tests, the e2e helpers' own tests, the built binaries against the fake cloud, a real control plane (K8S_VERSION) and rancher/scc-operator; all but LONG_TESTS (go test -race)
	@mkdir -p _out; rm -f _out/unit-test.rc
	@# What the go test runs below compile, compiled once: from a cold
	@# GOCACHE they would each compile it, side by side. The same for the
	@# engine and the fake cloud, which each end-to-end process builds.
	@CGO_ENABLED=1 $(GO) build -race $$($(GO) list -f '{{if ne .Name "main"}}{{.ImportPath}}{{end}}' ./...)
	@$(GO) build . ./e2e/cmd/fakecloud
	@echo "--- end-to-end on Kubernetes $(K8S_VERSION): the built binaries, a real kube-apiserver and rancher/scc-operator, all but $(LONG_TESTS), in two processes: $(E2E_SPLIT_TESTS) (marked e2e|, full log: _out/e2e-test-split.log) beside the others (full log: _out/e2e-test.log)"
	@echo "--- beside them, marked unit|: the unit tests and the e2e helpers' own tests (full log: _out/unit-test.log), then the end-to-end harness's own tests, $(E2E_HARNESS_PKGS) (full log: _out/e2e-harness-test.log)"
	@{ set -o pipefail; \
	  CGO_ENABLED=1 K8S_TESTBIN=$(K8S_TESTBIN) HELM_BIN=$(HELM_DIR)/helm COREDNS_BIN=$(COREDNS_BIN) CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD_BIN) PROMTOOL_BIN=$(PROMTOOL_BIN) \
	    $(GO) test -race -count=1 -timeout 20m $(UNIT_PKGS) $(HARNESS_PKGS) 2>&1 | tee _out/unit-test.log | sed -u 's/^/unit| /'; unit_rc=$$?; \
	  ( $(call e2e,$(K8S_TESTBIN),10m,e2e-harness-test,-skip '$(LONG_TESTS)' $(E2E_HARNESS_PKGS)) ) 2>&1 | sed -u 's/^/unit| /'; \
	  echo "$$unit_rc $$?" >_out/unit-test.rc; } & \
	( set -o pipefail; ( $(call e2e,$(K8S_TESTBIN),20m,e2e-test-split,-run '$(E2E_SPLIT_TESTS)' $(E2E_MAIN_PKGS)) ) 2>&1 | sed -u 's/^/e2e| /' ) & split_pid=$$!; \
	e2e_rc=0; ( $(call e2e,$(K8S_TESTBIN),20m,e2e-test,-skip '$(LONG_TESTS)|$(E2E_SPLIT_TESTS)' $(E2E_MAIN_PKGS)) ) || e2e_rc=$$?; \
	split_rc=0; wait $$split_pid || split_rc=$$?; wait; read -r unit_rc harness_rc <_out/unit-test.rc; \
	if [ "$$unit_rc" != 0 ]; then echo "the unit tests failed (rc $$unit_rc): their output is above, marked unit|, and in _out/unit-test.log"; fi; \
	if [ "$$harness_rc" != 0 ]; then echo "the end-to-end harness's own tests failed (rc $$harness_rc): see above, marked unit|, and _out/e2e-harness-test.log"; fi; \
	if [ "$$split_rc" != 0 ]; then echo "the end-to-end tests $(E2E_SPLIT_TESTS) failed (rc $$split_rc): see above, marked e2e|, and _out/e2e-test-split.log"; fi; \
	[ "$$unit_rc" = 0 ] && [ "$$harness_rc" = 0 ] && [ "$$split_rc" = 0 ] && [ "$$e2e_rc" = 0 ]

.PHONY: e2e-long
e2e-long: testbin scc-operator helm coredns ## the long end-to-end cases make test leaves out, LONG_TESTS, on K8S_VERSION (in .ci/run)
	@echo "--- end-to-end on Kubernetes $(K8S_VERSION), the long cases: $(LONG_TESTS) (full log: _out/e2e-long.log)"
	@$(call e2e,$(K8S_TESTBIN),20m,e2e-long,-run '$(LONG_TESTS)' $(E2E_PKGS))

.PHONY: e2e-lts
e2e-lts: testbin-lts scc-operator helm coredns ## the control-plane tier's LTS_TESTS again on Kubernetes K8S_LTS_VERSION (in .ci/run)
	@echo "--- the control-plane tier again on Kubernetes $(K8S_LTS_VERSION) (LTS): $(LTS_TESTS) (full log: _out/e2e-lts-test.log)"
	@$(call e2e,$(K8S_LTS_TESTBIN),15m,e2e-lts-test,-run '$(LTS_TESTS)' ./e2e)

.PHONY: test-all
test-all: test e2e-long e2e-lts e2e-kind ## every test tier .ci/run runs (lint apart): make test, e2e-long, e2e-lts, e2e-kind

# e2e TESTBIN,TIMEOUT,LOG,ARGS: go test -v ARGS against the control plane in
# TESTBIN, its whole output in _out/LOG.log and the PASS/FAIL and proved:
# lines on the terminal; on a failure, the failing part of the log.
e2e = mkdir -p _out; set -o pipefail; \
	CGO_ENABLED=1 K8S_TESTBIN=$(1) HELM_BIN=$(HELM_DIR)/helm COREDNS_BIN=$(COREDNS_BIN) SCC_OPERATOR_DIR=$(SCC_OPERATOR_DIR) $(GO) test -race -count=1 -p 1 -v -timeout $(2) $(4) 2>&1 \
	  | tee _out/$(3).log | grep --line-buffered -E -- '^\s*--- (PASS|FAIL|SKIP)|proved:|control plane (started|stopped)|^(ok|FAIL|panic)' \
	  || { echo "e2e tests failed; the failing part of _out/$(3).log:"; grep -B2 -A40 -- '--- FAIL' _out/$(3).log | head -300; exit 1; }

.PHONY: proved
proved: ## list, from the sources, the proved: lines each target of .ci/run logs (Kubernetes version, target, package, test, line)
	@set -e; p="$(GO) run ./e2e/cmd/proved"; { \
	  $$p -label '$(K8S_VERSION)	test' -skip '$(LONG_TESTS)' $(E2E_PKGS); \
	  $$p -label '$(K8S_VERSION)	e2e-long' -run '$(LONG_TESTS)' $(E2E_PKGS); \
	  $$p -label '$(K8S_LTS_VERSION)	e2e-lts' -run '$(LTS_TESTS)' ./e2e; \
	  $$p -label '$(K8S_VERSION)	e2e-kind' -tags e2e ./e2e/kind; \
	  $$p -unreached -run '^$$' $(E2E_PKGS) >/dev/null; $$p -unreached -tags e2e -run '^$$' ./e2e/kind >/dev/null; }

.PHONY: unit
unit: tiers ## only the unit tests: the product's packages, UNIT_PKGS (no end-to-end code, no built binaries, no control plane)
	CGO_ENABLED=1 $(GO) test -race -count=1 $(UNIT_PKGS)

.PHONY: pins
pins: ## check, in seconds and downloading nothing, that every pinned thing the tiers fetch (Go modules, Debian packages and suite, the operator's sources) is still obtainable; each FAIL names the pin and its fix
	@K8S_VERSION=$(K8S_VERSION) K8S_LTS_VERSION=$(K8S_LTS_VERSION) HELM_VERSION=$(HELM_VERSION) STATICCHECK=$(STATICCHECK) CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD) e2e/scripts/pins.sh

.PHONY: tiers
tiers: ## check that every package is in exactly one test tier (UNIT_PKGS, HARNESS_PKGS, E2E_PKGS)
	@diff <($(GO) list ./... | sort) <({ $(GO) list $(UNIT_PKGS); $(GO) list $(HARNESS_PKGS); $(GO) list $(E2E_PKGS); } | sort) \
	  || { echo "make tiers: a package is in no test tier (<) or in two (>): add it to one of UNIT_PKGS, HARNESS_PKGS, E2E_PKGS in the Makefile"; exit 1; }

.PHONY: testbin
testbin: ## build (or reuse) etcd, kube-apiserver, kube-controller-manager, kubectl at K8S_VERSION (make test's control plane)
	@CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_VERSION) e2e/scripts/k8s-testbin.sh $(K8S_TESTBIN)

.PHONY: testbin-lts
testbin-lts: ## the same at K8S_LTS_VERSION (make e2e-lts's control plane)
	@CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_LTS_VERSION) e2e/scripts/k8s-testbin.sh $(K8S_LTS_TESTBIN)

.PHONY: scc-operator
scc-operator: ## build (or reuse) rancher/scc-operator at its pinned commits (see e2e/scripts/scc-operator.sh)
	@CACHE_DIR=$(CACHE_DIR) SCC_OPERATOR_DIR=$(SCC_OPERATOR_DIR) e2e/scripts/scc-operator.sh $(SCC_OPERATOR_COMMITS)

.PHONY: coredns
coredns: ## build (or reuse) CoreDNS for the in-cluster DNS tests (see e2e/scripts/coredns-bin.sh)
	@CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_VERSION) e2e/scripts/coredns-bin.sh >/dev/null

.PHONY: promtool
promtool: ## extract (or reuse) promtool from Debian's prometheus package, for the PrometheusRule's test
	@CACHE_DIR=$(CACHE_DIR) e2e/scripts/promtool-bin.sh >/dev/null

.PHONY: helm
helm: ## build (or reuse) helm for the chart tests
	@HELM_VERSION=$(HELM_VERSION) e2e/scripts/helm-bin.sh $(HELM_DIR)

.PHONY: chart
chart: helm ## lint and render the Helm chart with its default values and the least an install must set (it refuses fewer)
	$(HELM_DIR)/helm lint --strict manifests/chart/registration-engine --values manifests/testdata/chart/minimal.yaml
	$(HELM_DIR)/helm template registration-engine manifests/chart/registration-engine -n cattle-scc-system --values manifests/testdata/chart/minimal.yaml >/dev/null

# What e2e/kind/run.sh takes from make.
KIND_ENV = HELM_BIN=$(HELM_DIR)/helm CACHE_DIR=$(CACHE_DIR) K8S_VERSION=$(K8S_VERSION) K8S_TESTBIN=$(K8S_TESTBIN) IMAGE=$(IMAGE) FAKECLOUD_IMAGE=$(FAKECLOUD_IMAGE) SCC_OPERATOR_DIR=$(SCC_OPERATOR_DIR)

.PHONY: e2e-kind
e2e-kind: helm ## the kind tier: Docker, the images and a kind node built here, then go test -tags e2e ./e2e/kind
	@$(KIND_ENV) e2e/kind/run.sh

.PHONY: e2e-kind-build
e2e-kind-build: helm ## what the kind tier needs, built (Docker, its programs and images), no tests; leaves Docker running for make e2e-kind
	@$(KIND_ENV) e2e/kind/run.sh build

.PHONY: lint
lint: ## gofmt, go vet, staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@e2e/scripts/go-tool.sh $(STATICCHECK) $(STATICCHECK_BIN)
	$(STATICCHECK_BIN) ./...

.PHONY: bench
bench: build testbin helm ## benchmarks side by side; rewrites docs/BENCHMARKS.md
	@K8S_TESTBIN=$(K8S_TESTBIN) HELM_BIN=$(HELM_DIR)/helm e2e/scripts/bench.sh

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME (default 30s), minimizing each new input for at most FUZZMINIMIZETIME (5s)
	@e2e/scripts/fuzz.sh $(FUZZTIME)

.PHONY: image
image: ## build the engine and fakecloud images for each of IMAGE_ARCHS, as IMAGE-<arch> (BUILD_IMAGE/BASE_IMAGE, BASE_IMAGE_<arch> override the bases; FAKECLOUD_IMAGE= builds the engine's only)
	@set -e; $(foreach arch,$(IMAGE_ARCHS),$(call image_arch,$(arch),$(or $(BASE_IMAGE_$(arch)),$(BASE_IMAGE))))
	docker tag $(IMAGE)-$(firstword $(IMAGE_ARCHS)) $(IMAGE)
	$(if $(FAKECLOUD_IMAGE),docker tag $(FAKECLOUD_IMAGE)-$(firstword $(IMAGE_ARCHS)) $(FAKECLOUD_IMAGE))

# The engine image's OCI labels: the commit and its time (so that two builds
# of one commit agree), and the base as name and digest (BASE_IMAGE is
# name@sha256:<digest> when pinned; the digest is then its own label).
REVISION      ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED       ?= $(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)

# image_arch ARCH,BASE: the engine's and the fake cloud's image for
# linux/ARCH on BASE, then a check that docker records that platform.
# BuildKit takes the target from --platform; the classic builder
# (DOCKER_BUILDKIT=0) refuses COPY --from a stage of another platform than
# --platform names, so it gets none: TARGETARCH cross-compiles, and the
# image takes its platform from BASE, which must then be an ARCH image
# (BASE_IMAGE_<arch>). hack/release.sh builds the release's images here.
image_arch = \
	echo "image: $(IMAGE)-$(1)$(if $(FAKECLOUD_IMAGE), and $(FAKECLOUD_IMAGE)-$(1)) (linux/$(1) on $(2), built on $(BUILD_PLATFORM) in $(BUILD_IMAGE))"; \
	platform="--platform linux/$(1)"; [ "$${DOCKER_BUILDKIT:-}" != 0 ] || platform=; \
	args="$$platform --build-arg TARGETARCH=$(1) --build-arg BUILDPLATFORM=$(BUILD_PLATFORM) --build-arg BUILD_IMAGE=$(BUILD_IMAGE) --build-arg BASE_IMAGE=$(2)"; \
	docker build $$args --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg CREATED=$(CREATED) \
	  --build-arg BASE_NAME=$(firstword $(subst @, ,$(2))) --build-arg BASE_DIGEST=$(word 2,$(subst @, ,$(2))) -t $(IMAGE)-$(1) .; \
	$(if $(FAKECLOUD_IMAGE),docker build $$args --target fakecloud -t $(FAKECLOUD_IMAGE)-$(1) .;) \
	docker image inspect -f '{{.Os}}/{{.Architecture}}' $(IMAGE)-$(1) | grep -qx "linux/$(1)" \
	  || { echo "image: $(IMAGE)-$(1) is not linux/$(1)" >&2; exit 1; };

.PHONY: image-push
image-push: ## push each IMAGE-<arch> and one multi-architecture IMAGE listing them (IMAGE names a registry)
	@set -e; for arch in $(IMAGE_ARCHS); do docker push $(IMAGE)-$$arch; done
	docker manifest rm $(IMAGE) >/dev/null 2>&1 || true
	docker manifest create $(IMAGE) $(foreach a,$(IMAGE_ARCHS),$(IMAGE)-$(a))
	docker manifest push $(IMAGE)

.PHONY: manifests
manifests: testbin ## render every kustomize overlay
	@for o in manifests/overlays/*/; do echo "--- $$o"; $(K8S_TESTBIN)/kubectl kustomize $$o >/dev/null && echo ok; done

.PHONY: clean
clean: ## remove build output (the control-plane cache stays)
	rm -rf $(BIN) _out

# --- releases: one version, in VERSION (docs/releasing.md).
RELEASE_VERSION := $(shell tr -d '[:space:]' < VERSION)
RELEASE_DIR   ?= _out/release/$(RELEASE_VERSION)
# RELEASE_IMAGE=0 skips the image (where docker does not run); the rest of
# the release needs no docker. RELEASE_ARCHS: the binaries' and the image's.
RELEASE_IMAGE ?= 1
RELEASE_ARCHS ?= $(IMAGE_ARCHS)
RELEASE_IMAGE_REPO ?= registration-engine
# The SBOM generator: CycloneDX's own, for Go modules, pinned like staticcheck.
CYCLONEDX_GOMOD := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
CYCLONEDX_GOMOD_BIN := $(TOOLS_DIR)/cyclonedx-gomod-$(lastword $(subst @, ,$(CYCLONEDX_GOMOD)))

.PHONY: stamp
stamp: ## write VERSION into the chart's Chart.yaml (version, appVersion) and the bundle's manifest.yaml
	@hack/release.sh stamp

.PHONY: sbom-tool
sbom-tool: ## build cyclonedx-gomod (pinned) once into CACHE_DIR/tools (make test's release test and make release use it)
	@e2e/scripts/go-tool.sh $(CYCLONEDX_GOMOD) $(CYCLONEDX_GOMOD_BIN)

.PHONY: release
release: stamp helm sbom-tool ## the release of VERSION in RELEASE_DIR: chart package, images (RELEASE_IMAGE=0 skips them), binaries (the images') and SBOMs, bundle (with ENGINE_DIGEST)
	HELM=$(HELM_DIR)/helm CYCLONEDX_GOMOD=$(CYCLONEDX_GOMOD_BIN) RELEASE_ARCHS="$(RELEASE_ARCHS)" \
	  RELEASE_IMAGE=$(RELEASE_IMAGE) IMAGE_REPO=$(RELEASE_IMAGE_REPO) BUILD_IMAGE=$(BUILD_IMAGE) BASE_IMAGE=$(BASE_IMAGE) \
	  $(foreach a,$(RELEASE_ARCHS),$(if $(BASE_IMAGE_$(a)),BASE_IMAGE_$(a)=$(BASE_IMAGE_$(a)))) \
	  VERSION=$(RELEASE_VERSION) hack/release.sh build $(RELEASE_DIR)
