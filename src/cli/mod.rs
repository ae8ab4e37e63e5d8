//! One file per subcommand: argument struct (clap) + `run`. Handlers only glue library
//! entries together and add file context to errors.

pub mod cluster;
pub mod compare;
pub mod examples;
pub mod export;
pub mod inspect;
pub mod job;
pub mod ns3;
pub mod parse;
pub mod plan;
pub mod replay;
pub mod run;
pub mod sweep;
pub mod trace;
pub mod validate;

/// A clap value parser for one of the library's keyword enums (`T::NAMES`, parsed by its
/// `FromStr`): `--help` lists the accepted names, and the library stays free of clap.
pub fn keyword<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).try_map(|s| s.parse::<T>())
}
