//! Reading a bash launch script that runs `pretrain_gpt.py` (directly, or through
//! `torchrun`, `python -m torch.distributed.launch`, `deepspeed`).
//!
//! This is not a shell. It reads the script top to bottom once and understands what
//! launch scripts use to assemble Megatron flags: `VAR=value` (also `export`, `local`,
//! `declare`), arrays `X=( … )` (also `+=`) expanded with `"${X[@]}"`, `$VAR`, `${VAR}`,
//! `${VAR:-default}` / `${VAR-default}` / `${VAR:=default}`, integer `$(( … ))`,
//! single/double quotes, `\` line continuations and comments. Assignments are taken in
//! file order regardless of `if`/`for` (the last one before the launch wins); the
//! process environment is never read, so the result depends on the file alone. Command
//! substitutions `$( … )` have no value. A flag that matters to the configuration whose
//! value cannot be resolved is an error naming the line and the flag, never a guess.

use super::error::{Loc, MegatronError};
use super::fields::{canonical_key, FIELDS};
use super::scan::Assignment;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Part {
    Lit(String),
    /// `$NAME`, `${NAME…}`: name, operator (`:-`, `-`, `:=`, `:+`), operand text, `[@]`.
    Var {
        name: String,
        op: Option<String>,
        arg: String,
        all: bool,
        quoted: bool,
    },
    Arith(String),
    Cmd(String),
}

#[derive(Clone, Debug)]
struct Word {
    parts: Vec<Part>,
    raw: String,
    line: usize,
    col: usize,
}

#[derive(Clone, Debug)]
enum Tok {
    Word(Word),
    Open,
    Close,
    Sep,
}

#[derive(Clone, Debug)]
enum Val {
    Scalar(String),
    Array(Vec<String>),
    /// Could not be computed: the first variable (or `$(…)`) that blocked it.
    Unknown(String),
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
    line: usize,
    line_start: usize,
}

impl<'a> Lexer<'a> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek(0)?;
        self.i += 1;
        if c == b'\n' {
            self.line += 1;
            self.line_start = self.i;
        }
        Some(c)
    }

    /// Text up to the matching closer, honouring nesting of `open`/`close`.
    fn until_matching(&mut self, open: u8, close: u8) -> String {
        let start = self.i;
        let mut depth = 1usize;
        while let Some(c) = self.peek(0) {
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    let t = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                    self.bump();
                    return t;
                }
            }
            self.bump();
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn dollar(&mut self, quoted: bool) -> Part {
        // `$` already consumed.
        match self.peek(0) {
            Some(b'{') => {
                self.bump();
                let body = self.until_matching(b'{', b'}');
                parse_brace(&body, quoted)
            }
            Some(b'(') if self.peek(1) == Some(b'(') => {
                self.bump();
                self.bump();
                let body = self.until_matching(b'(', b')');
                // consume the second `)`
                if self.peek(0) == Some(b')') {
                    self.bump();
                }
                Part::Arith(body)
            }
            Some(b'(') => {
                self.bump();
                Part::Cmd(self.until_matching(b'(', b')'))
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let st = self.i;
                while self
                    .peek(0)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.bump();
                }
                let name = String::from_utf8_lossy(&self.s[st..self.i]).into_owned();
                Part::Var {
                    name,
                    op: None,
                    arg: String::new(),
                    all: false,
                    quoted,
                }
            }
            Some(c) if c.is_ascii_digit() || c == b'@' || c == b'*' || c == b'#' || c == b'?' => {
                self.bump();
                Part::Var {
                    name: (c as char).to_string(),
                    op: None,
                    arg: String::new(),
                    all: c == b'@',
                    quoted,
                }
            }
            _ => Part::Lit("$".into()),
        }
    }

    fn next(&mut self) -> Option<Tok> {
        // Skip blanks, continuations and comments.
        loop {
            match self.peek(0)? {
                b' ' | b'\t' | b'\r' => {
                    self.bump();
                }
                b'\\' if self.peek(1) == Some(b'\n') => {
                    self.bump();
                    self.bump();
                }
                b'\\' if self.peek(1) == Some(b'\r') && self.peek(2) == Some(b'\n') => {
                    self.bump();
                    self.bump();
                    self.bump();
                }
                b'#' => {
                    while self.peek(0).is_some_and(|c| c != b'\n') {
                        self.bump();
                    }
                }
                _ => break,
            }
        }
        let c = self.peek(0)?;
        match c {
            b'\n' | b';' | b'&' | b'|' => {
                self.bump();
                while matches!(self.peek(0), Some(b'&' | b'|' | b';')) {
                    self.bump();
                }
                return Some(Tok::Sep);
            }
            b'(' => {
                self.bump();
                return Some(Tok::Open);
            }
            b')' => {
                self.bump();
                return Some(Tok::Close);
            }
            _ => {}
        }
        let (line, col, start) = (self.line, self.i - self.line_start + 1, self.i);
        let mut parts = Vec::new();
        let mut lit = String::new();
        let flush = |lit: &mut String, parts: &mut Vec<Part>| {
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(lit)));
            }
        };
        while let Some(c) = self.peek(0) {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b'(' | b')' => {
                    // `NAME=(` opens an array: stop so the parser sees the paren.
                    break;
                }
                b'\\' => {
                    self.bump();
                    match self.bump() {
                        Some(b'\n') | None => {}
                        Some(c) => lit.push(c as char),
                    }
                }
                b'\'' => {
                    self.bump();
                    let st = self.i;
                    while self.peek(0).is_some_and(|c| c != b'\'') {
                        self.bump();
                    }
                    lit.push_str(&String::from_utf8_lossy(&self.s[st..self.i]));
                    self.bump();
                }
                b'"' => {
                    self.bump();
                    while let Some(c) = self.peek(0) {
                        match c {
                            b'"' => {
                                self.bump();
                                break;
                            }
                            b'\\' => {
                                self.bump();
                                if let Some(c) = self.bump() {
                                    if c != b'\n' {
                                        lit.push(c as char);
                                    }
                                }
                            }
                            b'$' => {
                                self.bump();
                                flush(&mut lit, &mut parts);
                                parts.push(self.dollar(true));
                            }
                            _ => {
                                let st = self.i;
                                self.bump();
                                while self.peek(0).is_some_and(|c| (0x80..0xC0).contains(&c)) {
                                    self.bump();
                                }
                                lit.push_str(&String::from_utf8_lossy(&self.s[st..self.i]));
                            }
                        }
                    }
                }
                b'$' => {
                    self.bump();
                    flush(&mut lit, &mut parts);
                    parts.push(self.dollar(false));
                }
                _ => {
                    let st = self.i;
                    self.bump();
                    while self.peek(0).is_some_and(|c| (0x80..0xC0).contains(&c)) {
                        self.bump();
                    }
                    lit.push_str(&String::from_utf8_lossy(&self.s[st..self.i]));
                }
            }
        }
        flush(&mut lit, &mut parts);
        let raw = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        Some(Tok::Word(Word {
            parts,
            raw,
            line,
            col,
        }))
    }
}

fn parse_brace(body: &str, quoted: bool) -> Part {
    let b = body.trim();
    let n = b
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    let n = if n == 0 && b.starts_with(['@', '*', '#']) {
        1
    } else {
        n
    };
    let name = b[..n].to_string();
    let mut rest = &b[n..];
    let mut all = name == "@";
    if let Some(r) = rest
        .strip_prefix("[@]")
        .or_else(|| rest.strip_prefix("[*]"))
    {
        all = true;
        rest = r;
    }
    for op in [":-", ":=", ":+", "-", "=", "+"] {
        if let Some(arg) = rest.strip_prefix(op) {
            return Part::Var {
                name,
                op: Some(op.into()),
                arg: arg.into(),
                all,
                quoted,
            };
        }
    }
    if !rest.is_empty() {
        // `${X/a/b}`, `${#X}` and friends: not supported, so not resolvable.
        return Part::Cmd(format!("${{{b}}}"));
    }
    Part::Var {
        name,
        op: None,
        arg: String::new(),
        all,
        quoted,
    }
}

/// Integer arithmetic of `$(( … ))`: + - * / % and parentheses, after variables are
/// substituted.
fn arith(expr: &str) -> Option<i64> {
    // Depth-limited so hostile input cannot exhaust the stack.
    fn atom(t: &[u8], i: &mut usize, d: u32) -> Option<i64> {
        if d > 64 {
            return None;
        }
        while t.get(*i) == Some(&b' ') {
            *i += 1;
        }
        match t.get(*i)? {
            b'(' => {
                *i += 1;
                let v = sum(t, i, d + 1)?;
                while t.get(*i) == Some(&b' ') {
                    *i += 1;
                }
                (t.get(*i) == Some(&b')')).then(|| *i += 1)?;
                Some(v)
            }
            b'-' => {
                *i += 1;
                atom(t, i, d + 1)?.checked_neg()
            }
            _ => {
                let st = *i;
                while t.get(*i).is_some_and(u8::is_ascii_digit) {
                    *i += 1;
                }
                std::str::from_utf8(&t[st..*i]).ok()?.parse().ok()
            }
        }
    }
    fn prod(t: &[u8], i: &mut usize, d: u32) -> Option<i64> {
        let mut v = atom(t, i, d)?;
        loop {
            while t.get(*i) == Some(&b' ') {
                *i += 1;
            }
            match t.get(*i) {
                Some(b'*') => {
                    *i += 1;
                    v = v.checked_mul(atom(t, i, d)?)?
                }
                Some(b'/') => {
                    *i += 1;
                    v = v.checked_div(atom(t, i, d)?)?
                }
                Some(b'%') => {
                    *i += 1;
                    v = v.checked_rem(atom(t, i, d)?)?
                }
                _ => return Some(v),
            }
        }
    }
    fn sum(t: &[u8], i: &mut usize, d: u32) -> Option<i64> {
        let mut v = prod(t, i, d)?;
        loop {
            while t.get(*i) == Some(&b' ') {
                *i += 1;
            }
            match t.get(*i) {
                Some(b'+') => {
                    *i += 1;
                    v = v.checked_add(prod(t, i, d)?)?
                }
                Some(b'-') => {
                    *i += 1;
                    v = v.checked_sub(prod(t, i, d)?)?
                }
                _ => return Some(v),
            }
        }
    }
    let t = expr.trim().as_bytes();
    let mut i = 0;
    let v = sum(t, &mut i, 0)?;
    (i == t.len()).then_some(v)
}

struct Env {
    vars: BTreeMap<String, Val>,
    /// Nesting of `${X:-${Y:-…}}` being expanded (bounded: hostile input cannot recurse forever).
    depth: u32,
}

/// The result of expanding a word: fields, or the variable that blocked it.
type Exp = Result<Vec<String>, String>;

impl Env {
    fn lex_word(text: &str) -> Word {
        // Operand of `${X:-…}`: expanded like a double-quoted string.
        let quoted = format!("\"{}\"", text.replace('"', "\\\""));
        let mut lx = Lexer {
            s: quoted.as_bytes(),
            i: 0,
            line: 0,
            line_start: 0,
        };
        match lx.next() {
            Some(Tok::Word(w)) => w,
            _ => Word {
                parts: vec![],
                raw: String::new(),
                line: 0,
                col: 0,
            },
        }
    }

    fn get(&self, name: &str) -> Option<&Val> {
        self.vars.get(name)
    }

    /// Expands a word into fields. Unquoted expansions are split on blanks.
    fn expand(&mut self, w: &Word) -> Exp {
        if self.depth > 16 {
            return Err("(too deeply nested ${…})".into());
        }
        self.depth += 1;
        let r = self.expand_inner(w);
        self.depth -= 1;
        r
    }

    fn expand_inner(&mut self, w: &Word) -> Exp {
        let mut fields: Vec<String> = vec![String::new()];
        let mut any_quoted_or_lit = false;
        for p in &w.parts {
            match p {
                Part::Lit(s) => {
                    any_quoted_or_lit = true;
                    fields.last_mut().unwrap_or(&mut String::new()).push_str(s);
                }
                Part::Cmd(c) => return Err(format!("$({c})")),
                Part::Arith(e) => {
                    let mut text = String::new();
                    let lx = e.as_bytes().iter().peekable();
                    let mut cur = String::new();
                    let flush = |cur: &mut String,
                                 text: &mut String,
                                 env: &Env|
                     -> Result<(), String> {
                        if cur.is_empty() {
                            return Ok(());
                        }
                        if cur.as_bytes()[0].is_ascii_digit() {
                            text.push_str(cur);
                        } else {
                            match env.get(cur) {
                                Some(Val::Scalar(v)) => text.push_str(&format!("({})", v.trim())),
                                Some(Val::Unknown(u)) => return Err(u.clone()),
                                _ => return Err(cur.clone()),
                            }
                        }
                        cur.clear();
                        Ok(())
                    };
                    for &c in lx {
                        if c.is_ascii_alphanumeric() || c == b'_' {
                            cur.push(c as char);
                        } else {
                            flush(&mut cur, &mut text, self)?;
                            if c != b'$' && c != b'{' && c != b'}' {
                                text.push(c as char);
                            }
                        }
                    }
                    flush(&mut cur, &mut text, self)?;
                    match arith(&text) {
                        Some(v) => fields
                            .last_mut()
                            .unwrap_or(&mut String::new())
                            .push_str(&v.to_string()),
                        None => return Err(format!("$(({e}))")),
                    }
                    any_quoted_or_lit = true;
                }
                Part::Var {
                    name,
                    op,
                    arg,
                    all,
                    quoted,
                } => {
                    let cur = self.get(name).cloned();
                    let set = match &cur {
                        Some(Val::Scalar(s)) => {
                            !(s.is_empty() && op.as_deref().is_some_and(|o| o.starts_with(':')))
                        }
                        Some(_) => true,
                        None => false,
                    };
                    let val: Val = match (op.as_deref(), set) {
                        (Some(":-" | "-"), false) => {
                            let w = Self::lex_word(arg);
                            Val::Scalar(self.expand(&w)?.join(" "))
                        }
                        (Some(":=" | "="), false) => {
                            let w = Self::lex_word(arg);
                            let v = Val::Scalar(self.expand(&w)?.join(" "));
                            self.vars.insert(name.clone(), v.clone());
                            v
                        }
                        (Some(":+" | "+"), true) => {
                            let w = Self::lex_word(arg);
                            Val::Scalar(self.expand(&w)?.join(" "))
                        }
                        (Some(":+" | "+"), false) => Val::Scalar(String::new()),
                        (_, true) => cur.unwrap_or(Val::Scalar(String::new())),
                        (_, false) => return Err(name.clone()),
                    };
                    match val {
                        Val::Unknown(u) => return Err(u),
                        Val::Scalar(s) if *quoted => {
                            any_quoted_or_lit = true;
                            fields.last_mut().unwrap_or(&mut String::new()).push_str(&s)
                        }
                        Val::Scalar(s) => {
                            let mut it = s.split_whitespace();
                            if let Some(first) = it.next() {
                                if s.starts_with(char::is_whitespace)
                                    && !fields.last().is_none_or(|f| f.is_empty())
                                {
                                    fields.push(String::new());
                                }
                                fields
                                    .last_mut()
                                    .unwrap_or(&mut String::new())
                                    .push_str(first);
                                for f in it {
                                    fields.push(f.to_string());
                                }
                            }
                        }
                        Val::Array(a) => {
                            let elems: Vec<String> = if *all {
                                if *quoted {
                                    a
                                } else {
                                    a.iter()
                                        .flat_map(|e| e.split_whitespace().map(str::to_string))
                                        .collect()
                                }
                            } else {
                                a.into_iter().take(1).collect()
                            };
                            if *quoted {
                                any_quoted_or_lit = true;
                            }
                            let mut it = elems.into_iter();
                            if let Some(first) = it.next() {
                                fields
                                    .last_mut()
                                    .unwrap_or(&mut String::new())
                                    .push_str(&first);
                                for e in it {
                                    fields.push(e);
                                }
                            } else if fields.len() == 1 && fields[0].is_empty() && *all {
                                // "${EMPTY[@]}" expands to no field at all.
                                any_quoted_or_lit = false;
                            }
                        }
                    }
                }
            }
        }
        if !any_quoted_or_lit && fields.len() == 1 && fields[0].is_empty() {
            return Ok(vec![]);
        }
        Ok(fields)
    }
}

/// Marks an array element that did not resolve: `\u{1}VAR\u{1}LINE\u{1}COL`.
const UNRESOLVED: char = '\u{1}';

/// One expanded launch argument, with the word it came from.
struct Arg {
    text: Result<String, String>,
    raw: String,
    line: usize,
    col: usize,
}

fn assignment_name(raw_first: &Part) -> Option<(String, bool, String)> {
    // `NAME=rest`, `NAME+=rest` at the start of a word's first literal.
    let Part::Lit(s) = raw_first else { return None };
    let n = s
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    if n == 0 || s.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let rest = &s[n..];
    if let Some(r) = rest.strip_prefix("+=") {
        Some((s[..n].to_string(), true, r.to_string()))
    } else {
        rest.strip_prefix('=')
            .map(|r| (s[..n].to_string(), false, r.to_string()))
    }
}

/// Keys whose value the configuration needs: unresolved values for these are errors.
fn needed(key: &str) -> bool {
    FIELDS.contains(&key)
        || matches!(
            key,
            "bf16"
                | "fp16"
                | "group_query_attention"
                | "make_vocab_size_divisible_by"
                | "num_layers_per_virtual_pipeline_stage"
        )
}

/// Reads the Megatron flags (and the launcher's GPU count) of the first
/// `pretrain_*.py` command in a bash script.
pub fn scan_script(path: &str, text: &str) -> Result<Vec<Assignment>, MegatronError> {
    let mut lx = Lexer {
        s: text.as_bytes(),
        i: 0,
        line: 1,
        line_start: 0,
    };
    let mut env = Env {
        vars: BTreeMap::new(),
        depth: 0,
    };
    let mut stmt: Vec<Tok> = Vec::new();
    let mut launch: Option<(Vec<Arg>, Vec<Arg>)> = None;
    let mut depth = 0usize;
    loop {
        let tok = lx.next();
        let eof = tok.is_none();
        let end = match &tok {
            None => true,
            Some(Tok::Sep) => depth == 0,
            Some(Tok::Open) => {
                depth += 1;
                false
            }
            Some(Tok::Close) => {
                depth = depth.saturating_sub(1);
                false
            }
            Some(Tok::Word(_)) => false,
        };
        match tok {
            Some(Tok::Sep) if depth > 0 => {}
            Some(t @ (Tok::Word(_) | Tok::Open | Tok::Close)) => stmt.push(t),
            _ => {}
        }
        if end {
            if launch.is_none() {
                launch = statement(&mut env, std::mem::take(&mut stmt));
            } else {
                stmt.clear();
            }
            if eof {
                break;
            }
        }
    }
    let Some((launcher, args)) = launch else {
        return Err(MegatronError::at(
            &Loc::new(path, 1, 1),
            "pretrain_*.py",
            "a launch script running pretrain_gpt.py (or another pretrain_*.py); none found",
        ));
    };
    let mut out = Vec::new();
    // World size from the launcher: torchrun/launch `--nproc_per_node`, `--nnodes`;
    // deepspeed `--num_gpus`, `--num_nodes`.
    let lflags = flags(path, &launcher, |k| {
        matches!(k, "nproc_per_node" | "nnodes" | "num_gpus" | "num_nodes")
    })?;
    let get = |k: &str| lflags.iter().find(|a| canonical_key(&a.key) == k);
    let per_node = get("nproc_per_node").or_else(|| get("num_gpus"));
    let nodes = get("nnodes").or_else(|| get("num_nodes"));
    if let Some(p) = per_node {
        let n_nodes = match nodes {
            // `--nnodes 1:4` (elastic) takes the maximum.
            Some(n) => n
                .value
                .rsplit(':')
                .next()
                .and_then(|v| v.trim().parse::<u64>().ok()),
            None => Some(1),
        };
        if let (Ok(p_n), Some(n)) = (p.value.trim().parse::<u64>(), n_nodes) {
            out.push(Assignment {
                key: "world_size".into(),
                value: (p_n * n).to_string(),
                loc: p.loc.clone(),
            });
        }
    }
    out.extend(flags(path, &args, needed)?);
    Ok(out)
}

fn flags(
    path: &str,
    args: &[Arg],
    needed: impl Fn(&str) -> bool,
) -> Result<Vec<Assignment>, MegatronError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let loc = Loc::new(path, a.line, a.col);
        let text = match &a.text {
            Ok(t) => t.clone(),
            Err(var) => {
                // A whole word we cannot expand may hide any flag.
                if a.raw.starts_with("--") {
                    let flag = a.raw.split('=').next().unwrap_or(&a.raw).to_string();
                    if needed(&canonical_key(&flag)) {
                        return Err(MegatronError::Unresolved {
                            at: loc.to_string(),
                            field: flag,
                            var: var.clone(),
                        });
                    }
                    continue;
                }
                return Err(MegatronError::Unresolved {
                    at: loc.to_string(),
                    field: a.raw.clone(),
                    var: var.clone(),
                });
            }
        };
        let Some(flag) = text.strip_prefix("--") else {
            continue;
        };
        if flag.is_empty() {
            continue;
        }
        let (key, value, vloc) = if let Some(p) = flag.find('=') {
            (
                flag[..p].to_string(),
                Ok(flag[p + 1..].to_string()),
                loc.clone(),
            )
        } else if i < args.len()
            && !args[i].text.as_ref().is_ok_and(|t| t.starts_with("--"))
            && !args[i].raw.starts_with("--")
        {
            let v = &args[i];
            i += 1;
            (
                flag.to_string(),
                v.text.clone().map_err(|e| (e, v.raw.clone())),
                Loc::new(path, v.line, v.col),
            )
        } else {
            (flag.to_string(), Ok("True".into()), loc.clone())
        };
        let ck = canonical_key(&key);
        let value = match value {
            Ok(v) => v,
            Err((var, raw)) => {
                if needed(&ck) {
                    return Err(MegatronError::Unresolved {
                        at: vloc.to_string(),
                        field: format!("--{key}"),
                        var,
                    });
                }
                raw
            }
        };
        // `--no-foo` (store_false): foo = False when foo is modelled.
        if let Some(base) = ck.strip_prefix("no_") {
            if needed(base) && value == "True" {
                out.push(Assignment {
                    key: base.into(),
                    value: "False".into(),
                    loc: vloc,
                });
                continue;
            }
        }
        out.push(Assignment {
            key,
            value,
            loc: vloc,
        });
    }
    Ok(out)
}

/// Executes one statement: assignments update `env`; a command running
/// `pretrain_*.py` returns (launcher words, script arguments).
fn statement(env: &mut Env, toks: Vec<Tok>) -> Option<(Vec<Arg>, Vec<Arg>)> {
    let mut i = 0;
    // Skip declaration keywords and their options.
    while let Some(Tok::Word(w)) = toks.get(i) {
        if matches!(
            w.raw.as_str(),
            "export" | "local" | "declare" | "readonly" | "typeset"
        ) || (i > 0 && w.raw.starts_with('-') && !w.raw.starts_with("--"))
        {
            i += 1;
        } else {
            break;
        }
    }
    // Leading assignments.
    while let Some(Tok::Word(w)) = toks.get(i) {
        let Some((name, append, rest)) = w.parts.first().and_then(assignment_name) else {
            break;
        };
        i += 1;
        if rest.is_empty() && w.parts.len() == 1 && matches!(toks.get(i), Some(Tok::Open)) {
            // Array literal.
            i += 1;
            let mut elems = Vec::new();
            while let Some(t) = toks.get(i) {
                i += 1;
                match t {
                    Tok::Close => break,
                    Tok::Word(e) => match env.expand(e) {
                        Ok(v) => elems.extend(v),
                        // Kept as a marker so the flag reader can report the variable
                        // at the element's own line if (and only if) its flag matters.
                        Err(u) => elems.push(format!(
                            "{UNRESOLVED}{u}{UNRESOLVED}{}{UNRESOLVED}{}",
                            e.line, e.col
                        )),
                    },
                    _ => {}
                }
            }
            let val = match (append, env.vars.get(&name)) {
                (true, Some(Val::Array(a))) => Val::Array(a.iter().cloned().chain(elems).collect()),
                _ => Val::Array(elems),
            };
            env.vars.insert(name, val);
            continue;
        }
        let mut w2 = w.clone();
        w2.parts[0] = Part::Lit(rest);
        let quoted_word = Word {
            parts: w2.parts,
            ..w.clone()
        };
        // Assignment values are not word-split.
        let v = match env.expand(&quoted_word) {
            Ok(f) => Val::Scalar(f.join(" ")),
            Err(u) => Val::Unknown(u),
        };
        let v = match (append, env.vars.get(&name), v) {
            (true, Some(Val::Scalar(a)), Val::Scalar(b)) => Val::Scalar(format!("{a}{b}")),
            (_, _, v) => v,
        };
        env.vars.insert(name, v);
    }
    // A command: is it the launch?
    let words: Vec<&Word> = toks[i.min(toks.len())..]
        .iter()
        .filter_map(|t| if let Tok::Word(w) = t { Some(w) } else { None })
        .collect();
    let pos = words.iter().position(|w| {
        let r = w.raw.trim_matches(['"', '\'']);
        let file = r.rsplit('/').next().unwrap_or(r);
        file.starts_with("pretrain_") && file.ends_with(".py")
    })?;
    let mut expand_all = |ws: &[&Word]| -> Vec<Arg> {
        let mut out = Vec::new();
        for w in ws {
            match env.expand(w) {
                Ok(fields) => out.extend(fields.into_iter().map(|f| {
                    let mut m = f.split(UNRESOLVED);
                    match (f.starts_with(UNRESOLVED), m.nth(1), m.next(), m.next()) {
                        (true, Some(var), Some(l), Some(c)) => Arg {
                            text: Err(var.to_string()),
                            raw: format!("${var}"),
                            line: l.parse().unwrap_or(w.line),
                            col: c.parse().unwrap_or(w.col),
                        },
                        _ => Arg {
                            text: Ok(f),
                            raw: w.raw.clone(),
                            line: w.line,
                            col: w.col,
                        },
                    }
                })),
                Err(u) => out.push(Arg {
                    text: Err(u),
                    raw: w.raw.clone(),
                    line: w.line,
                    col: w.col,
                }),
            }
        }
        out
    };
    let launcher = expand_all(&words[..pos]);
    let args = expand_all(&words[pos + 1..]);
    Some((launcher, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_handles_precedence_and_parentheses() {
        assert_eq!(arith("2*(3+4)-1"), Some(13));
        assert_eq!(arith("8 / 2 % 3"), Some(1));
        assert_eq!(arith("1/0"), None);
        assert_eq!(arith("a+1"), None);
    }
}
