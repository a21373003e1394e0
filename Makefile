# stackhouse: build system (GNU make). `make help` lists the targets.
#
# Build configurations, each in build/<cfg>/ (objects in build/<cfg>/obj/):
#   release  -O2 -g -fPIC              libstackhouse.a, libstackhouse.so.*, benches, examples
#   asan     ASan + UBSan              libstackhouse.a, tests
#   tsan     ThreadSanitizer           libstackhouse.a, the tests in TSAN_TESTS
#   cov      -O0 --coverage            libstackhouse.a, tests, shsim (for `make coverage`)
# Every object also depends on build/<cfg>/.flags, so changing CC or flags
# (e.g. `make CC=clang`) rebuilds that configuration.

SHELL := bash
.DEFAULT_GOAL := all
.SUFFIXES:
.DELETE_ON_ERROR:
# Keep every object: test/bench/example objects are reached through pattern
# rules only, and make would otherwise delete them as intermediates.
.SECONDARY:

# The version is the public header's (SH_VERSION_MAJOR/MINOR/PATCH in
# include/stackhouse/stackhouse.h): the .so name, the .pc and CMake files.
version_part = $(shell sed -n 's/^\#define SH_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' include/stackhouse/stackhouse.h)
SOMAJOR := $(call version_part,MAJOR)
VERSION := $(SOMAJOR).$(call version_part,MINOR).$(call version_part,PATCH)

ifeq ($(origin CC),default)
CC := gcc
endif
# C++ only compiles the public headers and a C++ user (make install-check).
ifeq ($(origin CXX),default)
CXX := $(if $(findstring clang,$(CC)),clang++,g++)
endif

# Sub-makes of test/sim/coverage/bench build with -j$(NPROC) unless -j was given.
NPROC   := $(shell nproc 2>/dev/null || echo 1)
PAR      = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))
# NO_DEPS=1 skips tools/deps.sh (a system that is not Debian, a packager's
# chroot); sub-makes get it from their parent, which ran it.
NO_DEPS :=
SUBMAKE  = $(MAKE) --no-print-directory $(PAR) NO_DEPS=1

# V=1 shows the full commands.
ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-15s %s\n' '$(1)' '$(2)'
endif

# ---------------------------------------------------------------- sources ---

# The simulator's headers: its control interface (sim.h, sim_cmocka.h).
# They belong to the simulation library (libstackhouse-sim.a), not to
# libstackhouse, and install with it. The scenario framework's header
# (scenario.h) is for both backends: libstackhouse-sim.a and
# libstackhouse-shrun.a implement it.
SIM_HEADERS       := $(addprefix include/stackhouse/,sim.h sim_cmocka.h)
PUBLIC_HEADERS    := $(filter-out $(SIM_HEADERS),$(wildcard include/stackhouse/*.h))
CORE_SRCS         := $(wildcard core/*.c core/*/*.c)
EPOLL_SRCS        := $(wildcard backend-epoll/*.c)
SIM_SRCS          := $(wildcard backend-sim/*.c)
# Library modules above the core (http/: the HTTP/1.1 codec and server):
# built into both libraries, they see only the public headers and their own.
HTTP_SRCS         := $(wildcard http/*.c)
LIB_SRCS          := $(CORE_SRCS) $(EPOLL_SRCS) $(HTTP_SRCS)
# The scenario framework (registry, runs, shared invariants): in the
# simulation library, and, compiled for epoll, in libstackhouse-shrun.a, so
# that users' scenarios get it on both backends.
SCN_FRAMEWORK_SRC := scenarios/scenario.c scenarios/scnactor.c scenarios/scnidle.c scenarios/scnnemesis.c
# libstackhouse-shrun.a: shrun (the epoll runner, main included) and the
# scenario framework, for libstackhouse. Linked with scenario objects and
# libstackhouse it makes a shrun of those scenarios, as
# libstackhouse-shsim.a does a shsim.
SHRUN_LIB_SRCS    := tools/shrun.c $(SCN_FRAMEWORK_SRC)
# libstackhouse-sim.a (core + simulator backend + scenario framework,
# -DSH_SIM) only once backend-sim/ has sources.
SIMLIB_SRCS       := $(if $(SIM_SRCS),$(CORE_SRCS) $(SIM_SRCS) $(HTTP_SRCS) $(SCN_FRAMEWORK_SRC))

ALL_TESTS         := $(sort $(basename $(notdir $(wildcard tests/test_*.c))))
# Shared test plumbing (tests/support/*.c), linked into every test program.
TEST_SUPPORT_SRCS := $(wildcard tests/support/*.c)
BENCH_NAMES       := $(sort $(basename $(notdir $(wildcard bench/*.c))))
BENCH_COMMON_SRCS := $(wildcard bench/common/*.c)
# The Savina suite (bench/savina/): one program per benchmark, release only,
# with its harness (bench/savina/common/) and the malloc counter.
SAVINA_NAMES      := $(sort $(basename $(notdir $(wildcard bench/savina/*.c))))
SAVINA_COMMON_SRCS := $(wildcard bench/savina/common/*.c) bench/common/malloc_count.c
EXAMPLE_NAMES     := $(sort $(basename $(notdir $(wildcard examples/*.c))))
# Scenarios (scenarios/*.c): linked into shsim, shrun and the scenario tests.
SCENARIO_SRCS     := $(filter-out $(SCN_FRAMEWORK_SRC),$(wildcard scenarios/*.c))
# Examples the scenarios run (their nodes, in the cluster scenarios): linked
# with the scenarios, mains left out.
SCENARIO_EXAMPLE_SRCS := $(filter-out %_main.c,$(wildcard examples/failover/*.c))
# shsim, the simulator's runner: a folder of its own (not a one-file tool),
# built into libstackhouse-shsim.a, main included: linked with scenario
# objects and the simulation library, it makes a shsim of those scenarios.
SHSIM_SRCS        := $(wildcard tools/shsim/*.c)

# ------------------------------------------------------------------ tests ---

# Tests to build and run (default: all). E.g. `make test TESTS="test_pool test_wheel"`.
TESTS := $(ALL_TESTS)
# Tests that also build and run under ThreadSanitizer. Names or make patterns.
# To add one: append its name here (e.g. `test_wheel`).
TSAN_TESTS := test_e2e_% test_scn_% test_pool test_pool_remote test_mailbox test_plat_epoll test_plat_epoll_event test_housequeue test_worker test_net_epoll
E2E_TESTS   = $(filter test_e2e_%,$(TESTS))
TESTS_asan   = $(TESTS)
TESTS_tsan   = $(filter $(TSAN_TESTS),$(TESTS))
TESTS_cov    = $(TESTS)
TESTS_release = $(TESTS)

TEST_TIMEOUT := 300
# Extra libraries: TEST_LDLIBS for every test, LDLIBS_<name> for one program
# (test, bench or example), e.g. `LDLIBS_test_x := -lm`.
TEST_LDLIBS  :=
BENCH_LDLIBS :=
BENCH_LDFLAGS :=

# tools/tsan.supp is used only if it exists (add it only for a real, explained false positive).
TSAN_SUPP   := $(wildcard tools/tsan.supp)
RUN_ENV_asan := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
RUN_ENV_tsan := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1$(if $(TSAN_SUPP),:suppressions=$(abspath $(TSAN_SUPP)))
RUN_ENV_cov  :=
RUN_ENV_release :=

# ------------------------------------------------------------------ flags ---

WARN_CFLAGS   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# Hidden visibility: the shared library exports only what the public headers
# mark SH_API (tools/check_exports.sh checks it in `make test`).
COMMON_CFLAGS := -std=gnu11 $(WARN_CFLAGS) -pthread -D_GNU_SOURCE -MMD -MP -fvisibility=hidden

CONFIGS := release asan tsan cov explore

release_CFLAGS  := -O2 -g -fPIC
release_LDFLAGS :=
asan_SANITIZE   := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# Fault points (libfiu, `sh/<area>/<op>`) are compiled into the test
# configurations and into every simulation library (SIM_FIU_CFLAGS, so that
# users' scenarios can run with --faults); the production epoll library
# carries no check for them (docs/simulator.md, "Faults").
# SH_FAULTS_ALWAYS: the tests enable points through libfiu directly, so the
# points always ask it (elsewhere only while a fault spec is in force).
# SH_DEBUG turns on the core's costlier checks (SH_DEBUG_ASSERT, core/check.h).
FIU_CFLAGS      := -DFIU_ENABLE -DSH_FAULTS_ALWAYS -DSH_DEBUG
# What every program of a configuration links besides the library: the
# fault-point library where fault points are compiled in.
release_LIBS    :=
asan_LIBS       := -lfiu
tsan_LIBS       := -lfiu
cov_LIBS        := -lfiu
SIM_FIU_CFLAGS  := -DFIU_ENABLE
# What every program linked with a simulation library links besides it.
SIM_LIBS        := -lfiu
# And its link options: the allocation calls go through the simulator's
# tracker of each node's memory first (backend-sim/nodemem.c), so that a
# crashed node's blocks can be freed. stackhouse-sim.pc.in and the CMake
# package carry the same list.
SIM_WRAP_LDFLAGS := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign,--wrap=aligned_alloc,--wrap=reallocarray,--wrap=strdup,--wrap=strndup
asan_CFLAGS     := -O1 -g $(asan_SANITIZE) $(FIU_CFLAGS)
asan_LDFLAGS    := $(asan_SANITIZE)
tsan_CFLAGS     := -O1 -g -fsanitize=thread $(FIU_CFLAGS)
tsan_LDFLAGS    := -fsanitize=thread
cov_CFLAGS      := -O0 -g --coverage $(FIU_CFLAGS)
# explore: release, with the code under test (the core, http/, the
# scenarios) calling backend-sim/coverage.c at every edge, for shsim
# explore (docs/simulator.md, "Coverage-guided exploration"); only its
# shsim is built (make explore).
explore_CFLAGS  := $(release_CFLAGS)
EXPLORE_EDGES   := -fsanitize-coverage=trace-pc
build/explore/obj-sim/core/%.o build/explore/obj-sim/http/%.o \
build/explore/obj-sim/scenarios/%.o: private CFLAGS += $(EXPLORE_EDGES)
cov_LDFLAGS     := --coverage

# Include path by top-level directory of the source file. Examples and
# scenarios see only the public headers (scenarios also their framework,
# benches their own headers and the scenarios'); tests may include the
# simulator's internals too (trace.h).
INC_DEFAULT  := -Iinclude -Icore
INC_tests    := -Icore -Iinclude -Ibackend-sim
INC_tools    := -Iinclude -Icore
INC_scenarios := -Iinclude -Iexamples
INC_bench    := -Ibench/common -Iinclude
INC_examples := -Iinclude
INC_http     := -Iinclude
incs = $(or $(INC_$(firstword $(subst /, ,$(1)))),$(INC_DEFAULT))

# ------------------------------------------------------ per-config rules ---

# $(call config_rules,CFG): every rule of one configuration.
define config_rules
$(1)_ALL_CFLAGS   = $$(COMMON_CFLAGS) $$($(1)_CFLAGS) $$(CPPFLAGS) $$(CFLAGS)
$(1)_ALL_LDFLAGS  = -pthread $$($(1)_LDFLAGS) $$(LDFLAGS)
$(1)_LIB_OBJS    := $$(LIB_SRCS:%.c=build/$(1)/obj/%.o)
$(1)_SIMLIB_OBJS := $$(SIMLIB_SRCS:%.c=build/$(1)/obj-sim/%.o)
$(1)_BENCH_COMMON_OBJS := $$(BENCH_COMMON_SRCS:%.c=build/$(1)/obj/%.o)
$(1)_BENCH_COMMON_SIM_OBJS := $$(BENCH_COMMON_SRCS:%.c=build/$(1)/obj-sim/%.o)
$(1)_TEST_SUPPORT_OBJS := $$(TEST_SUPPORT_SRCS:%.c=build/$(1)/obj/%.o)
$(1)_TEST_SUPPORT_SIM_OBJS := $$(TEST_SUPPORT_SRCS:%.c=build/$(1)/obj-sim/%.o)
$(1)_SCN_OBJS     := $$(SCENARIO_SRCS:%.c=build/$(1)/obj/%.o) $$(SCENARIO_EXAMPLE_SRCS:%.c=build/$(1)/obj/%.o)
$(1)_SCN_SIM_OBJS := $$(SCENARIO_SRCS:%.c=build/$(1)/obj-sim/%.o) $$(SCENARIO_EXAMPLE_SRCS:%.c=build/$(1)/obj-sim/%.o)

# Rewritten only when the compiler or flags change; every object depends on
# it. After deps: whatever builds (make, make install) has its packages first.
build/$(1)/.flags: FORCE | deps
	@mkdir -p $$(@D)
	@printf '%s\n' '$$(CC) $$($(1)_ALL_CFLAGS) $$($(1)_ALL_LDFLAGS) sim: $$(SIM_FIU_CFLAGS) $$(SIM_LIBS) $$(SIM_WRAP_LDFLAGS)' > $$@.new; \
	 if cmp -s $$@.new $$@; then rm -f $$@.new; else mv -f $$@.new $$@; fi

build/$(1)/obj/%.o: %.c build/$(1)/.flags
	@mkdir -p $$(@D)
	$$(call say,CC $(1),$$<)
	$(Q)$$(CC) $$(call incs,$$<) $$($(1)_ALL_CFLAGS) -c $$< -o $$@

build/$(1)/obj-sim/%.o: %.c build/$(1)/.flags
	@mkdir -p $$(@D)
	$$(call say,CC $(1)-sim,$$<)
	$(Q)$$(CC) $$(call incs,$$<) -DSH_SIM $$(SIM_FIU_CFLAGS) $$($(1)_ALL_CFLAGS) -c $$< -o $$@

build/$(1)/libstackhouse.a: $$($(1)_LIB_OBJS)
	$$(call say,AR $(1),$$@)
	$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^

build/$(1)/libstackhouse-sim.a: $$($(1)_SIMLIB_OBJS)
	$$(call say,AR $(1),$$@)
	$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^

build/$(1)/libstackhouse-shsim.a: $$(SHSIM_SRCS:%.c=build/$(1)/obj-sim/%.o)
	$$(call say,AR $(1),$$@)
	$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^

build/$(1)/libstackhouse-shrun.a: $$(SHRUN_LIB_SRCS:%.c=build/$(1)/obj/%.o)
	$$(call say,AR $(1),$$@)
	$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^

build/$(1)/tests/%: build/$(1)/obj/tests/%.o $$($(1)_TEST_SUPPORT_OBJS) build/$(1)/libstackhouse.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1),$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse.a \
	    $$(LDLIBS_$$*) $$(TEST_LDLIBS) $$($(1)_LIBS) -lcmocka -lpthread $$(LDLIBS)

# test_scn_*: tests that run the scenarios on the epoll backend, with the
# framework from libstackhouse-shrun.a (its main stays out: the test has one).
build/$(1)/tests/test_scn_%: build/$(1)/obj/tests/test_scn_%.o $$($(1)_TEST_SUPPORT_OBJS) $$($(1)_SCN_OBJS) \
    build/$(1)/libstackhouse-shrun.a build/$(1)/libstackhouse.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1),$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse-shrun.a build/$(1)/libstackhouse.a \
	    $$(LDLIBS_test_scn_$$*) $$(TEST_LDLIBS) $$($(1)_LIBS) -lcmocka -lpthread $$(LDLIBS)

# test_sim_*: tests of the simulator, built with -DSH_SIM against libstackhouse-sim.a,
# and libstackhouse-shsim.a for sh_sim_run (its main stays out: the test has one).
# test_sim_shsim, test_sim_shsim_fuzz, test_sim_replay and test_sim_fiu run
# the shsim of their configuration (build/<cfg>/bin/shsim).
build/$(1)/tests/test_sim_shsim: build/$(1)/bin/shsim
build/$(1)/tests/test_sim_shsim_fuzz: build/$(1)/bin/shsim
build/$(1)/tests/test_sim_replay: build/$(1)/bin/shsim
build/$(1)/tests/test_sim_fiu: build/$(1)/bin/shsim
build/$(1)/tests/test_sim_%: build/$(1)/obj-sim/tests/test_sim_%.o $$($(1)_TEST_SUPPORT_SIM_OBJS) $$($(1)_SCN_SIM_OBJS) \
    build/$(1)/libstackhouse-shsim.a build/$(1)/libstackhouse-sim.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1)-sim,$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) $$(SIM_WRAP_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse-shsim.a build/$(1)/libstackhouse-sim.a \
	    $$(LDLIBS_test_sim_$$*) $$(TEST_LDLIBS) $$(SIM_LIBS) $$($(1)_LIBS) -lcmocka -lpthread $$(LDLIBS)

# The scenario runners: shsim (simulator) and shrun (epoll), in build/<cfg>/bin.
# Each is built as a user builds theirs: scenario objects (the registration
# does not pull objects out of archives), then the runner's library (main
# included), then the simulation library or libstackhouse.
build/$(1)/bin/shsim: $$($(1)_SCN_SIM_OBJS) build/$(1)/libstackhouse-shsim.a build/$(1)/libstackhouse-sim.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1)-sim,$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) $$(SIM_WRAP_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse-shsim.a \
	    build/$(1)/libstackhouse-sim.a $$(SIM_LIBS) $$($(1)_LIBS) -lpthread $$(LDLIBS)

build/$(1)/bin/shrun: $$($(1)_SCN_OBJS) build/$(1)/libstackhouse-shrun.a build/$(1)/libstackhouse.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1),$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse-shrun.a build/$(1)/libstackhouse.a \
	    $$($(1)_LIBS) -lpthread $$(LDLIBS)

# bench/sim_*.c: benchmarks of the simulator (-DSH_SIM, libstackhouse-sim.a, the scenarios).
build/$(1)/bench/sim_%: build/$(1)/obj-sim/bench/sim_%.o $$($(1)_BENCH_COMMON_SIM_OBJS) $$($(1)_SCN_SIM_OBJS) build/$(1)/libstackhouse-sim.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1)-sim,$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) $$(SIM_WRAP_LDFLAGS) $$(BENCH_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse-sim.a \
	    $$(LDLIBS_sim_$$*) $$(BENCH_LDLIBS) $$(SIM_LIBS) $$($(1)_LIBS) -lpthread $$(LDLIBS)

build/$(1)/bench/%: build/$(1)/obj/bench/%.o $$($(1)_BENCH_COMMON_OBJS) build/$(1)/libstackhouse.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1),$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) $$(BENCH_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse.a \
	    $$(LDLIBS_$$*) $$(BENCH_LDLIBS) $$($(1)_LIBS) -lpthread $$(LDLIBS)

build/$(1)/examples/%: build/$(1)/obj/examples/%.o build/$(1)/libstackhouse.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1),$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) -o $$@ $$< build/$(1)/libstackhouse.a \
	    $$(LDLIBS_$$*) $$($(1)_LIBS) -lpthread $$(LDLIBS)

.PHONY: $(1)-lib $(1)-tests
$(1)-lib: build/$(1)/libstackhouse.a $$(if $$(SIMLIB_SRCS),build/$(1)/libstackhouse-sim.a)
$(1)-tests: $$(addprefix build/$(1)/tests/,$$(TESTS_$(1)))
endef

$(foreach cfg,$(CONFIGS),$(eval $(call config_rules,$(cfg))))

# --------------------------------------------------------------- mutants ---
# A planted bug (tools/mutants/list*, docs/simulator.md "Planted bugs") is a
# patch, tools/mutants/<name>.patch; no switch of it is in the sources.
# `make mutant MUTANT=name` applies it in a scratch copy of the working tree,
# build/mutants/<name>/src, and builds there its release shsim and the
# simulator's tests (build/mutants/<name>/bin, tests; tools/mutants.sh).
MUTANT :=

-include $(shell find build -name '*.d' 2>/dev/null)

# ---------------------------------------------------- release artefacts ---

SO_REAL := libstackhouse.so.$(VERSION)
SO_NAME := libstackhouse.so.$(SOMAJOR)

build/release/$(SO_REAL): $(release_LIB_OBJS)
	$(call say,LD release,$@)
	$(Q)$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--no-undefined $(release_ALL_LDFLAGS) -o $@ $^ -lpthread
build/release/$(SO_NAME): build/release/$(SO_REAL)
	$(Q)ln -sfn $(SO_REAL) $@
build/release/libstackhouse.so: build/release/$(SO_NAME)
	$(Q)ln -sfn $(SO_NAME) $@
release-lib: build/release/libstackhouse.so

.PHONY: all lib benches examples
ifeq ($(strip $(LIB_SRCS)),)
all lib:
	@echo "stackhouse: no library sources yet (core/*.c, backend-epoll/*.c): nothing to build"
else
all: lib benches examples tools
lib: release-lib
endif
benches: $(addprefix build/release/bench/,$(BENCH_NAMES)) \
         $(addprefix build/release/bench/savina/,$(SAVINA_NAMES))

# The malloc counter's definitions must be exported for libc (and a C++
# runtime) to call them: -fvisibility=hidden would keep them to the program.
# private: the .flags stamp it depends on must not see this.
build/release/obj/bench/common/malloc_count.o: private CFLAGS += -fvisibility=default

# A shorter stem than build/release/bench/%'s: this rule wins for them.
build/release/bench/savina/%: build/release/obj/bench/savina/%.o \
    $(SAVINA_COMMON_SRCS:%.c=build/release/obj/%.o) build/release/libstackhouse.a
	@mkdir -p $(@D)
	$(call say,LD release,$@)
	$(Q)$(CC) $(release_ALL_LDFLAGS) $(BENCH_LDFLAGS) -o $@ $(filter %.o,$^) \
	    build/release/libstackhouse.a $(BENCH_LDLIBS) -lm -lpthread $(LDLIBS)
examples: $(addprefix build/release/examples/,$(EXAMPLE_NAMES))

# examples/failover/ (its README.md): a program of several files, which
# EXAMPLE_NAMES (one file each) leaves out. build/CFG/examples/failover/node
# and .../client are node_main.c and client_main.c over the example's other
# files; tests/test_e2e_failover links those files too, to boot nodes and a
# client in one process.
FAILOVER_OBJS = $(patsubst %.c,build/$(1)/obj/%.o,$(filter-out %_main.c,$(wildcard examples/failover/*.c)))
define failover_rules
build/$(1)/examples/failover/node build/$(1)/examples/failover/client: \
    build/$(1)/examples/failover/%: build/$(1)/obj/examples/failover/%_main.o \
    $(call FAILOVER_OBJS,$(1)) build/$(1)/libstackhouse.a
	@mkdir -p $$(@D)
	$$(call say,LD $(1),$$@)
	$(Q)$$(CC) $$($(1)_ALL_LDFLAGS) -o $$@ $$(filter %.o,$$^) build/$(1)/libstackhouse.a \
	    $$($(1)_LIBS) -lpthread $$(LDLIBS)
build/$(1)/tests/test_e2e_failover: $(call FAILOVER_OBJS,$(1))
endef
$(foreach cfg,$(CONFIGS),$(eval $(call failover_rules,$(cfg))))
examples: build/release/examples/failover/node build/release/examples/failover/client

# An example with the malloc counter linked in, SIGUSR1 printing its counts
# (bench/counted/malloc_signal.c): build/release/bench/echo_counted for
# bench/echo.sh --mallocs, http_counted for bench/http.sh --mallocs. (A
# shorter stem than build/release/bench/%'s: this rule wins for them.)
build/release/bench/%_counted: build/release/obj/examples/%.o \
    build/release/obj/bench/counted/malloc_signal.o build/release/obj/bench/common/malloc_count.o \
    build/release/libstackhouse.a
	@mkdir -p $(@D)
	$(call say,LD release,$@)
	$(Q)$(CC) $(release_ALL_LDFLAGS) -o $@ $(filter %.o,$^) build/release/libstackhouse.a -lpthread $(LDLIBS)

# ------------------------------------------------------------------ tools ---
# The scenario runners go to build/bin/: shsim (the simulator, SIM_CFG build,
# release by default; `make sim SIM_CFG=asan` runs the sweep under ASan+UBSan)
# and shrun (the epoll backend, release build). Other tools/*.c link the
# release library.

SIM_CFG     := release
SIM_SEEDS   := 1..1000
# The sweeps of `make sim`, one per entry: a strategy and, after a `:`,
# random's switch probability in permille, or msgpct's and delay's span
# (the deliveries, or yield points, their change points or delays fall in).
SIM_SWEEPS  := random:100 random:500 pct none msgpct:200 delay:2000
# And one more of random with every runtime fault point firing at this rate
# (fault-tolerant runs: every ask still answered once, nothing lost).
SIM_FAULTS  := sh/*:0.01
# And one more of random with weak memory: a load weaker than seq_cst reads
# a value another fiber overwrote lately with this probability (permille).
SIM_STALE   := 250
RUNNERS     := shsim shrun
TOOL_NAMES  := $(filter-out $(RUNNERS),$(basename $(notdir $(wildcard tools/*.c))))

# build/bin/shsim is a copy of one configuration's; the stamp makes a change
# of SIM_CFG copy again even when that build is older than the last copy.
build/bin/.sim-cfg: FORCE
	@mkdir -p $(@D)
	@echo '$(SIM_CFG)' > $@.new; if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi
build/bin/shsim: build/$(SIM_CFG)/bin/shsim build/bin/.sim-cfg
	@mkdir -p $(@D)
	$(Q)cp -f $< $@
build/bin/shrun: build/release/bin/shrun
	@mkdir -p $(@D)
	$(Q)cp -f $< $@

build/bin/%: build/release/obj/tools/%.o build/release/libstackhouse.a
	@mkdir -p $(@D)
	$(call say,LD release,$@)
	$(Q)$(CC) $(release_ALL_LDFLAGS) -o $@ $< build/release/libstackhouse.a $(LDLIBS_$*) -lpthread $(LDLIBS)

.PHONY: tools
tools: $(addprefix build/bin/,$(TOOL_NAMES) $(RUNNERS))

# ---------------------------------------------------------- test running ---

# $(call run_tests,CFG,NAMES[,LAUNCHER]): shell code that runs each program
# build/CFG/tests/NAME in sequence under `timeout`, prints one line per program
# (and its output, from build/CFG/tests/NAME.log, when it fails) and counts
# the shell variables pass and fail. A program that did not build is a failure.
# Each also gets its JUnit report, $(JUNIT_DIR)/CFG/NAME.xml (tools/junit.sh).
define run_tests
for t in $(2); do \
  bin=build/$(1)/tests/$$t; log=build/$(1)/tests/$$t.log; \
  if [ ! -x "$$bin" ]; then \
    printf 'FAIL  %-4s  %s  (did not build)\n' $(1) $$t; fail=$$((fail+1)); \
    bash tools/junit.sh case $(JUNIT_DIR) $(1) $$t 0 1 "did not build"; continue; \
  fi; \
  t0=$$SECONDS; \
  { env $(RUN_ENV_$(1)) timeout -k 10 $(TEST_TIMEOUT) $(3) "$$bin" > "$$log" 2>&1; rc=$$?; } 2>/dev/null; \
  dt=$$((SECONDS-t0)); why=; \
  if [ $$rc -eq 0 ]; then \
    printf 'PASS  %-4s  %s  (%ss)\n' $(1) $$t $$dt; pass=$$((pass+1)); \
  else \
    case $$rc in \
      124) why="timed out after $(TEST_TIMEOUT)s";; \
      137) why="killed by SIGKILL: timeout after $(TEST_TIMEOUT)+10s, or OOM";; \
      *) if [ $$rc -gt 128 ]; then why="killed by signal $$((rc-128))"; else why="exit status $$rc"; fi;; \
    esac; \
    printf 'FAIL  %-4s  %s  (%s, %ss; log: %s)\n' $(1) $$t "$$why" $$dt "$$log"; \
    tail -n 300 "$$log" | sed 's/^/    | /'; \
    fail=$$((fail+1)); \
  fi; \
  bash tools/junit.sh case $(JUNIT_DIR) $(1) $$t $$dt $$rc "$$why" "$$log"; \
done
endef

# Older TSan runtimes abort ("unexpected memory mapping") when the kernel
# randomises mmap with more than 28 bits; run TSan programs without ASLR then.
tsan_launcher = launch=; \
  if [ "$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)" -gt 28 ] && \
     setarch "$$(uname -m)" -R true 2>/dev/null; then launch="setarch $$(uname -m) -R"; fi

summary = echo "$$pass passed, $$fail failed"; [ $$fail -eq 0 ]

# $(call run_check,NAME,LOG,COMMANDS): shell code that runs COMMANDS with
# their output in LOG, prints `PASS  NAME`, or `FAIL  NAME` and the log, and
# counts pass or fail; its JUnit report goes to $(JUNIT_DIR)/checks/.
define run_check
t0=$$SECONDS; if { $(3); } > $(2) 2>&1; then printf 'PASS  %s\n' '$(1)'; pass=$$((pass+1)); rc=0; \
else printf 'FAIL  %s (log: %s)\n' '$(1)' '$(2)'; sed 's/^/    | /' $(2); fail=$$((fail+1)); rc=1; fi; \
bash tools/junit.sh case $(JUNIT_DIR) checks '$(subst $(space),_,$(1))' $$((SECONDS-t0)) $$rc 'failed' $(2)
endef

# JUnit XML of `make test` (CI test reports): a file per program or check,
# $(JUNIT_DIR)/<asan|tsan|checks>/<name>.xml, and all of them in one file,
# $(JUNIT_DIR)/junit.xml, written at the end.
JUNIT_DIR := build/test-results
space := $(subst ,, )

# The public headers whose API libstackhouse.so exports, for the exports
# check of `make test` (tools/check_exports.sh): every function and object
# they declare must be exported, and nothing else. A header of another
# library (e.g. the simulator's, in libstackhouse-sim.a) stays out of it.
SO_API_HEADERS := include/stackhouse/stackhouse.h include/stackhouse/bridge.h include/stackhouse/system.h \
                  include/stackhouse/probe.h include/stackhouse/net.h include/stackhouse/http.h \
                  include/stackhouse/cluster.h

# ---------------------------------------------------------------- targets ---

.PHONY: mutant mutants
mutant:
	@[ -n "$(MUTANT)" ] || { echo 'make mutant: say which, e.g. MUTANT=house_no_recheck'; exit 2; }
	+@MAKE='$(MAKE)' bash tools/mutants.sh --build '$(MUTANT)'

# Every planted bug (or MUTANTS="a b"): built, fuzzed over seeds 1..MUTANT_BUDGET,
# its simulator tests run; the table goes to build/mutants/table.md.
MUTANTS :=
MUTANT_BUDGET := 2000
mutants: deps
	@MAKE='$(MAKE)' bash tools/mutants.sh --budget $(MUTANT_BUDGET) $(MUTANTS)

# Mechanical mutants (tools/mutagen.sh, docs/simulator.md "Mechanical
# mutants"): generated by rule from core/ and http/, each built and fuzzed
# over a short budget, then the score and the survivors. MUTAGEN_ARGS go to
# `tools/mutagen.sh run`, e.g. "--sample 100 --budget 200" or "--shard 2/4".
.PHONY: mutagen
MUTAGEN_ARGS :=
mutagen: deps
	+@MAKE='$(MAKE)' bash tools/mutagen.sh run $(MUTAGEN_ARGS) && bash tools/mutagen.sh report

.PHONY: deps test sim explore bench savina coverage profile install install-check uninstall clean help FORCE
FORCE:

deps:
	@$(if $(NO_DEPS),:,bash tools/deps.sh)

# Build (asan from scratch) and run every test under ASan+UBSan, the
# TSAN_TESTS under TSan, then build `all`, check the installed library, the
# include and call layering (tools/check_layers.sh, the calls read from the
# release objects of core/ that `all` built), the style's limits
# (tools/tidy.sh, docs/style.md) and the exports of the .so
# (tools/check_exports.sh, SO_API_HEADERS). Exit status non-zero on any failure.
test: deps
	@rm -rf build/asan build/tsan $(JUNIT_DIR)
	+@pass=0; fail=0; $(tsan_launcher); \
	echo "== build: asan tests$(if $(TESTS_tsan), + tsan tests)"; \
	$(SUBMAKE) -k asan-tests tsan-tests; build=$$?; \
	echo "== run: $(words $(TESTS_asan)) test programs under ASan+UBSan"; \
	$(call run_tests,asan,$(TESTS_asan)); \
	echo "== run: $(words $(TESTS_tsan)) test programs under TSan"; \
	$(call run_tests,tsan,$(TESTS_tsan),$$launch); \
	echo "== build: release (make all)"; \
	if ! $(SUBMAKE) all; then printf 'FAIL  release build (make all)\n'; fail=$$((fail+1)); fi; \
	echo "== install check: users of make install (pkg-config, rpath, the sim-project on both backends and its coverage, CMake, headers as C++17)"; \
	$(call run_check,install check,build/install-check.log,$(SUBMAKE) install-check); \
	echo "== architecture: include and call layering; the style's limits (docs/style.md); the planted bugs' patches (each applies, no switch left); the mechanical mutants' self-test; exports of libstackhouse.so against $(SO_API_HEADERS)"; \
	$(call run_check,layering check,build/check-layers.log,bash tools/check_layers.sh --self-test && bash tools/check_layers.sh --objs build/release/obj/core); \
	$(call run_check,tidy check,build/check-tidy.log,bash tools/tidy.sh --self-test && bash tools/tidy.sh); \
	$(call run_check,planted bugs check,build/check-mutants.log,bash tools/mutants.sh --check); \
	$(call run_check,mechanical mutants self-test,build/check-mutagen.log,bash tools/mutagen.sh --self-test); \
	$(call run_check,exports check,build/check-exports.log,CC='$(CC)' bash tools/check_exports.sh --self-test && \
	  CC='$(CC)' bash tools/check_exports.sh build/release/libstackhouse.so $(SO_API_HEADERS)); \
	echo "== shsim campaigns: JUnit, --out, signals, merge of shards under GNU parallel (tools/check_campaign.sh)"; \
	$(call run_check,campaign check,build/check-campaign.log,bash tools/check_campaign.sh build/bin/shsim); \
	$(call run_check,JUnit check,build/check-junit.log,bash tools/junit.sh --self-test && bash tools/junit.sh check $(JUNIT_DIR)); \
	if [ $$build -ne 0 ] && [ $$fail -eq 0 ]; then printf 'FAIL  test build\n'; fail=$$((fail+1)); fi; \
	bash tools/junit.sh collect $(JUNIT_DIR) > $(JUNIT_DIR)/junit.xml.new && mv -f $(JUNIT_DIR)/junit.xml.new $(JUNIT_DIR)/junit.xml; \
	echo "JUnit report: $(JUNIT_DIR)/junit.xml"; \
	$(summary)

# Deterministic simulation: every visible scenario over SIM_SEEDS in each of
# SIM_SWEEPS, each with its summary table; non-zero exit on any failure.
sim: deps
	+@$(SUBMAKE) build/bin/shsim build/bin/shrun
	@status=0; for sw in $(SIM_SWEEPS); do \
	  st=$${sw%%:*}; opt=$$(bash tools/sweep-opt.sh "$$sw"); \
	  echo "== sim: every scenario, seeds $(SIM_SEEDS), strategy $$st $$opt"; \
	  build/bin/shsim sweep all --seeds $(SIM_SEEDS) --strategy $$st $$opt || status=1; \
	done; \
	echo "== sim: every scenario, seeds $(SIM_SEEDS), strategy random, faults $(SIM_FAULTS)"; \
	build/bin/shsim sweep all --seeds $(SIM_SEEDS) --faults '$(SIM_FAULTS)' || status=1; \
	echo "== sim: every scenario, seeds $(SIM_SEEDS), strategy random, weak memory (--stale-permille $(SIM_STALE))"; \
	build/bin/shsim sweep all --seeds $(SIM_SEEDS) --stale-permille $(SIM_STALE) || status=1; \
	exit $$status

# shsim with edge coverage, for `shsim explore` (build/bin/shsim-explore):
# `make explore`, then e.g. build/bin/shsim-explore explore all --seeds 1..50.
explore: deps
	+@$(SUBMAKE) build/bin/shsim-explore
build/bin/shsim-explore: build/explore/bin/shsim
	@mkdir -p $(@D)
	$(Q)cp -f $< $@

# Then the echo benchmark (bench/echo.sh; its servers run until stopped, so
# the loop above only shows their usage): ECHO_ARGS="--seconds 1", ...
ECHO_ARGS ?=
bench:
	+@$(SUBMAKE) benches
	@status=0; for b in $(BENCH_NAMES); do \
	  echo "== bench $$b"; \
	  build/release/bench/$$b || { echo "bench $$b: FAILED (exit status $$?)"; status=1; }; \
	done; \
	echo "== bench/echo.sh $(ECHO_ARGS)"; \
	bash bench/echo.sh $(ECHO_ARGS) || { echo "bench/echo.sh: FAILED"; status=1; }; \
	exit $$status

# The Savina suite against CAF, Erlang and Go (bench/compare_savina.sh, which
# installs the peers on demand): SAVINA_ARGS="--quick", "--only fib", ...
savina:
	@bash bench/compare_savina.sh $(SAVINA_ARGS)

# Line coverage (gcc: gcov; clang: llvm-cov gcov) of the tests, then of every
# scenario under the simulator over COV_SEEDS in each of SIM_SWEEPS
# (tools/coverage.sh): build/coverage/lcov.info (core/, the backends and
# http/), its HTML, cobertura.xml (gcovr) beside it, lines per folder. The
# counters (build/cov/**/*.gcda) stay: `bash tools/coverage.sh report` reads
# them again. The cov shsim (and the simulator tests, which fork through its
# runner) run each simulation in a child that ends with _exit(); the
# runner writes the child's counters first (tools/shsim/covdump.c).
COV_SEEDS := 1..50
coverage: deps
	@rm -rf build/cov build/coverage
	+@pass=0; fail=0; \
	$(SUBMAKE) -k cov-tests build/cov/bin/shsim; build=$$?; \
	$(call run_tests,cov,$(TESTS_cov)); \
	CC='$(CC)' bash tools/coverage.sh capture build/coverage/tests.info || fail=$$((fail+1)); \
	mkdir -p build/coverage; for sw in $(SIM_SWEEPS); do \
	  st=$${sw%%:*}; opt=$$(bash tools/sweep-opt.sh "$$sw"); \
	  log=build/coverage/sim-$$(printf %s "$$sw" | tr : -).log; \
	  echo "== coverage: every scenario under the simulator, seeds $(COV_SEEDS), strategy $$st $$opt"; \
	  build/cov/bin/shsim sweep all --seeds $(COV_SEEDS) --strategy $$st $$opt >$$log 2>&1 \
	    && pass=$$((pass+1)) || { echo "FAIL  sweep $$sw ($$log)"; fail=$$((fail+1)); }; \
	done; \
	CC='$(CC)' bash tools/coverage.sh capture build/coverage/all.info && \
	CC='$(CC)' bash tools/coverage.sh report build/coverage/all.info build/coverage/tests.info || fail=$$((fail+1)); \
	if [ $$build -ne 0 ] && [ $$fail -eq 0 ]; then fail=$$((fail+1)); fi; \
	$(summary)

# `make profile BENCH=pingpong ARGS="--case 1pair --quick"`: one benchmark
# under the gperftools CPU profiler, its top functions printed
# (tools/profile.sh; BENCH may be savina/NAME).
BENCH ?=
ARGS ?=
profile: deps
	@[ -n "$(BENCH)" ] || { echo 'make profile: say which, e.g. BENCH=pingpong or BENCH=savina/fib'; exit 2; }
	+@$(SUBMAKE) build/release/bench/$(BENCH)
	@bash tools/profile.sh $(BENCH) $(ARGS)

# ---------------------------------------------------------------- install ---

PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BINDIR       ?= $(PREFIX)/bin
CMAKEDIR     ?= $(LIBDIR)/cmake/stackhouse
INSTALL      ?= install
# libdir/includedir in the .pc files, relative to ${prefix} when under it.
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# What every install has besides libstackhouse: the scenario framework on
# epoll with shrun's main (libstackhouse-shrun.a, release build) and the
# tree's shrun. The simulator's part: its libraries, its headers, and the
# tree's shsim. One .pc file per library.
SHRUN_INSTALL_LIBS := build/release/libstackhouse-shrun.a
SIM_INSTALL_LIBS := build/release/libstackhouse-sim.a build/release/libstackhouse-shsim.a
PC_FILES         := stackhouse stackhouse-shrun $(if $(SIMLIB_SRCS),stackhouse-sim stackhouse-shsim)

install: lib $(SHRUN_INSTALL_LIBS) build/release/bin/shrun \
         $(if $(SIMLIB_SRCS),$(SIM_INSTALL_LIBS) build/release/bin/shsim)
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR)/stackhouse $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(BINDIR)
	$(INSTALL) -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/stackhouse/
	$(INSTALL) -m 644 build/release/libstackhouse.a $(SHRUN_INSTALL_LIBS) $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 755 build/release/$(SO_REAL) $(DESTDIR)$(LIBDIR)/
	ln -sfn $(SO_REAL) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sfn $(SO_NAME) $(DESTDIR)$(LIBDIR)/libstackhouse.so
	@# The loader finds a new library in /usr/local/lib (or another directory
	@# of ld.so.conf) only once its cache is rebuilt: do it for a live install.
	if [ -z '$(DESTDIR)' ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi
	$(INSTALL) -m 755 build/release/bin/shrun $(DESTDIR)$(BINDIR)/
ifneq ($(SIMLIB_SRCS),)
	$(INSTALL) -m 644 $(SIM_HEADERS) $(DESTDIR)$(INCLUDEDIR)/stackhouse/
	$(INSTALL) -m 644 $(SIM_INSTALL_LIBS) $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 755 build/release/bin/shsim $(DESTDIR)$(BINDIR)/
endif
	for pc in $(PC_FILES); do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(call pc_dir,$(LIBDIR))|g' \
	      -e 's|@INCLUDEDIR@|$(call pc_dir,$(INCLUDEDIR))|g' -e 's|@VERSION@|$(VERSION)|g' \
	      $$pc.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/$$pc.pc && \
	  chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/$$pc.pc || exit 1; \
	done
	$(INSTALL) -d $(DESTDIR)$(CMAKEDIR)
	sed -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@SOMAJOR@|$(SOMAJOR)|g' cmake/stackhouseConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/stackhouseConfig.cmake
	chmod 644 $(DESTDIR)$(CMAKEDIR)/stackhouseConfig.cmake
	@# The version file: CMake's own helper writes it, when CMake is there.
	if command -v cmake >/dev/null; then \
	  cmake -DVERSION=$(VERSION) -DOUT=$(DESTDIR)$(CMAKEDIR)/stackhouseConfigVersion.cmake \
	        -DCMAKE_SIZEOF_VOID_P=$$(printf '__SIZEOF_POINTER__\n' | $(CC) -E -P - | tail -n 1) \
	        -P cmake/version.cmake && chmod 644 $(DESTDIR)$(CMAKEDIR)/stackhouseConfigVersion.cmake; \
	else echo "install: no cmake: find_package(stackhouse) will take any version"; fi

# Installs into build/install-check, builds examples/adder.c with nothing but
# `pkg-config --cflags --libs stackhouse` and the rpath the README gives, and
# runs it (it exits with 55); runs the installed shrun, checks its
# --version and compiles each installed header alone as C11 and C++17;
# then, with the simulator, builds a copy of examples/sim-project/ (its own
# Makefile: pkg-config stackhouse-shsim and stackhouse-shrun) and runs its
# check (shsim sweeps, its cmocka test, its scenario on epoll through its
# own shrun) and its coverage (its counter.c's lines hit under the
# simulator, at least its COV_MIN), the installed shsim, and
# examples/cmake-project (find_package(stackhouse CONFIG)) with ctest.
IC_PREFIX := $(abspath build/install-check/usr)
install-check: lib
	@rm -rf build/install-check
	$(MAKE) --no-print-directory install PREFIX=$(IC_PREFIX) DESTDIR= NO_DEPS=1
	PKG_CONFIG_PATH=$(IC_PREFIX)/lib/pkgconfig; export PKG_CONFIG_PATH; \
	$(CC) -std=c11 -Wall -Wextra -Werror examples/adder.c $$(pkg-config --cflags --libs stackhouse) \
	    -Wl,-rpath,$(IC_PREFIX)/lib -o build/install-check/adder
	build/install-check/adder; rc=$$?; \
	if [ $$rc -ne 55 ]; then echo "install-check: adder exited $$rc, expected 55"; exit 1; fi
	$(IC_PREFIX)/bin/shrun ask_reply --seed 1 | grep -q 'result=ok'
	test "$$($(IC_PREFIX)/bin/shrun --version)" = "shrun (stackhouse) $(VERSION)"
	$(IC_PREFIX)/bin/shrun ask_reply --help | grep -q -- '--runs R'
	CC='$(CC)' CXX='$(CXX)' bash tools/check_headers.sh $(IC_PREFIX)/include
ifneq ($(SIMLIB_SRCS),)
	cp -r examples/sim-project build/install-check/sim-project
	PKG_CONFIG_PATH=$(IC_PREFIX)/lib/pkgconfig $(MAKE) --no-print-directory -C build/install-check/sim-project \
	    CC='$(CC)' check coverage
	$(IC_PREFIX)/bin/shsim run ask_reply --seed 1 | grep -q 'result=ok'
	cmake -S examples/cmake-project -B build/install-check/cmake-project -DCMAKE_PREFIX_PATH=$(IC_PREFIX) \
	    -DCMAKE_C_COMPILER='$(CC)' -DCMAKE_CXX_COMPILER='$(CXX)'
	+cmake --build build/install-check/cmake-project -- --no-print-directory
	cd build/install-check/cmake-project && ctest --output-on-failure
endif

uninstall:
	rm -rf $(DESTDIR)$(INCLUDEDIR)/stackhouse
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,libstackhouse.a $(SO_REAL) $(SO_NAME) libstackhouse.so \
	        libstackhouse-shrun.a libstackhouse-sim.a libstackhouse-shsim.a) \
	      $(addprefix $(DESTDIR)$(PKGCONFIGDIR)/,stackhouse.pc stackhouse-shrun.pc stackhouse-sim.pc stackhouse-shsim.pc) \
	      $(DESTDIR)$(BINDIR)/shsim $(DESTDIR)$(BINDIR)/shrun
	rm -rf $(DESTDIR)$(CMAKEDIR)

# ---------------------------------------------------------------- fuzzing ---
# `make fuzz-http`: the request parser's libFuzzer target
# (tests/fuzz/http_parser.c) with clang, in a configuration of its own,
# build/fuzz/: the library's sources instrumented for coverage
# (-fsanitize=fuzzer-no-link) under ASan+UBSan, the target linked with
# libFuzzer. It runs FUZZ_TIME seconds from the seeds of tests/fuzz/http/;
# new inputs go to build/fuzz/corpus, a crash to build/fuzz/crash-*. (Keep
# a crash's input in tests/fuzz/http/: test_http_parser replays them all.)
# Not part of `make test`.
FUZZ_CC     := clang
FUZZ_TIME   := 600
FUZZ_ARGS   := -max_len=12000
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := $(COMMON_CFLAGS) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_OBJS   := $(LIB_SRCS:%.c=build/fuzz/obj/%.o)

build/fuzz/.flags: FORCE | deps
	@mkdir -p $(@D)
	@printf '%s\n' '$(FUZZ_CC) $(FUZZ_CFLAGS) $(CPPFLAGS) $(CFLAGS)' > $@.new; \
	 if cmp -s $@.new $@; then rm -f $@.new; else mv -f $@.new $@; fi

build/fuzz/obj/%.o: %.c build/fuzz/.flags
	@mkdir -p $(@D)
	$(call say,CC fuzz,$<)
	$(Q)$(FUZZ_CC) $(call incs,$<) $(FUZZ_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

build/fuzz/libstackhouse.a: $(FUZZ_OBJS)
	$(call say,AR fuzz,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

build/fuzz/http_parser: build/fuzz/obj/tests/fuzz/http_parser.o build/fuzz/libstackhouse.a
	$(call say,LD fuzz,$@)
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -pthread -o $@ $^ -lpthread $(LDLIBS)

.PHONY: fuzz-http
fuzz-http: build/fuzz/http_parser
	@mkdir -p build/fuzz/corpus
	build/fuzz/http_parser -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	    -dict=tests/fuzz/http.dict -artifact_prefix=build/fuzz/ $(FUZZ_ARGS) \
	    build/fuzz/corpus tests/fuzz/http

clean:
	rm -rf build

help:
	@echo "make [all]      deps; release library (.a, .so), benches, examples (build/release)"
	@echo "make deps       install missing packages (tools/deps.sh)"
	@echo "make test       deps; asan build from scratch; every test under ASan+UBSan,"
	@echo "                TSAN_TESTS under TSan; then make all. TESTS=\"...\" runs a subset;"
	@echo "                JUnit report: build/test-results/junit.xml"
	@echo "make sim        every scenario under the simulator: SIM_SEEDS (1..1000) x SIM_SWEEPS"
	@echo "make explore    build/bin/shsim-explore: shsim with edge coverage for shsim explore"
	@echo "make bench      build and run every bench/*.c, then bench/echo.sh [ECHO_ARGS=...]"
	@echo "make savina     the Savina suite against CAF, Erlang, Go (SAVINA_ARGS=--quick)"
	@echo "make coverage   tests + simulated scenarios in build/cov: build/coverage/lcov.info, HTML"
	@echo "make mutants    the planted bugs (tools/mutants/list*): each built, fuzzed over"
	@echo "                MUTANT_BUDGET seeds, its simulator tests run (MUTANTS=\"a b\")"
	@echo "make mutant     MUTANT=name: build/mutants/<name> (shsim, simulator tests)"
	@echo "make mutagen    mechanical mutants of core/, http/ (tools/mutagen.sh): each built,"
	@echo "                fuzzed, then the score and survivors; MUTAGEN_ARGS=\"--sample 100\""
	@echo "make profile    BENCH=NAME [ARGS=...]: a benchmark under the CPU profiler, top functions"
	@echo "make fuzz-http  the HTTP parser's libFuzzer target (clang), FUZZ_TIME=600 s, in build/fuzz/"
	@echo "make tools      build/bin: shsim (simulator runner), shrun (epoll runner), tools/*.c"
	@echo "make install    PREFIX=$(PREFIX) DESTDIR=... ; make uninstall (libraries, headers,"
	@echo "                a .pc per library, the CMake package, bin/shrun, bin/shsim)"
	@echo "make install-check  install into build/install-check; build and run users of it"
	@echo "make clean      rm -rf build"
	@echo "single programs: make build/<release|asan|tsan|cov>/tests/<test_x> (also bench/, examples/)"
	@echo "variables: CC, CFLAGS, LDFLAGS, LDLIBS, LDLIBS_<prog>, TEST_LDLIBS, TEST_TIMEOUT, V=1,"
	@echo "           NO_DEPS=1 (skip tools/deps.sh)"
