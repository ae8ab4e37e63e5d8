//! `params.txt`: the ns-3 glue's run parameters, one `KEY value` per line after a
//! `# ina3d-ns3 params v1` comment. This module is its one writer ([`to_string`], used by
//! `ns3 emit`) and its one Rust reader ([`parse`], used to re-emit a glue directory); the
//! glue reads the same keys in C++ (`ns3-glue/helper/ina3d-helper.cc`, keys documented in
//! `ns3-glue/README.md`). `TRANSPORT` and `TCP_CONNECTIONS` take the keywords of
//! [`Transport`] and [`TcpConnections`], the file's own vocabulary.

use super::FormatError;
use crate::collective::InaConfig;
use crate::keyword::keyword_enum;
use crate::units::Bytes;
use std::path::Path;

/// How the glue carries `net` records over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TcpConnections {
    /// One long-lived connection per (src, dst) pair, records in FIFO order (as NCCL keeps
    /// its peer connections open): no handshake or slow start per record.
    #[default]
    Persistent,
    /// A new connection per record (handshake and slow start each time).
    PerFlow,
}

keyword_enum!(TcpConnections, "TCP connection reuse", TcpConnections::Persistent => "persistent", TcpConnections::PerFlow => "per-flow");

/// How the glue carries `net` records (`TRANSPORT` in `params.txt`; see
/// `ns3-glue/README.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Transport {
    /// RoCE-like queue pairs over UDP with DCQCN (rate-based, paced, starting at line rate)
    /// and ECN-marking switch ports, the parameters from `config.txt`: what LLM clusters
    /// run and what HPCC's and SimAI's ns-3 simulate.
    #[default]
    Roce,
    /// TCP NewReno over deep drop-tail queues.
    Tcp,
}

keyword_enum!(Transport, "transport", Transport::Roce => "roce", Transport::Tcp => "tcp");

/// Everything `params.txt` says.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// The INA switch model (`INA_SLOTS`, `INA_PAYLOAD`, `INA_WINDOW`, `INA_POLICY`,
    /// `INA_CLASSES`; planned reservations travel in `reservations.txt`).
    pub ina: InaConfig,
    /// `TRANSPORT`.
    pub transport: Transport,
    /// `MTU`, bytes.
    pub mtu: u64,
    /// `NET_PAYLOAD`: payload bytes per packet of a `net` record.
    pub net_payload: u64,
    /// `TCP_INITIAL_CWND`, segments.
    pub tcp_initial_cwnd: u64,
    /// `TCP_BUFFER`, bytes.
    pub tcp_buffer: u64,
    /// `TCP_CONNECTIONS`.
    pub tcp_connections: TcpConnections,
    /// `QUEUE_PACKETS`: packets each queue holds.
    pub queue_packets: u64,
    /// `FLAVOR`: the simulator dialect of the emitted files (a label the glue logs).
    pub flavor: &'static str,
    /// `SEED`: the ECMP seed of `routes.txt`.
    pub seed: u64,
    /// `STOP_TIME_S`: the simulation's stop time, seconds.
    pub stop_time_s: f64,
}

/// The file's text.
pub fn to_string(p: &Params) -> String {
    let ina = &p.ina;
    format!(
        "# ina3d-ns3 params v1\nINA_SLOTS {}\nINA_PAYLOAD {}\nINA_WINDOW {}\nINA_POLICY {}\nINA_CLASSES {}\nTRANSPORT {}\nMTU {}\nNET_PAYLOAD {}\nTCP_INITIAL_CWND {}\nTCP_BUFFER {}\nTCP_CONNECTIONS {}\nQUEUE_PACKETS {}\nFLAVOR {}\nSEED {}\nSTOP_TIME_S {:.3}\n",
        ina.slots,
        ina.payload.0,
        ina.window,
        ina.policy().as_str(),
        ina.classes
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(","),
        p.transport,
        p.mtu,
        p.net_payload,
        p.tcp_initial_cwnd,
        p.tcp_buffer,
        p.tcp_connections.as_str(),
        p.queue_packets,
        p.flavor,
        p.seed,
        p.stop_time_s,
    )
}

/// The largest INA payload per slot the glue takes: one packet's.
pub const MAX_INA_PAYLOAD: u64 = 8192;

/// What a re-emit reads back: the INA switch model (defaults for keys the file lacks) and
/// the route seed (`None` without a `SEED` line).
#[derive(Clone, Debug, PartialEq)]
pub struct ReadBack {
    /// The INA switch model.
    pub ina: InaConfig,
    /// `SEED`, when given.
    pub seed: Option<u64>,
}

/// Reads `text` (the contents of `path`). Keys a re-emit does not need are skipped; a
/// malformed value of a key it reads is an error naming `path:line` and the key.
pub fn parse(path: &Path, text: &str) -> Result<ReadBack, FormatError> {
    let mut ina = InaConfig::default();
    let mut seed = None;
    for (i, l) in text.lines().enumerate() {
        let mut it = l.split_whitespace();
        let (Some(key), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let bad = |msg: String| FormatError::syntax(path, i as u64 + 1, key, msg);
        let int = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| bad(format!("`{v}` is not an unsigned integer")))
        };
        let small = |v: &str| {
            int(v).and_then(|n| u32::try_from(n).map_err(|_| bad(format!("{n} is too large"))))
        };
        // the ranges the glue runs (one packet per slot; at least one slot and window):
        // refused here, at the line, rather than by the emit after it
        let positive = |n: u32| {
            if n == 0 {
                Err(bad("0 is out of range: expected at least 1".into()))
            } else {
                Ok(n)
            }
        };
        match key {
            "INA_SLOTS" => ina.slots = positive(small(v)?)?,
            "INA_PAYLOAD" => {
                let n = int(v)?;
                if !(1..=MAX_INA_PAYLOAD).contains(&n) {
                    return Err(bad(format!(
                        "{n} B is out of range: expected 1..={MAX_INA_PAYLOAD} (one packet)"
                    )));
                }
                ina.payload = Bytes(n)
            }
            "INA_WINDOW" => ina.window = positive(small(v)?)?,
            "INA_POLICY" => ina.policy = Some(v.parse().map_err(bad)?),
            "INA_CLASSES" => {
                ina.classes = v
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(|c| c.parse().map_err(bad))
                    .collect::<Result<_, _>>()?
            }
            "SEED" => seed = Some(int(v)?),
            _ => {}
        }
    }
    Ok(ReadBack { ina, seed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::InaPolicy;
    use crate::record::Class;

    #[test]
    fn what_a_re_emit_needs_round_trips_and_a_bad_value_names_line_and_key() {
        let p = Params {
            ina: InaConfig {
                slots: 512,
                payload: Bytes(1024),
                window: 64,
                policy: Some(InaPolicy::Priority),
                classes: vec![Class::Dp, Class::Tp],
                ..InaConfig::default()
            },
            transport: Transport::Tcp,
            mtu: 1500,
            net_payload: 1000,
            tcp_initial_cwnd: 10,
            tcp_buffer: 64_000,
            tcp_connections: TcpConnections::PerFlow,
            queue_packets: 10_000,
            flavor: "hpcc",
            seed: 7,
            stop_time_s: 1.5,
        };
        let text = to_string(&p);
        let r = parse(Path::new("params.txt"), &text).unwrap();
        assert_eq!(r.ina, p.ina);
        assert_eq!(r.seed, Some(7));
        assert!(text.contains("TRANSPORT tcp\n") && text.contains("TCP_CONNECTIONS per-flow\n"));
        let e = parse(Path::new("params.txt"), "# c\nINA_WINDOW 99999999999\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("params.txt:2") && e.contains("INA_WINDOW"),
            "{e}"
        );
    }
}
