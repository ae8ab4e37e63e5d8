//! Stage 4b: the native flow-level replayer with INA-enabled switches.
