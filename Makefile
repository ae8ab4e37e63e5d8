# ina3d — the whole set-up on a fresh Debian machine is `make run` and `make test`.
# Each target installs what it needs when it is missing (apt packages, a Python venv).

SHELL := /bin/bash
CARGO ?= cargo
# Debian's ns-3.37 and what linking it needs.
NS3_PKGS := ns3 libns3-dev libgsl-dev
NS3_STAMP := /usr/include/ns3/core-module.h
EXAMPLE_OUT ?= out/example

.PHONY: run test bench ns3-deps build clean venv notebooks glue dcqcn-test slurm-test validate reality study study-scale

## run: the main job on the bundled example over eight ECMP seeds (parse → trace → replay
## each INA policy → table, results.csv and results.svg). Built without polars
## (--no-default-features: `run` needs no tables library), so a fresh clone compiles in
## about 2 CPU-minutes instead of 25; `make test` builds everything.
RUN_SEEDS ?= 0,1,2,3,4,5,6,7
run:
	@echo "building ina3d without polars (a fresh clone: about 2 CPU-minutes)"
	$(CARGO) build --quiet --no-default-features
	$(CARGO) run --quiet --no-default-features -- run --seeds $(RUN_SEEDS) -o $(EXAMPLE_OUT)

## test: every test (unit, integration, property, ns-3 end to end, Slurm, notebooks); the
## venv first: tests/chakra.rs reads `export chakra`'s files with MLCommons' mlc-chakra
test: ns3-deps glue venv build
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	    $(CARGO) nextest run --no-fail-fast; \
	else \
	    $(CARGO) test --no-fail-fast; \
	fi
	$(CARGO) test --doc --quiet
	$(MAKE) slurm-test
	$(MAKE) notebooks

## slurm-test: a 4-cell sweep through a real single-node Slurm (Debian slurm-wlm + munge,
## installed when missing, started here and stopped after), whose collected sweep.csv must
## equal the same grid run locally byte for byte (tests/slurm/ci.sh)
SLURM_STATE ?= target/slurm
slurm-test: build
	tests/slurm/ci.sh $(SLURM_STATE)

## bench: benchmarks printing figures and ratios (not timed tests)
bench: ns3-deps glue
	$(CARGO) bench --no-default-features

## validate: the validation suite, replayer vs ns-3 on 16-128-GPU contended fabrics
## (ina3d validate; one row per case in $(VALIDATE_OUT)/validate.csv; TRANSPORT=roce|tcp)
VALIDATE_OUT ?= out/validate
TRANSPORT ?= roce
validate: ns3-deps glue
	$(CARGO) run --quiet --no-default-features -- validate -o $(VALIDATE_OUT) --transport $(TRANSPORT)

## reality: the published-run suite (docs/compute.md): real Megatron-LM, NeMo and
## Megatron-DeepSpeed runs' published iteration times against the prediction, fit and
## held-out rows apart (ina3d validate --reality; $(REALITY_OUT)/reality.csv). No ns-3.
REALITY_OUT ?= out/reality
reality:
	$(CARGO) run --release --quiet --no-default-features -- validate --reality -o $(REALITY_OUT)

build:
	$(CARGO) build --all-targets --quiet

## glue: the ns-3 glue (ns3-glue/, C++ on Debian's ns-3) → target/ns3-glue/ina3d-ns3
GLUE_BIN := target/ns3-glue/ina3d-ns3
GLUE_SRC := $(wildcard $(addprefix ns3-glue/,$(addsuffix /*.cc,scenario helper model) $(addsuffix /*.h,scenario helper model)))
NS3_MODULES := core network internet point-to-point applications traffic-control
glue: $(GLUE_BIN)
$(GLUE_BIN): $(GLUE_SRC) | ns3-deps
	@mkdir -p $(dir $@)
	g++ -std=c++17 -O2 -o $@.tmp $(filter %.cc,$(GLUE_SRC)) \
	    $$(pkg-config --cflags --libs $(addprefix ns3-,$(NS3_MODULES)) 2>/dev/null || echo $(addprefix -lns3-,$(NS3_MODULES)))
	mv $@.tmp $@

## dcqcn-test: the DCQCN reaction point against its equations (no ns-3 needed; tests/ns3.rs
## builds and runs the same program)
DCQCN_TEST := target/ns3-glue/dcqcn-test
dcqcn-test: $(DCQCN_TEST)
	$(DCQCN_TEST)
$(DCQCN_TEST): ns3-glue/test/dcqcn-test.cc ns3-glue/model/dcqcn.cc ns3-glue/model/dcqcn.h
	@mkdir -p $(dir $@)
	g++ -std=c++17 -O2 -Wall -Werror -o $@ ns3-glue/test/dcqcn-test.cc ns3-glue/model/dcqcn.cc

## ns3-deps: Debian's ns-3 (headers + libraries), installed once when missing
ns3-deps: $(NS3_STAMP)
$(NS3_STAMP):
	@echo "installing Debian's ns-3 ($(NS3_PKGS))"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NS3_PKGS)

clean:
	$(CARGO) clean
	rm -rf out

## venv: the Python environment the notebooks and tests/chakra.rs run in (.venv, pinned in
## notebooks/requirements.txt)
VENV := .venv
PY := $(VENV)/bin/python
venv: $(VENV)/.installed
$(VENV)/.installed: notebooks/requirements.txt
	@python3 -m venv $(VENV) 2>/dev/null || { \
	    echo "installing python3-venv"; apt-get update -qq; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; \
	    python3 -m venv $(VENV); }
	$(VENV)/bin/pip install -q --disable-pip-version-check -r notebooks/requirements.txt
	touch $@

## notebooks: execute every notebook headless (fails on any cell error); outputs in NB_OUT.
## Inputs are real runs made here: the tiny job on replay + ns-3 (results and per-flow
## comparison), a replay-only sweep of aggregator slots (notebooks/slots.toml) and the
## cluster sweep of notebooks/cluster.toml (three jobs sharing one fabric, ~30 s).
NB_OUT ?= target/notebooks
INA3D_BIN = $(CARGO) run --quiet --
notebooks: venv glue
	$(INA3D_BIN) run traces/example/tiny.toml --ns3 -o $(NB_OUT)/tiny
	$(INA3D_BIN) sweep notebooks/slots.toml -o $(NB_OUT)/sweep
	$(INA3D_BIN) cluster notebooks/cluster.toml -o $(NB_OUT)/cluster
	INA3D_CLUSTER=$(NB_OUT)/cluster \
	INA3D_RESULTS=$(NB_OUT)/tiny/results.csv \
	INA3D_FLOWS=$(NB_OUT)/tiny/ina-dp/compare/flows.csv \
	INA3D_SWEEP=$(NB_OUT)/sweep/sweep.csv \
	    $(PY) notebooks/execute.py --out $(NB_OUT)

## study: the 3D-INA study (docs/studies.md, "The study"): `ina3d sweep notebooks/study.toml` — every
## policy of `ina3d run` over ECMP seeds 0-2 on 57 cells (slots per switch, INA switches,
## GPT-3 13B/175B and Llama-2 70B cut to 4 layers on 16 GPUs, TP·PP·DP layouts, fat-tree,
## leaf-spine 1:1 and 2:1, rail), replay only — then notebooks/study.ipynb on it, which
## writes STUDY_OUT/study.csv (sweep.csv + the planner's solve times). Resumes a killed run.
STUDY_OUT ?= target/study
study: venv build
	$(INA3D_BIN) sweep notebooks/study.toml -o $(STUDY_OUT)
	INA3D_STUDY=$(STUDY_OUT) $(PY) notebooks/execute.py --out $(STUDY_OUT) notebooks/study.ipynb

## study-scale: the study at cluster scale (docs/studies.md, "The study at scale"): `ina3d sweep
## notebooks/study-scale.toml` — GPT-3 175B, Llama-2 70B and Mixtral 8x7B at full depth on
## 1,024 and 8,192 GPUs (fat-tree, leaf-spine 3:1, rail; two layouts each; 1 K-64 K slots),
## ECMP seeds 0-1, the ideal rate model — with the release binary, then
## notebooks/study_scale.ipynb on the cells that finished (writes study_scale.csv,
## study_scale_plans.csv and study_scale_cells.csv into STUDY_SCALE_OUT; exits with the
## sweep's status: 1 when a cell failed or is missing). About 1.5 hours on 2 shared cores; resumes a
## killed run. Not part of `make test`. STUDY_SCALE_FLAGS="--slurm --wait [--partition P]"
## runs the cells as a Slurm job array instead (docs/sweeps.md, Slurm).
STUDY_SCALE_OUT ?= target/study-scale
STUDY_SCALE_FLAGS ?= --jobs 2
study-scale: venv
	$(CARGO) run --release --quiet -- sweep notebooks/study-scale.toml -o $(STUDY_SCALE_OUT) $(STUDY_SCALE_FLAGS); \
	rc=$$?; [ $$rc -le 1 ] || exit $$rc; \
	INA3D_STUDY_SCALE=$(STUDY_SCALE_OUT) $(PY) notebooks/execute.py --out $(STUDY_SCALE_OUT) notebooks/study_scale.ipynb \
	    && exit $$rc
