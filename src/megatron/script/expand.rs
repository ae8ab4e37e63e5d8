//! Shell state and word expansion: variables (scalars, arrays, unknowns), parameter
//! operators, arithmetic, quoting and field splitting, as bash does them — and, for
//! every value the script alone cannot give, the reason why.

use super::arith::{self, ArithError};
use super::lex::{lex_operand, Part, Word};
use crate::megatron::error::{MegatronError, Warning};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// A file the script writes (a here-document or an `echo` redirected to it).
#[derive(Clone, Debug, PartialEq)]
pub struct WrittenFile {
    /// The script that writes it.
    pub path: String,
    /// Its content, or why the reader cannot know it.
    pub text: Result<String, String>,
    /// Line of the content's first line in the script.
    pub line: usize,
}

/// The first command running `pretrain_*.py`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Launch {
    pub launcher: Vec<Elem>,
    pub args: Vec<Elem>,
    pub line: usize,
    pub col: usize,
    /// Reached only on one side of an undecided condition.
    pub cond: Option<Rc<str>>,
}

/// Largest value a variable may hold (bytes) and longest array: a script that doubles a
/// string in a loop cannot make the reader allocate without bound.
pub(crate) const MAX_VALUE_BYTES: usize = 1 << 20;
pub(crate) const MAX_ARRAY_LEN: usize = 1 << 16;

/// Marks an unknown piece inside an otherwise known text: `\u{1}N\u{1}`, where N indexes
/// [`Shell::marks`]. A launch line such as `deepspeed $(pwd)/pretrain_gpt.py …` stays
/// readable while what `$(pwd)` is stays unknown, and any decision that depends on a
/// marked text (a condition, arithmetic, a flag that matters) is undecided. Input text
/// cannot forge a marker: the reader replaces the byte before lexing.
pub(crate) const MARK: char = '\u{1}';

/// Most distinct unknowns one script may produce (each a few bytes).
const MAX_MARKS: usize = 1 << 16;

/// Why a value cannot be known from the script alone.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Blocker {
    /// A variable the script never sets (it would come from the environment).
    Unset(String),
    /// Anything else: command output, an undecidable branch, arithmetic that fails…
    /// with the reason, naming file:line where there is one.
    Why(Rc<str>),
}

impl Blocker {
    pub fn why(s: impl Into<String>) -> Blocker {
        Blocker::Why(Rc::from(s.into()))
    }

    /// Human reason, for errors and conditions.
    pub fn describe(&self) -> String {
        match self {
            Blocker::Unset(v) => format!("`${v}` is not set in the script"),
            Blocker::Why(w) => w.to_string(),
        }
    }
}

/// One field of an expansion, or one array element, with where it was written and the
/// undecided condition it depends on, if any.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Elem {
    pub text: Result<String, Blocker>,
    pub line: usize,
    pub col: usize,
    /// Present in one branch of an undecided condition only (the reason, naming it).
    pub cond: Option<Rc<str>>,
    /// With `cond`: the branch it is present in (true: the one where the condition held).
    pub side: bool,
    /// The word as written, for a word that could not be expanded (or only in part).
    pub raw: Option<Rc<str>>,
    /// The expansion with its unknown pieces shown as the script wrote them (or as the
    /// alternatives of an undecided branch).
    pub shown: Option<Rc<str>>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Scalar(String),
    Array(Vec<Elem>),
    Unknown(Blocker),
}

/// The interpreter's state. Cloned to explore both branches of an undecided condition;
/// the step budget is shared by all clones.
#[derive(Clone)]
pub(crate) struct Shell {
    pub path: String,
    pub vars: BTreeMap<String, Val>,
    pub funcs: BTreeMap<String, Rc<super::ast::Node>>,
    /// `$1 …`: unknown (`None`) at the top level, known inside a function call.
    pub positional: Option<Vec<String>>,
    pub launch: Option<Launch>,
    pub files: BTreeMap<String, WrittenFile>,
    pub warnings: Vec<Warning>,
    pub budget: Rc<Cell<u64>>,
    /// What each marker stands for: the reason and how the script wrote it (shared by
    /// the clones of a branch, so markers keep their meaning).
    pub marks: Rc<RefCell<Vec<(Blocker, String)>>>,
    /// Nesting of `${X:-${Y:-…}}` being expanded.
    pub depth: u32,
    /// Nesting of function calls.
    pub calls: u32,
}

/// Expansion result: fields, or the reason the whole word is unknown.
pub(crate) type Exp = Result<Vec<Elem>, Blocker>;

impl Shell {
    /// Charges `n` steps; an error once the budget is spent.
    pub fn charge(&self, n: u64, line: usize) -> Result<(), MegatronError> {
        let left = self.budget.get();
        if left < n {
            return Err(MegatronError::Syntax {
                at: format!("{}:{line}:1", self.path),
                field: "script".into(),
                expected: "a script the reader can evaluate in bounded time: its loops, calls and branches exceed the evaluation budget".into(),
            });
        }
        self.budget.set(left - n);
        Ok(())
    }

    /// A marker standing for an unknown value.
    pub fn mark(&self, b: Blocker, shown: &str) -> String {
        let mut m = self.marks.borrow_mut();
        if m.len() >= MAX_MARKS {
            return format!("{MARK}0{MARK}");
        }
        m.push((b, shown.to_string()));
        format!("{MARK}{}{MARK}", m.len() - 1)
    }

    /// The reason of the first marker in `s`, if any.
    pub fn blocker_in(&self, s: &str) -> Option<Blocker> {
        let i = s.find(MARK)?;
        let rest = &s[i + 1..];
        let n: usize = rest[..rest.find(MARK)?].parse().ok()?;
        self.marks.borrow().get(n).map(|(b, _)| b.clone())
    }

    /// `s` when it holds no marker, else the reason of the first.
    pub fn known(&self, s: String) -> Result<String, Blocker> {
        match self.blocker_in(&s) {
            Some(b) => Err(b),
            None => Ok(s),
        }
    }

    /// `s` with each marker shown as the script wrote it (`$(pwd)`, `${HOSTNAME}`).
    pub fn shown(&self, s: &str) -> String {
        let marks = self.marks.borrow();
        let mut out = String::new();
        let mut parts = s.split(MARK);
        out.push_str(parts.next().unwrap_or(""));
        while let Some(idx) = parts.next() {
            let sh = idx
                .parse::<usize>()
                .ok()
                .and_then(|n| marks.get(n))
                .map_or("?", |m| m.1.as_str());
            out.push_str(sh);
            out.push_str(parts.next().unwrap_or(""));
        }
        out
    }

    fn elem(&self, text: String, w: &Word) -> Elem {
        Elem {
            text: Ok(text),
            line: w.line,
            col: w.col,
            cond: None,
            side: false,
            raw: None,
            shown: None,
        }
    }

    /// Sets a variable, refusing values beyond the size bounds (the variable becomes
    /// unknown, with the reason).
    pub fn set_var(&mut self, name: &str, v: Val, line: usize) {
        let too_big = match &v {
            Val::Scalar(s) => s.len() > MAX_VALUE_BYTES,
            Val::Array(a) => {
                a.len() > MAX_ARRAY_LEN
                    || a.iter()
                        .any(|e| e.text.as_ref().is_ok_and(|t| t.len() > MAX_VALUE_BYTES))
            }
            Val::Unknown(_) => false,
        };
        let v = if too_big {
            Val::Unknown(Blocker::why(format!(
                "`{name}` grows beyond {MAX_VALUE_BYTES} bytes or {MAX_ARRAY_LEN} elements at {}:{line}",
                self.path
            )))
        } else {
            v
        };
        self.vars.insert(name.to_string(), v);
    }

    /// Expands a word into fields; `split`: unquoted expansions are split on blanks (a
    /// command's arguments), else joined (an assignment's value).
    pub fn expand(&mut self, w: &Word, split: bool) -> Exp {
        // Brace expansion comes first, on a command's words only.
        if split {
            let words = super::brace::expand_braces(w).map_err(Blocker::why)?;
            if words.len() > 1 {
                let mut all = Vec::new();
                for x in &words {
                    all.extend(self.expand_word(x, true)?);
                }
                return Ok(all);
            }
        }
        self.expand_word(w, split)
    }

    fn expand_word(&mut self, w: &Word, split: bool) -> Exp {
        if self.depth > 16 {
            return Err(Blocker::why("`${…}` nested too deeply"));
        }
        self.depth += 1;
        let r = self.expand_parts(w);
        self.depth -= 1;
        let fields = r?;
        if split {
            return Ok(fields);
        }
        let mut text = String::new();
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(f.text.as_ref().map_err(Clone::clone)?);
        }
        Ok(vec![self.elem(text, w)])
    }

    /// The expanded word as one string (an assignment's value, a test operand).
    pub fn expand_str(&mut self, w: &Word) -> Result<String, Blocker> {
        let mut f = self.expand(w, false)?;
        Ok(f.pop().and_then(|e| e.text.ok()).unwrap_or_default())
    }

    fn expand_parts(&mut self, w: &Word) -> Exp {
        let mut out = Fields {
            fields: vec![self.elem(String::new(), w)],
            keep: false,
            brk: false,
        };
        for p in &w.parts {
            match p {
                Part::Lit(s, quoted) => {
                    out.keep |= !s.is_empty() || *quoted;
                    out.push_str(s);
                }
                Part::Cmd(c) => {
                    let b = Blocker::why(format!(
                        "`$({})` is command output, which the reader does not run",
                        c.trim()
                    ));
                    out.keep = true;
                    out.push_str(&self.mark(b, &format!("$({})", c.trim())));
                }
                Part::Arith(e) => {
                    let v = match self.arith(e) {
                        Ok(v) => v.to_string(),
                        Err(b) => self.mark(b, &format!("$(({e}))")),
                    };
                    out.keep = true;
                    out.push_str(&v);
                }
                Part::Var {
                    name,
                    op,
                    arg,
                    all,
                    quoted,
                } => {
                    let shown = match op {
                        Some(o) => format!("${{{name}{o}{arg}}}"),
                        None => format!("${{{name}}}"),
                    };
                    match self.var_value(name, op.as_deref(), arg) {
                        Ok(Val::Unknown(b)) | Err(b) => {
                            out.keep = true;
                            out.push_str(&self.mark(b, &shown));
                        }
                        Ok(v) => out.push_val(v, *all, *quoted),
                    }
                }
            }
        }
        if !out.keep
            && out.fields.len() == 1
            && out.fields[0].text.as_ref().is_ok_and(|t| t.is_empty())
        {
            return Ok(vec![]);
        }
        Ok(out.fields)
    }

    /// `$(( … ))`: the body is expanded first (`$X`, `${X:-4}`), then evaluated with bare
    /// names looked up.
    pub fn arith(&mut self, e: &str) -> Result<i64, Blocker> {
        let body = lex_operand(e, 0);
        let text = self.expand_str(&body)?;
        let text = self.known(text)?;
        let (vars, this) = (&self.vars, &*self);
        let r = arith::eval(&text, |name: &str| match vars.get(name) {
            Some(Val::Scalar(s)) => match this.blocker_in(s) {
                Some(b) => Err(b),
                None => s.trim().parse::<i64>().map_err(|_| {
                    Blocker::why(format!("`{name}` = `{s}` is not an integer in `$(({e}))`"))
                }),
            },
            Some(Val::Array(a)) => match a.first().map(|x| &x.text) {
                Some(Ok(s)) => s
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| Blocker::why(format!("`{name}` is not an integer"))),
                Some(Err(b)) => Err(b.clone()),
                None => Ok(0),
            },
            Some(Val::Unknown(b)) => Err(b.clone()),
            None => Err(Blocker::Unset(name.to_string())),
        });
        r.map_err(|err| match err {
            ArithError::Name(b) => b,
            ArithError::Bad(m) => Blocker::why(format!("`$(({}))`: {m}", e.trim())),
        })
    }

    /// A positional or special parameter.
    fn special(&self, name: &str) -> Option<Val> {
        let pos = self.positional.as_ref();
        match name {
            "@" | "*" => pos.map(|p| {
                Val::Array(
                    p.iter()
                        .map(|s| Elem {
                            text: Ok(s.clone()),
                            line: 0,
                            col: 0,
                            cond: None,
                            side: false,
                            raw: None,
                            shown: None,
                        })
                        .collect(),
                )
            }),
            "#" => pos.map(|p| Val::Scalar(p.len().to_string())),
            n if n.bytes().all(|c| c.is_ascii_digit()) => {
                let i: usize = n.parse().ok()?;
                if i == 0 {
                    return Some(Val::Scalar(self.path.clone()));
                }
                // Known positionals: an absent one is unset (`${3:-x}` takes the default).
                pos.and_then(|p| p.get(i - 1).cloned().map(Val::Scalar))
            }
            _ => None,
        }
    }

    fn is_special(name: &str) -> bool {
        name.bytes().all(|c| c.is_ascii_digit())
            || matches!(name, "@" | "*" | "#" | "?" | "$" | "!" | "-")
    }

    /// The value of `${name<op>arg}`.
    fn var_value(&mut self, name: &str, op: Option<&str>, arg: &str) -> Result<Val, Blocker> {
        let cur = if Self::is_special(name) {
            match self.special(name) {
                Some(v) => Some(v),
                // `$1` at the top level, `$?`, `$$`: not known from the file.
                None if self.positional.is_none() || !name.bytes().all(|c| c.is_ascii_digit()) => {
                    Some(Val::Unknown(Blocker::why(format!(
                        "`${name}` is given when the script runs, not written in it"
                    ))))
                }
                None => None,
            }
        } else {
            self.vars.get(name).cloned()
        };
        let colon = op.is_some_and(|o| o.starts_with(':'));
        let set = match &cur {
            Some(Val::Scalar(s)) => !(s.is_empty() && colon),
            Some(Val::Array(a)) => !(a.is_empty() && colon),
            Some(Val::Unknown(b)) if op.is_some() => return Err(b.clone()),
            Some(Val::Unknown(_)) => true,
            None => false,
        };
        Ok(match (op, set) {
            (Some(":-" | "-"), false) => Val::Scalar(self.expand_str(&lex_operand(arg, 0))?),
            (Some(":=" | "="), false) => {
                let v = Val::Scalar(self.expand_str(&lex_operand(arg, 0))?);
                self.vars.insert(name.to_string(), v.clone());
                v
            }
            (Some(":+" | "+"), true) => Val::Scalar(self.expand_str(&lex_operand(arg, 0))?),
            (Some(":+" | "+"), false) => Val::Scalar(String::new()),
            (_, true) => cur.unwrap_or(Val::Scalar(String::new())),
            (_, false) => return Err(Blocker::Unset(name.to_string())),
        })
    }
}

/// Fields being built by an expansion.
struct Fields {
    fields: Vec<Elem>,
    /// The word expands to at least one field even if empty (it has a literal or a
    /// quoted part).
    keep: bool,
    /// Field splitting ended the current field: the next text starts a new one.
    brk: bool,
}

impl Fields {
    fn last(&mut self) -> &mut Elem {
        // `fields` always holds at least one element.
        let n = self.fields.len() - 1;
        &mut self.fields[n]
    }

    fn new_field(&mut self, line: usize, col: usize) {
        self.fields.push(Elem {
            text: Ok(String::new()),
            line,
            col,
            cond: None,
            side: false,
            raw: None,
            shown: None,
        });
    }

    fn start(&mut self) {
        if self.brk {
            self.brk = false;
            let (l, c) = (self.last().line, self.last().col);
            self.new_field(l, c);
        }
    }

    fn push_str(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.start();
        if let Ok(t) = &mut self.last().text {
            t.push_str(s);
        }
    }

    /// Appends the elements of an array: the first joins the current field, the others
    /// are fields of their own (keeping where they were written).
    fn push_elems(&mut self, elems: Vec<Elem>) {
        let mut it = elems.into_iter();
        let Some(first) = it.next() else { return };
        self.start();
        let cur = self.last();
        match (&mut cur.text, first.text) {
            (Ok(t), Ok(f)) if t.is_empty() => {
                *t = f;
                cur.line = first.line;
                cur.col = first.col;
                cur.cond = first.cond;
                cur.side = first.side;
            }
            (Ok(t), Ok(f)) => t.push_str(&f),
            (_, Err(b)) => {
                cur.text = Err(b);
                cur.line = first.line;
                cur.col = first.col;
                cur.cond = first.cond;
                cur.side = first.side;
            }
            (Err(_), _) => {}
        }
        self.fields.extend(it);
    }

    fn push_val(&mut self, v: Val, all: bool, quoted: bool) {
        match v {
            Val::Unknown(b) => {
                self.start();
                self.last().text = Err(b);
                self.keep = true;
            }
            Val::Scalar(s) if quoted => {
                self.keep = true;
                self.push_str(&s);
            }
            Val::Scalar(s) => self.push_split(&s),
            Val::Array(a) => {
                let elems: Vec<Elem> = if !all {
                    a.into_iter().take(1).collect()
                } else if quoted {
                    a
                } else {
                    a.into_iter().flat_map(split_elem).collect()
                };
                if quoted && !elems.is_empty() {
                    self.keep = true;
                }
                if !quoted && !elems.is_empty() {
                    self.keep = true;
                }
                self.push_elems(elems);
            }
        }
    }

    /// An unquoted scalar: split on blanks into fields.
    fn push_split(&mut self, s: &str) {
        let mut it = s.split_whitespace();
        let Some(first) = it.next() else { return };
        let cur_nonempty = self.last().text.as_ref().is_ok_and(|t| !t.is_empty());
        if s.starts_with(char::is_whitespace) && cur_nonempty {
            self.brk = true;
        }
        self.push_str(first);
        for f in it {
            self.brk = true;
            self.push_str(f);
        }
        self.brk = s.ends_with(char::is_whitespace);
        self.keep = true;
    }
}

/// An unquoted array element, split on blanks (each piece keeps the element's origin).
fn split_elem(e: Elem) -> Vec<Elem> {
    match &e.text {
        Ok(t) => t
            .split_whitespace()
            .map(|p| Elem {
                text: Ok(p.to_string()),
                ..e.clone()
            })
            .collect(),
        Err(_) => vec![e],
    }
}
