//! Stage 5: tables (polars) — replayer vs ns-3, policy vs policy.
