//! What the benchmarks read of Linux's `/proc`: peak memory, CPU time and load, one
//! reader each for every bench that includes this module (`mod procfs;`).

// each bench uses part of it
#![allow(dead_code)]

/// Peak resident set of this process (`VmHWM`), KiB.
pub fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

/// User + system seconds of a process or thread, from its `/proc/…/stat` file (0 when
/// it cannot be read: the process has ended).
pub fn stat_cpu(path: &str) -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            // the fields after the command's closing parenthesis: utime and stime are
            // the 12th and 13th of them
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / tick)
        })
        .unwrap_or(0.0)
}

/// The 1-minute load average.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into())
}
