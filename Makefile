# bpfperf: build, install, test, benchmark. On a fresh Debian or Ubuntu
# machine with Go, each of these does its own set-up:
#   sudo make demo     build, run the daemon against a workload and show what it sees
#   sudo make test     install the apt packages the tests need (make deps), then
#                      run every test (privileged ones need root)
# and:
#   make build         build bin/bpfperfd and bin/bpfperf
#   sudo make deps     install what builds and tests need (idempotent: apt runs
#                      only when a package is missing)
#   sudo make bench    print performance figures, side by side with peers
#                      (docs/performance.md)
#   make docs          regenerate docs/flags.md from the flag definitions
#   make install       install the binaries, the unit and sysusers.d (DESTDIR, PREFIX)
#   make deb           build dist/bpfperf_<version>_<arch>.deb (nfpm); with
#                      GOARCH=arm64, the binaries and the package for arm64
#   make image         build dist/bpfperf-image.tar, the OCI image for amd64 and
#                      arm64 (no container engine needed; internal/image)
#   make chart         lint the Helm chart and package it as dist/bpfperf-<version>.tgz
#   sudo make chart-test   the chart's tests: helm lint and template checked, and
#                      its pod run on a real containerd node (internal/chart)

GO      ?= go
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
DEMO    ?= /tmp/bpfperf-demo
# Debian's architecture name is Go's for amd64 and arm64: `make deb
# GOARCH=arm64` packages arm64 binaries.
DEBARCH := $(or $(GOARCH),$(shell $(GO) env GOARCH))

.PHONY: all build deb image chart chart-test deps docs install uninstall test test-vm bench fuzz soak generate check-generate compare-api demo run clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/bpfperfd ./cmd/bpfperfd
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/bpfperf ./cmd/bpfperf

# The Debian package: binaries in /usr/bin, the unit, sysusers.d. Built by
# internal/deb's mkdeb (nfpm as a library, its own module so nfpm's
# dependencies stay out of the daemon's).
# mkdeb itself runs on this machine whatever GOARCH the binaries are for.
deb: build
	env -u GOARCH -u GOOS $(GO) -C internal/deb run ./cmd/mkdeb -root $(CURDIR) -bin $(CURDIR)/bin -version $(VERSION) -arch $(DEBARCH)

# The container image: static bpfperfd and bpfperf for each platform, one
# OCI index, as an archive (ctr images import, podman load) and a layout.
image:
	$(GO) run ./internal/image/cmd/mkimage -version $(VERSION) -commit $(COMMIT) -o dist/bpfperf-image.tar -layout dist/oci

# The Helm chart, with the helm tools/helm pins (built into the tools
# cache the first time: internal/chart/cmd/helm).
HELM = $(GO) run ./internal/chart/cmd/helm
chart:
	$(HELM) lint --strict charts/bpfperf
	$(HELM) package charts/bpfperf -d dist

chart-test:
	$(GO) test -count=1 -v -timeout 15m ./internal/chart/

deps:
	./.ci/deps

install: build
	install -D -m 0755 bin/bpfperfd $(DESTDIR)$(BINDIR)/bpfperfd
	install -D -m 0755 bin/bpfperf $(DESTDIR)$(BINDIR)/bpfperf
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	sed 's|/usr/local/bin/bpfperfd|$(BINDIR)/bpfperfd|' systemd/bpfperfd.service > $(DESTDIR)$(UNITDIR)/bpfperfd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/bpfperfd.service
	install -m 0644 systemd/bpfperf.sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/bpfperf.conf

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/bpfperfd $(DESTDIR)$(BINDIR)/bpfperf \
		$(DESTDIR)$(UNITDIR)/bpfperfd.service $(DESTDIR)$(SYSUSERSDIR)/bpfperf.conf

# Regenerate docs/flags.md from bpfperfd's and bpfperf's flag definitions;
# TestFlagsDoc (in make test) fails when it is stale.
docs:
	$(GO) test -count=1 -p 1 -run '^TestFlagsDoc$$' ./cmd/bpfperfd ./cmd/bpfperf -update

# The apt packages first (deps: quick when all are there). Privileged
# tests run as root; with BPFPERF_REQUIRE_PRIVILEGED=1 (CI) a skipped
# privileged test fails. Packages run one at a time (-p 1): BPF stats are
# global to the kernel, and a daemon started by one package's tests turns
# them on for every other. The timeout is per package: ./daemon alone
# took 1,009 s of 1,200 in CI on 2026-11-27, so it has 30 minutes.
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 -parallel 4 -timeout 30m ./...
	$(GO) -C internal/deb vet ./...
	$(GO) -C internal/deb test -count=1 ./...

# Tests this kernel refuses or lacks (fentry/fexit exact counters, kprobes'
# missed counts, netkit devices), in Debian's stock 6.1 and 6.12 kernels
# under qemu. `make test` runs them too.
test-vm:
	$(GO) test -count=1 -p 1 -run 'InVM' ./internal/vmtest/ ./collectors/ ./profile/ ./daemon/

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./collectors/ ./collectors/netspace/ ./collectors/loadrec/ ./daemon/... ./store/ ./profile/ ./internal/top/ ./cmd/bpfperf/ ./bench/ ./bench/hooks/ ./bench/plots/ ./internal/regress/

# Go fuzz targets over what users and disks hand us: suite, map-init and
# object files, bench reports, pprof input, time ranges, store records.
# `make test` runs their seeds and committed corpus (testdata/fuzz); this
# searches further, FUZZTIME each. A crasher lands in testdata/fuzz: commit
# it with the fix.
FUZZTIME ?= 30s
FUZZ_TARGETS := api:FuzzParseTime store:FuzzChunk store:FuzzDecodeChunk store:FuzzDecodeSealed \
	store:FuzzDecodeProfile store:FuzzDecodeBenchRun bench:FuzzSuiteFile bench:FuzzMapInit \
	bench:FuzzObjectFile bench:FuzzReadJSON profile:FuzzParseData
#
# Then the long damaged-store run: thousands of damaged copies through the
# store (every meta-page bit, 2,000 random page flips, 512 flips in the
# unused tail of the meta pages) and the binaries on a sample. `go test`
# runs a short version; BPFPERF_DAMAGE_SEED=N replays a run.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz ./$$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$pkg; \
	done
	BPFPERF_DAMAGE_COPIES=2000 BPFPERF_DAMAGE_TAIL=512 $(GO) test -count=1 -timeout 60m -run 'TestDamaged' -v ./store/ ./daemon/

# Long runs CI has no time for: 10,000 programs loaded and unloaded under a
# daemon sampling every 100 ms (make test churns 2,000), then the daemon
# time-compressed over 1,000 programs at 100 ms for SOAK (6m: an hour of
# 1 s ticks), its CPU and RSS checked flat.
SOAK ?= 6m
soak:
	BPFPERF_CHURN_PROGRAMS=10000 $(GO) test -count=1 -run '^TestChurn$$' -v -timeout 30m ./daemon/
	BPFPERF_SOAK=$(SOAK) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 3h ./daemon/


# A refactor leaves the API's documents byte-identical: build OLD (a git
# revision) and this tree, and compare what each answers from copies of
# one recorded store (tools/compare-api.sh).
OLD ?= HEAD
compare-api: build
	@d=$$(mktemp -d) && git worktree add -q --detach $$d/src $(OLD) && \
		(cd $$d/src && $(GO) build -o $$d/old-bpfperfd ./cmd/bpfperfd) && \
		git worktree remove --force $$d/src && \
		tools/compare-api.sh $$d/old-bpfperfd bin/bpfperfd $$d/work

# Regenerate the BPF objects and their Go loaders (needs clang and libbpf-dev).
generate:
	$(GO) generate ./...

# Fails if the committed generated code differs from what `make generate`
# makes now.
check-generate: generate
	@git diff --exit-code -- '*_bpfel.go' '*_bpfel.o' '*_bpfel_test.go' '*_bpfel_test.o' || \
		{ echo "generated BPF code is stale: run make generate and commit"; exit 1; }

# Run the daemon on a throw-away state dir, drive a BPF workload through it
# (the bench suite's baseline programs), and show what the CLI sees.
demo: build
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@bin/bpfperfd --state-dir $(DEMO) --socket $(DEMO)/api.sock --interval 250ms --log-level warn & echo $$! > $(DEMO)/pid
	@sleep 1
	export BPFPERF_SOCKET=$(DEMO)/api.sock; \
	bin/bpfperf bench --filter '^baseline/(socket_filter|xdp|sched_cls)$$' --target 50ms --measures 20 >/dev/null & \
	sleep 2; bin/bpfperf progs; wait; sleep 0.5; \
	bin/bpfperf progs --all; \
	bin/bpfperf history $$(bin/bpfperf progs --all -o csv | awk -F, 'NR==2{print $$1}') --since 1m; \
	bin/bpfperf status
	@kill $$(cat $(DEMO)/pid)

# Run the daemon in the foreground on the default paths.
run: build
	mkdir -p /var/lib/bpfperf /run/bpfperf
	bin/bpfperfd

clean:
	rm -rf bin dist
