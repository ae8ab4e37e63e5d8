//! The layers of docs/architecture.md, checked on the source: every `crate::` path (and
//! `super::` path, and `ina3d::` path in the binary's `cli`) of `src/` is read as an arrow
//! from the file that writes it to the module it names, and the test fails on
//!
//! - an arrow from a module to one in a higher or the same layer ([`LAYERS`]),
//! - a cycle between top-level modules,
//! - a cycle between the files (child modules) of one module, at any depth.
//!
//! Code under `#[cfg(test)]` modules is not read: a unit test may build its fixture with
//! anything above it. Comments and string literals are not read either (doc links such as
//! [`crate::report`] are prose). A module's `mod.rs` is its front door: a path to an item
//! it re-exports (`pub use child::Item`) is an arrow to that child; its own code is the
//! node `mod` of the file graph (but in [`FRONT_DOORS_TO_SPLIT`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first (docs/architecture.md has the picture). A module may name
/// modules of lower layers only.
const LAYERS: &[&[&str]] = &[
    // Foundations: vocabulary with no project dependency.
    &["units", "keyword", "progress"],
    // The trace record.
    &["record"],
    // The results' schema; how a collective is carried out (algorithms, the INA switch
    // configuration).
    &["fct", "collective"],
    // The fluid network's formulas (the replayer and the planner both price with them).
    &["netmodel"],
    // Every file format: readers and writers, no simulation.
    &["formats"],
    // Topology and routing.
    &["topology"],
    // The data flow, job to tables.
    &["megatron"],
    &["schedule"],
    &["lower"],
    // The trace, and the workload for other simulators (AICB, Chakra) with their results
    // read beside ours: both are made from the lowered workload.
    &["trace", "interop"],
    &["replay", "ns3"],
    &["plan"],
    &["report"],
    // Orchestration.
    &["pipeline"],
    &["sweep"],
    &["cluster"],
    // The command line (the binary).
    &["cli"],
];

/// One source file: its module path (`src/a/b.rs` and `src/a/b/mod.rs` are `[a, b]`) and
/// its text with comments, strings and test modules removed.
struct Source {
    path: Vec<String>,
    text: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src/`; `main.rs` and `cli/` are the module `cli`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "mod.rs" => {}
        "main.rs" if parts.is_empty() => parts.push("cli".into()),
        "lib.rs" if parts.is_empty() => {}
        f => parts.push(f.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// Text without comments, string and char literals (replaced by a space, so that no path
/// inside them is read).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |k| k + 2);
        } else if let Some(n) = raw_string_len(rest) {
            out.push(' ');
            i += n;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push(' ');
            i = j + 1;
        } else if b[i] == b'\'' && char_literal_len(rest).is_some() {
            out.push(' ');
            i += char_literal_len(rest).unwrap();
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Length of a raw string literal `r"…"`, `r#"…"#`, `br"…"` at the start of `s`.
fn raw_string_len(s: &str) -> Option<usize> {
    let t = s.strip_prefix('b').unwrap_or(s);
    let after_r = t.strip_prefix('r')?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    let body = after_r[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = body.find(&close)?;
    Some(s.len() - body.len() + end + close.len())
}

/// Length of a char literal (`'a'`, `'\n'`, `'\''`) at the start of `s`; `None` for a
/// lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'\\') {
        let end = s[2..].find('\'')? + 2;
        return Some(end + 1);
    }
    let c = s[1..].chars().next()?;
    let n = 1 + c.len_utf8();
    (b.get(n) == Some(&b'\'')).then_some(n + 1)
}

/// Text without `#[cfg(test)] mod NAME { … }` blocks.
fn drop_test_modules(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(k) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..k]);
        let after = &rest[k + "#[cfg(test)]".len()..];
        let t = after.trim_start();
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let is_mod = t.starts_with("mod ") && {
            let head = &t[..t.find([';', '{']).unwrap_or(t.len())];
            t[head.len()..].starts_with('{')
        };
        if !is_mod {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        let open = after.find('{').unwrap();
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a use tree starting at `s` (after a `::`): `a::b`, `{a::b, c::{d, e}}`,
/// `a::*`; each path as its segments (`self` inside a group is the group's prefix).
fn use_tree(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &[char], i: &mut usize) -> Vec<Vec<String>> {
        skip_ws(s, i);
        if *i < s.len() && s[*i] == '{' {
            *i += 1;
            let mut out = Vec::new();
            loop {
                skip_ws(s, i);
                if *i >= s.len() || s[*i] == '}' {
                    *i += 1;
                    return out;
                }
                out.extend(tree(s, i));
                skip_ws(s, i);
                if *i < s.len() && s[*i] == ',' {
                    *i += 1;
                }
            }
        }
        let start = *i;
        while *i < s.len() && (is_ident(s[*i]) || s[*i] == '*') {
            *i += 1;
        }
        let seg: String = s[start..*i].iter().collect();
        if seg.is_empty() {
            return vec![vec![]];
        }
        if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
            *i += 2;
            let subs = tree(s, i);
            return subs
                .into_iter()
                .map(|mut p| {
                    p.insert(0, seg.clone());
                    p
                })
                .collect();
        }
        // `x as y`: the alias is not part of the path.
        skip_ws(s, i);
        if s[*i..].starts_with(&['a', 's', ' ']) {
            *i += 3;
            skip_ws(s, i);
            while *i < s.len() && is_ident(s[*i]) {
                *i += 1;
            }
        }
        if seg == "self" || seg == "*" {
            vec![vec![]]
        } else {
            vec![vec![seg]]
        }
    }
    fn skip_ws(s: &[char], i: &mut usize) {
        while *i < s.len() && s[*i].is_whitespace() {
            *i += 1;
        }
    }
    let chars: Vec<char> = s.chars().take(4096).collect();
    let mut i = 0;
    tree(&chars, &mut i)
}

/// Every absolute module path a file's text names: `crate::…` (`ina3d::…` in `cli`) and
/// `super::…` resolved against the file's own path.
fn references(file: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let roots: &[&str] = if file.first().is_some_and(|m| m == "cli") {
        &["crate", "ina3d", "super"]
    } else {
        &["crate", "super"]
    };
    for root in roots {
        let pat = format!("{root}::");
        let mut from = 0;
        while let Some(k) = text[from..].find(&pat) {
            let at = from + k;
            from = at + pat.len();
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == '$' || c == ':') {
                continue;
            }
            let (base, rest): (Vec<String>, &str) = if *root == "super" {
                // `super::super::x`: one level up per `super`.
                let mut base = file.to_vec();
                base.pop();
                let mut rest = &text[from..];
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                (base, rest)
            } else {
                (Vec::new(), &text[from..])
            };
            for p in use_tree(rest) {
                let mut abs = base.clone();
                abs.extend(p);
                out.push(abs);
            }
        }
    }
    out
}

/// What the crate looks like: its files, the child modules of every module, and the
/// items each `mod.rs` re-exports from a child (`pub use child::Item`).
struct Crate {
    files: Vec<Source>,
    children: BTreeMap<Vec<String>, BTreeSet<String>>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, String>>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        let mut files = Vec::new();
        let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
        for p in paths {
            let rel = p.strip_prefix(src).unwrap();
            let path = module_path(rel);
            if path.is_empty() {
                continue; // lib.rs: the module list.
            }
            for d in 1..=path.len() {
                children
                    .entry(path[..d - 1].to_vec())
                    .or_default()
                    .insert(path[d - 1].clone());
            }
            let raw = std::fs::read_to_string(&p).unwrap();
            let text = drop_test_modules(&strip(&raw));
            files.push(Source { path, text });
        }
        let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, String>> = BTreeMap::new();
        for f in &files {
            let kids = children.get(&f.path).cloned().unwrap_or_default();
            for stmt in f.text.split(';') {
                // `… pub use TREE` (`pub(crate) use`, `pub(in …) use` too): the statement's
                // last `use`.
                let Some(k) = stmt.rfind("use ") else {
                    continue;
                };
                let head = stmt[..k].trim_end();
                if !is_pub(head) {
                    continue;
                }
                let tree = stmt[k + 4..].trim();
                let rel = tree.strip_prefix("self::").unwrap_or(tree);
                let abs_prefix = {
                    let mut c = vec!["crate".to_string()];
                    c.extend(f.path.iter().cloned());
                    c.join("::") + "::"
                };
                let rel = rel.strip_prefix(abs_prefix.as_str()).unwrap_or(rel);
                for p in use_tree(rel) {
                    if p.len() >= 2 && kids.contains(&p[0]) {
                        reexports
                            .entry(f.path.clone())
                            .or_default()
                            .insert(p.last().unwrap().clone(), p[0].clone());
                    }
                }
            }
        }
        Crate {
            files,
            children,
            reexports,
        }
    }

    /// The arrows between the children of each module: `module → {(from, to)}`, the root
    /// module `[]` holding the arrows between top-level modules. A module's own file
    /// (`mod.rs`, or `x.rs` beside a folder `x/`) is the node `mod` among its children:
    /// a child naming an item defined there points to it, and its code (not its `pub use`
    /// lines, the front door) naming a child points from it.
    fn arrows(&self) -> BTreeMap<Vec<String>, BTreeSet<(String, String)>> {
        let mut out: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
        let mut add = |module: &[String], from: &str, to: &str| {
            if from != to {
                out.entry(module.to_vec())
                    .or_default()
                    .insert((from.to_string(), to.to_string()));
            }
        };
        for f in &self.files {
            let kids = self.children.get(&f.path);
            for r in references(&f.path, &f.text) {
                let common = f.path.iter().zip(&r).take_while(|(a, b)| a == b).count();
                if common >= r.len() {
                    continue; // a module the file lives in.
                }
                let module = &f.path[..common];
                let from = if common == f.path.len() {
                    "mod" // the module's own file naming one of its children
                } else {
                    f.path[common].as_str()
                };
                if let Some(to) = self.child_of(module, &r[common]) {
                    add(module, from, &to);
                }
            }
            // The module's own file naming a child by a relative path (`gen::x`).
            if let Some(kids) = kids.filter(|k| !k.is_empty()) {
                let code = without_facade(&f.text);
                for kid in kids {
                    let pat = format!("{kid}::");
                    let named = code.match_indices(&pat).any(|(at, _)| {
                        let before = code[..at].chars().next_back();
                        !before.is_some_and(|c| is_ident(c) || c == ':')
                    });
                    if named {
                        add(&f.path, "mod", kid);
                    }
                }
            }
        }
        out
    }

    /// The child of `module` a path's next segment `seg` lands in: the child itself, the
    /// child an item is re-exported from, else `mod` (an item of the module's own file);
    /// `None` for the crate root's own items.
    fn child_of(&self, module: &[String], seg: &str) -> Option<String> {
        let kids = self.children.get(module)?;
        if kids.contains(seg) {
            return Some(seg.to_string());
        }
        if let Some(c) = self.reexports.get(module).and_then(|m| m.get(seg)) {
            return Some(c.clone());
        }
        (!module.is_empty()).then(|| "mod".to_string())
    }
}

/// Whether `head`, the text before a `use`, ends with a visibility: `pub`, `pub(crate)`,
/// `pub(super)`, `pub(in path)`.
fn is_pub(head: &str) -> bool {
    head.ends_with("pub")
        || head
            .rsplit_once("pub(")
            .is_some_and(|(_, v)| v.ends_with(')') && !v.contains(['(', ';', '{', '}']))
}

/// A module file's text without its `mod x;` declarations and `pub use` statements (its
/// front door, not its code).
fn without_facade(text: &str) -> String {
    text.split_inclusive(';')
        .filter(|stmt| {
            let Some(k) = stmt.rfind("use ") else {
                return true;
            };
            let head = stmt[..k].trim_end();
            !is_pub(head)
        })
        .collect()
}

/// The strongly connected components with more than one node (Tarjan).
fn cycles(arrows: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = arrows.iter().flat_map(|(a, b)| [a, b]).collect();
    let nodes: Vec<&String> = nodes.into_iter().collect();
    let id = |n: &String| nodes.iter().position(|m| *m == n).unwrap();
    let mut next = vec![Vec::new(); nodes.len()];
    for (a, b) in arrows {
        next[id(a)].push(id(b));
    }
    struct T {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], t: &mut T) {
        t.index[v] = Some(t.count);
        t.low[v] = t.count;
        t.count += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &next[v] {
            match t.index[w] {
                None => {
                    visit(w, next, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(i) if t.on[w] => t.low[v] = t.low[v].min(i),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on: vec![false; nodes.len()],
        stack: Vec::new(),
        count: 0,
        out: Vec::new(),
    };
    for v in 0..nodes.len() {
        if t.index[v].is_none() {
            visit(v, &next, &mut t);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .out
        .into_iter()
        .map(|c| {
            let mut c: Vec<String> = c.into_iter().map(|i| nodes[i].clone()).collect();
            c.sort();
            c
        })
        .collect();
    out.sort();
    out
}

/// Arrows that do not point to a lower layer, as `from → to (layers i → j)`.
fn up_arrows(arrows: &BTreeSet<(String, String)>) -> Vec<String> {
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    arrows
        .iter()
        .filter_map(|(a, b)| match (layer(a), layer(b)) {
            (Some(i), Some(j)) if j < i => None,
            (i, j) => Some(format!("{a} → {b} (layers {i:?} → {j:?})")),
        })
        .collect()
}

fn crate_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_is_in_one_layer() {
    let c = Crate::read(&crate_src());
    let top = &c.children[&Vec::new()];
    let listed: Vec<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let missing: Vec<&String> = top
        .iter()
        .filter(|m| !listed.contains(&m.as_str()))
        .collect();
    assert!(missing.is_empty(), "modules in no layer: {missing:?}");
    let gone: Vec<&&str> = listed.iter().filter(|m| !top.contains(**m)).collect();
    assert!(gone.is_empty(), "layers name modules src/ lacks: {gone:?}");
}

#[test]
fn arrows_point_down_and_modules_form_no_cycle() {
    let arrows = Crate::read(&crate_src()).arrows();
    let root = arrows.get(&Vec::new()).cloned().unwrap_or_default();
    let up = up_arrows(&root);
    let loops = cycles(&root);
    assert!(
        up.is_empty() && loops.is_empty(),
        "{} arrows between top-level modules; pointing up or sideways:\n  {}\ncycles: {loops:?}",
        root.len(),
        up.join("\n  ")
    );
}

/// Modules whose own file (`mod.rs`, or `x.rs` beside a folder `x/`) is still left out of
/// the file-cycle check: it defines the types its children share and also calls them, a
/// cycle through the front door. Each leaves this list once those types move to a child
/// file and the module file keeps only `mod` lines, `pub use` re-exports and docs.
const FRONT_DOORS_TO_SPLIT: &[&str] = &[
    "cli",
    "cluster",
    "formats/trace_csv/read",
    "plan",
    "topology/routing",
];

#[test]
fn files_of_a_module_form_no_cycle() {
    let arrows = Crate::read(&crate_src()).arrows();
    let mut found = Vec::new();
    for (module, a) in &arrows {
        if module.is_empty() {
            continue;
        }
        // A module's own file is a node like its children, except in the modules of
        // `FRONT_DOORS_TO_SPLIT`, whose own file still defines the types its children share
        // and calls them (docs/architecture.md, "What the test reads").
        let a: BTreeSet<(String, String)> =
            if FRONT_DOORS_TO_SPLIT.contains(&module.join("/").as_str()) {
                a.iter()
                    .filter(|(x, y)| x != "mod" && y != "mod")
                    .cloned()
                    .collect()
            } else {
                a.clone()
            };
        for c in cycles(&a) {
            // The arrows inside the cycle, so the failure says which ones to cut.
            let inside: Vec<String> = a
                .iter()
                .filter(|(x, y)| c.contains(x) && c.contains(y))
                .map(|(x, y)| format!("{x} → {y}"))
                .collect();
            found.push(format!(
                "{}: {} ({})",
                module.join("/"),
                c.join(" ↔ "),
                inside.join(", ")
            ));
        }
    }
    assert!(found.is_empty(), "file cycles:\n  {}", found.join("\n  "));
    // The list only shrinks: a module listed whose own file no longer closes a cycle
    // leaves it.
    let split: Vec<&&str> = FRONT_DOORS_TO_SPLIT
        .iter()
        .filter(|m| {
            let path: Vec<String> = m.split('/').map(String::from).collect();
            arrows
                .get(&path)
                .is_none_or(|a| cycles(a).iter().all(|c| !c.iter().any(|n| n == "mod")))
        })
        .collect();
    assert!(
        split.is_empty(),
        "no cycle through the module file any more, remove from FRONT_DOORS_TO_SPLIT: {split:?}"
    );
}

/// The reader on a crafted crate, against arrows listed by hand: grouped and nested use
/// trees, `super::`, re-exports through `mod.rs` (`pub use`, `pub(in …) use`), a path in a comment, a string and a
/// test module (none of which count).
#[test]
fn the_reader_finds_the_arrows_a_person_finds() {
    let d = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let p = d.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n");
    w(
        "a/mod.rs",
        "mod x;\nmod y;\npub use x::Thing;\npub(in crate::a) use y::Other;\npub struct M;\nfn m() { y::g(); }\n",
    );
    w(
        "a/x.rs",
        "use crate::{b::{self, Z}, c};\n// crate::d::Nope\nfn f(_: super::M, _: super::Other) { let s = \"crate::e\"; }\n",
    );
    w(
        "a/y.rs",
        "use super::Thing;\nfn g() -> super::x::T { todo!() }\n",
    );
    w(
        "b.rs",
        "#[cfg(test)]\nmod tests { use crate::a::x; }\nfn h(_: &'static str, _: char) { let _ = '\"'; crate::c::k(); }\n",
    );
    w("c.rs", "pub fn k() {}\n");
    let arrows = Crate::read(d.path()).arrows();
    let pairs = |v: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        arrows[&Vec::new()],
        pairs(&[("a", "b"), ("a", "c"), ("b", "c")])
    );
    assert_eq!(
        arrows[&vec!["a".to_string()]],
        pairs(&[("y", "x"), ("x", "mod"), ("x", "y"), ("mod", "y")])
    );
    assert_eq!(arrows.len(), 2);
    assert_eq!(
        cycles(&arrows[&vec!["a".to_string()]]),
        vec![vec!["mod".to_string(), "x".into(), "y".into()]]
    );
    assert_eq!(
        cycles(&pairs(&[("p", "q"), ("q", "r"), ("r", "p"), ("r", "s")])),
        vec![vec!["p".to_string(), "q".into(), "r".into()]]
    );
}
