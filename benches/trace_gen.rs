//! Benchmark (to be written): prints figures, asserts nothing about time.
fn main() {}
