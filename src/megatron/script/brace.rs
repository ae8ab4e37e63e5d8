//! Bash brace expansion (`{a..b}`, `{a..b..step}`, `{x,y,z}`), which runs before every
//! other expansion on a command's words and an array's elements (not on an assignment's
//! value). A group inside one unquoted literal piece of a word is expanded; a group that
//! spans quotes or a `$…` expansion is left as written, as bash leaves malformed ones.

use super::lex::{Part, Word};

/// Words one brace-expanded word stands for: more than this is refused as crafted input.
pub(crate) const MAX_BRACE_WORDS: usize = 10_000;

/// The words `w` expands to (`w` itself when it has no brace group); `Err` when the
/// expansion would exceed [`MAX_BRACE_WORDS`].
pub(crate) fn expand_braces(w: &Word) -> Result<Vec<Word>, String> {
    let mut out = Vec::new();
    expand_into(w, &mut out)?;
    Ok(out)
}

fn expand_into(w: &Word, out: &mut Vec<Word>) -> Result<(), String> {
    let Some((pi, start, end, alts)) = first_group(w) else {
        out.push(w.clone());
        return Ok(());
    };
    let Part::Lit(text, _) = &w.parts[pi] else {
        unreachable!("groups are found in unquoted literal parts")
    };
    for alt in alts {
        let mut parts = w.parts[..pi].to_vec();
        let mid = format!("{}{alt}{}", &text[..start], &text[end..]);
        parts.push(Part::Lit(mid, false));
        parts.extend_from_slice(&w.parts[pi + 1..]);
        let next = Word { parts, ..w.clone() };
        expand_into(&next, out)?;
        if out.len() > MAX_BRACE_WORDS {
            return Err(format!(
                "the brace expansion of `{}` gives more than {MAX_BRACE_WORDS} words",
                w.raw
            ));
        }
    }
    Ok(())
}

/// The first expandable group: its part, byte range `{…}` in that part, and alternatives.
fn first_group(w: &Word) -> Option<(usize, usize, usize, Vec<String>)> {
    for (pi, p) in w.parts.iter().enumerate() {
        let Part::Lit(text, false) = p else { continue };
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'{' && (i == 0 || b[i - 1] != b'$') {
                if let Some(close) = matching(b, i) {
                    let inner = &text[i + 1..close];
                    if let Some(alts) = alternatives(inner) {
                        return Some((pi, i, close + 1, alts));
                    }
                }
            }
            i += 1;
        }
    }
    None
}

/// The `}` closing the `{` at `open`, nested groups counted.
fn matching(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `x,y,z` (top-level commas) or a sequence `a..b[..step]`; `None` for anything else.
fn alternatives(inner: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let (mut depth, mut last) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(inner[last..i].to_string());
                last = i + 1;
            }
            _ => {}
        }
    }
    if !parts.is_empty() {
        parts.push(inner[last..].to_string());
        return Some(parts);
    }
    sequence(inner)
}

fn sequence(inner: &str) -> Option<Vec<String>> {
    let f: Vec<&str> = inner.split("..").collect();
    if !(2..=3).contains(&f.len()) {
        return None;
    }
    let step: i64 = match f.get(2) {
        Some(s) => s.parse::<i64>().ok()?.checked_abs()?.max(1),
        None => 1,
    };
    if let (Ok(a), Ok(b)) = (f[0].parse::<i64>(), f[1].parse::<i64>()) {
        // `{01..10}`: a leading zero pads every number to the wider endpoint.
        let padded = |s: &str| {
            s.trim_start_matches('-').len() > 1 && s.trim_start_matches('-').starts_with('0')
        };
        let width = if padded(f[0]) || padded(f[1]) {
            f[0].len().max(f[1].len())
        } else {
            0
        };
        let n = (a.abs_diff(b) / step as u64) as usize + 1;
        if n > MAX_BRACE_WORDS {
            return Some(vec![String::new(); MAX_BRACE_WORDS + 1]);
        }
        let dir = if b >= a { 1 } else { -1 };
        return Some(
            (0..n as i64)
                .map(|k| format!("{:0width$}", a + dir * k * step))
                .collect(),
        );
    }
    let (a, b) = (single_letter(f[0])?, single_letter(f[1])?);
    let (lo, hi) = (a.min(b), a.max(b));
    let mut v: Vec<String> = (lo..=hi)
        .step_by(step as usize)
        .map(|c| (c as char).to_string())
        .collect();
    if a > b {
        v.reverse();
    }
    Some(v)
}

fn single_letter(s: &str) -> Option<u8> {
    match s.as_bytes() {
        [c] if c.is_ascii_alphabetic() => Some(*c),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Word {
        Word {
            parts: vec![Part::Lit(s.into(), false)],
            raw: s.into(),
            line: 1,
            col: 1,
        }
    }

    fn texts(s: &str) -> Vec<String> {
        expand_braces(&lit(s))
            .unwrap()
            .into_iter()
            .map(|w| match &w.parts[0] {
                Part::Lit(t, _) => t.clone(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn sequences_lists_and_nesting_expand_as_bash_does() {
        assert_eq!(texts("{1..4}"), ["1", "2", "3", "4"]);
        assert_eq!(texts("{4..1}"), ["4", "3", "2", "1"]);
        assert_eq!(texts("{0..10..5}"), ["0", "5", "10"]);
        assert_eq!(texts("{01..03}"), ["01", "02", "03"]);
        assert_eq!(texts("{a..c}"), ["a", "b", "c"]);
        assert_eq!(
            texts("node{1,2}-{a,b}"),
            ["node1-a", "node1-b", "node2-a", "node2-b"]
        );
        assert_eq!(texts("{x,{y,z}}"), ["x", "y", "z"]);
        // Not groups: left as written.
        assert_eq!(texts("{}"), ["{}"]);
        assert_eq!(texts("{abc}"), ["{abc}"]);
        assert_eq!(texts("{1..x}"), ["{1..x}"]);
        assert!(expand_braces(&lit("{1..100000}")).is_err());
    }
}
