//! Reading a bash launch script that runs `pretrain_gpt.py` (directly, or through
//! `torchrun`, `python -m torch.distributed.launch`, `deepspeed`, `srun`).
//!
//! The script is evaluated as bash would run it, without running any command and without
//! reading the process environment (so the result depends on the file alone):
//! assignments (`VAR=value`, `export`/`local`/`declare`, arrays `X=( … )`, `+=`),
//! expansions (`$VAR`, `${VAR}`, `${VAR:-default}` and the other defaulting operators,
//! `"${X[@]}"`, `$(( … ))` with checked integer arithmetic, quoting, field splitting,
//! brace expansion), variables set before the script runs (`--env`, and the Slurm
//! environment its `#SBATCH` lines give),
//! `if`/`elif`/`else` on `[ ]`, `[[ ]]`, `test`, `(( ))` and command lists, `&&`/`||`,
//! `case`, `for` over known words, `while`/`until`, functions, subshells, pipelines,
//! here-documents written to files (`cat <<EOF > ds_config.json`, read back for the
//! DeepSpeed config). A flag inside a branch not taken does not apply.
//!
//! What the file alone cannot decide — a condition on a variable the script never sets,
//! a file test, command output `$( … )`, a loop over the script's arguments — is explored
//! both ways: values that differ become unknown and flags present on one side only are
//! marked; a flag given on both sides with the same value is decided. A flag that matters
//! to the configuration with an undecided value is an error naming its file:line and the
//! condition's; one that does not matter is listed in a warning;
//! a launch reached only on one side is a warning. Never a silent guess.

mod arith;
mod ast;
mod brace;
mod cond;
mod exec;
mod expand;
mod lex;
mod read;
mod slurm;

pub use expand::WrittenFile;
pub use read::{scan_script, scan_script_with_env, ScriptScan};
