//! Conditions: `test` / `[ … ]` (POSIX, on expanded fields), `[[ … ]]` (bash: no field
//! splitting, patterns on the right of `==`, `&&`/`||`/`!`/parentheses) and glob
//! patterns (`case`, `[[ == ]]`). What cannot be decided from the script — an unset
//! variable, a file test, a regular expression — is [`Tri::Unknown`] with the reason.

use super::ast::CondTok;
use super::expand::{Blocker, Shell};
use super::lex::{Part, Word};

/// A condition's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tri {
    True,
    False,
    Unknown(String),
}

impl Tri {
    fn from(b: bool) -> Tri {
        if b {
            Tri::True
        } else {
            Tri::False
        }
    }

    pub fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            u => u,
        }
    }

    fn and(self, b: impl FnOnce() -> Tri) -> Tri {
        match self {
            Tri::False => Tri::False,
            Tri::True => b(),
            Tri::Unknown(u) => match b() {
                Tri::False => Tri::False,
                _ => Tri::Unknown(u),
            },
        }
    }

    fn or(self, b: impl FnOnce() -> Tri) -> Tri {
        match self {
            Tri::True => Tri::True,
            Tri::False => b(),
            Tri::Unknown(u) => match b() {
                Tri::True => Tri::True,
                _ => Tri::Unknown(u),
            },
        }
    }
}

const FILE_TESTS: &[&str] = &[
    "-e", "-f", "-d", "-r", "-w", "-x", "-s", "-L", "-h", "-p", "-S", "-b", "-c", "-g", "-u", "-k",
    "-O", "-G", "-N", "-t", "-a",
];

fn integer(s: &str) -> Option<i64> {
    s.trim().parse().ok()
}

fn unary(op: &str, x: &str) -> Option<Tri> {
    Some(match op {
        "-z" => Tri::from(x.is_empty()),
        "-n" => Tri::from(!x.is_empty()),
        op if FILE_TESTS.contains(&op) => Tri::Unknown(format!(
            "`{op} {x}` tests the file system, which the reader does not look at"
        )),
        "-v" => Tri::Unknown(format!("`-v {x}` depends on the environment")),
        _ => return None,
    })
}

fn binary(op: &str, a: &str, b: &str) -> Option<Tri> {
    let num = |f: fn(i64, i64) -> bool| match (integer(a), integer(b)) {
        (Some(x), Some(y)) => Tri::from(f(x, y)),
        // bash: "integer expression expected", status 2.
        _ => Tri::False,
    };
    Some(match op {
        "=" | "==" => Tri::from(a == b),
        "!=" => Tri::from(a != b),
        "<" => Tri::from(a < b),
        ">" => Tri::from(a > b),
        "-eq" => num(|x, y| x == y),
        "-ne" => num(|x, y| x != y),
        "-lt" => num(|x, y| x < y),
        "-le" => num(|x, y| x <= y),
        "-gt" => num(|x, y| x > y),
        "-ge" => num(|x, y| x >= y),
        "-nt" | "-ot" | "-ef" => Tri::Unknown(format!("`{a} {op} {b}` compares files")),
        _ => return None,
    })
}

/// `test` / `[`: the arguments after expansion (without the closing `]`).
pub(crate) fn test(args: &[Result<String, Blocker>]) -> Tri {
    if let Some(Err(b)) = args.iter().find(|a| a.is_err()) {
        return Tri::Unknown(b.describe());
    }
    let a: Vec<&str> = args.iter().filter_map(|a| a.as_deref().ok()).collect();
    let mut p = TestParser {
        a: &a,
        i: 0,
        depth: 0,
    };
    let v = p.or();
    if p.i == a.len() {
        v
    } else {
        // bash: "too many arguments", status 2.
        Tri::False
    }
}

struct TestParser<'a> {
    a: &'a [&'a str],
    i: usize,
    depth: u32,
}

impl<'a> TestParser<'a> {
    fn peek(&self, k: usize) -> Option<&'a str> {
        self.a.get(self.i + k).copied()
    }

    fn or(&mut self) -> Tri {
        let mut v = self.and();
        while self.peek(0) == Some("-o") {
            self.i += 1;
            let r = self.and();
            v = v.or(|| r);
        }
        v
    }

    fn and(&mut self) -> Tri {
        let mut v = self.not();
        while self.peek(0) == Some("-a") && self.peek(1).is_some() {
            self.i += 1;
            let r = self.not();
            v = v.and(|| r);
        }
        v
    }

    fn not(&mut self) -> Tri {
        if self.peek(0) == Some("!") && self.peek(1).is_some() && self.depth < 64 {
            self.i += 1;
            self.depth += 1;
            let v = self.not().not();
            self.depth -= 1;
            return v;
        }
        self.primary()
    }

    fn primary(&mut self) -> Tri {
        let Some(x) = self.peek(0) else {
            return Tri::False;
        };
        if let (Some(op), Some(b)) = (self.peek(1), self.peek(2)) {
            if let Some(t) = binary(op, x, b) {
                self.i += 3;
                return t;
            }
        }
        if x == "(" && self.depth < 64 {
            self.i += 1;
            self.depth += 1;
            let v = self.or();
            self.depth -= 1;
            if self.peek(0) == Some(")") {
                self.i += 1;
            }
            return v;
        }
        if let Some(y) = self.peek(1) {
            if let Some(t) = unary(x, y) {
                self.i += 2;
                return t;
            }
        }
        self.i += 1;
        Tri::from(!x.is_empty())
    }
}

/// A word as a glob pattern: quoted characters escaped so they match literally.
fn pattern_of(sh: &mut Shell, w: &Word) -> Result<String, Blocker> {
    let mut out = String::new();
    for p in &w.parts {
        match p {
            Part::Lit(s, false) => out.push_str(s),
            Part::Lit(s, true) => s.chars().for_each(|c| {
                out.push('\\');
                out.push(c);
            }),
            other => {
                let one = Word {
                    parts: vec![other.clone()],
                    raw: String::new(),
                    line: w.line,
                    col: w.col,
                };
                let quoted = matches!(other, Part::Var { quoted: true, .. });
                let t = sh.expand_str(&one)?;
                if quoted {
                    t.chars().for_each(|c| {
                        out.push('\\');
                        out.push(c);
                    });
                } else {
                    out.push_str(&t);
                }
            }
        }
    }
    sh.known(out)
}

/// Glob matching bounded in time: a pattern and a text whose product of lengths is
/// beyond this are not matched (the condition is unknown).
const MAX_GLOB_WORK: usize = 50_000_000;

fn glob_tri(pattern: &str, text: &str) -> Tri {
    if pattern.len().saturating_mul(text.len().max(1)) > MAX_GLOB_WORK {
        return Tri::Unknown("a pattern match too large to evaluate".into());
    }
    Tri::from(glob(pattern, text))
}

/// Glob match (`*`, `?`, `[…]`, `\x`), iterative with one backtrack point: linear
/// memory, O(pattern·text) time.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => class(&p, pi, t[ti]),
            Some('\\') if pi + 1 < p.len() => (p[pi + 1] == t[ti]).then_some(pi + 2),
            Some(c) => (*c == t[ti]).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(n), _) => {
                pi = n;
                ti += 1;
            }
            (None, Some((sp, st))) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// `[abc]`, `[!a-z]`, `[^0-9]` at `p[i]` against `c`: the index after the class when it
/// matches.
fn class(p: &[char], i: usize, c: char) -> Option<usize> {
    let mut j = i + 1;
    let neg = matches!(p.get(j), Some('!' | '^'));
    if neg {
        j += 1;
    }
    let mut hit = false;
    let mut first = true;
    while let Some(&x) = p.get(j) {
        if x == ']' && !first {
            return (hit != neg).then_some(j + 1);
        }
        first = false;
        if p.get(j + 1) == Some(&'-') && p.get(j + 2).is_some_and(|e| *e != ']') {
            hit |= x <= c && c <= p[j + 2];
            j += 3;
        } else {
            hit |= x == c;
            j += 1;
        }
    }
    // No closing `]`: the `[` is literal.
    (c == '[').then_some(i + 1)
}

/// `[[ … ]]`.
pub(crate) fn double_bracket(sh: &mut Shell, toks: &[CondTok]) -> Tri {
    let mut p = CondParser {
        sh,
        t: toks,
        i: 0,
        depth: 0,
    };
    let v = p.or();
    if p.i == toks.len() {
        v
    } else {
        Tri::Unknown("a `[[ … ]]` form the reader does not parse".into())
    }
}

struct CondParser<'a> {
    sh: &'a mut Shell,
    t: &'a [CondTok],
    i: usize,
    depth: u32,
}

impl CondParser<'_> {
    fn or(&mut self) -> Tri {
        let mut v = self.and();
        while matches!(self.t.get(self.i), Some(CondTok::Or)) {
            self.i += 1;
            let r = self.and();
            v = v.or(|| r);
        }
        v
    }

    fn and(&mut self) -> Tri {
        let mut v = self.not();
        while matches!(self.t.get(self.i), Some(CondTok::And)) {
            self.i += 1;
            let r = self.not();
            v = v.and(|| r);
        }
        v
    }

    fn not(&mut self) -> Tri {
        if self.depth > 64 {
            return Tri::Unknown("`[[ … ]]` nested too deeply".into());
        }
        match self.t.get(self.i) {
            Some(CondTok::Not) => {
                self.i += 1;
                self.depth += 1;
                let v = self.not().not();
                self.depth -= 1;
                v
            }
            Some(CondTok::Open) => {
                self.i += 1;
                self.depth += 1;
                let v = self.or();
                self.depth -= 1;
                if matches!(self.t.get(self.i), Some(CondTok::Close)) {
                    self.i += 1;
                }
                v
            }
            _ => self.primary(),
        }
    }

    fn word(&mut self, k: usize) -> Option<&Word> {
        match self.t.get(self.i + k) {
            Some(CondTok::Word(w)) => Some(w),
            _ => None,
        }
    }

    fn primary(&mut self) -> Tri {
        let Some(x) = self.word(0).cloned() else {
            self.i += 1;
            return Tri::Unknown("a `[[ … ]]` form the reader does not parse".into());
        };
        let op = match self.t.get(self.i + 1) {
            Some(CondTok::Less) => Some("<".to_string()),
            Some(CondTok::Greater) => Some(">".to_string()),
            Some(CondTok::Word(w)) => w.plain().map(str::to_string),
            _ => None,
        };
        if let (Some(op), Some(y)) = (op, self.word(2).cloned()) {
            if let Some(v) = self.binary(&op, &x, &y) {
                self.i += 3;
                return v;
            }
        }
        if let (Some(op), Some(y)) = (x.plain().map(str::to_string), self.word(1).cloned()) {
            if op.starts_with('-') && op.len() == 2 {
                self.i += 2;
                return match self.sh.expand_str(&y).and_then(|t| self.sh.known(t)) {
                    Ok(s) => unary(&op, &s).unwrap_or(Tri::False),
                    Err(b) => Tri::Unknown(b.describe()),
                };
            }
        }
        self.i += 1;
        match self.sh.expand_str(&x).and_then(|t| self.sh.known(t)) {
            Ok(s) => Tri::from(!s.is_empty()),
            Err(b) => Tri::Unknown(b.describe()),
        }
    }

    fn binary(&mut self, op: &str, x: &Word, y: &Word) -> Option<Tri> {
        if !matches!(
            op,
            "=" | "=="
                | "!="
                | "=~"
                | "<"
                | ">"
                | "-eq"
                | "-ne"
                | "-lt"
                | "-le"
                | "-gt"
                | "-ge"
                | "-nt"
                | "-ot"
                | "-ef"
        ) {
            return None;
        }
        let a = match self.sh.expand_str(x).and_then(|t| self.sh.known(t)) {
            Ok(a) => a,
            Err(b) => return Some(Tri::Unknown(b.describe())),
        };
        Some(match op {
            "=~" => Tri::Unknown("`=~` regular expressions are not evaluated".into()),
            "=" | "==" | "!=" => match pattern_of(self.sh, y) {
                Ok(p) => {
                    let m = glob_tri(&p, &a);
                    if op == "!=" {
                        m.not()
                    } else {
                        m
                    }
                }
                Err(b) => Tri::Unknown(b.describe()),
            },
            // `[[ ]]` evaluates integer operands as arithmetic.
            "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge" => {
                let b = match self.sh.expand_str(y).and_then(|t| self.sh.known(t)) {
                    Ok(b) => b,
                    Err(e) => return Some(Tri::Unknown(e.describe())),
                };
                match (self.sh.arith(&a), self.sh.arith(&b)) {
                    (Ok(x), Ok(y)) => {
                        binary(op, &x.to_string(), &y.to_string()).unwrap_or(Tri::False)
                    }
                    (Err(e), _) | (_, Err(e)) => Tri::Unknown(e.describe()),
                }
            }
            _ => match self.sh.expand_str(y).and_then(|t| self.sh.known(t)) {
                Ok(b) => binary(op, &a, &b).unwrap_or(Tri::False),
                Err(e) => Tri::Unknown(e.describe()),
            },
        })
    }
}

/// Whether `text` matches a `case` pattern word.
pub(crate) fn case_matches(sh: &mut Shell, pat: &Word, text: &str) -> Tri {
    match pattern_of(sh, pat) {
        Ok(p) => glob_tri(&p, text),
        Err(b) => Tri::Unknown(b.describe()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_bash_patterns_do() {
        assert!(glob("*", ""));
        assert!(glob("fp*", "fp16"));
        assert!(!glob("fp*", "bf16"));
        assert!(glob("?f16", "bf16"));
        assert!(glob("[bf]f16", "bf16"));
        assert!(!glob("[!bf]f16", "bf16"));
        assert!(glob("a\\*", "a*"));
        assert!(!glob("a\\*", "ab"));
        assert!(glob("*a*b*", "xxaxxbxx"));
        assert!(glob("[0-9]*", "7b"));
    }

    #[test]
    fn posix_test_reads_strings_numbers_and_connectives() {
        let t = |v: &[&str]| test(&v.iter().map(|s| Ok(s.to_string())).collect::<Vec<_>>());
        assert_eq!(t(&["true", "=", "true"]), Tri::True);
        assert_eq!(t(&["8", "-gt", "4"]), Tri::True);
        assert_eq!(t(&["-z", ""]), Tri::True);
        assert_eq!(t(&["-n", ""]), Tri::False);
        assert_eq!(t(&["x"]), Tri::True);
        assert_eq!(t(&[]), Tri::False);
        assert_eq!(t(&["!", "a", "=", "b"]), Tri::True);
        assert_eq!(t(&["a", "=", "a", "-a", "1", "-lt", "0"]), Tri::False);
        assert_eq!(t(&["a", "=", "b", "-o", "1", "-lt", "2"]), Tri::True);
        assert!(matches!(t(&["-f", "/etc/passwd"]), Tri::Unknown(_)));
        assert_eq!(
            t(&["abc", "-eq", "1"]),
            Tri::False,
            "bash: integer expression expected"
        );
    }
}
