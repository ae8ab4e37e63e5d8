//! Closed sets of keywords (modes, policies, flavours) as enums: one macro gives each its
//! file/command-line name, the list of names (for `--help` and error messages), `Display`
//! and a `FromStr` whose error lists what is accepted. The library parses keywords with
//! these; the CLI wraps them for clap, so the library does not depend on clap.

/// `keyword_enum!(Type, "what it is", Type::A => "a", Type::B => "b")`.
macro_rules! keyword_enum {
    ($t:ty, $what:literal, $($v:path => $s:literal),+ $(,)?) => {
        impl $t {
            /// Every accepted name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            /// Name as written in files and on the command line.
            pub fn as_str(self) -> &'static str {
                match self { $($v => $s),+ }
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                // the name as written (every row of a trace): no allocation
                match s {
                    $($s => return Ok($v),)+
                    _ => {}
                }
                match s.trim().to_ascii_lowercase().as_str() {
                    $($s => Ok($v),)+
                    other => Err(format!(
                        concat!("unknown ", $what, " `{}` (expected {})"),
                        other,
                        Self::NAMES.join(", ")
                    )),
                }
            }
        }
    };
}
pub(crate) use keyword_enum;
