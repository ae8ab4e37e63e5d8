//! [`RunSpec`]: every option of `ina3d run`, and the table of their names through which a
//! sweep grid sets them, echoes them and hashes them into a cell id.
//!
//! Each name is the `ina3d run` flag without its dashes (boolean flags by their positive
//! name: `calibrate`, `traces`, `flows`; `ns3` is `auto`, `on` or `off`), plus every Megatron
//! argument of [`MEGATRON_FLAGS`] by its own flag name. To make a new option sweepable, add
//! its field and one row to [`RUN_OPTIONS`]; the flag of the same name goes on `ina3d run`
//! (a test checks the two lists agree).

use super::job::{JobSpec, MEGATRON_FLAGS};
use super::policy::{parse_policies, Policy, DEFAULT_POLICIES};
use super::PipelineError;
use crate::collective::InaConfig;
use crate::keyword::keyword_enum;
use crate::megatron::{Loc, Source, TrainingConfig};
use crate::ns3::{TcpConnections, Transport};
use crate::replay::RateModel;
use crate::trace::{InaMode, MAX_ITERATIONS, MAX_NCCL_CHANNELS, MAX_NVLINK_STEP_LATENCY};
use std::str::FromStr;

/// Whether `run` also simulates each policy on ns-3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ns3Choice {
    /// When Debian's ns-3 is installed and the trace moves at most
    /// [`super::AUTO_NS3_MAX_NET_BYTES`] over the network.
    Auto,
    /// Always (an error when ns-3 is missing).
    On,
    /// Never.
    Off,
}

keyword_enum!(Ns3Choice, "ns-3 choice", Ns3Choice::Auto => "auto", Ns3Choice::On => "on", Ns3Choice::Off => "off");

/// Every option of one `ina3d run`: the job, the policies, the ECMP seeds, ns-3.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    /// The job and its base trace options; `job.ina.mode` is the INA algorithm of the INA
    /// policies, `job.ina.classes` and `job.seed` are set per policy and per seed.
    pub job: JobSpec,
    /// Policies, in table order; `ring` among them.
    pub policies: Vec<Policy>,
    /// ECMP seeds: every policy runs once per seed.
    pub seeds: Vec<u64>,
    /// ns-3 or not.
    pub ns3: Ns3Choice,
    /// Transport of the ns-3 glue: RoCE with DCQCN (the default) or bounded TCP.
    pub transport: Transport,
    /// TCP connections of the ns-3 glue (under `tcp`).
    pub tcp_connections: TcpConnections,
    /// The replayer's rate model; `None`: the transport's ([`RunSpec::rate_model`]).
    pub rate_model: Option<RateModel>,
    /// Keep each policy's trace file (`trace.csv.gz`); without, traces stay in memory.
    pub traces: bool,
    /// Write each replay's per-flow files (`replay/fct.csv`, `fct.txt`); without, only its
    /// summary, links and switches ([`crate::replay::PerRecord::Skip`]), and no ns-3 run
    /// (whose comparison joins the per-flow files).
    pub flows: bool,
    /// Write each replay's timeline, `<policy>/timeline.json` (representative ranks,
    /// [`crate::replay::timeline`]).
    pub timeline: bool,
    /// Wall-time budget (seconds) of each planner policy's solve (`plan`, `plan-exact`,
    /// `sharp`), per seed.
    pub plan_time_limit: f64,
}

impl Default for RunSpec {
    /// `ina3d run` with no flags: the bundled example, hierarchical INA, the four policies,
    /// seed 0, ns-3 when small enough.
    fn default() -> Self {
        RunSpec {
            job: JobSpec {
                ina: InaConfig {
                    mode: InaMode::Hierarchical,
                    ..InaConfig::default()
                },
                ..JobSpec::default()
            },
            policies: DEFAULT_POLICIES.to_vec(),
            seeds: vec![0],
            ns3: Ns3Choice::Auto,
            transport: Transport::default(),
            tcp_connections: TcpConnections::default(),
            rate_model: None,
            traces: true,
            flows: true,
            timeline: false,
            plan_time_limit: DEFAULT_PLAN_TIME_LIMIT,
        }
    }
}

impl RunSpec {
    /// The replayer's rate model: the one given, else the transport's
    /// ([`RateModel::chosen`]).
    pub fn rate_model(&self) -> RateModel {
        RateModel::chosen(self.rate_model, self.transport)
    }
}

/// The planner policies' time limit when none is given, seconds (`ina3d plan`'s default).
/// A safety net only: the search is bounded by work (model evaluations, branch-and-bound
/// nodes, replays: docs/plan.md), so a plan that stops here depends on the machine's load
/// and says so; 10 minutes is beyond what the work budgets take on the study's jobs.
pub const DEFAULT_PLAN_TIME_LIMIT: f64 = 600.0;

/// The longest planner budget taken, in seconds (a day): beyond it a `Duration` of the
/// value would overflow, and no solve of one iteration's groups needs it.
pub const MAX_PLAN_TIME_LIMIT: f64 = 86_400.0;

/// Whether `t` seconds is a planner budget: above 0, at most [`MAX_PLAN_TIME_LIMIT`].
pub fn plan_time_limit_ok(t: f64) -> bool {
    t.is_finite() && t > 0.0 && t <= MAX_PLAN_TIME_LIMIT
}

/// A value given to an option: one, or a list (TOML arrays; a comma-separated string is
/// also read as a list by list options).
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    /// One value, as text.
    One(String),
    /// Several values.
    List(Vec<String>),
}

/// One settable option of a run.
pub struct RunOption {
    /// Name: the `ina3d run` flag without `--`.
    pub name: &'static str,
    /// What it is (for `ina3d sweep --help` and error messages).
    pub help: &'static str,
    set: fn(&mut RunSpec, &OptionValue) -> Result<(), String>,
    get: fn(&RunSpec) -> String,
}

fn one(v: &OptionValue) -> Result<&str, String> {
    match v {
        OptionValue::One(s) => Ok(s),
        OptionValue::List(_) => Err("expects one value, not a list".into()),
    }
}

fn list(v: &OptionValue) -> Vec<String> {
    match v {
        OptionValue::One(s) => s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        OptionValue::List(l) => l.clone(),
    }
}

fn num<T: FromStr>(v: &OptionValue, what: &str) -> Result<T, String> {
    let s = one(v)?;
    s.trim().parse().map_err(|_| format!("`{s}` is not {what}"))
}

fn keyword<T: FromStr<Err = String>>(v: &OptionValue) -> Result<T, String> {
    one(v)?.parse()
}

fn boolean(v: &OptionValue) -> Result<bool, String> {
    match one(v)?.trim() {
        "true" | "True" | "1" => Ok(true),
        "false" | "False" | "0" => Ok(false),
        s => Err(format!("`{s}` is not true or false")),
    }
}

fn opt_text<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or(String::new(), ToString::to_string)
}

const U32: &str = "a non-negative integer";
const POS: &str = "a positive integer";

macro_rules! parallel_size {
    ($name:literal, $field:ident, $help:literal) => {
        RunOption {
            name: $name,
            help: $help,
            set: |s, v| {
                s.job.sizes.$field = Some(num::<u32>(v, POS)?).filter(|&n| n > 0);
                s.job
                    .sizes
                    .$field
                    .map(|_| ())
                    .ok_or_else(|| "must be positive".into())
            },
            get: |s| opt_text(&s.job.sizes.$field),
        }
    };
}

/// The options of a run a grid can set, in `--help` order (Megatron arguments by their
/// own names come on top of these: [`MEGATRON_FLAGS`]).
pub const RUN_OPTIONS: &[RunOption] = &[
    RunOption {
        name: "input",
        help: "Megatron log, launch script, TOML/JSON config or preset name",
        set: |s, v| {
            s.job.input = one(v)?.to_string();
            Ok(())
        },
        get: |s| s.job.input.clone(),
    },
    RunOption {
        name: "topology",
        help: "topology spec or HPCC topology file",
        set: |s, v| {
            s.job.topology = one(v)?.to_string();
            Ok(())
        },
        get: |s| s.job.topology.clone(),
    },
    parallel_size!("tp", tp, "tensor-parallel size"),
    parallel_size!("pp", pp, "pipeline-parallel size"),
    parallel_size!("dp", dp, "data-parallel size"),
    parallel_size!("vpp", vpp, "virtual pipeline chunks per stage"),
    parallel_size!("cp", cp, "context-parallel size"),
    parallel_size!("ep", ep, "expert-parallel size"),
    RunOption {
        name: "set",
        help: "Megatron arguments as KEY=VALUE (a list)",
        set: |s, v| {
            let l = list(v);
            if let Some(bad) = l.iter().find(|kv| !kv.contains('=')) {
                return Err(format!("`{bad}`: expected KEY=VALUE"));
            }
            s.job.set = l;
            Ok(())
        },
        get: |s| s.job.set.join(","),
    },
    RunOption {
        name: "env",
        help: "launch-script variables as NAME=VALUE, set before the script runs (a list)",
        set: |s, v| {
            s.job.env = super::env_pairs(&list(v)).map_err(|e| e.to_string())?;
            Ok(())
        },
        get: |s| {
            s.job
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        },
    },
    RunOption {
        name: "gpu",
        help: "GPU for compute time (a preset or NAME:TFLOPS[:HBM_GBPS])",
        set: |s, v| {
            let g = one(v)?;
            crate::schedule::Gpu::preset(g).ok_or_else(|| {
                format!(
                    "`{g}`: expected {} or NAME:TFLOPS[:HBM_GBPS]",
                    crate::schedule::Gpu::NAMES
                )
            })?;
            s.job.gpu = g.to_string();
            Ok(())
        },
        get: |s| s.job.gpu.clone(),
    },
    RunOption {
        name: "mfu",
        help: "model FLOPs utilisation: prices compute with the flat model (every FLOP at peak·MFU)",
        set: |s, v| {
            // Its range is the schedule's to check (one place for `--mfu` and grids).
            s.job.mfu = num(v, "a number")?;
            s.job.compute = crate::schedule::ComputeModel::Mfu;
            Ok(())
        },
        get: |s| s.job.mfu.to_string(),
    },
    RunOption {
        name: "compute-model",
        help: "how compute is priced: roofline (per-GEMM, by GPU and shape; default) or mfu",
        set: |s, v| {
            s.job.compute = one(v)?.parse()?;
            Ok(())
        },
        get: |s| s.job.compute.to_string(),
    },
    RunOption {
        name: "calibrate",
        help: "calibrate compute against the log's timers (flag: --no-calibrate)",
        set: |s, v| {
            s.job.calibrate = boolean(v)?;
            Ok(())
        },
        get: |s| s.job.calibrate.to_string(),
    },
    RunOption {
        name: "calibration-factor",
        help: "compute scale factor instead of calibrating",
        set: |s, v| {
            s.job.calibration_factor = Some(num(v, "a number")?);
            Ok(())
        },
        get: |s| opt_text(&s.job.calibration_factor),
    },
    RunOption {
        name: "collective",
        help: "host algorithm of network collectives (ring, dbt, hd, hierarchical)",
        set: |s, v| {
            s.job.collective = keyword(v)?;
            Ok(())
        },
        get: |s| s.job.collective.to_string(),
    },
    RunOption {
        name: "routing",
        help: "how equal-cost paths are chosen: ecmp (hash per connection), dmodk (InfiniBand's static tables), spray (even split per hop)",
        set: |s, v| {
            s.job.routing = keyword(v)?;
            Ok(())
        },
        get: |s| s.job.routing.to_string(),
    },
    RunOption {
        name: "iterations",
        help: "iterations to generate",
        set: |s, v| {
            let n: u32 = num(v, POS)?;
            if !(1..=MAX_ITERATIONS).contains(&n) {
                return Err(format!("must be in [1, {MAX_ITERATIONS}]"));
            }
            s.job.iterations = n;
            Ok(())
        },
        get: |s| s.job.iterations.to_string(),
    },
    RunOption {
        name: "nvlink-step-latency",
        help: "latency (ns) per algorithm step inside an NVLink domain",
        set: |s, v| {
            let a: u64 = num(v, U32)?;
            if a > MAX_NVLINK_STEP_LATENCY.0 {
                return Err(format!("must be in [0, {}] ns", MAX_NVLINK_STEP_LATENCY.0));
            }
            s.job.nvlink_step_latency = Some(a);
            Ok(())
        },
        get: |s| opt_text(&s.job.nvlink_step_latency),
    },
    RunOption {
        name: "nccl-channels",
        help: "NCCL channels per network collective (default: NCCL's rule for the topology)",
        set: |s, v| {
            let n: u32 = num(v, POS)?;
            if !(1..=MAX_NCCL_CHANNELS).contains(&n) {
                return Err(format!("must be in [1, {MAX_NCCL_CHANNELS}]"));
            }
            s.job.nccl_channels = Some(n);
            Ok(())
        },
        get: |s| opt_text(&s.job.nccl_channels),
    },
    RunOption {
        name: "moe-routing",
        help: "how MoE tokens spread over the experts: uniform, or zipf:S",
        set: |s, v| {
            s.job.moe_routing = one(v)?.parse()?;
            Ok(())
        },
        get: |s| s.job.moe_routing.to_string(),
    },
    RunOption {
        name: "legacy-interleaved-warmup",
        help: "interleaved 1F1B warm-up as Megatron before November 2024 (true/false)",
        set: |s, v| {
            s.job.warmup_rule = if boolean(v)? {
                crate::schedule::WarmupRule::AllWarmupWhenMEqualsPp
            } else {
                crate::schedule::WarmupRule::Current
            };
            Ok(())
        },
        get: |s| {
            (s.job.warmup_rule == crate::schedule::WarmupRule::AllWarmupWhenMEqualsPp).to_string()
        },
    },
    RunOption {
        name: "ina",
        help: "INA algorithm of the INA policies (switchml, hierarchical, atp, rina)",
        set: |s, v| {
            s.job.ina.mode = keyword(v)?;
            Ok(())
        },
        get: |s| s.job.ina.mode.to_string(),
    },
    RunOption {
        name: "ina-switches",
        help: "switches that can aggregate: all, tor, or a list of switch ids",
        set: |s, v| {
            s.job.ina.switches = list(v).join(",").parse()?;
            Ok(())
        },
        get: |s| s.job.ina.switches.to_string(),
    },
    RunOption {
        name: "ina-slots",
        help: "aggregator slots per switch",
        set: |s, v| positive(&mut s.job.ina.slots, v),
        get: |s| s.job.ina.slots.to_string(),
    },
    RunOption {
        name: "ina-payload",
        help: "payload bytes per slot (one packet)",
        set: |s, v| positive(&mut s.job.ina.payload.0, v),
        get: |s| s.job.ina.payload.to_string(),
    },
    RunOption {
        name: "ina-window",
        help: "outstanding packets per worker",
        set: |s, v| positive(&mut s.job.ina.window, v),
        get: |s| s.job.ina.window.to_string(),
    },
    RunOption {
        name: "ina-policy",
        help: "slot policy: static, best-effort, priority",
        set: |s, v| {
            s.job.ina.policy = Some(keyword(v)?);
            Ok(())
        },
        get: |s| opt_text(&s.job.ina.policy),
    },
    RunOption {
        name: "policies",
        help: "policies to run (a list; ring, ina-dp, ina-tp, ina-tp-dp, plan, plan-exact, atp, rina, sharp)",
        set: |s, v| {
            s.policies = parse_policies(&list(v).join(","))?;
            Ok(())
        },
        get: |s| join(&s.policies),
    },
    RunOption {
        name: "plan-time-limit",
        help: "wall-time budget of each planner policy's solve, seconds",
        set: |s, v| {
            let t: f64 = num(v, "a number of seconds")?;
            if !plan_time_limit_ok(t) {
                return Err("must be a number of seconds above 0 and at most 86400 (a day)".into());
            }
            s.plan_time_limit = t;
            Ok(())
        },
        get: |s| s.plan_time_limit.to_string(),
    },
    RunOption {
        name: "seeds",
        help: "ECMP seeds (a list): every policy runs once per seed",
        set: |s, v| {
            s.seeds = parse_seeds(&list(v).join(","))?;
            Ok(())
        },
        get: |s| join(&s.seeds),
    },
    RunOption {
        name: "ns3",
        help: "also run ns-3: auto (when installed and small), on, off",
        set: |s, v| {
            s.ns3 = keyword(v)?;
            Ok(())
        },
        get: |s| s.ns3.to_string(),
    },
    RunOption {
        name: "transport",
        help: "transport of the ns-3 glue: roce (DCQCN), tcp (bounded NewReno)",
        set: |s, v| {
            s.transport = keyword(v)?;
            Ok(())
        },
        get: |s| s.transport.to_string(),
    },
    RunOption {
        name: "rate-model",
        help: "the replayer's rate model: ideal (max-min fair), dcqcn (what the roce glue runs); default: the transport's (dcqcn for roce, ideal for tcp)",
        set: |s, v| {
            s.rate_model = Some(keyword(v)?);
            Ok(())
        },
        get: |s| s.rate_model().to_string(),
    },
    RunOption {
        name: "tcp-connections",
        help: "TCP connections of the ns-3 glue: persistent, per-flow",
        set: |s, v| {
            s.tcp_connections = keyword(v)?;
            Ok(())
        },
        get: |s| s.tcp_connections.to_string(),
    },
    RunOption {
        name: "traces",
        help: "keep each policy's trace.csv.gz (flag: --no-traces)",
        set: |s, v| {
            s.traces = boolean(v)?;
            Ok(())
        },
        get: |s| s.traces.to_string(),
    },
    RunOption {
        name: "flows",
        help: "write each replay's per-flow fct.csv and fct.txt (flag: --no-flows; hundreds of MB per replay at thousands of GPUs)",
        set: |s, v| {
            s.flows = boolean(v)?;
            Ok(())
        },
        get: |s| s.flows.to_string(),
    },
    RunOption {
        name: "timeline",
        help: "write each replay's timeline, <policy>/timeline.json (Chrome/Perfetto trace events of representative ranks: docs/timeline.md)",
        set: |s, v| {
            s.timeline = boolean(v)?;
            Ok(())
        },
        get: |s| s.timeline.to_string(),
    },
];

fn positive<T: FromStr + Default + PartialEq>(
    field: &mut T,
    v: &OptionValue,
) -> Result<(), String> {
    let n: T = num(v, POS)?;
    if n == T::default() {
        return Err("must be positive".into());
    }
    *field = n;
    Ok(())
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses a comma-separated seed list (`0,1,2`): at least one, none twice.
///
/// ```
/// use ina3d::pipeline::parse_seeds;
/// assert_eq!(parse_seeds("0, 1,2"), Ok(vec![0, 1, 2]));
/// assert_eq!(parse_seeds("3,1,3"), Err("seed 3 is named twice".to_string()));
/// assert!(parse_seeds("").is_err());
/// ```
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let mut v: Vec<u64> = Vec::new();
    // a set beside the list: the check stays linear in the number of seeds
    let mut seen = std::collections::HashSet::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: u64 = p
            .parse()
            .map_err(|_| format!("seed `{p}` is not a non-negative integer"))?;
        if !seen.insert(n) {
            return Err(format!("seed {n} is named twice"));
        }
        v.push(n);
    }
    if v.is_empty() {
        return Err("no seed given".into());
    }
    Ok(v)
}

/// Why an option could not be set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionError {
    /// No option has this name.
    #[error("unknown option `{name}` (options: the `ina3d run` flags without `--`: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// A short list of the names accepted.
        known: String,
    },
    /// The value is not one the option takes.
    #[error("{name}: {msg}")]
    Invalid {
        /// The option.
        name: String,
        /// What is wrong.
        msg: String,
    },
}

fn unknown(name: &str) -> OptionError {
    OptionError::Unknown {
        name: name.into(),
        known: "input, topology, tp, pp, dp, ina, ina-slots, policies, seeds, ns3, …, \
                and Megatron's own flag names such as num-layers"
            .into(),
    }
}

fn megatron_flag(name: &str) -> Option<(usize, bool)> {
    MEGATRON_FLAGS
        .iter()
        .position(|(n, _)| *n == name)
        .map(|i| (i, MEGATRON_FLAGS[i].1))
}

impl RunSpec {
    /// Every option name: [`RUN_OPTIONS`] then the Megatron arguments.
    pub fn option_names() -> impl Iterator<Item = &'static str> {
        RUN_OPTIONS
            .iter()
            .map(|o| o.name)
            .chain(MEGATRON_FLAGS.iter().map(|(n, _)| *n))
    }

    /// Whether `name` is an option.
    pub fn is_option(name: &str) -> bool {
        RUN_OPTIONS.iter().any(|o| o.name == name) || megatron_flag(name).is_some()
    }

    /// `Ok` when `name` is an option, else the error listing what is.
    pub fn check_name(name: &str) -> Result<(), OptionError> {
        if Self::is_option(name) {
            return Ok(());
        }
        Err(unknown(name))
    }

    /// Sets option `name`. The value is checked as far as it can be alone (numbers,
    /// keywords, Megatron argument types); combinations are checked by [`RunSpec::validate`].
    pub fn set(&mut self, name: &str, value: &OptionValue) -> Result<(), OptionError> {
        let invalid = |msg: String| OptionError::Invalid {
            name: name.into(),
            msg,
        };
        if let Some(o) = RUN_OPTIONS.iter().find(|o| o.name == name) {
            return (o.set)(self, value).map_err(invalid);
        }
        let Some((index, is_bool)) = megatron_flag(name) else {
            return Err(unknown(name));
        };
        self.job.megatron.retain(|(k, _)| k != name);
        let text = if is_bool {
            if !boolean(value).map_err(invalid)? {
                return Ok(());
            }
            "True".to_string()
        } else {
            one(value).map_err(invalid)?.trim().to_string()
        };
        // Type-check the value the way Megatron's own inputs are, on Megatron's defaults.
        TrainingConfig::megatron_defaults()
            .apply(name, &text, Source::Override, &Loc::new("grid", 0, 0))
            .map_err(|e| invalid(e.to_string()))?;
        let at = self
            .job
            .megatron
            .iter()
            .position(|(k, _)| megatron_flag(k).is_some_and(|(i, _)| i > index))
            .unwrap_or(self.job.megatron.len());
        self.job.megatron.insert(at, (name.to_string(), text));
        Ok(())
    }

    /// The value of option `name` as text (lists comma-separated, unset optional values
    /// empty; Megatron flags their override, booleans `true`/`false`).
    pub fn get(&self, name: &str) -> Option<String> {
        if let Some(o) = RUN_OPTIONS.iter().find(|o| o.name == name) {
            return Some((o.get)(self));
        }
        let (_, is_bool) = megatron_flag(name)?;
        let v = self.job.megatron.iter().find(|(k, _)| k == name);
        Some(match (v, is_bool) {
            (Some(_), true) => "true".into(),
            (None, true) => "false".into(),
            (Some((_, v)), false) => v.clone(),
            (None, false) => String::new(),
        })
    }

    /// The options that differ from [`RunSpec::default`], sorted by name: what defines this
    /// run (a sweep cell's id is a hash of it, so options left at their default — or added
    /// to the tool later with a default — do not change it).
    pub fn canonical(&self) -> Vec<(String, String)> {
        let d = RunSpec::default();
        let mut v: Vec<(String, String)> = Self::option_names()
            .filter_map(|n| {
                let mine = self.get(n)?;
                (Some(&mine) != d.get(n).as_ref()).then(|| (n.to_string(), mine))
            })
            .collect();
        v.sort();
        v
    }

    /// Checks what single options cannot: the trace options convert, and INA policies
    /// have an INA algorithm.
    pub fn validate(&self) -> Result<(), PipelineError> {
        self.job.trace_options()?;
        let fixed: Vec<Policy> = self
            .policies
            .iter()
            .copied()
            .filter(|p| matches!(p, Policy::InaDp | Policy::InaTp | Policy::InaTpDp))
            .collect();
        if !fixed.is_empty() && self.job.ina.mode == InaMode::Off {
            return Err(PipelineError::Option {
                option: "--ina off".into(),
                msg: format!("the INA policies ({}) need an INA algorithm", join(&fixed)),
            });
        }
        if !plan_time_limit_ok(self.plan_time_limit) {
            return Err(PipelineError::Option {
                option: "--plan-time-limit".into(),
                msg: "must be a number of seconds above 0 and at most 86400 (a day)".into(),
            });
        }
        if !self.flows && self.ns3 == Ns3Choice::On {
            return Err(PipelineError::Option {
                option: "--ns3 / --no-flows".into(),
                msg: "ns-3 is compared with the replay flow by flow, which needs the replay's per-flow files: drop --no-flows (flows = false)".into(),
            });
        }
        if !self.policies.contains(&Policy::Ring) || self.seeds.is_empty() {
            return Err(PipelineError::Option {
                option: "--policies / --seeds".into(),
                msg: "need `ring` among the policies and at least one seed".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_model_follows_the_transport_unless_one_is_given() {
        let mut s = RunSpec::default();
        assert_eq!(s.rate_model(), RateModel::Dcqcn, "roce by default");
        s.set("transport", &OptionValue::One("tcp".into())).unwrap();
        assert_eq!(s.rate_model(), RateModel::Ideal);
        s.set("rate-model", &OptionValue::One("dcqcn".into()))
            .unwrap();
        assert_eq!(
            s.rate_model(),
            RateModel::Dcqcn,
            "given, whatever the transport"
        );
    }
}
