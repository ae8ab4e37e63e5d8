//! Megatron's layer-pattern strings (`--moe-layer-freq "([0]*3+[1]*29)"`, or the list a
//! log prints, `[0, 0, 0, 1, …]`).
//!
//! Megatron evaluates them with Python after allowing only digits, `,`, `[`, `]`, `(`, `)`,
//! `+` and `*`. This module evaluates the same language — integer and list literals,
//! `*` (repeat / multiply) binding tighter than `+` (concatenate / add), parentheses —
//! without Python, and within bounds: a list may not grow beyond [`MAX_PATTERN_LAYERS`]
//! entries (checked before anything is allocated), nesting is limited, integers are
//! checked for overflow. Blanks are allowed because a log prints lists with them.

/// Longest pattern accepted: far above any real model's layer count, and a bound on the
/// memory a crafted `[1]*99999999999` can make the reader allocate.
pub const MAX_PATTERN_LAYERS: usize = 1 << 16;

const MAX_DEPTH: u32 = 64;

#[derive(Debug)]
enum V {
    Int(i64),
    List(Vec<u8>),
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn blanks(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.blanks();
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!(
                "expected `{}` at character {}",
                c as char,
                self.i + 1
            ))
        }
    }

    fn sum(&mut self, d: u32) -> Result<V, String> {
        let mut v = self.product(d)?;
        while self.peek() == Some(b'+') {
            self.i += 1;
            let r = self.product(d)?;
            v = add(v, r)?;
        }
        Ok(v)
    }

    fn product(&mut self, d: u32) -> Result<V, String> {
        let mut v = self.atom(d)?;
        while self.peek() == Some(b'*') {
            self.i += 1;
            let r = self.atom(d)?;
            v = mul(v, r)?;
        }
        Ok(v)
    }

    fn atom(&mut self, d: u32) -> Result<V, String> {
        if d > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        match self.peek() {
            Some(b'(') => {
                self.i += 1;
                let v = self.sum(d + 1)?;
                self.expect(b')')?;
                Ok(v)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(V::List(items));
                }
                loop {
                    match self.sum(d + 1)? {
                        V::Int(n) => items.push(layer_flag(n)?),
                        V::List(_) => return Err("a list inside a list".into()),
                    }
                    if items.len() > MAX_PATTERN_LAYERS {
                        return Err(too_long());
                    }
                    match self.peek() {
                        Some(b',') => {
                            self.i += 1;
                            // Python allows a trailing comma.
                            if self.peek() == Some(b']') {
                                self.i += 1;
                                return Ok(V::List(items));
                            }
                        }
                        Some(b']') => {
                            self.i += 1;
                            return Ok(V::List(items));
                        }
                        _ => return Err(format!("expected `,` or `]` at character {}", self.i + 1)),
                    }
                }
            }
            Some(c) if c.is_ascii_digit() => {
                let st = self.i;
                while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                    self.i += 1;
                }
                std::str::from_utf8(&self.s[st..self.i])
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .map(V::Int)
                    .ok_or_else(|| "an integer too large".to_string())
            }
            Some(c) => Err(format!(
                "unexpected `{}` at character {} (only digits, `,`, `[`, `]`, `(`, `)`, `+`, `*` are allowed)",
                c as char,
                self.i + 1
            )),
            None => Err("the pattern ends too early".into()),
        }
    }
}

fn too_long() -> String {
    format!("the pattern has more than {MAX_PATTERN_LAYERS} entries")
}

fn layer_flag(n: i64) -> Result<u8, String> {
    match n {
        0 | 1 => Ok(n as u8),
        _ => Err(format!(
            "entries must be 0 (dense layer) or 1 (MoE layer), found {n}"
        )),
    }
}

fn add(a: V, b: V) -> Result<V, String> {
    match (a, b) {
        (V::Int(x), V::Int(y)) => x
            .checked_add(y)
            .map(V::Int)
            .ok_or_else(|| "integer overflow".into()),
        (V::List(mut x), V::List(y)) => {
            if x.len() + y.len() > MAX_PATTERN_LAYERS {
                return Err(too_long());
            }
            x.extend(y);
            Ok(V::List(x))
        }
        _ => Err("`+` between a list and an integer".into()),
    }
}

fn mul(a: V, b: V) -> Result<V, String> {
    match (a, b) {
        (V::Int(x), V::Int(y)) => x
            .checked_mul(y)
            .map(V::Int)
            .ok_or_else(|| "integer overflow".into()),
        (V::List(l), V::Int(n)) | (V::Int(n), V::List(l)) => {
            // Python: a list times a non-positive count is empty.
            let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
            match l.len().checked_mul(n) {
                Some(total) if total <= MAX_PATTERN_LAYERS => Ok(V::List(l.repeat(n))),
                _ => Err(too_long()),
            }
        }
        (V::List(_), V::List(_)) => Err("`*` between two lists".into()),
    }
}

/// Evaluates a Megatron layer pattern into one flag per layer (`true` = 1). The error says
/// what is wrong, for the caller to place at the argument's position.
pub fn eval_layer_pattern(text: &str) -> Result<Vec<bool>, String> {
    let mut p = P {
        s: text.trim().as_bytes(),
        i: 0,
    };
    let v = p.sum(0)?;
    if p.peek().is_some() {
        return Err(format!("unexpected text at character {}", p.i + 1));
    }
    match v {
        V::List(l) => Ok(l.into_iter().map(|b| b == 1).collect()),
        V::Int(_) => Err("expected a list such as `([0]*3+[1]*29)`, found an integer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(s: &str) -> String {
        eval_layer_pattern(s)
            .unwrap()
            .iter()
            .map(|b| if *b { '1' } else { '0' })
            .collect()
    }

    #[test]
    fn megatron_help_examples_evaluate_as_python_would() {
        assert_eq!(bits("([1]*3+[0]*1)*3"), "111011101110");
        assert_eq!(bits("([0]+[1]*23)"), format!("0{}", "1".repeat(23)));
        assert_eq!(bits("([1]*3+[0]*2)*2"), "1110011100");
        assert_eq!(bits("[1,0,1,0]"), "1010");
        assert_eq!(bits("[1, 0, 1, 0, ]"), "1010");
        assert_eq!(bits("2*[0]+[1]"), "001");
        assert_eq!(bits("[0]*0+[1]"), "1");
    }

    #[test]
    fn bad_patterns_say_what_is_wrong() {
        assert!(eval_layer_pattern("[2]")
            .unwrap_err()
            .contains("0 (dense layer) or 1"));
        assert!(eval_layer_pattern("[1]*99999999999")
            .unwrap_err()
            .contains("more than 65536"));
        assert!(eval_layer_pattern("[1]*9223372036854775807*9")
            .unwrap_err()
            .contains("more than"));
        assert!(eval_layer_pattern("[1]+2").unwrap_err().contains("`+`"));
        assert!(eval_layer_pattern("[[1]]")
            .unwrap_err()
            .contains("list inside"));
        assert!(eval_layer_pattern("3").unwrap_err().contains("integer"));
        assert!(eval_layer_pattern("([1]").unwrap_err().contains("`)`"));
        assert!(eval_layer_pattern("[1];rm")
            .unwrap_err()
            .contains("unexpected"));
        assert!(eval_layer_pattern(&"(".repeat(500))
            .unwrap_err()
            .contains("nested"));
    }
}
