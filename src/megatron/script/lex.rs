//! Bash tokens: words (with their quoted and expandable parts), operators, redirections
//! and here-documents, each with its 1-based line and column.

/// One piece of a word.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    /// Literal text; `true` when it was quoted (so glob characters in it are literal).
    Lit(String, bool),
    /// `$NAME`, `${NAME…}`: name, operator (`:-`, `-`, `:=`, `=`, `:+`, `+`), operand text,
    /// `[@]`/`[*]`, and whether it stood inside double quotes.
    Var {
        name: String,
        op: Option<String>,
        arg: String,
        all: bool,
        quoted: bool,
    },
    /// `$(( … ))`, raw text.
    Arith(String),
    /// `$( … )`, `` `…` `` or an unsupported `${…}` form: no value.
    Cmd(String),
}

/// A word as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Word {
    pub parts: Vec<Part>,
    /// The source text of the word.
    pub raw: String,
    pub line: usize,
    pub col: usize,
}

impl Word {
    /// The word's text when it is one unquoted literal (reserved words, names).
    pub fn plain(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Lit(s, false)] => Some(s),
            _ => None,
        }
    }
}

/// A here-document body.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Heredoc {
    pub body: String,
    /// Quoted delimiter (`<<'EOF'`): the body is not expanded.
    pub quoted: bool,
    /// Line of the body's first line.
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Word(Word),
    Newline,
    Semi,
    /// `;;`, `;&`, `;;&`: end of a `case` arm.
    DSemi,
    And,
    Or,
    Pipe,
    Amp,
    LParen,
    RParen,
    /// `(( … ))` as a command: raw text.
    Arith(String),
    /// A redirection operator (`>`, `>>`, `<`, `<<`, `2>&1`'s `>&`, …); a here-document
    /// carries its body.
    Redir {
        op: String,
        heredoc: Option<Heredoc>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
    line: usize,
    line_start: usize,
    out: Vec<Token>,
    /// Here-documents waiting for the end of their line: token index, delimiter, `<<-`.
    pending: Vec<(usize, String, bool)>,
}

/// Splits a script into tokens. Never fails: unterminated quotes and here-documents end
/// at the end of the input, as bash reads them (with a warning there).
pub(crate) fn tokens(text: &str) -> Vec<Token> {
    let mut lx = Lexer {
        s: text.as_bytes(),
        i: 0,
        line: 1,
        line_start: 0,
        out: Vec::new(),
        pending: Vec::new(),
    };
    while let Some(t) = lx.next() {
        lx.out.push(t);
        if matches!(lx.out.last().map(|t| &t.tok), Some(Tok::Newline)) {
            lx.read_heredocs();
        }
    }
    lx.read_heredocs();
    lx.out
}

/// Lexes the operand of `${X:-…}` (or a here-document body) as the inside of double
/// quotes, so `$X`, `${…}`, `$((…))` expand and quotes are literal.
pub(crate) fn lex_quoted(text: &str, line: usize) -> Word {
    let mut lx = Lexer {
        s: text.as_bytes(),
        i: 0,
        line,
        line_start: 0,
        out: Vec::new(),
        pending: Vec::new(),
    };
    let mut parts = Vec::new();
    let mut lit = String::new();
    lx.double_quoted_body(&mut parts, &mut lit, None);
    flush(&mut lit, &mut parts, true);
    Word {
        parts,
        raw: text.to_string(),
        line,
        col: 1,
    }
}

/// Lexes the operand of `${X:-…}` or the body of `$(( … ))` as bash reads them: quotes
/// are removed, `$` expands, blanks and operators are plain text.
pub(crate) fn lex_operand(text: &str, line: usize) -> Word {
    let mut lx = Lexer {
        s: text.as_bytes(),
        i: 0,
        line,
        line_start: 0,
        out: Vec::new(),
        pending: Vec::new(),
    };
    let mut w = lx.word_until(line, 1, |_| false);
    w.raw = text.to_string();
    w
}

fn flush(lit: &mut String, parts: &mut Vec<Part>, quoted: bool) {
    if !lit.is_empty() {
        parts.push(Part::Lit(std::mem::take(lit), quoted));
    }
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
    )
}

impl Lexer<'_> {
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

    fn text(&self, a: usize, b: usize) -> String {
        String::from_utf8_lossy(&self.s[a..b]).into_owned()
    }

    /// One UTF-8 character (so multi-byte text is never split).
    fn push_char(&mut self, lit: &mut String) {
        let st = self.i;
        self.bump();
        while self.peek(0).is_some_and(|c| (0x80..0xC0).contains(&c)) {
            self.bump();
        }
        lit.push_str(&String::from_utf8_lossy(&self.s[st..self.i]));
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
                    let t = self.text(start, self.i);
                    self.bump();
                    return t;
                }
            }
            self.bump();
        }
        self.text(start, self.i)
    }

    fn skip_blanks(&mut self) -> Option<()> {
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
                _ => return Some(()),
            }
        }
    }

    fn next(&mut self) -> Option<Token> {
        self.skip_blanks()?;
        let (line, col) = (self.line, self.i - self.line_start + 1);
        let tok = match self.operator() {
            Some(t) => t,
            None => {
                let w = self.word(line, col);
                // `2>&1`, `1>log`: the digits are a file descriptor, not a word.
                if matches!(self.peek(0), Some(b'<' | b'>'))
                    && !w.raw.is_empty()
                    && w.raw.bytes().all(|c| c.is_ascii_digit())
                {
                    self.operator()?
                } else {
                    Tok::Word(w)
                }
            }
        };
        Some(Token { tok, line, col })
    }

    /// An operator at the current position, if any.
    fn operator(&mut self) -> Option<Tok> {
        let (c, d, e) = (self.peek(0)?, self.peek(1), self.peek(2));
        let (tok, n) = match (c, d, e) {
            (b'\n', _, _) => (Tok::Newline, 1),
            (b';', Some(b';'), Some(b'&')) => (Tok::DSemi, 3),
            (b';', Some(b';' | b'&'), _) => (Tok::DSemi, 2),
            (b';', _, _) => (Tok::Semi, 1),
            (b'&', Some(b'&'), _) => (Tok::And, 2),
            (b'&', Some(b'>'), Some(b'>')) => (redir("&>>"), 3),
            (b'&', Some(b'>'), _) => (redir("&>"), 2),
            (b'&', _, _) => (Tok::Amp, 1),
            (b'|', Some(b'|'), _) => (Tok::Or, 2),
            (b'|', Some(b'&'), _) => (Tok::Pipe, 2),
            (b'|', _, _) => (Tok::Pipe, 1),
            (b'(', Some(b'('), _) => {
                self.bump();
                self.bump();
                let body = self.until_matching(b'(', b')');
                if self.peek(0) == Some(b')') {
                    self.bump();
                }
                return Some(Tok::Arith(body));
            }
            (b'(', _, _) => (Tok::LParen, 1),
            (b')', _, _) => (Tok::RParen, 1),
            (b'<', Some(b'<'), Some(b'<')) => (redir("<<<"), 3),
            (b'<', Some(b'<'), _) => return Some(self.heredoc_start()),
            (b'>', Some(b'>'), _) => (redir(">>"), 2),
            (b'>' | b'<', Some(b'&' | b'|'), _) => {
                (redir(&format!("{}{}", c as char, d? as char)), 2)
            }
            (b'<', Some(b'>'), _) => (redir("<>"), 2),
            (b'>', _, _) => (redir(">"), 1),
            (b'<', _, _) => (redir("<"), 1),
            _ => return None,
        };
        for _ in 0..n {
            self.bump();
        }
        Some(tok)
    }

    /// `<<DELIM`, `<<-DELIM`, `<< 'DELIM'`: the body is read at the end of the line.
    fn heredoc_start(&mut self) -> Tok {
        self.bump();
        self.bump();
        let strip_tabs = self.peek(0) == Some(b'-');
        if strip_tabs {
            self.bump();
        }
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.bump();
        }
        let (line, col) = (self.line, self.i - self.line_start + 1);
        let w = self.word(line, col);
        let quoted = w.raw.contains(['\'', '"', '\\']);
        let delim: String = w
            .parts
            .iter()
            .map(|p| match p {
                Part::Lit(s, _) => s.clone(),
                _ => String::new(),
            })
            .collect();
        self.pending.push((self.out.len(), delim, strip_tabs));
        Tok::Redir {
            op: "<<".into(),
            heredoc: Some(Heredoc {
                body: String::new(),
                quoted,
                line: 0,
            }),
        }
    }

    /// Reads the bodies of the here-documents opened on the line just ended.
    fn read_heredocs(&mut self) {
        for (idx, delim, strip) in std::mem::take(&mut self.pending) {
            let first_line = self.line;
            let mut body = String::new();
            while self.i < self.s.len() {
                let st = self.i;
                while self.peek(0).is_some_and(|c| c != b'\n') {
                    self.bump();
                }
                let l = self.text(st, self.i);
                self.bump();
                let l = l.strip_suffix('\r').unwrap_or(&l);
                let l = if strip { l.trim_start_matches('\t') } else { l };
                if l == delim {
                    break;
                }
                body.push_str(l);
                body.push('\n');
            }
            // The token was pushed at `idx`; the Newline that triggered this came after.
            if let Some(Token {
                tok: Tok::Redir {
                    heredoc: Some(h), ..
                },
                ..
            }) = self.out.get_mut(idx)
            {
                h.body = body;
                h.line = first_line;
            }
        }
    }

    /// A word: literal, quoted and expandable parts up to the next metacharacter.
    fn word(&mut self, line: usize, col: usize) -> Word {
        self.word_until(line, col, is_meta)
    }

    /// A word up to a byte `stop` accepts (outside quotes).
    fn word_until(&mut self, line: usize, col: usize, stop: fn(u8) -> bool) -> Word {
        let start = self.i;
        let mut parts = Vec::new();
        let mut lit = String::new();
        while let Some(c) = self.peek(0) {
            match c {
                c if stop(c) => break,
                b'\\' => {
                    self.bump();
                    match self.peek(0) {
                        Some(b'\n') => {
                            self.bump();
                        }
                        None => {}
                        Some(_) => {
                            flush(&mut lit, &mut parts, false);
                            self.push_char(&mut lit);
                            flush(&mut lit, &mut parts, true);
                        }
                    }
                }
                b'\'' => {
                    flush(&mut lit, &mut parts, false);
                    self.bump();
                    self.single_quoted(&mut lit);
                    flush(&mut lit, &mut parts, true);
                }
                b'$' if self.peek(1) == Some(b'\'') => {
                    flush(&mut lit, &mut parts, false);
                    self.bump();
                    self.bump();
                    self.single_quoted(&mut lit);
                    flush(&mut lit, &mut parts, true);
                }
                b'"' => {
                    flush(&mut lit, &mut parts, false);
                    self.bump();
                    self.double_quoted_body(&mut parts, &mut lit, Some(b'"'));
                    flush(&mut lit, &mut parts, true);
                    // An empty "" still makes a (quoted, empty) word.
                    if !matches!(parts.last(), Some(Part::Lit(_, true))) {
                        parts.push(Part::Lit(String::new(), true));
                    }
                }
                b'`' => {
                    flush(&mut lit, &mut parts, false);
                    self.bump();
                    parts.push(Part::Cmd(self.until_matching(0, b'`')));
                }
                b'$' => {
                    flush(&mut lit, &mut parts, false);
                    self.bump();
                    parts.push(self.dollar(false));
                }
                _ => self.push_char(&mut lit),
            }
        }
        flush(&mut lit, &mut parts, false);
        Word {
            parts,
            raw: self.text(start, self.i),
            line,
            col,
        }
    }

    fn single_quoted(&mut self, lit: &mut String) {
        let st = self.i;
        while self.peek(0).is_some_and(|c| c != b'\'') {
            self.bump();
        }
        lit.push_str(&self.text(st, self.i));
        self.bump();
    }

    /// Inside double quotes (or a here-document when `close` is `None`): `$` expands,
    /// `\` escapes `$`, `` ` ``, `"`, `\` and a newline.
    fn double_quoted_body(&mut self, parts: &mut Vec<Part>, lit: &mut String, close: Option<u8>) {
        while let Some(c) = self.peek(0) {
            match c {
                c if Some(c) == close => {
                    self.bump();
                    return;
                }
                b'\\' => {
                    self.bump();
                    match self.peek(0) {
                        Some(b'\n') => {
                            self.bump();
                        }
                        Some(b'$' | b'`' | b'"' | b'\\') => self.push_char(lit),
                        _ => lit.push('\\'),
                    }
                }
                b'`' => {
                    self.bump();
                    flush(lit, parts, true);
                    parts.push(Part::Cmd(self.until_matching(0, b'`')));
                }
                b'$' => {
                    self.bump();
                    flush(lit, parts, true);
                    parts.push(self.dollar(true));
                }
                _ => self.push_char(lit),
            }
        }
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
                Part::Var {
                    name: self.text(st, self.i),
                    op: None,
                    arg: String::new(),
                    all: false,
                    quoted,
                }
            }
            Some(c)
                if c.is_ascii_digit()
                    || matches!(c, b'@' | b'*' | b'#' | b'?' | b'$' | b'!' | b'-') =>
            {
                self.bump();
                Part::Var {
                    name: (c as char).to_string(),
                    op: None,
                    arg: String::new(),
                    all: c == b'@' || c == b'*',
                    quoted,
                }
            }
            _ => Part::Lit("$".into(), quoted),
        }
    }
}

fn redir(op: &str) -> Tok {
    Tok::Redir {
        op: op.to_string(),
        heredoc: None,
    }
}

fn parse_brace(body: &str, quoted: bool) -> Part {
    let b = body.trim();
    let n = b
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    let n = if n == 0 && b.starts_with(['@', '*']) {
        1
    } else {
        n
    };
    let name = b[..n].to_string();
    let mut rest = &b[n..];
    let mut all = name == "@" || name == "*";
    if let Some(r) = rest
        .strip_prefix("[@]")
        .or_else(|| rest.strip_prefix("[*]"))
    {
        all = true;
        rest = r;
    }
    if name.is_empty() {
        // `${#X}`, `${!X}` and friends: not supported, so not resolvable.
        return Part::Cmd(format!("${{{b}}}"));
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
        // `${X/a/b}`, `${X%.*}` and friends: not supported, so not resolvable.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<String> {
        tokens(s)
            .into_iter()
            .map(|t| match t.tok {
                Tok::Word(w) => format!("W({})", w.raw),
                Tok::Redir { op, heredoc } => format!(
                    "R({op}{})",
                    heredoc.map_or(String::new(), |h| format!(":{}", h.body.escape_default()))
                ),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn operators_split_words_as_bash_does() {
        assert_eq!(
            kinds("a&&b||c;d|e 2>&1 >log&"),
            [
                "W(a)", "And", "W(b)", "Or", "W(c)", "Semi", "W(d)", "Pipe", "W(e)", "R(>&)",
                "W(1)", "R(>)", "W(log)", "Amp"
            ]
        );
        assert_eq!(
            kinds("case x in a) y;; esac"),
            ["W(case)", "W(x)", "W(in)", "W(a)", "RParen", "W(y)", "DSemi", "W(esac)"]
        );
    }

    #[test]
    fn here_documents_take_the_lines_after_their_command() {
        let t = kinds("cat <<EOF > f.json\n{\"a\": $X}\nEOF\necho done\n");
        assert_eq!(
            t,
            [
                "W(cat)",
                "R(<<:{\\\"a\\\": $X}\\n)",
                "R(>)",
                "W(f.json)",
                "Newline",
                "W(echo)",
                "W(done)",
                "Newline"
            ]
        );
        let t = kinds("cat <<-'END'\n\tx\n\tEND\n");
        assert_eq!(t, ["W(cat)", "R(<<:x\\n)", "Newline"]);
    }
}
