//! The validation suite as a benchmark: every case on the replayer and on ns-3, printing
//! the errors and the speed ratio (ns-3 wall / replay wall). `INA3D_VALIDATE_CASES=a,b`
//! runs a subset and `INA3D_VALIDATE_RUNS=N` sets the runs per case (default 8, as
//! `ina3d validate`); outputs go to `target/validate`.

use ina3d::ns3::Transport;
use ina3d::pipeline::validate::{cases, rate_model_for, run_suite, Ensemble};

fn main() {
    let only: Vec<String> = std::env::var("INA3D_VALIDATE_CASES")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let cases: Vec<_> = cases()
        .into_iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| o == c.name))
        .collect();
    let runs = match std::env::var("INA3D_VALIDATE_RUNS") {
        Ok(v) => v
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| {
                eprintln!("error: INA3D_VALIDATE_RUNS={v}: expected a whole number ≥ 1");
                std::process::exit(2)
            }),
        Err(_) => Ensemble::default().runs,
    };
    let ensemble = Ensemble {
        runs,
        ..Ensemble::default()
    };
    for transport in [Transport::Roce, Transport::Tcp] {
        suite(&cases, transport, ensemble);
    }
}

/// One run of the suite under `transport`, into `target/validate/<transport>`.
fn suite(cases: &[ina3d::pipeline::validate::Case], transport: Transport, ensemble: Ensemble) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/validate")
        .join(transport.to_string());
    println!("transport {transport}");
    let ina3d::pipeline::validate::SuiteOutcome { rows, failed } = run_suite(
        cases,
        transport,
        rate_model_for(transport),
        ensemble,
        &dir,
        &mut |c, r, s| match r {
            Ok(row) => println!(
                "{:<20} iteration error {:+7.2} %, mean of {} runs {:+7.2} % (ns-3 spread {:.2} %)  ns-3/replay wall {:>7.1}x  ({s:.1} s)",
                c.name,
                100.0 * row.iteration_error,
                row.runs,
                100.0 * row.iteration_error_mean,
                100.0 * row.ns3_spread,
                row.speed_ratio
            ),
            Err(e) => println!("{:<20} FAILED: {}", c.name, ina3d::pipeline::error_chain(e)),
        },
    )
    .expect("validate.csv written");
    println!(
        "{} cases, {} failed; table in {}",
        rows.len(),
        failed.len(),
        dir.join("validate.csv").display()
    );
}
