//! The filter expression of a grid: which cells of the product to keep.
//!
//! ```text
//! expr    := or
//! or      := and ("or" and)*
//! and     := not ("and" not)*
//! not     := "not" not | compare
//! compare := sum (("==" | "!=" | "<=" | ">=" | "<" | ">") sum | "in" "[" expr ("," expr)* "]")?
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/" | "%") unary)*
//! unary   := "-" unary | atom
//! atom    := integer | decimal | 'text' | "text" | true | false | name | "(" expr ")"
//! ```
//!
//! A name is an option of the cell (`ina-slots`, `collective`, `tp`, `num-layers`, …):
//! letters, digits, `_`, `.` and `-`, so subtraction needs spaces (`a - b`). Its value is
//! the cell's: an axis value, a `[base]` value, or the option's default. Integers stay
//! integers (checked arithmetic; `/` gives a decimal, `%` needs integers); comparing text
//! with a number, or using a number as true/false, is an error naming the column.

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, digit1, multispace0};
use nom::combinator::{not, opt, peek, recognize};
use nom::sequence::{pair, preceded, terminated, tuple};
use nom::IResult;
use std::cmp::Ordering;
use std::fmt;

/// A value in a filter: an option's value or a literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A decimal number.
    Float(f64),
    /// Text.
    Str(String),
    /// true / false.
    Bool(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "'{s}'"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) | Value::Float(_) => "a number",
            Value::Str(_) => "text",
            Value::Bool(_) => "true/false",
        }
    }
    fn number(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(x) => Some(*x),
            _ => None,
        }
    }
}

/// A filter that does not parse or cannot be evaluated: what, and where (0-based byte
/// offset into the expression).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// Byte offset into the expression.
    pub offset: usize,
    /// What is wrong.
    pub msg: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Lit(Value),
    Name(String),
    Not(Box<Node>),
    Neg(Box<Node>),
    Bin(Op, Box<Node>, Box<Node>),
    In(Box<Node>, Vec<Node>),
}

/// An expression and its offset in the source.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    at: usize,
    e: Expr,
}

/// A parsed filter.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    root: Node,
}

type In<'a> = &'a str;

/// The parser state: the whole source, to turn remaining input into offsets.
struct P<'s> {
    src: &'s str,
    /// Parentheses, `not`s and minus signs open around the current position.
    depth: std::cell::Cell<usize>,
    /// Binary operators read so far.
    ops: std::cell::Cell<usize>,
}

/// The most binary operators a filter may have: a chain like `a + b + …` is evaluated
/// one level deeper per operator.
pub const MAX_OPS: usize = 256;

/// The deepest nesting a filter may have (parentheses, `not`, unary minus): the parser
/// and the evaluator recurse once per level, so a crafted filter must not reach the
/// stack's end.
pub const MAX_DEPTH: usize = 32;

/// The longest filter accepted, in bytes.
pub const MAX_LEN: usize = 4096;

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

const KEYWORDS: [&str; 6] = ["and", "or", "not", "in", "true", "false"];

fn ws<'a, O>(
    f: impl FnMut(In<'a>) -> IResult<In<'a>, O>,
) -> impl FnMut(In<'a>) -> IResult<In<'a>, O> {
    preceded(multispace0, f)
}

fn keyword<'a>(kw: &'static str) -> impl FnMut(In<'a>) -> IResult<In<'a>, In<'a>> {
    ws(terminated(tag(kw), not(peek(take_while1(ident_char)))))
}

impl<'s> P<'s> {
    fn at(&self, rest: In<'_>) -> usize {
        self.src.len() - rest.len()
    }
    /// `f` one level deeper, or a failure past [`MAX_DEPTH`].
    fn deeper<'a>(
        &self,
        i: In<'a>,
        f: impl FnOnce(In<'a>) -> IResult<In<'a>, Node>,
    ) -> IResult<In<'a>, Node> {
        if self.depth.get() >= MAX_DEPTH {
            return Err(nom::Err::Failure(nom::error::Error::new(
                i,
                nom::error::ErrorKind::TooLarge,
            )));
        }
        self.depth.set(self.depth.get() + 1);
        let r = f(i);
        self.depth.set(self.depth.get() - 1);
        r
    }
    /// One more binary operator at `i`, or a failure past [`MAX_OPS`].
    fn count_op<'a>(&self, i: In<'a>) -> Result<(), nom::Err<nom::error::Error<In<'a>>>> {
        self.ops.set(self.ops.get() + 1);
        if self.ops.get() > MAX_OPS {
            return Err(nom::Err::Failure(nom::error::Error::new(
                i,
                nom::error::ErrorKind::Count,
            )));
        }
        Ok(())
    }
    fn node(&self, rest: In<'_>, e: Expr) -> Node {
        Node {
            at: self.at(rest),
            e,
        }
    }

    fn expr<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        self.chain(i, &[(Op::Or, "or")], Self::and)
    }
    fn and<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        self.chain(i, &[(Op::And, "and")], Self::not)
    }
    /// Left-associative chain of `next` joined by the word operators `ops`.
    fn chain<'a>(
        &self,
        i: In<'a>,
        ops: &[(Op, &'static str)],
        next: fn(&Self, In<'a>) -> IResult<In<'a>, Node>,
    ) -> IResult<In<'a>, Node> {
        let (mut i, mut left) = next(self, i)?;
        'more: loop {
            for &(op, word) in ops {
                if let Ok((r, _)) = keyword(word)(i) {
                    self.count_op(i)?;
                    let at = self.at(r) - word.len();
                    let (r, right) = next(self, r)?;
                    left = Node {
                        at,
                        e: Expr::Bin(op, Box::new(left), Box::new(right)),
                    };
                    i = r;
                    continue 'more;
                }
            }
            return Ok((i, left));
        }
    }
    fn not<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        if let Ok((r, _)) = keyword("not")(i) {
            let at = self.at(r) - 3;
            let (r, inner) = self.deeper(r, |r| self.not(r))?;
            return Ok((
                r,
                Node {
                    at,
                    e: Expr::Not(Box::new(inner)),
                },
            ));
        }
        self.compare(i)
    }
    fn compare<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        let (i, left) = self.sum(i)?;
        let ops = alt((
            tag("=="),
            tag("!="),
            tag("<="),
            tag(">="),
            tag("<"),
            tag(">"),
        ));
        if let Ok((r, o)) = ws(ops)(i) {
            let op = match o {
                "==" => Op::Eq,
                "!=" => Op::Ne,
                "<=" => Op::Le,
                ">=" => Op::Ge,
                "<" => Op::Lt,
                _ => Op::Gt,
            };
            let at = self.at(r) - o.len();
            let (r, right) = self.sum(r)?;
            return Ok((
                r,
                Node {
                    at,
                    e: Expr::Bin(op, Box::new(left), Box::new(right)),
                },
            ));
        }
        if let Ok((r, _)) = keyword("in")(i) {
            let at = self.at(r) - 2;
            let (mut r, _) = ws(char('['))(r)?;
            let mut items = Vec::new();
            loop {
                let (r2, item) = self.expr(r)?;
                items.push(item);
                let (r3, sep) = ws(alt((char(','), char(']'))))(r2)?;
                r = r3;
                if sep == ']' {
                    break;
                }
            }
            return Ok((
                r,
                Node {
                    at,
                    e: Expr::In(Box::new(left), items),
                },
            ));
        }
        Ok((i, left))
    }
    fn arith<'a>(
        &self,
        i: In<'a>,
        ops: &[(char, Op)],
        next: fn(&Self, In<'a>) -> IResult<In<'a>, Node>,
    ) -> IResult<In<'a>, Node> {
        let (mut i, mut left) = next(self, i)?;
        'more: loop {
            let (r, _) = multispace0::<_, nom::error::Error<In<'a>>>(i)?;
            for &(c, op) in ops {
                if let Ok((r2, _)) = char::<_, nom::error::Error<In<'a>>>(c)(r) {
                    self.count_op(r)?;
                    let at = self.at(r);
                    let (r3, right) = next(self, r2)?;
                    left = Node {
                        at,
                        e: Expr::Bin(op, Box::new(left), Box::new(right)),
                    };
                    i = r3;
                    continue 'more;
                }
            }
            return Ok((i, left));
        }
    }
    fn sum<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        self.arith(i, &[('+', Op::Add), ('-', Op::Sub)], Self::product)
    }
    fn product<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        self.arith(
            i,
            &[('*', Op::Mul), ('/', Op::Div), ('%', Op::Rem)],
            Self::unary,
        )
    }
    fn unary<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        if let Ok((r, _)) = ws(char::<_, nom::error::Error<In<'a>>>('-'))(i) {
            let at = self.at(r) - 1;
            let (r, inner) = self.deeper(r, |r| self.unary(r))?;
            return Ok((
                r,
                Node {
                    at,
                    e: Expr::Neg(Box::new(inner)),
                },
            ));
        }
        self.atom(i)
    }
    fn atom<'a>(&self, i: In<'a>) -> IResult<In<'a>, Node> {
        let (i, _) = multispace0(i)?;
        if let Ok((r, _)) = char::<_, nom::error::Error<In<'a>>>('(')(i) {
            let (r, e) = self.deeper(r, |r| self.expr(r))?;
            let (r, _) = ws(char(')'))(r)?;
            return Ok((r, e));
        }
        let quoted: IResult<In<'a>, In<'a>> = alt((
            preceded(
                char('\''),
                terminated(take_while(|c| c != '\''), char('\'')),
            ),
            preceded(char('"'), terminated(take_while(|c| c != '"'), char('"'))),
        ))(i);
        if let Ok((r, s)) = quoted {
            return Ok((r, self.node(i, Expr::Lit(Value::Str(s.to_string())))));
        }
        let number = recognize(tuple((
            digit1,
            opt(pair(char('.'), digit1)),
            opt(tuple((
                alt((char('e'), char('E'))),
                opt(alt((char('+'), char('-')))),
                digit1,
            ))),
        )));
        let number: IResult<In<'a>, In<'a>> =
            terminated(number, not(peek(take_while1(ident_char))))(i);
        if let Ok((r, n)) = number {
            let v = match n.parse::<i64>() {
                Ok(v) => Value::Int(v),
                // digits alone past i64: refused, not read as an inexact decimal
                Err(_) if n.bytes().all(|c| c.is_ascii_digit()) => {
                    return Err(nom::Err::Failure(nom::error::Error::new(
                        i.trim_start(),
                        nom::error::ErrorKind::Digit,
                    )))
                }
                Err(_) => match n.parse::<f64>() {
                    Ok(x) if x.is_finite() => Value::Float(x),
                    _ => return Err(fail(i)),
                },
            };
            return Ok((r, self.node(i, Expr::Lit(v))));
        }
        let (r, name) = recognize(pair(
            take_while1(|c: char| c.is_ascii_alphabetic() || c == '_'),
            take_while(ident_char),
        ))(i)?;
        let e = match name {
            "true" => Expr::Lit(Value::Bool(true)),
            "false" => Expr::Lit(Value::Bool(false)),
            k if KEYWORDS.contains(&k) => return Err(fail(i)),
            _ => Expr::Name(name.to_string()),
        };
        Ok((r, self.node(i, e)))
    }
}

fn fail(i: In<'_>) -> nom::Err<nom::error::Error<In<'_>>> {
    nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Verify))
}

/// What is at `rest`, for "unexpected …" messages.
fn near(rest: &str) -> String {
    let t: String = rest.chars().take(12).collect();
    if t.is_empty() {
        "the end of the filter".into()
    } else {
        format!("`{t}`")
    }
}

impl Filter {
    /// Parses `src`.
    pub fn parse(src: &str) -> Result<Filter, FilterError> {
        if src.len() > MAX_LEN {
            return Err(FilterError {
                offset: MAX_LEN,
                msg: format!(
                    "the filter is {} bytes long, more than {MAX_LEN}: split the grid instead",
                    src.len()
                ),
            });
        }
        let p = P {
            src,
            depth: std::cell::Cell::new(0),
            ops: std::cell::Cell::new(0),
        };
        match p.expr(src) {
            Ok((rest, root)) => {
                let rest = rest.trim_start();
                if rest.is_empty() {
                    Ok(Filter { root })
                } else {
                    Err(FilterError {
                        offset: p.at(rest),
                        msg: format!(
                            "unexpected {} (expected an operator, `and`, `or` or the end)",
                            near(rest)
                        ),
                    })
                }
            }
            Err(nom::Err::Failure(e)) if e.code == nom::error::ErrorKind::TooLarge => {
                Err(FilterError {
                    offset: p.at(e.input),
                    msg: format!("nested more than {MAX_DEPTH} deep (parentheses, `not`, `-`)"),
                })
            }
            Err(nom::Err::Failure(e)) if e.code == nom::error::ErrorKind::Digit => {
                let digits: String = e.input.chars().take_while(char::is_ascii_digit).collect();
                Err(FilterError {
                    offset: p.at(e.input),
                    msg: format!(
                        "integer {digits} is out of range (at most {}); a decimal ({digits}.0) \
                         compares approximately",
                        i64::MAX
                    ),
                })
            }
            Err(nom::Err::Failure(e)) if e.code == nom::error::ErrorKind::Count => {
                Err(FilterError {
                    offset: p.at(e.input),
                    msg: format!("more than {MAX_OPS} operators: split the grid instead"),
                })
            }
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                let rest = e.input.trim_start();
                Err(FilterError {
                    offset: p.at(rest),
                    msg: format!(
                        "unexpected {} (expected a value, a name, `not` or `(`)",
                        near(rest)
                    ),
                })
            }
            Err(nom::Err::Incomplete(_)) => Err(FilterError {
                offset: src.len(),
                msg: "incomplete filter".into(),
            }),
        }
    }

    /// Every name the filter uses, with its offset.
    pub fn names(&self) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        fn walk(n: &Node, out: &mut Vec<(String, usize)>) {
            match &n.e {
                Expr::Lit(_) => {}
                Expr::Name(s) => out.push((s.clone(), n.at)),
                Expr::Not(a) | Expr::Neg(a) => walk(a, out),
                Expr::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Expr::In(a, items) => {
                    walk(a, out);
                    items.iter().for_each(|x| walk(x, out));
                }
            }
        }
        walk(&self.root, &mut out);
        out
    }

    /// Whether a cell whose option values `lookup` gives passes.
    pub fn keeps(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<bool, FilterError> {
        match eval(&self.root, lookup)? {
            Value::Bool(b) => Ok(b),
            v => Err(FilterError {
                offset: self.root.at,
                msg: format!(
                    "the filter must be true or false, it gave {} ({v})",
                    v.kind()
                ),
            }),
        }
    }
}

fn err<T>(at: usize, msg: String) -> Result<T, FilterError> {
    Err(FilterError { offset: at, msg })
}

fn truth(n: &Node, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<bool, FilterError> {
    match eval(n, lookup)? {
        Value::Bool(b) => Ok(b),
        v => err(
            n.at,
            format!("expected true or false, found {} ({v})", v.kind()),
        ),
    }
}

fn compare(at: usize, a: &Value, b: &Value) -> Result<Ordering, FilterError> {
    let o = match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Float(y)) => cmp_int_float(*x, *y),
        (Value::Float(x), Value::Int(y)) => cmp_int_float(*y, *x).map(Ordering::reverse),
        _ => match (a.number(), b.number()) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => None,
        },
    };
    o.map_or_else(
        || {
            err(
                at,
                format!("cannot compare {} ({a}) with {} ({b})", a.kind(), b.kind()),
            )
        },
        Ok,
    )
}

fn arith(at: usize, op: Op, a: &Value, b: &Value) -> Result<Value, FilterError> {
    let overflow = || FilterError {
        offset: at,
        msg: format!("{a} and {b}: integer overflow"),
    };
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        let r = match op {
            Op::Add => x.checked_add(*y),
            Op::Sub => x.checked_sub(*y),
            Op::Mul => x.checked_mul(*y),
            Op::Rem if *y == 0 => return err(at, format!("{a} % 0")),
            Op::Rem => x.checked_rem(*y),
            _ => None,
        };
        if op != Op::Div {
            return r.map(Value::Int).ok_or_else(overflow);
        }
    }
    let (Some(x), Some(y)) = (a.number(), b.number()) else {
        return err(
            at,
            format!(
                "arithmetic needs numbers, found {} ({a}) and {} ({b})",
                a.kind(),
                b.kind()
            ),
        );
    };
    let r = match op {
        Op::Div if y == 0.0 => return err(at, format!("{a} / 0")),
        Op::Rem => return err(at, "% needs integers".into()),
        Op::Add => x + y,
        Op::Sub => x - y,
        Op::Mul => x * y,
        _ => x / y,
    };
    if !r.is_finite() {
        return err(
            at,
            format!("{x:?} and {y:?}: the result overflows a decimal"),
        );
    }
    Ok(Value::Float(r))
}

/// An integer against a decimal, exactly (`2^53 + 1` is not `2^53` as a decimal is):
/// the decimal's whole part as an integer first, then its fraction. `None` for NaN.
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    // 2^63 as a decimal: every decimal in [-2^63, 2^63) has a whole part that is an i64
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return None;
    }
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    Some(i.cmp(&(whole as i64)).then_with(|| {
        // same whole part: the fraction decides
        0.0f64.partial_cmp(&(f - whole)).unwrap_or(Ordering::Equal)
    }))
}

fn eval(n: &Node, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<Value, FilterError> {
    Ok(match &n.e {
        Expr::Lit(v) => v.clone(),
        Expr::Name(s) => match lookup(s) {
            Some(v) => v,
            None => return err(n.at, format!("unknown name `{s}`")),
        },
        Expr::Not(a) => Value::Bool(!truth(a, lookup)?),
        Expr::Neg(a) => match eval(a, lookup)? {
            Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(|| FilterError {
                offset: n.at,
                msg: "integer overflow".into(),
            })?),
            Value::Float(x) => Value::Float(-x),
            v => return err(n.at, format!("cannot negate {} ({v})", v.kind())),
        },
        Expr::Bin(Op::Or, a, b) => Value::Bool(truth(a, lookup)? || truth(b, lookup)?),
        Expr::Bin(Op::And, a, b) => Value::Bool(truth(a, lookup)? && truth(b, lookup)?),
        Expr::Bin(op, a, b) => {
            let (x, y) = (eval(a, lookup)?, eval(b, lookup)?);
            match op {
                Op::Eq => Value::Bool(compare(n.at, &x, &y)? == Ordering::Equal),
                Op::Ne => Value::Bool(compare(n.at, &x, &y)? != Ordering::Equal),
                Op::Lt => Value::Bool(compare(n.at, &x, &y)? == Ordering::Less),
                Op::Le => Value::Bool(compare(n.at, &x, &y)? != Ordering::Greater),
                Op::Gt => Value::Bool(compare(n.at, &x, &y)? == Ordering::Greater),
                Op::Ge => Value::Bool(compare(n.at, &x, &y)? != Ordering::Less),
                _ => arith(n.at, *op, &x, &y)?,
            }
        }
        Expr::In(a, items) => {
            let x = eval(a, lookup)?;
            let mut found = false;
            for it in items {
                found |= compare(it.at, &x, &eval(it, lookup)?)? == Ordering::Equal;
            }
            Value::Bool(found)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<Value> {
        match name {
            "tp" => Some(Value::Int(2)),
            "ina-slots" => Some(Value::Int(256)),
            "collective" => Some(Value::Str("ring".into())),
            "mfu" => Some(Value::Float(0.45)),
            "calibrate" => Some(Value::Bool(true)),
            _ => None,
        }
    }

    fn keeps(src: &str) -> Result<bool, FilterError> {
        Filter::parse(src)?.keeps(&env)
    }

    #[test]
    fn comparisons_words_and_precedence_follow_the_grammar() {
        for (src, want) in [
            ("tp == 2", true),
            ("tp * 128 == ina-slots", true),
            ("ina-slots - 256 == 0", true),
            ("not tp > 1 or collective == 'ring'", true),
            ("not (tp > 1 or collective == 'ring')", false),
            ("tp > 1 and collective != \"ring\"", false),
            ("collective in ['hd', 'ring']", true),
            ("tp in [1, 4]", false),
            ("mfu < 0.5 and calibrate", true),
            ("ina-slots % 3 == 1", true),
            ("tp / 4 == 0.5", true),
            ("-tp < 0", true),
            ("1 + 2 * 3 == 7", true),
            ("true or 1 / 0 == 0", true),
        ] {
            assert_eq!(keeps(src), Ok(want), "{src}");
        }
    }

    #[test]
    fn parse_errors_point_at_the_offending_column() {
        for (src, at) in [
            ("tp == ", 6),
            ("tp = 2", 3),
            ("(tp == 2", 8),
            ("tp == 2 and", 11),
            ("tp 2", 3),
            ("collective == 'ring", 14),
        ] {
            let e = Filter::parse(src).unwrap_err();
            assert_eq!(e.offset, at, "{src}: {}", e.msg);
        }
    }

    #[test]
    fn type_errors_name_both_sides_and_where() {
        let e = keeps("tp == 2 and collective > 3").unwrap_err();
        assert_eq!(e.offset, 23);
        assert!(
            e.msg.contains("text ('ring') with a number (3)"),
            "{}",
            e.msg
        );
        assert!(keeps("tp").unwrap_err().msg.contains("true or false"));
        assert!(keeps("tp and calibrate")
            .unwrap_err()
            .msg
            .contains("expected true or false"));
        assert!(keeps("nope == 1")
            .unwrap_err()
            .msg
            .contains("unknown name `nope`"));
        assert!(keeps("9223372036854775807 + 1 == 0")
            .unwrap_err()
            .msg
            .contains("overflow"));
        assert!(keeps("tp % 0 == 0").is_err());
    }

    #[test]
    fn integers_and_decimals_compare_exactly_and_nothing_overflows_silently() {
        // 2^53 + 1 has no decimal of its own: as a decimal it was 2^53, "equal" to 2^53.0
        assert_eq!(keeps("9007199254740993 == 9007199254740992.0"), Ok(false));
        assert_eq!(keeps("9007199254740993 > 9007199254740992.0"), Ok(true));
        assert_eq!(keeps("9007199254740992.0 < 9007199254740993"), Ok(true));
        // i64::MAX is below 2^63, which is what 9223372036854775807.0 rounds to
        assert_eq!(
            keeps("9223372036854775807 < 9223372036854775807.0"),
            Ok(true)
        );
        assert_eq!(keeps("-3 < -2.5 and -2 > -2.5 and 2 == 2.0"), Ok(true));
        // integers past i64 are refused where they stand, not read as decimals
        let e = keeps("tp < 9223372036854775808").unwrap_err();
        assert_eq!(e.offset, 5);
        assert!(
            e.msg.contains("9223372036854775808 is out of range"),
            "{}",
            e.msg
        );
        assert!(keeps("1e308 * 10.0 > 0")
            .unwrap_err()
            .msg
            .contains("overflows"));
        assert!(keeps("-1e308 - 1e308 < 0")
            .unwrap_err()
            .msg
            .contains("overflows"));
    }

    #[test]
    fn nesting_and_length_are_bounded_before_the_stack_is() {
        // the issue's case, 10,000 parentheses deep: refused for its length
        let deep = format!("{}tp{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(Filter::parse(&deep)
            .unwrap_err()
            .msg
            .contains("more than 4096"));
        // within the length, each kind of nesting stops at 32 levels, at the 33rd
        let e = Filter::parse(&format!("{}tp{}", "(".repeat(100), ")".repeat(100))).unwrap_err();
        assert!(e.msg.contains("nested more than 32 deep"), "{}", e.msg);
        assert_eq!(e.offset, 33, "just past the 33rd parenthesis");
        let nots = format!("{}true", "not ".repeat(100));
        assert!(Filter::parse(&nots).unwrap_err().msg.contains("nested"));
        let minus = format!("{}1 < 2", "- ".repeat(100));
        assert!(Filter::parse(&minus).unwrap_err().msg.contains("nested"));
        // 32 levels still parse, and a long flat chain within the length evaluates
        let ok = format!("{}tp{} == 2", "(".repeat(32), ")".repeat(32));
        assert!(keeps(&ok).unwrap());
        let chain = format!("{}1 == 256", "1 + ".repeat(255));
        assert!(keeps(&chain).unwrap());
        let chain = format!("{}1 == 1000", "1 + ".repeat(999));
        assert!(Filter::parse(&chain)
            .unwrap_err()
            .msg
            .contains("more than 256 operators"));
    }

    #[test]
    fn names_are_listed_with_their_offsets() {
        let f = Filter::parse("tp > 1 and ina-slots in [tp, 4]").unwrap();
        assert_eq!(
            f.names(),
            [
                ("tp".to_string(), 0),
                ("ina-slots".to_string(), 11),
                ("tp".to_string(), 25)
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_parses_or_fails_with_an_offset_inside_it(src in "[a-z0-9 ()<>=!'\\[\\],.+*/%-]{0,40}") {
            match Filter::parse(&src) {
                Ok(f) => { let _ = f.keeps(&env); }
                Err(e) => proptest::prop_assert!(e.offset <= src.len()),
            }
        }
    }
}
