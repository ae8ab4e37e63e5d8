//! One file per subcommand: argument struct (clap) + `run`. Handlers only glue library
//! entries together and add file context to errors.

pub mod compare;
pub mod export;
pub mod inspect;
pub mod ns3;
pub mod parse;
pub mod replay;
pub mod run;
pub mod trace;
