//! Stage 2: the 3D-parallel workload of one iteration (rank groups, pipeline order,
//! per-op sizes and compute times).
