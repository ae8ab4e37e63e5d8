//! Running the command tree as bash would, without running any command: assignments,
//! conditions, loops, `case`, functions and here-documents are evaluated; every other
//! command's exit status is unknown. A condition the script alone cannot decide is
//! explored both ways and the two outcomes merged: a variable that differs becomes
//! unknown (naming the condition), array elements present in one branch only are marked
//! with it, and a branch that exits is dropped (its state never reaches later code).

use super::ast::{Assign, AssignValue, CondTok, Node, Simple};
use super::cond::{self, Tri};
use super::expand::{Blocker, Elem, Launch, Shell, Val, WrittenFile};
use super::lex::{lex_quoted, Word};
use crate::megatron::error::{MegatronError, Warning};
use std::rc::Rc;

/// How a command finished.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Flow {
    /// Went on, with this exit status.
    Next(Tri),
    Exit,
    Break,
    Continue,
    Return(Tri),
}

type R = Result<Flow, MegatronError>;

/// Iterations of one loop before the reader stops following it.
const MAX_LOOP: usize = 10_000;

/// Nested function calls followed.
const MAX_CALLS: u32 = 32;

fn ok(b: bool) -> Flow {
    Flow::Next(if b { Tri::True } else { Tri::False })
}

/// Where a command starts.
pub(crate) fn node_pos(n: &Node) -> (usize, usize) {
    match n {
        Node::Simple(s) => (s.line, s.col),
        Node::Pipeline(v, _) | Node::Group(v) | Node::Subshell(v) => {
            v.first().map_or((0, 0), node_pos)
        }
        Node::AndOr(f, _) => node_pos(f),
        Node::If { arms, .. } => arms
            .first()
            .and_then(|a| a.0.first())
            .map_or((0, 0), node_pos),
        Node::Case { line, .. } | Node::For { line, .. } | Node::While { line, .. } => (*line, 1),
        Node::Cond(_, l, c) | Node::Arith(_, l, c) => (*l, *c),
        Node::Function(_, b) => node_pos(b),
    }
}

/// Commands that name a training script without running it (`[ -f pretrain_gpt.py ]`,
/// `echo … pretrain_gpt.py`).
const NOT_LAUNCHERS: &[&str] = &[
    "[", "test", "echo", "printf", "cat", "ls", "cp", "mv", "rm", "mkdir", "cd", "grep", "sed",
    "awk", "find", "wget", "curl", "git", "chmod", "touch", "head", "tail", "which", "export",
    "local", "declare", "readonly", "typeset", "realpath", "dirname", "basename", "readlink",
    "eval",
];

/// `… sh -c "STRING"` / `bash -c 'STRING'` (after any launcher such as `srun`): the
/// string is run as a script.
fn shell_dash_c(fields: &[Elem]) -> Option<String> {
    let text = |i: usize| fields.get(i).and_then(|e| e.text.as_ref().ok());
    (0..fields.len()).find_map(|i| {
        let sh = text(i)?;
        let base = sh.rsplit('/').next().unwrap_or(sh);
        (matches!(base, "sh" | "bash") && text(i + 1)? == "-c").then(|| text(i + 2).cloned())?
    })
}

fn is_pretrain(e: &Elem) -> bool {
    e.text.as_ref().is_ok_and(|t| {
        let t = t.trim_matches(['"', '\'']);
        let file = t.rsplit('/').next().unwrap_or(t);
        file.starts_with("pretrain_") && file.ends_with(".py")
    })
}

impl Shell {
    fn why(&self, line: usize, col: usize, what: &str, detail: &str) -> Rc<str> {
        Rc::from(format!(
            "{what} at {}:{line}:{col} cannot be decided from the script ({detail})",
            self.path
        ))
    }

    /// Runs commands in order; the status is the last one's.
    pub fn run(&mut self, nodes: &[Node]) -> R {
        let mut last = ok(true);
        for n in nodes {
            last = self.node(n)?;
            if !matches!(last, Flow::Next(_)) {
                break;
            }
        }
        Ok(last)
    }

    fn node(&mut self, n: &Node) -> R {
        let (line, _) = node_pos(n);
        self.charge(1, line)?;
        match n {
            Node::Simple(s) => self.simple(s),
            Node::Pipeline(cmds, negate) => {
                let mut last = ok(true);
                for c in cmds {
                    last = self.subshell(std::slice::from_ref(c))?;
                }
                Ok(match last {
                    Flow::Next(t) if *negate => Flow::Next(t.not()),
                    f => f,
                })
            }
            Node::AndOr(first, rest) => self.and_or(first, rest),
            Node::If { arms, otherwise } => self.if_arms(arms, otherwise.as_deref()),
            Node::Case {
                subject,
                arms,
                line,
            } => {
                let s = self.expand_str(subject).and_then(|t| self.known(t));
                self.case_arms(&s, arms, *line)
            }
            Node::For {
                var,
                words,
                body,
                line,
            } => self.for_loop(var, words.as_deref(), body, *line),
            Node::While {
                cond,
                body,
                until,
                line,
            } => self.while_loop(cond, body, *until, *line),
            Node::Group(v) => self.run(v),
            Node::Subshell(v) => self.subshell(v),
            Node::Cond(toks, l, c) => Ok(self.cond_status(toks, *l, *c)),
            Node::Arith(e, _, _) => Ok(Flow::Next(match self.arith(e) {
                Ok(v) => {
                    if v != 0 {
                        Tri::True
                    } else {
                        Tri::False
                    }
                }
                Err(b) => Tri::Unknown(b.describe()),
            })),
            Node::Function(name, body) => {
                self.funcs.insert(name.clone(), Rc::new((**body).clone()));
                Ok(ok(true))
            }
        }
    }

    fn cond_status(&mut self, toks: &[CondTok], _l: usize, _c: usize) -> Flow {
        Flow::Next(cond::double_bracket(self, toks))
    }

    /// A subshell (`( … )`, a pipeline element): variables do not come back, a launch,
    /// written files and warnings do.
    fn subshell(&mut self, nodes: &[Node]) -> R {
        let mut s = self.clone();
        let f = s.run(nodes)?;
        if self.launch.is_none() {
            self.launch = s.launch;
        }
        self.files = s.files;
        self.warnings = s.warnings;
        Ok(match f {
            Flow::Next(t) | Flow::Return(t) => Flow::Next(t),
            _ => Flow::Next(Tri::Unknown("the exit status of a subshell".into())),
        })
    }

    /// Explores both outcomes of an undecided condition and merges them.
    fn branch(
        &mut self,
        why: Rc<str>,
        detail: &str,
        yes: impl FnOnce(&mut Shell) -> R,
        no: impl FnOnce(&mut Shell) -> R,
    ) -> R {
        let mut other = self.clone();
        let fa = yes(self)?;
        let fb = no(&mut other)?;
        Ok(self.merge(fa, other, fb, &why, detail))
    }

    /// Merges the other outcome of a branch into this one. `detail` is the undecided
    /// condition's own reason: the status when the two outcomes' statuses differ (so
    /// reasons do not nest).
    fn merge(&mut self, fa: Flow, other: Shell, fb: Flow, why: &Rc<str>, detail: &str) -> Flow {
        let mut warnings = std::mem::take(&mut self.warnings);
        for w in &other.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
        match (fa == Flow::Exit, fb == Flow::Exit) {
            (true, true) => {
                self.warnings = warnings;
                return Flow::Exit;
            }
            (true, false) => {
                *self = other;
                self.warnings = warnings;
                return fb;
            }
            (false, true) => {
                self.warnings = warnings;
                return fa;
            }
            _ => {}
        }
        self.warnings = warnings;
        // Each variable once: merging a merged array again would repeat the other side.
        let keys: std::collections::BTreeSet<String> =
            self.vars.keys().chain(other.vars.keys()).cloned().collect();
        for k in keys {
            let v = merge_val(self, self.vars.get(&k), other.vars.get(&k), why);
            self.vars.insert(k, v);
        }
        match (&mut self.launch, other.launch) {
            (Some(a), None) => {
                a.cond.get_or_insert_with(|| why.clone());
            }
            (None, Some(mut b)) => {
                b.cond.get_or_insert_with(|| why.clone());
                self.launch = Some(b);
            }
            _ => {}
        }
        for (k, f) in other.files {
            match self.files.get(&k) {
                Some(mine) if *mine != f => {
                    let mut u = f.clone();
                    u.text = Err(why.to_string());
                    self.files.insert(k, u);
                }
                Some(_) => {}
                None => {
                    self.files.insert(k, f);
                }
            }
        }
        for (k, f) in other.funcs {
            self.funcs.entry(k).or_insert(f);
        }
        match (fa, fb) {
            (Flow::Next(a), Flow::Next(b)) if a == b => Flow::Next(a),
            _ => Flow::Next(Tri::Unknown(detail.to_string())),
        }
    }

    fn and_or(&mut self, first: &Node, rest: &[(bool, Node)]) -> R {
        let mut flow = self.node(first)?;
        for (and, n) in rest {
            let Flow::Next(st) = flow else {
                return Ok(flow);
            };
            flow = match (and, st) {
                (true, Tri::True) | (false, Tri::False) => self.node(n)?,
                (true, Tri::False) => ok(false),
                (false, Tri::True) => ok(true),
                (_, Tri::Unknown(d)) => {
                    let (l, c) = node_pos(first);
                    let why = self.why(l, c, "the command list", &d);
                    let skipped = Flow::Next(Tri::Unknown(d.clone()));
                    self.branch(why, &d, |s| s.node(n), |_| Ok(skipped))?
                }
            };
        }
        Ok(flow)
    }

    fn if_arms(&mut self, arms: &[(Vec<Node>, Vec<Node>)], otherwise: Option<&[Node]>) -> R {
        let Some(((cond, body), rest)) = arms.split_first() else {
            return match otherwise {
                Some(o) => self.run(o),
                None => Ok(ok(true)),
            };
        };
        let st = match self.run(cond)? {
            Flow::Next(st) => st,
            f => return Ok(f),
        };
        match st {
            Tri::True => self.run(body),
            Tri::False => self.if_arms(rest, otherwise),
            Tri::Unknown(d) => {
                let (l, c) = cond.first().map_or((0, 0), node_pos);
                let why = self.why(l, c, "the condition", &d);
                self.branch(why, &d, |s| s.run(body), |s| s.if_arms(rest, otherwise))
            }
        }
    }

    fn case_arms(
        &mut self,
        subject: &Result<String, Blocker>,
        arms: &[(Vec<Word>, Vec<Node>)],
        line: usize,
    ) -> R {
        let Some(((pats, body), rest)) = arms.split_first() else {
            return Ok(ok(true));
        };
        let mut st = Tri::False;
        if let Ok(text) = subject {
            for p in pats {
                match cond::case_matches(self, p, text) {
                    Tri::False => {}
                    t => {
                        st = t;
                        break;
                    }
                }
            }
        } else if let Err(b) = subject {
            st = Tri::Unknown(b.describe());
        }
        match st {
            Tri::True => self.run(body),
            Tri::False => self.case_arms(subject, rest, line),
            Tri::Unknown(d) => {
                let why = self.why(line, 1, "the `case`", &d);
                self.branch(
                    why,
                    &d,
                    |s| s.run(body),
                    |s| s.case_arms(subject, rest, line),
                )
            }
        }
    }

    /// Runs a loop body once; `Some` ends the loop with that flow.
    fn iteration(&mut self, body: &[Node]) -> Result<Option<Flow>, MegatronError> {
        Ok(match self.run(body)? {
            Flow::Break => Some(ok(true)),
            f @ (Flow::Exit | Flow::Return(_)) => Some(f),
            _ => None,
        })
    }

    /// A loop whose iterations are not known: its body is explored as run once or not.
    fn unknown_loop(&mut self, body: &[Node], line: usize, detail: &str) -> R {
        let why = self.why(line, 1, "the number of iterations of the loop", detail);
        self.branch(
            why,
            detail,
            |s| s.run(body).map(|_| ok(true)),
            |_| Ok(ok(true)),
        )
    }

    fn for_loop(&mut self, var: &str, words: Option<&[Word]>, body: &[Node], line: usize) -> R {
        let Some(words) = words else {
            return self.unknown_loop(
                body,
                line,
                "it iterates over the script's arguments or a C-style counter",
            );
        };
        let mut items = Vec::new();
        for w in words {
            match self.expand(w, true) {
                Ok(f) => items.extend(f),
                Err(b) => return self.unknown_loop(body, line, &b.describe()),
            }
        }
        if let Some(Err(b)) = items.iter().map(|e| &e.text).find(|t| t.is_err()) {
            let d = b.describe();
            return self.unknown_loop(body, line, &d);
        }
        if items.len() > MAX_LOOP {
            return Err(self.loop_budget(line));
        }
        for it in items {
            self.set_var(var, Val::Scalar(it.text.unwrap_or_default()), line);
            if let Some(f) = self.iteration(body)? {
                return Ok(f);
            }
        }
        Ok(ok(true))
    }

    fn while_loop(&mut self, cond: &[Node], body: &[Node], until: bool, line: usize) -> R {
        for _ in 0..MAX_LOOP {
            let st = match self.run(cond)? {
                Flow::Next(st) => st,
                f => return Ok(f),
            };
            match if until { st.not() } else { st } {
                Tri::False => return Ok(ok(true)),
                Tri::True => {
                    if let Some(f) = self.iteration(body)? {
                        return Ok(f);
                    }
                }
                Tri::Unknown(d) => return self.unknown_loop(body, line, &d),
            }
        }
        Err(self.loop_budget(line))
    }

    /// A loop at `line` that has run [`MAX_LOOP`] times and would run on: refused, naming
    /// the script and the line, rather than read as if it had ended (the values it sets
    /// would be whatever the last of the iterations left).
    fn loop_budget(&self, line: usize) -> MegatronError {
        MegatronError::Syntax {
            at: format!("{}:{line}:1", self.path),
            field: "loop".into(),
            expected: format!(
                "a loop that ends within {MAX_LOOP} iterations (this one runs on: an endless \
                 loop, or one far longer than a launch script's); the reader cannot evaluate \
                 the script past it"
            ),
        }
    }

    pub fn assign(&mut self, a: &Assign) -> Result<(), MegatronError> {
        let v = match &a.value {
            AssignValue::Scalar(w) => match self.expand_str(w) {
                Ok(s) => Val::Scalar(s),
                Err(b) => Val::Unknown(b),
            },
            AssignValue::Array(ws) => Val::Array(self.expand_elems(ws)),
        };
        let v = match (a.append, self.vars.get(&a.name), v) {
            (true, Some(Val::Scalar(x)), Val::Scalar(y)) => Val::Scalar(format!("{x}{y}")),
            (true, Some(Val::Array(x)), Val::Array(y)) => {
                Val::Array(x.iter().cloned().chain(y).collect())
            }
            (true, Some(Val::Array(x)), Val::Scalar(y)) => {
                let mut x = x.clone();
                if let Some(Ok(t)) = x.first_mut().map(|e| &mut e.text) {
                    t.push_str(&y);
                }
                Val::Array(x)
            }
            (true, Some(Val::Unknown(b)), _) => Val::Unknown(b.clone()),
            (_, _, v) => v,
        };
        // Copying a value costs time in proportion to its size.
        let bytes = match &v {
            Val::Scalar(s) => s.len(),
            Val::Array(x) => x
                .iter()
                .map(|e| e.text.as_ref().map_or(0, String::len) + 16)
                .sum(),
            Val::Unknown(_) => 0,
        };
        self.charge(bytes as u64 / 64, a.line)?;
        self.set_var(&a.name, v, a.line);
        Ok(())
    }

    /// Array elements (or command arguments): each word's fields, a word that cannot be
    /// expanded kept as one unknown element at its own position.
    pub fn expand_elems(&mut self, ws: &[Word]) -> Vec<Elem> {
        let mut out = Vec::new();
        for w in ws {
            match self.expand(w, true) {
                Ok(f) => out.extend(f.into_iter().map(|mut e| {
                    let partly = e
                        .text
                        .as_ref()
                        .map_or(true, |t| t.contains(super::expand::MARK));
                    if partly && e.raw.is_none() {
                        e.raw = Some(Rc::from(w.raw.as_str()));
                    }
                    e
                })),
                Err(b) => out.push(Elem {
                    text: Err(b),
                    line: w.line,
                    col: w.col,
                    cond: None,
                    side: false,
                    raw: Some(Rc::from(w.raw.as_str())),
                    shown: None,
                }),
            }
        }
        out
    }

    fn simple(&mut self, s: &Simple) -> R {
        self.charge(1 + s.words.len() as u64, s.line)?;
        for a in &s.assigns {
            self.assign(a)?;
        }
        if s.words.is_empty() {
            return Ok(ok(true));
        }
        let fields = self.expand_elems(&s.words);
        if let Some(script) = shell_dash_c(&fields) {
            return self.eval_text(script, s);
        }
        let runs = !matches!(fields.first().map(|e| &e.text), Some(Ok(t)) if NOT_LAUNCHERS.contains(&t.as_str()));
        if let Some(pos) = fields.iter().position(is_pretrain).filter(|_| runs) {
            if self.launch.is_none() {
                self.launch = Some(Launch {
                    launcher: fields[..pos].to_vec(),
                    args: fields[pos + 1..].to_vec(),
                    line: s.line,
                    col: s.col,
                    cond: None,
                });
            }
            return Ok(Flow::Next(Tri::Unknown(
                "the training run's exit status".into(),
            )));
        }
        let name = match fields.first().map(|e| &e.text) {
            Some(Ok(t)) => t.clone(),
            Some(Err(b)) => return Ok(Flow::Next(Tri::Unknown(b.describe()))),
            None => return Ok(ok(true)),
        };
        self.write_files(s, &name, &fields[1..]);
        self.builtin(&name, &fields[1..], s)
    }

    fn builtin(&mut self, name: &str, args: &[Elem], s: &Simple) -> R {
        let texts: Vec<Result<String, Blocker>> = args
            .iter()
            .map(|e| e.text.clone().and_then(|t| self.known(t)))
            .collect();
        Ok(match name {
            "true" | ":" => ok(true),
            "false" => ok(false),
            "test" => Flow::Next(cond::test(&texts)),
            "[" => match texts.split_last() {
                Some((Ok(last), inner)) if last == "]" => Flow::Next(cond::test(inner)),
                _ => ok(false),
            },
            "exit" => Flow::Exit,
            "return" => Flow::Return(Tri::Unknown("a function's return status".into())),
            "break" => Flow::Break,
            "continue" => Flow::Continue,
            "export" | "local" | "declare" | "readonly" | "typeset" => ok(true),
            "unset" => {
                for t in texts.iter().flatten().filter(|t| !t.starts_with('-')) {
                    self.vars.remove(t);
                }
                ok(true)
            }
            "shift" => {
                if let Some(p) = &mut self.positional {
                    if !p.is_empty() {
                        p.remove(0);
                    }
                }
                ok(true)
            }
            "set" if matches!(texts.first(), Some(Ok(t)) if t == "--") => {
                self.positional = texts[1..]
                    .iter()
                    .cloned()
                    .collect::<Result<Vec<_>, _>>()
                    .ok();
                ok(true)
            }
            "eval" => return self.eval(args, s),
            "source" | "." => {
                let file = texts
                    .first()
                    .and_then(|t| t.as_ref().ok())
                    .cloned()
                    .unwrap_or_default();
                self.warnings.push(Warning {
                    at: format!("{}:{}:{}", self.path, s.line, s.col),
                    field: "source".into(),
                    message: format!("`{name} {file}` is not followed: variables it would set are unknown to the reader"),
                });
                Flow::Next(Tri::Unknown(format!("the exit status of `{name} {file}`")))
            }
            f if self.funcs.contains_key(f) => return self.call(f, &texts, s.line),
            other => Flow::Next(Tri::Unknown(format!("the exit status of `{other}`"))),
        })
    }

    /// `eval WORDS`: the words joined and run as a script (an unknown piece stays a
    /// marker, unknown again wherever it is used).
    fn eval(&mut self, args: &[Elem], s: &Simple) -> R {
        let mut parts = Vec::new();
        for e in args {
            match &e.text {
                Ok(t) => parts.push(t.clone()),
                Err(b) => return Ok(Flow::Next(Tri::Unknown(b.describe()))),
            }
        }
        self.eval_text(parts.join(" "), s)
    }

    fn eval_text(&mut self, text: String, s: &Simple) -> R {
        let raw: Vec<String> = s.words.iter().map(|w| w.raw.clone()).collect();
        if self.calls >= MAX_CALLS {
            return Ok(Flow::Next(Tri::Unknown("`eval` nested too deeply".into())));
        }
        self.charge(text.len() as u64 / 16 + 1, s.line)?;
        let nodes = match super::ast::parse(super::lex::tokens(&text)) {
            Ok(n) => n,
            Err((_, _, m)) => {
                self.warnings.push(Warning {
                    at: format!("{}:{}:{}", self.path, s.line, s.col),
                    field: "eval".into(),
                    message: format!(
                        "`eval {}` does not parse ({m}): not followed",
                        raw.join(" ")
                    ),
                });
                return Ok(Flow::Next(Tri::Unknown("the exit status of `eval`".into())));
            }
        };
        let nodes = relocate(nodes, s.line, s.col);
        self.calls += 1;
        let r = self.run(&nodes);
        self.calls -= 1;
        r
    }

    fn call(&mut self, f: &str, args: &[Result<String, Blocker>], line: usize) -> R {
        if self.calls >= MAX_CALLS {
            return Ok(Flow::Next(Tri::Unknown(format!(
                "calls of `{f}` nested too deeply"
            ))));
        }
        let Some(body) = self.funcs.get(f).cloned() else {
            return Ok(ok(true));
        };
        self.charge(1, line)?;
        let saved = self.positional.take();
        self.positional = args.iter().cloned().collect::<Result<Vec<_>, _>>().ok();
        self.calls += 1;
        let r = self.node(&body);
        self.calls -= 1;
        self.positional = saved;
        Ok(match r? {
            Flow::Exit => Flow::Exit,
            Flow::Next(t) | Flow::Return(t) => Flow::Next(t),
            _ => ok(true),
        })
    }

    /// `cat <<EOF > file`, `cat > file <<EOF`, `echo … > file`: what the script writes,
    /// so a DeepSpeed config it generates can be read back.
    fn write_files(&mut self, s: &Simple, name: &str, args: &[Elem]) {
        for r in &s.redirs {
            if !matches!(r.op.as_str(), ">" | ">>" | ">|") {
                continue;
            }
            let Some(target) = &r.target else { continue };
            // A partly unknown path (`$(pwd)/ds.json`) is kept as shown, so a flag naming
            // it through the same variable finds it.
            let Ok(path) = self.expand_str(target).map(|p| self.shown(&p)) else {
                continue;
            };
            let doc = s.redirs.iter().find_map(|r| r.heredoc.as_ref());
            let (text, line) = match (name, doc) {
                ("cat", Some(h)) if h.quoted => (Ok(h.body.clone()), h.line),
                ("cat", Some(h)) => {
                    let w = lex_quoted(&h.body, h.line);
                    (self.expand_str(&w).map_err(|b| b.describe()), h.line)
                }
                ("echo" | "printf", _) => {
                    let t: Result<Vec<String>, Blocker> =
                        args.iter().map(|e| e.text.clone()).collect();
                    (t.map(|v| v.join(" ")).map_err(|b| b.describe()), s.line)
                }
                _ => continue,
            };
            let text = text.and_then(|t| self.known(t).map_err(|b| b.describe()));
            let text = match (r.op.as_str(), self.files.get(&path)) {
                (">>", Some(WrittenFile { text: Ok(old), .. })) => {
                    text.map(|t| format!("{old}{t}"))
                }
                _ => text,
            };
            self.files.insert(
                path,
                WrittenFile {
                    path: self.path.clone(),
                    text,
                    line,
                },
            );
        }
    }
}

/// Two texts that differ only between common leading and trailing words: those words
/// stay known and the differing words become one marker showing both versions — the
/// shape `options="$options --bf16"` under an undecided `if` takes. (Blanks between
/// words become single spaces, which field splitting does anyway.)
fn merge_scalars(sh: &Shell, x: &str, y: &str, why: &Rc<str>) -> String {
    let (wx, wy): (Vec<&str>, Vec<&str>) = (
        x.split_whitespace().collect(),
        y.split_whitespace().collect(),
    );
    let k = wx.iter().zip(&wy).take_while(|(a, b)| a == b).count();
    let m = wx[k..]
        .iter()
        .rev()
        .zip(wy[k..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (mx, my) = (wx[k..wx.len() - m].join(" "), wy[k..wy.len() - m].join(" "));
    if mx.is_empty() && my.is_empty() {
        return x.to_string();
    }
    let shown = format!("`{}` or `{}`", sh.shown(&mx), sh.shown(&my));
    let marker = sh.mark(Blocker::Why(why.clone()), &shown);
    let words: Vec<&str> = wx[..k]
        .iter()
        .copied()
        .chain(std::iter::once(marker.as_str()))
        .chain(wx[wx.len() - m..].iter().copied())
        .collect();
    words.join(" ")
}

/// The value after a branch point: equal values stay; arrays keep their common prefix
/// and mark the rest with the condition; texts keep their common start and end; anything
/// else differing is unknown.
fn merge_val(sh: &Shell, a: Option<&Val>, b: Option<&Val>, why: &Rc<str>) -> Val {
    // `a` is the branch where the condition held, `b` the other.
    let mark = |e: &Elem, side: bool| match e.cond {
        Some(_) => e.clone(),
        None => Elem {
            cond: Some(why.clone()),
            side,
            ..e.clone()
        },
    };
    match (a, b) {
        (Some(x), Some(y)) if x == y => x.clone(),
        (Some(Val::Array(x)), Some(Val::Array(y))) => {
            let k = x.iter().zip(y).take_while(|(p, q)| p == q).count();
            Val::Array(
                x[..k]
                    .iter()
                    .cloned()
                    .chain(x[k..].iter().map(|e| mark(e, true)))
                    .chain(y[k..].iter().map(|e| mark(e, false)))
                    .collect(),
            )
        }
        (Some(Val::Array(x)), None) => Val::Array(x.iter().map(|e| mark(e, true)).collect()),
        (None, Some(Val::Array(y))) => Val::Array(y.iter().map(|e| mark(e, false)).collect()),
        (Some(Val::Scalar(x)), Some(Val::Scalar(y))) => Val::Scalar(merge_scalars(sh, x, y, why)),
        _ => Val::Unknown(Blocker::Why(why.clone())),
    }
}

/// Commands an `eval` parsed from a string, placed at the `eval` (their own positions are
/// in the string, not the file).
fn relocate(nodes: Vec<Node>, line: usize, col: usize) -> Vec<Node> {
    fn words(ws: &mut [Word], line: usize, col: usize) {
        for w in ws {
            w.line = line;
            w.col = col;
        }
    }
    fn node(n: &mut Node, line: usize, col: usize) {
        match n {
            Node::Simple(s) => {
                s.line = line;
                s.col = col;
                words(&mut s.words, line, col);
                for a in &mut s.assigns {
                    a.line = line;
                    match &mut a.value {
                        AssignValue::Scalar(w) => words(std::slice::from_mut(w), line, col),
                        AssignValue::Array(ws) => words(ws, line, col),
                    }
                }
            }
            Node::Pipeline(v, _) | Node::Group(v) | Node::Subshell(v) => {
                v.iter_mut().for_each(|n| node(n, line, col))
            }
            Node::AndOr(f, rest) => {
                node(f, line, col);
                rest.iter_mut().for_each(|(_, n)| node(n, line, col));
            }
            Node::If { arms, otherwise } => {
                for (c, b) in arms {
                    c.iter_mut()
                        .chain(b.iter_mut())
                        .for_each(|n| node(n, line, col));
                }
                otherwise
                    .iter_mut()
                    .flatten()
                    .for_each(|n| node(n, line, col));
            }
            Node::Case { line: l, arms, .. } => {
                *l = line;
                arms.iter_mut()
                    .flat_map(|a| a.1.iter_mut())
                    .for_each(|n| node(n, line, col));
            }
            Node::For { line: l, body, .. } => {
                *l = line;
                body.iter_mut().for_each(|n| node(n, line, col));
            }
            Node::While {
                line: l,
                cond,
                body,
                ..
            } => {
                *l = line;
                cond.iter_mut()
                    .chain(body.iter_mut())
                    .for_each(|n| node(n, line, col));
            }
            Node::Cond(_, l, c) | Node::Arith(_, l, c) => {
                *l = line;
                *c = col;
            }
            Node::Function(_, b) => node(b, line, col),
        }
    }
    let mut nodes = nodes;
    nodes.iter_mut().for_each(|n| node(n, line, col));
    nodes
}
