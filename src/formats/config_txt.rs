//! `config.txt`: the HPCC-family simulator configuration `ns3 emit` writes (every key
//! HPCC's and SimAI's ns-3 read, as `SimAI.conf`), with the ECN marking maps
//! (`KMAX_MAP`/`KMIN_MAP`/`PMAX_MAP`) for every link rate used. This module is its one
//! writer; the ns-3 glue reads the DCQCN keys and maps in C++
//! (`ns3-glue/helper/ina3d-helper.cc`). Which thresholds a rate gets is the ns-3 model's
//! decision (`netmodel::red_params`), passed in as [`Ecn`] rows.

use crate::units::BitsPerSec;
use std::fmt::Write as _;

/// ECN marking of one link rate: KMAX and KMIN in KB of 1,000 bytes (as HPCC's switch
/// reads them) and the marking probability at KMAX.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ecn {
    /// The link rate.
    pub rate: BitsPerSec,
    /// KMAX, KB.
    pub kmax_kb: u64,
    /// KMIN, KB.
    pub kmin_kb: u64,
    /// PMAX.
    pub pmax: f64,
}

/// The file's text, `ecn` in ascending rate order, the simulation stopping at `stop_time_s`.
pub fn to_string(ecn: &[Ecn], stop_time_s: f64) -> String {
    let mut s = String::new();
    // DCQCN's keys from the one set of values the replayer's model runs too
    let d = crate::netmodel::DcqcnParams::default();
    let us = |ns: u64| format!("{}", ns as f64 / 1000.0);
    let mbps = |r: BitsPerSec| format!("{}Mb/s", r.0 as f64 / 1e6);
    let kv: &[(&str, String)] = &[
        ("ENABLE_QCN", "1".into()),
        ("USE_DYNAMIC_PFC_THRESHOLD", "1".into()),
        ("PACKET_PAYLOAD_SIZE", "1000".into()),
        ("TOPOLOGY_FILE", "topology.txt".into()),
        ("FLOW_FILE", "flow.txt".into()),
        ("TRACE_FILE", "trace_nodes.txt".into()),
        ("TRACE_OUTPUT_FILE", "mix.tr".into()),
        ("FCT_OUTPUT_FILE", "fct.txt".into()),
        ("PFC_OUTPUT_FILE", "pfc.txt".into()),
        ("SIMULATOR_STOP_TIME", format!("{stop_time_s:.2}")),
        ("CC_MODE", "1".into()),
        ("ALPHA_RESUME_INTERVAL", us(d.alpha_resume_ns)),
        ("RATE_DECREASE_INTERVAL", us(d.rate_decrease_ns)),
        ("CLAMP_TARGET_RATE", u8::from(d.clamp_target).to_string()),
        ("RP_TIMER", us(d.rp_timer_ns)),
        ("EWMA_GAIN", d.ewma_gain.to_string()),
        ("FAST_RECOVERY_TIMES", d.fast_recovery_times.to_string()),
        ("RATE_AI", mbps(d.rate_ai)),
        ("RATE_HAI", mbps(d.rate_hai)),
        ("MIN_RATE", mbps(d.min_rate)),
        ("DCTCP_RATE_AI", "1000Mb/s".into()),
        ("ERROR_RATE_PER_LINK", "0.0000".into()),
        ("L2_CHUNK_SIZE", "4000".into()),
        ("L2_ACK_INTERVAL", "1".into()),
        ("L2_BACK_TO_ZERO", "0".into()),
        ("HAS_WIN", "1".into()),
        ("GLOBAL_T", "0".into()),
        ("VAR_WIN", "1".into()),
        ("FAST_REACT", "1".into()),
        ("U_TARGET", "0.95".into()),
        ("MI_THRESH", "0".into()),
        ("INT_MULTI", "1".into()),
        ("MULTI_RATE", "0".into()),
        ("SAMPLE_FEEDBACK", "0".into()),
        ("PINT_LOG_BASE", "1.05".into()),
        ("PINT_PROB", "1.0".into()),
        ("RATE_BOUND", "1".into()),
        ("ACK_HIGH_PRIO", "0".into()),
        ("LINK_DOWN", "0 0 0".into()),
        ("ENABLE_TRACE", "0".into()),
        ("BUFFER_SIZE", "32".into()),
        ("QLEN_MON_FILE", "qlen.txt".into()),
        ("QLEN_MON_START", "0".into()),
        ("QLEN_MON_END", "20000".into()),
        ("BW_MON_FILE", "bw.txt".into()),
        ("RATE_MON_FILE", "rate.txt".into()),
        ("CNP_MON_FILE", "cnp.txt".into()),
        ("MON_START", "0".into()),
        ("MON_END", "20000".into()),
        ("QP_MON_INTERVAL", "100".into()),
        ("QLEN_MON_INTERVAL", "10000".into()),
        ("BW_MON_INTERVAL", "10000".into()),
    ];
    for (k, v) in kv {
        let _ = writeln!(s, "{k} {v}");
    }
    let map = |f: &dyn Fn(&Ecn) -> String| -> String {
        let mut m = ecn.len().to_string();
        for e in ecn {
            let _ = write!(m, " {} {}", e.rate.0, f(e));
        }
        m
    };
    let _ = writeln!(s, "KMAX_MAP {}", map(&|e| e.kmax_kb.to_string()));
    let _ = writeln!(s, "KMIN_MAP {}", map(&|e| e.kmin_kb.to_string()));
    let _ = writeln!(s, "PMAX_MAP {}", map(&|e| format!("{}", e.pmax)));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rate_gets_one_entry_in_each_ecn_map_in_order() {
        let g = 1_000_000_000;
        let ecn = [
            Ecn {
                rate: BitsPerSec(100 * g),
                kmax_kb: 1600,
                kmin_kb: 400,
                pmax: 0.2,
            },
            Ecn {
                rate: BitsPerSec(400 * g),
                kmax_kb: 3200,
                kmin_kb: 800,
                pmax: 0.2,
            },
        ];
        let t = to_string(&ecn, 2.0);
        assert!(
            t.contains("\nKMAX_MAP 2 100000000000 1600 400000000000 3200\n"),
            "{t}"
        );
        assert!(
            t.contains("\nKMIN_MAP 2 100000000000 400 400000000000 800\n"),
            "{t}"
        );
        assert!(
            t.contains("\nPMAX_MAP 2 100000000000 0.2 400000000000 0.2\n"),
            "{t}"
        );
        assert!(t.contains("\nSIMULATOR_STOP_TIME 2.00\n"), "{t}");
    }
}
