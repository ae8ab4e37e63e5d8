//! Bash integer arithmetic (`$(( … ))`, `(( … ))`, `[[ a -lt b ]]` operands): 64-bit,
//! C precedence, every operation checked — an overflow or a division by zero is an
//! error, never a wrapped or a panicking value. Names are looked up through the caller
//! (a name the script never sets is the caller's error, not 0 as bash would take it:
//! the environment could set it). Assignments inside arithmetic (`i++`, `x += 1`) are
//! not evaluated.

const MAX_DEPTH: u32 = 64;

/// What an arithmetic expression could not be evaluated for.
#[derive(Debug, PartialEq)]
pub(crate) enum ArithError<E> {
    /// A name's value could not be had (the caller's reason).
    Name(E),
    /// Syntax, overflow, division by zero: the message.
    Bad(String),
}

type R<E> = Result<i64, ArithError<E>>;

struct P<'a, F> {
    s: &'a [u8],
    i: usize,
    lookup: F,
}

fn bad<E>(m: impl Into<String>) -> ArithError<E> {
    ArithError::Bad(m.into())
}

fn ovf<E>() -> ArithError<E> {
    bad("integer overflow")
}

/// Binary operators by precedence level, lowest first.
const LEVELS: &[&[&str]] = &[
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<=", ">=", "<", ">"],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

fn apply<E>(op: &str, a: i64, b: i64) -> R<E> {
    let t = |x: bool| i64::from(x);
    Ok(match op {
        "||" => t(a != 0 || b != 0),
        "&&" => t(a != 0 && b != 0),
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "==" => t(a == b),
        "!=" => t(a != b),
        "<=" => t(a <= b),
        ">=" => t(a >= b),
        "<" => t(a < b),
        ">" => t(a > b),
        "<<" | ">>" => {
            let sh = u32::try_from(b)
                .ok()
                .filter(|s| *s < 64)
                .ok_or_else(|| bad("shift out of range"))?;
            if op == "<<" {
                a.checked_shl(sh).ok_or_else(ovf)?
            } else {
                a >> sh
            }
        }
        "+" => a.checked_add(b).ok_or_else(ovf)?,
        "-" => a.checked_sub(b).ok_or_else(ovf)?,
        "*" => a.checked_mul(b).ok_or_else(ovf)?,
        "/" | "%" if b == 0 => return Err(bad("division by zero")),
        "/" => a.checked_div(b).ok_or_else(ovf)?,
        "%" => a.checked_rem(b).ok_or_else(ovf)?,
        _ => return Err(bad(format!("operator `{op}`"))),
    })
}

impl<E, F: FnMut(&str) -> Result<i64, E>> P<'_, F> {
    fn blanks(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn starts(&mut self, op: &str) -> bool {
        self.blanks();
        self.s[self.i..].starts_with(op.as_bytes())
    }

    fn ternary(&mut self, d: u32) -> R<E> {
        if d > MAX_DEPTH {
            return Err(bad("nested too deeply"));
        }
        let c = self.binary(0, d)?;
        if !self.starts("?") {
            return Ok(c);
        }
        self.i += 1;
        let a = self.ternary(d + 1)?;
        if !self.starts(":") {
            return Err(bad("expected `:`"));
        }
        self.i += 1;
        let b = self.ternary(d + 1)?;
        Ok(if c != 0 { a } else { b })
    }

    /// `op` is next, and not the start of a longer operator or an assignment (`<<`, `<=`,
    /// `&&`, `**`, `+=`).
    fn op_at(&mut self, op: &str) -> bool {
        if !self.starts(op) {
            return false;
        }
        let next = self.s.get(self.i + op.len()).copied();
        match op {
            "<" => !matches!(next, Some(b'<' | b'=')),
            ">" => !matches!(next, Some(b'>' | b'=')),
            "&" => !matches!(next, Some(b'&' | b'=')),
            "|" => !matches!(next, Some(b'|' | b'=')),
            "*" => !matches!(next, Some(b'*' | b'=')),
            "+" | "-" | "/" | "%" | "^" | "<<" | ">>" => next != Some(b'='),
            _ => true,
        }
    }

    fn binary(&mut self, level: usize, d: u32) -> R<E> {
        if level == LEVELS.len() {
            return self.power(d);
        }
        let mut v = self.binary(level + 1, d)?;
        'outer: loop {
            for op in LEVELS[level] {
                if self.op_at(op) {
                    self.i += op.len();
                    let r = self.binary(level + 1, d)?;
                    v = apply(op, v, r)?;
                    continue 'outer;
                }
            }
            return Ok(v);
        }
    }

    fn power(&mut self, d: u32) -> R<E> {
        let b = self.unary(d)?;
        if self.starts("**") {
            self.i += 2;
            let e = self.power(d + 1)?;
            let e = u32::try_from(e).map_err(|_| bad("negative or huge exponent"))?;
            return b.checked_pow(e).ok_or_else(ovf);
        }
        Ok(b)
    }

    fn unary(&mut self, d: u32) -> R<E> {
        if d > MAX_DEPTH {
            return Err(bad("nested too deeply"));
        }
        self.blanks();
        match self.s.get(self.i) {
            Some(b'+' | b'-')
                if matches!(self.s.get(self.i + 1), Some(b'+' | b'-'))
                    && self.s[self.i] == self.s[self.i + 1] =>
            {
                Err(bad("`++`/`--` are not evaluated"))
            }
            Some(b'-') => {
                self.i += 1;
                self.unary(d + 1)?.checked_neg().ok_or_else(ovf)
            }
            Some(b'+') => {
                self.i += 1;
                self.unary(d + 1)
            }
            Some(b'!') => {
                self.i += 1;
                Ok(i64::from(self.unary(d + 1)? == 0))
            }
            Some(b'~') => {
                self.i += 1;
                Ok(!self.unary(d + 1)?)
            }
            _ => self.atom(d),
        }
    }

    fn atom(&mut self, d: u32) -> R<E> {
        self.blanks();
        match self.s.get(self.i) {
            Some(b'(') => {
                self.i += 1;
                let v = self.ternary(d + 1)?;
                if !self.starts(")") {
                    return Err(bad("expected `)`"));
                }
                self.i += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() => self.number(),
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
                let st = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    self.i += 1;
                }
                let name = String::from_utf8_lossy(&self.s[st..self.i]).into_owned();
                self.blanks();
                if self.s[self.i..].starts_with(b"++") || self.s[self.i..].starts_with(b"--") {
                    return Err(bad("`++`/`--` are not evaluated"));
                }
                if self.s.get(self.i) == Some(&b'=') && self.s.get(self.i + 1) != Some(&b'=') {
                    return Err(bad("assignments are not evaluated"));
                }
                (self.lookup)(&name).map_err(ArithError::Name)
            }
            Some(c) => Err(bad(format!("unexpected `{}`", *c as char))),
            None => Err(bad("the expression ends too early")),
        }
    }

    /// Decimal, `0x` hexadecimal, or octal with a leading 0 (as bash reads them).
    fn number(&mut self) -> R<E> {
        let st = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'#')
        {
            self.i += 1;
        }
        let t = std::str::from_utf8(&self.s[st..self.i]).unwrap_or("");
        let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))
        {
            (h, 16)
        } else if t.len() > 1 && t.starts_with('0') {
            (&t[1..], 8)
        } else {
            (t, 10)
        };
        i64::from_str_radix(digits, radix).map_err(|_| bad(format!("`{t}` is not a number")))
    }
}

/// Evaluates `expr`; names are resolved by `lookup`.
pub(crate) fn eval<E>(expr: &str, lookup: impl FnMut(&str) -> Result<i64, E>) -> R<E> {
    let mut p = P {
        s: expr.as_bytes(),
        i: 0,
        lookup,
    };
    let v = p.ternary(0)?;
    p.blanks();
    if p.i != p.s.len() {
        return Err(bad(format!(
            "unexpected text `{}`",
            String::from_utf8_lossy(&p.s[p.i..])
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> Result<i64, ArithError<String>> {
        eval(s, |n: &str| match n {
            "TP" => Ok(4),
            "PP" => Ok(2),
            other => Err(other.to_string()),
        })
    }

    #[test]
    fn arithmetic_has_c_precedence_and_bash_literals() {
        assert_eq!(ev("2*(3+4)-1"), Ok(13));
        assert_eq!(ev("8 / 2 % 3"), Ok(1));
        assert_eq!(ev("TP*PP"), Ok(8));
        assert_eq!(ev("TP > 2 && PP == 2"), Ok(1));
        assert_eq!(ev("TP < 2 || PP != 2"), Ok(0));
        assert_eq!(ev("010 + 0x10"), Ok(8 + 16));
        assert_eq!(ev("2**10"), Ok(1024));
        assert_eq!(ev("TP >= 4 ? 1 : 0"), Ok(1));
        assert_eq!(ev("1 << 3"), Ok(8));
        assert_eq!(ev("-(-3)"), Ok(3));
    }

    #[test]
    fn overflow_division_by_zero_and_unknown_names_are_errors() {
        assert_eq!(ev("1/0"), Err(ArithError::Bad("division by zero".into())));
        assert_eq!(
            ev("9223372036854775807 + 1"),
            Err(ArithError::Bad("integer overflow".into()))
        );
        assert_eq!(
            ev("3037000500*3037000500"),
            Err(ArithError::Bad("integer overflow".into()))
        );
        assert_eq!(ev("2**64"), Err(ArithError::Bad("integer overflow".into())));
        assert_eq!(ev("NODES*8"), Err(ArithError::Name("NODES".into())));
        assert!(matches!(ev("i++"), Err(ArithError::Bad(_))));
        assert!(matches!(
            ev("x = 1"),
            Err(ArithError::Name(_) | ArithError::Bad(_))
        ));
        assert!(matches!(ev(&"(".repeat(300)), Err(ArithError::Bad(_))));
    }
}
