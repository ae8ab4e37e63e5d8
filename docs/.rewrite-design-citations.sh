#!/usr/bin/env bash
# One-off, for the lead: replace every citation of "DESIGN §N" (a document outside the
# repository) with the section of docs/model.md that now holds that material. Run from
# anywhere inside the repository after merging the docs branch, review `git diff`, then
# delete this file. Each command is keyed on the exact cited text and its file, so it is
# safe to run twice; the script fails, listing them, if any DESIGN citation is left.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

sed -i 's|advance together as one unit (DESIGN §7\.2)\.|advance together as one unit (docs/model.md#trace-dag).|' src/trace/record.rs
sed -i 's|(DESIGN §8: keeping every|(docs/model.md#nvlink-records: keeping every|' src/trace/record.rs
sed -i "s|flowSim's 1,000 B (DESIGN §10)\.|flowSim's 1,000 B (docs/model.md#wire-bytes).|" src/trace/record.rs
sed -i 's|bytes of headers (DESIGN §10: `size|bytes of headers (docs/model.md#wire-bytes: `size|' src/units.rs
sed -i 's|Real files are messy (DESIGN §9):|Real files are messy (docs/model.md#hpcc-and-simai-topology):|' src/ns3/hpcc.rs
sed -i 's|can run the same job (DESIGN §9)\.|can run the same job (docs/model.md#aicb-workload).|' src/ns3/aicb.rs
sed -i 's|(`params_per_stage / TP`, DESIGN §5\.3)|(`params_per_stage / TP`, docs/model.md#parameters-and-buckets)|' src/ns3/aicb.rs
sed -i 's|at MFU 0\.45 (DESIGN §5\.4)\.|at MFU 0.45 (docs/model.md#compute-and-calibration).|' src/ns3/aicb.rs
sed -i 's|`(ip >> 8) & 0xffff` (DESIGN §9)\.|`(ip >> 8) \& 0xffff` (docs/model.md#hpcc-host-ips).|' src/ns3/ingest.rs
sed -i 's|(id%256)<<8` (DESIGN §9)\.|(id%256)<<8` (docs/model.md#hpcc-host-ips).|' src/fct.rs
sed -i 's|SimAI topology files (DESIGN §9)\.|SimAI topology files (docs/model.md#hpcc-and-simai-topology).|' src/topology/hpcc.rs
sed -i 's|one pipeline stage (DESIGN §5\.1, |one pipeline stage (docs/model.md#pipeline-schedule, |' src/schedule/pipeline.rs
sed -i 's|`m == pp`; DESIGN §5\.1 (which this follows exactly) caps at `m·v` instead\.|`m == pp`; this function caps at `m·v` instead (docs/model.md#known-gaps).|' src/schedule/pipeline.rs
sed -i 's|//! Model (DESIGN §5; approximations are marked):|//! Model (docs/model.md#workload-model; approximations are marked):|' src/schedule/mod.rs
sed -i 's|group mapping (DESIGN §4, `parallel_state\.py`)\.|group mapping (docs/model.md#rank-layout, `parallel_state.py`).|' src/schedule/groups.rs
sed -i 's|workload matches Megatron (DESIGN §4–§5)\.|workload matches Megatron (docs/model.md#rank-layout, docs/model.md#workload-model).|' tests/schedule.rs
sed -i 's|collective, DESIGN §8);|collective, docs/model.md#nvlink-records);|' benches/replay.rs
sed -i 's|the replayer counts (DESIGN §10) and close|the replayer counts (docs/model.md#wire-bytes) and close|' ns3-glue/model/ina-apps.h
sed -i 's|single record (DESIGN §8: writing each|single record ([docs/model.md](../docs/model.md#nvlink-records): writing each|' traces/README.md
sed -i 's|^## What the records model (Megatron-LM, DESIGN §4–§7)$|## What the records model (Megatron-LM; derivations in [docs/model.md](../docs/model.md#workload-model))|' traces/README.md

left=$(grep -rn 'DESIGN' src tests benches ns3-glue traces notebooks README.md docs/model.md docs/testing.md || true)
if [ -n "$left" ]; then
    echo "DESIGN citations left (reword them by hand):" >&2
    echo "$left" >&2
    exit 1
fi
echo "every DESIGN citation now points into docs/model.md"
