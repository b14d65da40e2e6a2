# ringleader — `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo table3 test test-fast lint bench bench-compiled clean chromium slurm slurm-lab slurm-lab-down compiled uncompiled

$(STAMP): pyproject.toml
	@echo "ringleader: setting up $(VENV) once (about 2 minutes on 2 cores)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "ringleader: [1/2] PyTorch 2.13 (CPU build), about 1 minute"
	# Pin the CPU build provided on our machines first, so `torch>=2.3` is already met.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	@echo "ringleader: [2/2] ringleader and its dependencies, about 1 minute"
	$(BIN)/python -m pip install --quiet -e '.[dev,job,automl]'
	touch $(STAMP)
	@echo "ringleader: $(VENV) is ready"

# The main job: a scheduler on this machine running real training jobs, end to end.
demo: $(STAMP)
	$(BIN)/ringleader demo --out demo-output

# The ring-allreduce paper's Table 3 on the simulator.
table3: $(STAMP)
	$(BIN)/ringleader simulate --scenario table3 --seeds 10 \
		--json demo-output/table3.json --plot demo-output/table3.png

# Optional: the simulator and the policy core compiled with mypyc (needs a C
# compiler; 260-370 s here). The same runs to the same bits, several times
# faster (docs/scale.md, "The compiled hot path"); the pure-Python code runs
# wherever nothing is built, or where the source changed since (ringleader says
# so), or with RINGLEADER_PURE=1. See ringleader/hotpath.py.
compiled: $(STAMP)
	$(BIN)/python -c 'from ringleader.hotpath import main; main(["build"])'

uncompiled:
	test ! -x $(BIN)/python || $(BIN)/python -c 'from ringleader.hotpath import main; main(["remove"])'

# Also every commit's subject and body since issue 56 (CONTRIBUTING.md); skipped,
# with a message, in a clone whose history does not reach that far. Not part of
# `make test`: a subject already on main cannot be rewritten, so CI would fail
# on it until someone excused it (bench/commits.py's EXCUSED).
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src
	$(BIN)/python bench/commits.py

# The dashboard's test drives Debian's chromium through Playwright (offline: no
# browser download). Installed here when missing, or give RINGLEADER_CHROMIUM.
chromium:
	@test -n "$$RINGLEADER_CHROMIUM" || command -v chromium >/dev/null 2>&1 || { \
	  echo "make test: installing Debian's chromium for the dashboard test (apt-get install chromium)"; \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "make test: run 'sudo apt-get install chromium', or set RINGLEADER_CHROMIUM to a Chromium binary"; \
	    exit 1; \
	  fi; }

# The Slurm lab's daemons (tests/test_slurm_lab.py; docs/slurm.md): Debian's Slurm
# 22.05, its REST daemon and JWT plugin, and munge, installed here when missing. No daemon is started by the
# install: there is no init system, and the lab starts its own.
slurm:
	@command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && \
	  command -v srun >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 && \
	  command -v slurmrestd >/dev/null 2>&1 || { \
	  echo "make test: installing Debian's Slurm and munge for the Slurm lab (about 15 s)"; \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge >/dev/null; \
	  else \
	    echo "make test: run 'sudo apt-get install slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge'"; \
	    exit 1; \
	  fi; }

# A Slurm cluster on this machine to try things on: a controller and 3 nodes of 2
# virtual GPUs, each in namespaces of its own (root). Clients run on its controller:
# the command `make slurm-lab` prints says how. `make slurm-lab-down` removes it.
slurm-lab: $(STAMP) slurm
	$(BIN)/python -m ringleader.slurm.lab up

slurm-lab-down: $(STAMP)
	$(BIN)/python -m ringleader.slurm.lab down

# Every tier; what CI runs. ruff first (seconds); then the type check (mypy, ~30 s
# from a fresh clone) and the Ray harness (a 3-node cluster in its own network
# namespace, ~70 s, mostly waiting) run beside the rest of the tests, which run in
# order, and any of the three failing fails the target. Then the benchmark
# regression check (bench/regress.py, ~15 s): it fails on a slowdown beyond 2x the
# committed figures, measured against a calibration loop.
test: $(STAMP) chromium slurm
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	@$(BIN)/mypy src > .mypy.log 2>&1 & typed=$$!; \
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_ray.py > .ray-tests.log 2>&1 & ray=$$!; \
	$(BIN)/python -m pytest -q --durations=15 --ignore=tests/test_ray.py; rest=$$?; \
	wait $$typed; mypyed=$$?; echo "--- mypy src (ran beside the tests):"; cat .mypy.log; \
	wait $$ray; rayed=$$?; echo "--- tests/test_ray.py (ran beside the rest):"; cat .ray-tests.log; \
	test $$rest -eq 0 -a $$rayed -eq 0 -a $$mypyed -eq 0
	$(BIN)/python bench/regress.py

# Your own loop: skips tests marked slow.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# Every results file, with the commit it measured: the pure-Python code first (a
# build, if any, is left aside), then the hot-path benchmarks again compiled
# (bench/results/*-compiled.json). The build is removed after.
bench: export RINGLEADER_PURE = 1
bench: $(STAMP)
	$(BIN)/python bench/sim.py
	$(BIN)/python bench/decision.py
	$(BIN)/python bench/resize.py
	$(BIN)/python bench/traces.py
	$(BIN)/python bench/suspend.py
	$(BIN)/python bench/ray_executor.py
	$(BIN)/python bench/tensorlights_models.py
	$(BIN)/python bench/netlab.py
	$(BIN)/python bench/traffic_runtime.py
	$(BIN)/python bench/store_history.py
	$(BIN)/python bench/control_plane.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/fidelity.py
	$(BIN)/python bench/ddp_exit.py
	$(BIN)/python bench/cli.py
	$(BIN)/python bench/policies.py
	$(BIN)/python bench/heterogeneity.py
	$(BIN)/python bench/published.py
	$(BIN)/python bench/gavel.py
	$(BIN)/python bench/goodput.py
	$(BIN)/python bench/goodput_model.py
	$(BIN)/python bench/goodput_typed.py
	$(BIN)/python bench/goodput_band.py
	$(BIN)/python bench/regress.py --record
	$(BIN)/ringleader simulate --scenario gandiva-cluster --seeds 10 --json bench/results/gandiva-cluster.json
	$(BIN)/ringleader simulate --scenario automl --seeds 30 --json bench/results/automl.json
	RINGLEADER_PURE= $(MAKE) bench-compiled uncompiled

# The simulator and decision benchmarks on the compiled hot path only.
bench-compiled: compiled
	$(BIN)/python bench/sim.py
	$(BIN)/python bench/decision.py
	$(BIN)/python bench/traces.py
	$(BIN)/python bench/scale.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache .mypy_cache .ruff_cache
	rm -f src/ringleader_hot__mypyc* src/ringleader/_compiled.json
	find src -name "*.so" -delete
