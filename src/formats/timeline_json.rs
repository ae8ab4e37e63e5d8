//! `timeline.json`: a replay as a timeline in the Chrome trace-event JSON format, the one
//! `chrome://tracing` and <https://ui.perfetto.dev> open (docs/timeline.md).
//!
//! The file is one object, `{"displayTimeUnit": "ns", "traceEvents": [...]}`. Times are
//! microseconds (the format's unit) with the nanoseconds of the replay as three
//! decimals. Three kinds of event are written:
//! - complete events (`"ph": "X"`): `name`, `cat`, `ts`, `dur`, `pid`, `tid`, `args`;
//! - counter events (`"ph": "C"`): `name`, `ts`, `pid`, `args` holding one number per
//!   series;
//! - metadata events (`"ph": "M"`): `process_name`, `thread_name` (`args.name`),
//!   `process_sort_index`, `thread_sort_index` (`args.sort_index`).
//!
//! The writer takes the events in the order given (the assembly sorts them: a viewer
//! nests complete events of one thread by containment and wants the outer first when
//! two start together), so the file is a function of its input alone.

use super::{write_atomic, FormatError};
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::Path;

/// A time in nanoseconds, written as microseconds with three decimals.
fn micros(ns: u64) -> Value {
    // an integer below 2^53 divided by 1000 prints as its exact decimal
    Value::from(ns as f64 / 1000.0)
}

/// A value among a span's args.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A whole number.
    Int(u64),
    /// Text.
    Text(String),
}

impl From<u64> for Arg {
    fn from(n: u64) -> Self {
        Arg::Int(n)
    }
}

impl From<u32> for Arg {
    fn from(n: u32) -> Self {
        Arg::Int(u64::from(n))
    }
}

impl From<usize> for Arg {
    fn from(n: usize) -> Self {
        Arg::Int(n as u64)
    }
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Arg::Text(s.to_string())
    }
}

impl From<String> for Arg {
    fn from(s: String) -> Self {
        Arg::Text(s)
    }
}

/// A span's args: names and values (written as a JSON object, keys sorted). Kept typed
/// until written: a JSON map per span would triple the memory a large timeline takes.
pub type Args = Vec<(&'static str, Arg)>;

/// One event of the timeline.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A span (`"ph": "X"`).
    Span {
        /// What it is (shown on the slice).
        name: String,
        /// Category (the traffic class, `compute`, …), for the viewer's filters.
        cat: &'static str,
        /// Start, ns.
        start_ns: u64,
        /// Duration, ns.
        dur_ns: u64,
        /// Process (pipeline stage).
        pid: u32,
        /// Thread (a track of one rank).
        tid: u32,
        /// Details shown when the slice is selected.
        args: Args,
    },
    /// A counter sample (`"ph": "C"`): from `time_ns` on, each series has its value.
    Counter {
        /// The counter's track name.
        name: String,
        /// When, ns.
        time_ns: u64,
        /// Process the counter belongs to.
        pid: u32,
        /// Series name and value.
        values: Vec<(&'static str, f64)>,
    },
    /// `process_name` of `pid`.
    ProcessName {
        /// The process.
        pid: u32,
        /// Its name.
        name: String,
    },
    /// `process_sort_index` of `pid`.
    ProcessSort {
        /// The process.
        pid: u32,
        /// Its place among processes.
        index: u32,
    },
    /// `thread_name` of `tid` in `pid`.
    ThreadName {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
        /// Its name.
        name: String,
    },
    /// `thread_sort_index` of `tid` in `pid`.
    ThreadSort {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
        /// Its place among the process's threads.
        index: u32,
    },
}

/// The JSON object of one event, keys in a fixed order.
#[derive(Serialize)]
struct Json<'a> {
    name: &'a str,
    ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<Value>,
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u32>,
    args: Value,
}

impl Event {
    fn json(&self) -> Json<'_> {
        let meta = |name: &'static str, pid, tid, args: Value| Json {
            name,
            ph: "M",
            cat: None,
            ts: None,
            dur: None,
            pid,
            tid,
            args,
        };
        let named = |n: &str| Value::Object(Map::from_iter([("name".into(), n.into())]));
        let index = |i: u32| Value::Object(Map::from_iter([("sort_index".into(), i.into())]));
        match self {
            Event::Span {
                name,
                cat,
                start_ns,
                dur_ns,
                pid,
                tid,
                args,
            } => Json {
                name,
                ph: "X",
                cat: Some(cat),
                ts: Some(micros(*start_ns)),
                dur: Some(micros(*dur_ns)),
                pid: *pid,
                tid: Some(*tid),
                args: Value::Object(
                    args.iter()
                        .map(|(k, v)| {
                            let v = match v {
                                Arg::Int(n) => Value::from(*n),
                                Arg::Text(s) => Value::from(s.as_str()),
                            };
                            (k.to_string(), v)
                        })
                        .collect(),
                ),
            },
            Event::Counter {
                name,
                time_ns,
                pid,
                values,
            } => Json {
                name,
                ph: "C",
                cat: None,
                ts: Some(micros(*time_ns)),
                dur: None,
                pid: *pid,
                tid: None,
                args: Value::Object(
                    values
                        .iter()
                        .map(|(k, v)| (k.to_string(), (*v).into()))
                        .collect(),
                ),
            },
            Event::ProcessName { pid, name } => meta("process_name", *pid, None, named(name)),
            Event::ProcessSort { pid, index: i } => {
                meta("process_sort_index", *pid, None, index(*i))
            }
            Event::ThreadName { pid, tid, name } => {
                meta("thread_name", *pid, Some(*tid), named(name))
            }
            Event::ThreadSort { pid, tid, index: i } => {
                meta("thread_sort_index", *pid, Some(*tid), index(*i))
            }
        }
    }
}

/// Write `events` to `path` as a trace-event JSON object, one event per line, atomically.
pub fn write(path: &Path, events: &[Event]) -> Result<(), FormatError> {
    write_atomic(path, |w| write_to(w, events))
}

/// The file's bytes into `w`.
fn write_to(w: &mut dyn Write, events: &[Event]) -> std::io::Result<()> {
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            w.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *w, &e.json())?;
    }
    w.write_all(b"\n]}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_is_written_with_the_fields_a_viewer_reads() {
        let events = vec![
            Event::ProcessName {
                pid: 1,
                name: "stage 0".into(),
            },
            Event::ThreadSort {
                pid: 1,
                tid: 7,
                index: 3,
            },
            Event::Span {
                name: "fwd".into(),
                cat: "compute",
                start_ns: 1_234_567,
                dur_ns: 5,
                pid: 1,
                tid: 7,
                args: vec![("record", 3u64.into())],
            },
            Event::Counter {
                name: "slots".into(),
                time_ns: 2000,
                pid: 1,
                values: vec![("in use", 4.0)],
            },
        ];
        let mut buf = Vec::new();
        write_to(&mut buf, &events).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["displayTimeUnit"], "ns");
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev[0]["args"]["name"], "stage 0");
        assert_eq!(ev[0]["ph"], "M");
        assert_eq!(ev[1]["args"]["sort_index"], 3);
        assert_eq!(ev[1]["tid"], 7);
        // 1,234,567 ns is 1,234.567 µs, written as such; 5 ns is 0.005 µs
        assert!(text.contains("\"ts\":1234.567"), "{text}");
        assert!(text.contains("\"dur\":0.005"), "{text}");
        assert_eq!(ev[3]["ph"], "C");
        assert_eq!(ev[3]["ts"], 2.0);
        assert_eq!(ev[3]["args"]["in use"], 4.0);
        assert!(ev[3].get("tid").is_none());
    }
}
