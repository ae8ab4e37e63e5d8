//! Bash commands as a tree: simple commands (assignments, words, redirections),
//! pipelines, `&&`/`||` lists, `if`/`elif`/`else`, `case`, `for`, `while`/`until`,
//! groups, subshells, `[[ … ]]`, `(( … ))` and function definitions.
//!
//! The parser is recursive descent over [`super::lex`] tokens, depth-limited so crafted
//! nesting cannot exhaust the stack. A script bash would reject (an `if` without `fi`)
//! is an error naming the line of the construct left open.

use super::lex::{Heredoc, Part, Tok, Token, Word};

/// `NAME=value`, `NAME+=value`, `NAME=( … )`.
#[derive(Clone, Debug)]
pub(crate) struct Assign {
    pub name: String,
    pub append: bool,
    pub value: AssignValue,
    pub line: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum AssignValue {
    Scalar(Word),
    Array(Vec<Word>),
}

#[derive(Clone, Debug)]
pub(crate) struct Redir {
    pub op: String,
    pub target: Option<Word>,
    pub heredoc: Option<Heredoc>,
}

#[derive(Clone, Debug)]
pub(crate) struct Simple {
    pub assigns: Vec<Assign>,
    pub words: Vec<Word>,
    pub redirs: Vec<Redir>,
    pub line: usize,
    pub col: usize,
}

/// An element of `[[ … ]]`.
#[derive(Clone, Debug)]
pub(crate) enum CondTok {
    Word(Word),
    And,
    Or,
    Not,
    Open,
    Close,
    /// `<` / `>` string comparison.
    Less,
    Greater,
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    Simple(Simple),
    Pipeline(Vec<Node>, bool),
    /// First command, then (`true` for `&&`, command) pairs.
    AndOr(Box<Node>, Vec<(bool, Node)>),
    If {
        arms: Vec<(Vec<Node>, Vec<Node>)>,
        otherwise: Option<Vec<Node>>,
    },
    Case {
        subject: Word,
        arms: Vec<(Vec<Word>, Vec<Node>)>,
        line: usize,
    },
    For {
        var: String,
        words: Option<Vec<Word>>,
        body: Vec<Node>,
        line: usize,
    },
    While {
        cond: Vec<Node>,
        body: Vec<Node>,
        until: bool,
        line: usize,
    },
    Group(Vec<Node>),
    Subshell(Vec<Node>),
    Cond(Vec<CondTok>, usize, usize),
    Arith(String, usize, usize),
    Function(String, Box<Node>),
}

/// A syntax error: line, column, message.
pub(crate) type ParseError = (usize, usize, String);

const MAX_DEPTH: usize = 100;

const RESERVED_END: &[&str] = &["then", "elif", "else", "fi", "do", "done", "esac", "}"];

pub(crate) struct Parser {
    toks: Vec<Token>,
    i: usize,
    depth: usize,
}

/// Parses a whole script.
pub(crate) fn parse(toks: Vec<Token>) -> Result<Vec<Node>, ParseError> {
    let mut p = Parser {
        toks,
        i: 0,
        depth: 0,
    };
    let nodes = p.list(&[])?;
    match p.toks.get(p.i) {
        None => Ok(nodes),
        Some(t) => Err((t.line, t.col, format!("unexpected {}", describe(&t.tok)))),
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("`{}`", w.raw),
        Tok::RParen => "`)`".into(),
        Tok::DSemi => "`;;`".into(),
        other => format!("{other:?}"),
    }
}

/// `NAME=rest` / `NAME+=rest` at the start of a word.
fn assignment_head(w: &Word) -> Option<(String, bool, Word)> {
    let Some(Part::Lit(s, false)) = w.parts.first() else {
        return None;
    };
    let n = s
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    if n == 0 || s.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let (append, rest) = if let Some(r) = s[n..].strip_prefix("+=") {
        (true, r)
    } else {
        (false, s[n..].strip_prefix('=')?)
    };
    let mut parts = w.parts.clone();
    parts[0] = Part::Lit(rest.to_string(), false);
    parts.retain(|p| !matches!(p, Part::Lit(s, false) if s.is_empty()));
    let value = Word {
        parts,
        raw: w.raw[n + 1 + usize::from(append)..].to_string(),
        line: w.line,
        col: w.col,
    };
    Some((s[..n].to_string(), append, value))
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i).map(|t| &t.tok)
    }

    fn pos(&self) -> (usize, usize) {
        self.toks
            .get(self.i)
            .or_else(|| self.toks.last())
            .map_or((1, 1), |t| (t.line, t.col))
    }

    fn word_is(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w.plain() == Some(s))
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Some(Tok::Newline)) {
            self.i += 1;
        }
    }

    fn expect_word(
        &mut self,
        s: &str,
        opened: (usize, usize),
        what: &str,
    ) -> Result<(), ParseError> {
        self.skip_newlines();
        if self.word_is(s) {
            self.i += 1;
            Ok(())
        } else {
            Err((
                opened.0,
                opened.1,
                format!("expected `{s}` closing the `{what}` opened here"),
            ))
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let (l, c) = self.pos();
            return Err((
                l,
                c,
                format!("commands nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    /// Commands separated by newlines, `;` or `&`, up to a reserved word in `stop` (or any
    /// closing reserved word), `)`, `;;` or the end.
    fn list(&mut self, stop: &[&str]) -> Result<Vec<Node>, ParseError> {
        self.enter()?;
        let mut out = Vec::new();
        loop {
            while matches!(self.peek(), Some(Tok::Newline | Tok::Semi | Tok::Amp)) {
                self.i += 1;
            }
            match self.peek() {
                None | Some(Tok::RParen | Tok::DSemi) => break,
                Some(Tok::Word(w))
                    if w.plain()
                        .is_some_and(|s| stop.contains(&s) || RESERVED_END.contains(&s)) =>
                {
                    break
                }
                _ => out.push(self.and_or()?),
            }
        }
        self.depth -= 1;
        Ok(out)
    }

    fn and_or(&mut self) -> Result<Node, ParseError> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        while let Some(op @ (Tok::And | Tok::Or)) = self.peek() {
            let and = *op == Tok::And;
            self.i += 1;
            self.skip_newlines();
            rest.push((and, self.pipeline()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::AndOr(Box::new(first), rest)
        })
    }

    fn pipeline(&mut self) -> Result<Node, ParseError> {
        let negate = self.word_is("!");
        if negate {
            self.i += 1;
        }
        let mut cmds = vec![self.command()?];
        while matches!(self.peek(), Some(Tok::Pipe)) {
            self.i += 1;
            self.skip_newlines();
            cmds.push(self.command()?);
        }
        Ok(if cmds.len() == 1 && !negate {
            cmds.remove(0)
        } else {
            Node::Pipeline(cmds, negate)
        })
    }

    fn command(&mut self) -> Result<Node, ParseError> {
        self.enter()?;
        let (line, col) = self.pos();
        let node = match self.peek() {
            Some(Tok::LParen) => {
                self.i += 1;
                let body = self.list(&[])?;
                if !matches!(self.peek(), Some(Tok::RParen)) {
                    return Err((
                        line,
                        col,
                        "expected `)` closing the subshell opened here".into(),
                    ));
                }
                self.i += 1;
                Node::Subshell(body)
            }
            Some(Tok::Arith(a)) => {
                let a = a.clone();
                self.i += 1;
                Node::Arith(a, line, col)
            }
            Some(Tok::Word(w)) => match w.plain() {
                Some("if") => self.if_clause()?,
                Some("case") => self.case_clause()?,
                Some("for") => self.for_clause()?,
                Some(k @ ("while" | "until")) => {
                    let until = k == "until";
                    self.i += 1;
                    let cond = self.list(&["do"])?;
                    let body = self.do_group((line, col))?;
                    Node::While {
                        cond,
                        body,
                        until,
                        line,
                    }
                }
                Some("{") => {
                    self.i += 1;
                    let body = self.list(&["}"])?;
                    self.expect_word("}", (line, col), "{")?;
                    Node::Group(body)
                }
                Some("[[") => self.cond_command(line, col)?,
                Some("function") => {
                    self.i += 1;
                    let name = match self.peek() {
                        Some(Tok::Word(w)) => w.raw.clone(),
                        _ => return Err((line, col, "expected a function name".into())),
                    };
                    self.i += 1;
                    if matches!(self.peek(), Some(Tok::LParen))
                        && matches!(self.toks.get(self.i + 1).map(|t| &t.tok), Some(Tok::RParen))
                    {
                        self.i += 2;
                    }
                    self.function_body(name)?
                }
                _ if matches!(self.toks.get(self.i + 1).map(|t| &t.tok), Some(Tok::LParen))
                    && matches!(self.toks.get(self.i + 2).map(|t| &t.tok), Some(Tok::RParen))
                    && assignment_head(w).is_none() =>
                {
                    let name = w.raw.clone();
                    self.i += 3;
                    self.function_body(name)?
                }
                _ => self.simple()?,
            },
            _ => self.simple()?,
        };
        // Redirections after a compound command (`done > log`) are read and dropped.
        while let Some(Tok::Redir { .. }) = self.peek() {
            self.i += 1;
            if matches!(self.peek(), Some(Tok::Word(_))) {
                self.i += 1;
            }
        }
        self.depth -= 1;
        Ok(node)
    }

    fn function_body(&mut self, name: String) -> Result<Node, ParseError> {
        self.skip_newlines();
        let body = self.command()?;
        Ok(Node::Function(name, Box::new(body)))
    }

    fn do_group(&mut self, opened: (usize, usize)) -> Result<Vec<Node>, ParseError> {
        self.expect_word("do", opened, "loop")?;
        let body = self.list(&["done"])?;
        self.expect_word("done", opened, "loop")?;
        Ok(body)
    }

    fn if_clause(&mut self) -> Result<Node, ParseError> {
        let opened = self.pos();
        self.i += 1;
        let mut arms = Vec::new();
        let mut otherwise = None;
        loop {
            let cond = self.list(&["then"])?;
            self.expect_word("then", opened, "if")?;
            let body = self.list(&["elif", "else", "fi"])?;
            arms.push((cond, body));
            if self.word_is("elif") {
                self.i += 1;
                continue;
            }
            if self.word_is("else") {
                self.i += 1;
                otherwise = Some(self.list(&["fi"])?);
            }
            self.expect_word("fi", opened, "if")?;
            return Ok(Node::If { arms, otherwise });
        }
    }

    fn case_clause(&mut self) -> Result<Node, ParseError> {
        let opened = self.pos();
        self.i += 1;
        let Some(Tok::Word(subject)) = self.peek().cloned() else {
            return Err((opened.0, opened.1, "expected a word after `case`".into()));
        };
        self.i += 1;
        self.expect_word("in", opened, "case")?;
        let mut arms = Vec::new();
        loop {
            self.skip_newlines();
            if self.word_is("esac") {
                self.i += 1;
                return Ok(Node::Case {
                    subject,
                    arms,
                    line: opened.0,
                });
            }
            if matches!(self.peek(), Some(Tok::LParen)) {
                self.i += 1;
            }
            let mut pats = Vec::new();
            loop {
                match self.peek().cloned() {
                    Some(Tok::Word(w)) => {
                        pats.push(w);
                        self.i += 1;
                    }
                    _ => {
                        return Err((
                            opened.0,
                            opened.1,
                            "expected a pattern in the `case` opened here".into(),
                        ))
                    }
                }
                match self.peek() {
                    Some(Tok::Pipe) => self.i += 1,
                    Some(Tok::RParen) => {
                        self.i += 1;
                        break;
                    }
                    _ => {
                        return Err((
                            opened.0,
                            opened.1,
                            "expected `)` after a pattern of the `case` opened here".into(),
                        ))
                    }
                }
            }
            let body = self.list(&["esac"])?;
            arms.push((pats, body));
            if matches!(self.peek(), Some(Tok::DSemi)) {
                self.i += 1;
            } else if !self.word_is("esac") {
                return Err((
                    opened.0,
                    opened.1,
                    "expected `;;` or `esac` in the `case` opened here".into(),
                ));
            }
        }
    }

    fn for_clause(&mut self) -> Result<Node, ParseError> {
        let opened = self.pos();
        self.i += 1;
        let var = match self.peek().cloned() {
            Some(Tok::Word(w)) => {
                self.i += 1;
                w.raw
            }
            // C-style `for (( … ))`: iterations unknown.
            Some(Tok::Arith(_)) => {
                self.i += 1;
                String::new()
            }
            _ => return Err((opened.0, opened.1, "expected a variable after `for`".into())),
        };
        let mut words = None;
        while matches!(self.peek(), Some(Tok::Newline)) {
            self.i += 1;
        }
        if self.word_is("in") {
            self.i += 1;
            let mut ws = Vec::new();
            while let Some(Tok::Word(w)) = self.peek() {
                ws.push(w.clone());
                self.i += 1;
            }
            words = Some(ws);
        }
        while matches!(self.peek(), Some(Tok::Newline | Tok::Semi)) {
            self.i += 1;
        }
        let body = self.do_group(opened)?;
        // No `in` (positional parameters) or a C-style loop: iterations unknown.
        let words = if var.is_empty() { None } else { words };
        Ok(Node::For {
            var,
            words,
            body,
            line: opened.0,
        })
    }

    fn cond_command(&mut self, line: usize, col: usize) -> Result<Node, ParseError> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let t = self.peek().cloned();
            self.i += 1;
            out.push(match t {
                Some(Tok::Word(w)) if w.plain() == Some("]]") => {
                    return Ok(Node::Cond(out, line, col))
                }
                Some(Tok::Word(w)) if w.plain() == Some("!") => CondTok::Not,
                Some(Tok::Word(w)) => CondTok::Word(w),
                Some(Tok::And) => CondTok::And,
                Some(Tok::Or) => CondTok::Or,
                Some(Tok::LParen) => CondTok::Open,
                Some(Tok::RParen) => CondTok::Close,
                Some(Tok::Redir { op, .. }) if op == "<" => CondTok::Less,
                Some(Tok::Redir { op, .. }) if op == ">" => CondTok::Greater,
                _ => {
                    return Err((
                        line,
                        col,
                        "expected `]]` closing the `[[` opened here".into(),
                    ))
                }
            });
        }
    }

    fn simple(&mut self) -> Result<Node, ParseError> {
        let (line, col) = self.pos();
        let mut s = Simple {
            assigns: Vec::new(),
            words: Vec::new(),
            redirs: Vec::new(),
            line,
            col,
        };
        loop {
            match self.peek().cloned() {
                Some(Tok::Word(w)) => {
                    self.i += 1;
                    let decl = s.words.first().is_some_and(|d| {
                        matches!(
                            d.plain(),
                            Some("export" | "local" | "declare" | "readonly" | "typeset")
                        )
                    });
                    match assignment_head(&w).filter(|_| s.words.is_empty() || decl) {
                        Some((name, append, value)) => {
                            s.assigns.push(self.assignment(name, append, value, &w)?)
                        }
                        None => s.words.push(w),
                    }
                }
                Some(Tok::Redir { op, heredoc }) => {
                    self.i += 1;
                    let target = match (&heredoc, self.peek()) {
                        (None, Some(Tok::Word(w))) => {
                            let w = w.clone();
                            self.i += 1;
                            Some(w)
                        }
                        _ => None,
                    };
                    s.redirs.push(Redir {
                        op,
                        target,
                        heredoc,
                    });
                }
                _ => break,
            }
        }
        if s.assigns.is_empty() && s.words.is_empty() && s.redirs.is_empty() {
            let what = self
                .peek()
                .map_or("the end of the script".to_string(), describe);
            return Err((line, col, format!("expected a command, found {what}")));
        }
        Ok(Node::Simple(s))
    }

    /// The value of an assignment; `NAME=(` opens an array literal, which may span lines.
    fn assignment(
        &mut self,
        name: String,
        append: bool,
        value: Word,
        w: &Word,
    ) -> Result<Assign, ParseError> {
        let empty = value.parts.is_empty();
        let value = if empty && matches!(self.peek(), Some(Tok::LParen)) {
            self.i += 1;
            let mut elems = Vec::new();
            loop {
                match self.peek().cloned() {
                    Some(Tok::Word(e)) => {
                        elems.push(e);
                        self.i += 1;
                    }
                    Some(Tok::Newline) => self.i += 1,
                    Some(Tok::RParen) => {
                        self.i += 1;
                        break;
                    }
                    _ => {
                        return Err((
                            w.line,
                            w.col,
                            format!("expected `)` closing the array `{name}=(` opened here"),
                        ))
                    }
                }
            }
            AssignValue::Array(elems)
        } else {
            AssignValue::Scalar(value)
        };
        Ok(Assign {
            name,
            append,
            value,
            line: w.line,
        })
    }
}
