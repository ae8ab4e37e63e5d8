//! Stage 4a: the ns-3 back-end — emit HPCC/SimAI inputs, run the glue, ingest outputs.
