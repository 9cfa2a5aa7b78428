# Strata: a Kubernetes operator and erasure-coded S3 engine.
# `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# Release version and image names: hack/release.env is the one place they
# are defined (`make generate` writes the files that repeat them).
include hack/release.env
VERSION ?= $(RELEASE_VERSION)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
# The commit's time: the images' creation time and file times (reproducible).
SOURCE_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
LDFLAGS := -s -w -buildid= \
           -X github.com/strata-storage/strata/engine/buildinfo.Version=$(VERSION) \
           -X github.com/strata-storage/strata/engine/buildinfo.Commit=$(COMMIT)
# Static, path-free binaries: the same ones run in tests, the demo and the
# images (no cgo, so they need no libraries from the image).
GOBUILD := CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)"

LOCALBIN := $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)

# Pinned tool versions, installed with `go install` into bin/.
CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION  ?= v2.15.0
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT  := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Kubernetes version of the envtest control plane (built from source when it
# cannot be downloaded; see hack/envtest.sh).
ENVTEST_K8S_VERSION ?= 1.36.3
export ENVTEST_K8S_VERSION

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code and every file naming the release's images (hack/release.env).
	go run ./hack/release -root .
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases, chart crds/), RBAC (config/rbac/role.yaml) and the OLM bundle.
	$(CONTROLLER_GEN) rbac:roleName=manager crd:allowDangerousTypes=false webhook \
		paths="./api/..." paths="./controllers/..." paths="./internal/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart-crds.sh
	go run ./hack/bundlegen -root . -version $(BUNDLE_VERSION) -image $(OPERATOR_IMAGE)

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## gofmt check, go vet, and golangci-lint when it can be installed.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	@if $(MAKE) --no-print-directory $(GOLANGCI_LINT) >/dev/null 2>&1; then \
		echo "$(GOLANGCI_LINT) run ./..."; $(GOLANGCI_LINT) run ./...; \
	else echo "golangci-lint $(GOLANGCI_LINT_VERSION) could not be installed; gofmt and go vet only"; fi

.PHONY: verify
verify: ## Fail when generated files (deepcopy, CRDs, RBAC, chart CRDs) or go.mod are stale.
	hack/verify-generated.sh

BUNDLE_VERSION ?= $(RELEASE_VERSION)
OPERATOR_IMAGE ?= $(REGISTRY)/$(OPERATOR_IMAGE_NAME):$(RELEASE_VERSION)
ENGINE_IMAGE   ?= $(REGISTRY)/$(ENGINE_IMAGE_NAME):$(RELEASE_VERSION)

.PHONY: bundle
bundle: manifests ## Generate the OLM bundle (bundle/); part of `make manifests`.

##@ Test

# The S3 front end's packages: their unit tests also run under -race.
S3_PACKAGES = ./engine/s3api/... ./engine/s3http/... ./engine/s3sig/... ./engine/s3rules/... ./engine/s3err/... ./engine/posix/... ./engine/lifecycle/...

.PHONY: test
test: verify lint unit fuzz-smoke build pyclients jsclients strata-previous prebuild-background engine-integration conformance nodes envtest-suites localcluster-e2e ## Everything CI runs: verify, lint, unit, fuzz targets (briefly), engine integration, S3 conformance, envtest suites and the local-cluster end-to-end test.

# The builds the last steps of `make test` need (hack/prebuild.sh), started
# in the background at the lowest priority when the steps that mostly wait
# begin (the engine's integration tests, once their own builds are done,
# then the conformance suite), not earlier: beside the steps before them, which keep both cores busy, it only
# slowed them (a cold .ci/run with it started first: docs/decisions.md).
# Its process group's ID is in bin/prebuild.pid (.ci/run stops it on exit).
.PHONY: prebuild-background
prebuild-background:
	@mkdir -p $(LOCALBIN)
	@setsid hack/prebuild.sh >$(LOCALBIN)/prebuild.log 2>&1 & echo $$! >$(LOCALBIN)/prebuild.pid

.PHONY: unit
unit: ## Unit tests (no API server); fuzz targets run their seed corpora; the alerting rules' unit tests; the S3 front end's packages once more under the race detector; the erasure layer's once more with shards as files of their own (drive.Options.ShardFiles).
	go test $$(go list ./... | grep -v /test/) ./test/monitoring/...
	go test -race $(S3_PACKAGES)
	STRATA_TEST_SHARD_FILES=1 go test ./engine/erasure/

.PHONY: fuzz-smoke
fuzz-smoke: ## Each fuzz target of the engine for 3,000 executions (a count, not a duration: see hack/fuzz.sh).
	FUZZTIME=3000x hack/fuzz.sh

.PHONY: fuzz
fuzz: ## Each fuzz target of the engine for FUZZTIME (default 60s).
	FUZZTIME=$(or $(FUZZTIME),60s) hack/fuzz.sh

.PHONY: engine-integration
engine-integration: build pyclients jsclients strata-previous brokers keycloak ## Engine integration tests: real strata processes on 127.0.0.1 driven by aws-sdk-go-v2, minio-go, the aws CLI, boto3, s3cmd and the AWS SDK for JavaScript v3; bucket notifications to a real NATS server; the console's single sign-on through a real Keycloak.
	STRATA_BIN="$(LOCALBIN)/strata" STRATA_KEYCLOAK="$(KEYCLOAK)" STRATA_PYCLIENTS="$(PYCLIENTS_VENV)/bin" STRATA_JSCLIENTS="$(JSCLIENTS_DIR)" STRATA_NATS_SERVER="$(NATS_SERVER)" STRATA_KAFKA_LIBS="$(KAFKA_LIBS)" \
		STRATA_PREVIOUS_BIN="$$(test -x $(LOCALBIN)/strata-previous && echo $(LOCALBIN)/strata-previous)" \
		STRATA_LAYOUT1_BIN="$$(test -x $(LOCALBIN)/strata-layout1 && echo $(LOCALBIN)/strata-layout1)" \
		go test -count=1 ./test/engine/... -timeout 25m

.PHONY: console-long
console-long: build jsclients ## The web console's long measurement: the first page of a prefix of 100,000 objects in Chromium, and a 1 GiB upload from the browser downloaded back (docs/console.md).
	STRATA_TEST_CONSOLE_LONG=1 STRATA_BIN="$(LOCALBIN)/strata" STRATA_JSCLIENTS="$(JSCLIENTS_DIR)" \
		go test -count=1 ./test/engine/... -run TestConsoleLong -timeout 30m -v

# The brokers the notification tests deliver to, built from the Go module
# proxy (the tests start them themselves).
NATS_SERVER_VERSION ?= v2.12.15
NATS_SERVER ?= $(LOCALBIN)/nats-server-$(NATS_SERVER_VERSION)
KAFKA_VERSION ?= $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' hack/kafka/pom.xml)
KAFKA_LIBS ?= $(LOCALBIN)/kafka-$(KAFKA_VERSION)/libs

.PHONY: brokers
brokers: $(NATS_SERVER) ## The message brokers the notification tests run: bin/nats-server-VERSION built from the Go module proxy, redis-server and rabbitmq-server from Debian's packages (hack/broker-packages.sh), Kafka's jars from Maven Central (hack/kafka-broker.sh).
	hack/broker-packages.sh
	hack/kafka-broker.sh $(KAFKA_LIBS)

$(NATS_SERVER):
	@mkdir -p $(LOCALBIN)/.nats-build
	GOBIN=$(LOCALBIN)/.nats-build CGO_ENABLED=0 go install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
	mv $(LOCALBIN)/.nats-build/nats-server $@
	rmdir $(LOCALBIN)/.nats-build

.PHONY: crash-long
crash-long: build ## The long form of the crash harness of `make test`: 10 minutes of random SIGKILLs of a 4-node cluster under PUT, overwrite, multipart and delete load (STRATA_CRASH_SEED reruns a seed).
	STRATA_BIN="$(LOCALBIN)/strata" STRATA_CRASH_DURATION=$${STRATA_CRASH_DURATION:-10m} \
		go test -count=1 ./test/engine/... -run TestCrashConsistency -timeout 30m -v

.PHONY: replication-long
replication-long: build ## The long form of TestBucketReplication: the destination tenant down for 60 s under writes, then every version on both sides.
	STRATA_BIN="$(LOCALBIN)/strata" STRATA_TEST_REPLICATION_OUTAGE=$${STRATA_TEST_REPLICATION_OUTAGE:-60s} \
		go test -count=1 ./test/engine/... -run TestBucketReplication -timeout 20m -v

.PHONY: replication-load notify-load
notify-load: build bench-build $(NATS_SERVER) ## Measure bucket notifications: the cost to 4 KiB PUT throughput with a real nats-server target (bin/bench, notified and plain buckets alternating); figures in docs/benchmarks.md.
	STRATA_BIN="$(LOCALBIN)/strata" STRATA_BENCH_BIN="$(LOCALBIN)/bench" STRATA_NATS_SERVER="$(NATS_SERVER)" STRATA_TEST_NOTIFY_LOAD=1 \
		go test -count=1 ./test/engine/... -run TestNotificationLoad -timeout 30m -v

replication-load: build bench-build ## Measure bucket replication: lag at 200 PUT/s of 4 KiB and the cost to the source's PUT throughput (bin/bench, replicated and plain buckets alternating); figures in docs/benchmarks.md.
	STRATA_BIN="$(LOCALBIN)/strata" STRATA_BENCH_BIN="$(LOCALBIN)/bench" STRATA_TEST_REPLICATION_LOAD=1 \
		go test -count=1 ./test/engine/... -run TestReplicationLoad -timeout 30m -v

# The build that TestClusterMixedBuilds and TestRollbackToThePreviousRelease
# run next to this one: the last landed release (2026-11-30), the one a
# rollback returns to. It reads shards in both forms, which lets this build
# write shard files by default (docs/engine.md, On-disk format). Move it
# forward when the protocol or the on-disk format changes on purpose.
PREVIOUS_REV ?= cf964d2
# The last build that kept all of an object's versions in one list, whose
# drives TestVersionsWrittenByThePreviousReleaseAreKept serves with this one.
LAYOUT1_REV ?= 18d4f95

.PHONY: strata-previous
strata-previous: ## Build bin/strata-previous from PREVIOUS_REV and bin/strata-layout1 from LAYOUT1_REV (git history, Go module cache).
	hack/build-previous.sh $(PREVIOUS_REV) $(LOCALBIN)/strata-previous
	hack/build-previous.sh $(LAYOUT1_REV) $(LOCALBIN)/strata-layout1

# The Python S3 clients of TestClientMatrix, pinned in their requirements
# file; the venv is rebuilt from scratch only when that file changes.
PYCLIENTS_VENV := $(LOCALBIN)/venv-clients
PYCLIENTS_REQS := test/engine/testdata/clients/requirements.txt

.PHONY: pyclients
pyclients: $(PYCLIENTS_VENV)/.installed ## Python venv bin/venv-clients with the pinned aws CLI, boto3 and s3cmd (for TestClientMatrix: STRATA_PYCLIENTS=bin/venv-clients/bin).

$(PYCLIENTS_VENV)/.installed: $(PYCLIENTS_REQS) | $(LOCALBIN)
	rm -rf $(PYCLIENTS_VENV)
	python3 -m venv $(PYCLIENTS_VENV)
	$(PYCLIENTS_VENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir -r $(PYCLIENTS_REQS)
	touch $@

# The JavaScript S3 clients of TestClientMatrix (the AWS SDK for JavaScript
# v3), pinned with their whole tree in package-lock.json and installed with
# npm ci; reinstalled from scratch only when that file changes. The SDK is
# the last release that still supports Node.js 18, the nodejs of Debian 12
# and Ubuntu 24.04, which .ci/run installs where node is missing.
JSCLIENTS_DIR  := $(LOCALBIN)/node-clients
JSCLIENTS_SPEC := test/engine/testdata/clients/package.json test/engine/testdata/clients/package-lock.json

.PHONY: jsclients
jsclients: $(JSCLIENTS_DIR)/.installed ## npm packages in bin/node-clients with the pinned AWS SDK for JavaScript v3 (for TestClientMatrix: STRATA_JSCLIENTS=bin/node-clients).

$(JSCLIENTS_DIR)/.installed: $(JSCLIENTS_SPEC) | $(LOCALBIN)
	rm -rf $(JSCLIENTS_DIR)
	mkdir -p $(JSCLIENTS_DIR)
	cp $(JSCLIENTS_SPEC) $(JSCLIENTS_DIR)/
	cd $(JSCLIENTS_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

# Flags for hack/conformance, e.g. CONFORMANCE_FLAGS="-targets server-http,server-https,gateway,gateway-https -report".
# Two targets at once fit two cores (the suite's pytest is single-threaded).
CONFORMANCE_FLAGS ?= -parallel 2

.PHONY: conformance
conformance: build keycloak ## S3 conformance: ceph/s3-tests against strata server (HTTPS) and strata gateway, with Keycloak as the web identity tests' issuer; fails below test/conformance/floors.json, when a test of test/conformance/passing-TARGET.txt fails twice, or on output outside the JSON log.
	go run ./hack/conformance -strata $(LOCALBIN)/strata -keycloak $(KEYCLOAK) -parallel 2 $(CONFORMANCE_FLAGS)

# Keycloak, the OIDC issuer of the suite's web identity tests, from Maven Central (runs on the JDK 17 here).
KEYCLOAK_VERSION ?= 26.5.6
KEYCLOAK ?= $(LOCALBIN)/keycloak-$(KEYCLOAK_VERSION)
.PHONY: keycloak
keycloak: $(KEYCLOAK)/bin/kc.sh ## Download Keycloak (the OIDC issuer of the conformance suite and of the console's single sign-on test) into bin/.
$(KEYCLOAK)/bin/kc.sh:
	hack/keycloak.sh $(KEYCLOAK_VERSION) $(KEYCLOAK)

.PHONY: envtest
envtest: ## Make kube-apiserver and etcd available to envtest (builds them offline if needed).
	@hack/envtest.sh >/dev/null

.PHONY: cli-tools
cli-tools: ## Build bin/kubectl, bin/helm and bin/mc from the Go module proxy (what docs/install.md runs).
	@hack/cli-tools.sh >/dev/null

.PHONY: control-plane
control-plane: ## Also build kube-controller-manager and kube-scheduler (local cluster harness).
	@hack/envtest.sh --control-plane >/dev/null

.PHONY: nodes
nodes: ## What the local cluster's nodes run: the control plane plus kubelet, kube-proxy and CoreDNS (built once from the Go module proxy), and Debian's containerd, runc and CNI plugins (installed with apt when missing).
	@hack/node-packages.sh
	@hack/envtest.sh --nodes >/dev/null

.PHONY: envtest-suites
envtest-suites: envtest build ## Integration suites against a real kube-apiserver + etcd.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" MANAGER_BIN="$(LOCALBIN)/manager" STRATA_BIN="$(LOCALBIN)/strata" \
		go test $$(go list ./test/... | grep -v -e /test/engine -e /test/scale -e /test/localcluster -e /test/monitoring) -ginkgo.v=false -timeout 20m

.PHONY: localcluster-e2e
localcluster-e2e: images node-images broker-images nodes pyclients jsclients cli-tools monitoring-images ## End to end on a local cluster (as root): a Tenant from the images `make images` built, S3 through its endpoint, clean teardown; docs/install.md run as written (Helm, kubectl, aws, strata admin); with --monitoring, a real Prometheus scrapes the tenant.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh --nodes)" STRATA_IMAGES="$(IMAGES_DIR)" STRATA_BIN="$(LOCALBIN)/strata" \
		STRATA_CLI_TOOLS="$$(hack/cli-tools.sh)" STRATA_PYCLIENTS="$(PYCLIENTS_VENV)/bin" STRATA_JSCLIENTS="$(JSCLIENTS_DIR)" \
		go test -count=1 ./test/localcluster/... -timeout 50m -v

.PHONY: day2-e2e
day2-e2e: images node-images nodes pyclients cli-tools ## The long form of the day-2 test of `make test` (docs/operations.md run under load: upgrade and roll-back, a paused roll-out, expansion, decommission, node drain and loss, gateway scaling), each state held a minute.
	STRATA_DAY2_LONG=1 KUBEBUILDER_ASSETS="$$(hack/envtest.sh --nodes)" STRATA_IMAGES="$(IMAGES_DIR)" STRATA_BIN="$(LOCALBIN)/strata" \
		STRATA_CLI_TOOLS="$$(hack/cli-tools.sh)" STRATA_PYCLIENTS="$(PYCLIENTS_VENV)/bin" \
		go test -count=1 ./test/localcluster/... -run TestDayTwoUnderLoad -timeout 60m -v

.PHONY: soak
soak: images node-images nodes pyclients ## The long form of the soak of `make test` (as root): 10 minutes (STRATA_SOAK_DURATION) of mixed S3 load on the demo tenant and its gateways while random pods are killed; requests, errors, p99, RSS growth (STRATA_SOAK_SEED reruns a seed).
	STRATA_SOAK_DURATION=$${STRATA_SOAK_DURATION:-10m} KUBEBUILDER_ASSETS="$$(hack/envtest.sh --nodes)" STRATA_IMAGES="$(IMAGES_DIR)" \
		STRATA_BIN="$(LOCALBIN)/strata" STRATA_PYCLIENTS="$(PYCLIENTS_VENV)/bin" \
		go test -count=1 ./test/localcluster/... -run 'TestSoak$$' -timeout 60m -v

##@ Demo

# Where `make demo` keeps the cluster: kubeconfig, volumes, pods, logs.
DEMO_STATE ?= /tmp/strata-localcluster
# Extra flags for `localcluster up`, e.g. DEMO_FLAGS="--manifests config/samples --tenant default/media".
DEMO_FLAGS ?=

.PHONY: demo
demo: images node-images nodes $(if $(findstring --monitoring,$(DEMO_FLAGS)),monitoring-images) ## The main job: a local Kubernetes cluster (no Docker, needs root) running the operator and a demo Tenant from the images of `make images`; prints its S3 endpoint and keys. DEMO_FLAGS=--monitoring adds prometheus-operator and Prometheus (API on localhost:19090).
	go build -o $(LOCALBIN)/localcluster ./hack/localcluster
	$(LOCALBIN)/localcluster up --state-dir $(DEMO_STATE) --assets "$$(hack/envtest.sh --nodes)" \
		--images $(IMAGES_DIR) $(DEMO_FLAGS)

.PHONY: demo-status
demo-status: ## Print the endpoints and keys of the running demo again.
	go run ./hack/localcluster status --state-dir $(DEMO_STATE)

.PHONY: demo-down
demo-down: ## Stop the demo cluster and remove everything it made (processes, namespaces, volumes, logs).
	go build -o $(LOCALBIN)/localcluster ./hack/localcluster
	$(LOCALBIN)/localcluster down --state-dir $(DEMO_STATE)

##@ Build

.PHONY: build
build: ## Build bin/manager (operator) and bin/strata (engine), static.
	$(GOBUILD) -o $(LOCALBIN)/manager .
	$(GOBUILD) -o $(LOCALBIN)/strata ./cmd/strata

# Where `make images` writes: an OCI layout per image (images/<name>/) and a
# tarball `docker load`, `ctr import` and `kind load image-archive` take.
IMAGES_DIR ?= $(LOCALBIN)/images

.PHONY: images
images: build ## Build both images (strata, strata-operator) without a daemon: OCI layouts and tarballs in bin/images, reproducible.
	go run ./hack/images -out $(IMAGES_DIR) -version $(VERSION) -revision $(COMMIT) -created $(SOURCE_DATE) \
		-binary strata=$(LOCALBIN)/strata -binary strata-operator=$(LOCALBIN)/manager

.PHONY: node-images
node-images: ## The pause image (registry.k8s.io/pause:3.10, our own static program hack/localcluster/pause) in bin/images, for `localcluster up --kubelets`.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/pause ./hack/localcluster/pause
	go run ./hack/images -out $(IMAGES_DIR) \
		-image "ref=registry.k8s.io/pause:3.10,entrypoint=/pause,user=65535:65535,binary=$(LOCALBIN)/pause,source=https://github.com/strata-storage/strata/tree/main/hack/localcluster/pause"

.PHONY: broker-images
broker-images: $(NATS_SERVER) ## The image docker.io/library/nats:2.12.15 of bin/nats-server-VERSION in bin/images, for the local cluster's notifications test.
	go run ./hack/images -out $(IMAGES_DIR) \
		-image "ref=docker.io/library/nats:$(NATS_SERVER_VERSION:v%=%),entrypoint=/nats-server,user=65535:65535,binary=$(NATS_SERVER),source=https://github.com/nats-io/nats-server/tree/$(NATS_SERVER_VERSION)"

.PHONY: monitoring-images
monitoring-images: ## Images of prometheus-operator v0.85.0 and Prometheus v3.5.0 (built once from the Go module proxy, cached in ~/.cache/strata/monitoring) and the operator's CRDs in bin/images, for `localcluster up --monitoring`.
	hack/monitoring-images.sh $(IMAGES_DIR)

.PHONY: docker-build
docker-build: ## Build both images with the Dockerfile (needs a Docker daemon); the same images as `make images`.
	docker build --target strata --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(ENGINE_IMAGE) .
	docker build --target manager --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(OPERATOR_IMAGE) .

.PHONY: run
run: ## Run the operator against the cluster of the current kubeconfig (CRDs must be installed: make install).
	go run . --metrics-bind-address=:8443 --health-probe-bind-address=:8081 --enable-webhooks=false

.PHONY: install
install: ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: ## Remove the CRDs (and so every Strata object) from the current cluster.
	kubectl delete --ignore-not-found -f config/crd/bases

##@ Benchmarks

# Extra flags for hack/bench, e.g. BENCH_FLAGS="-profile quick -duration 5s".
BENCH_FLAGS ?=
# Client settings of the suites: both (each target measured with the load
# generator's lean settings and again with the SDK's defaults), lean or defaults.
BENCH_CLIENTS ?= both

.PHONY: peers
peers: ## Install the benchmark peers, MinIO, VersityGW and Garage, into hack/peers/bin (git-ignored; built once).
	hack/peers.sh

.PHONY: bench
bench: peers bench-build ## Run bench-engine then bench-gateway.
	$(MAKE) --no-print-directory bench-engine
	$(MAKE) --no-print-directory bench-gateway

.PHONY: bench-engine
bench-engine: peers bench-build ## Benchmark strata server (plain, and with SSE-S3 by bucket default) against MinIO (4 drives, EC 2+2), Garage (one node, fsync) and VersityGW, lean and default client settings; then bench-versions, bench-ingest, bench-list. JSON in bench-results/.
	$(LOCALBIN)/bench suite engine -strata $(LOCALBIN)/strata -clients $(BENCH_CLIENTS) -timeout 60m $(BENCH_FLAGS)
	$(MAKE) --no-print-directory bench-versions
	$(MAKE) --no-print-directory bench-ingest
	$(MAKE) --no-print-directory bench-list

.PHONY: bench-versions
bench-versions: bench-build ## 10,000 versions of one key on strata server: the last 1,000 PUTs' rate against the first 1,000's; JSON in bench-results/versions.json.
	mkdir -p bench-results
	$(LOCALBIN)/bench versions -strata $(LOCALBIN)/strata -versions $(or $(VERSIONS),10000) -out bench-results/versions.json

.PHONY: bench-ingest
bench-ingest: bench-build ## 1,000,000 new 4 KiB objects into strata server (4 drives, 2+2, durable) from 16 writers: last 10%'s rate against the first 10%'s, peak RSS, bytes on disk (OBJECTS=50000: under a minute); JSON in bench-results/ingest-<UTC time>.json.
	mkdir -p bench-results
	$(LOCALBIN)/bench ingest -strata $(LOCALBIN)/strata -objects $(or $(OBJECTS),1000000) -out bench-results/ingest-$$(date -u +%Y%m%d-%H%M%S).json

.PHONY: bench-list
bench-list: peers bench-build ## LIST of 100,000 objects, strata server against MinIO (4 drives, EC 2+2): all of them 1000 a page, the 100 directories, one directory (LIST_OBJECTS=10000 for a quick run); JSON in bench-results/.
	$(LOCALBIN)/bench listing -strata $(LOCALBIN)/strata -objects $(or $(LIST_OBJECTS),100000) $(LIST_FLAGS)

.PHONY: bench-gateway
bench-gateway: peers bench-build ## Benchmark strata gateway against VersityGW, with HEAD/s of one and two replicas, lean and default client settings.
	$(LOCALBIN)/bench suite gateway -strata $(LOCALBIN)/strata -clients $(BENCH_CLIENTS) -timeout 20m $(BENCH_FLAGS)

.PHONY: bench-cluster
bench-cluster: bench-build ## Benchmark 4 nodes x 2 drives against 1 node x 8 drives (EC 4+4) on loopback, alternating rounds.
	ROUNDS="$(or $(ROUNDS),1 2 3)" DURATION="$(or $(DURATION),6s)" hack/bench/cluster-ab.sh

.PHONY: bench-operator
bench-operator: envtest build ## Operator scale benchmark: 100 Tenants with pools against envtest (time, peak RSS, idle writes).
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" MANAGER_BIN="$(LOCALBIN)/manager" \
		go test ./test/scale -run '^$$' -bench HundredTenants -benchtime 1x -timeout 20m -v

.PHONY: bench-claims
bench-claims: envtest build ## Claims scale benchmark: 1,000 BucketClaims and BucketAccesses in 100 namespaces against envtest and a real strata server.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" MANAGER_BIN="$(LOCALBIN)/manager" \
		go test ./test/scale -run '^$$' -bench ThousandClaims -benchtime 1x -timeout 20m -v

.PHONY: bench-placement
bench-placement: ## Placement benchmark: a 64-server x 16-drive pool over 1,000 labelled nodes.
	go test ./internal/placement -run '^$$' -bench . -benchtime 2s

# bin/strata and the load generator, without the operator.
.PHONY: bench-build
bench-build:
	$(GOBUILD) -o $(LOCALBIN)/strata ./cmd/strata
	go build -o $(LOCALBIN)/bench ./hack/bench

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@
