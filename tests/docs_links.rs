//! The README and the pages of `docs/` link to each other by relative path and heading
//! anchor; moving a section from one page to another breaks such links silently. This
//! test reads every Markdown file of the repository (but `target/`, `out/` and hidden
//! directories) and checks each relative link `](path#anchor)` against the file system
//! and the target's headings, anchored as GitHub renders them.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.md` file under `dir`, skipping build outputs and hidden directories.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "out" {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The text outside fenced code blocks (a link inside one is an example, not a link).
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push(line);
        }
    }
    lines
}

/// A heading's anchor as GitHub makes it: lower case, link targets dropped, every
/// character but letters, digits, `-`, `_` and spaces removed, spaces turned to `-`.
fn anchor(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[label](target)` keeps only its label.
    while let Some(open) = rest.find("](") {
        let close = rest[open..].find(')').map_or(rest.len(), |c| open + c + 1);
        text.push_str(&rest[..open]);
        rest = &rest[close..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated heading gets `-1`, `-2`, …).
fn anchors(path: &Path) -> HashSet<String> {
    let text = fs::read_to_string(path).unwrap();
    let mut seen = HashSet::new();
    for line in prose(&text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = anchor(line[hashes..].trim().trim_end_matches('#').trim());
        let mut name = base.clone();
        let mut n = 0;
        while seen.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        seen.insert(name);
    }
    seen
}

/// The relative link targets `](target)` on a line (absolute URLs and mail left out).
fn targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &line[i + 2..];
            let end = rest.find([')', ' '])?;
            let target = &rest[..end];
            (!target.contains("://") && !target.starts_with("mailto:")).then_some(target)
        })
        .collect()
}

#[test]
fn every_relative_link_in_the_markdown_names_an_existing_file_and_heading() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("README.md")),
        "no README.md under {root:?}"
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in prose(&text).into_iter().enumerate() {
            for target in targets(line) {
                checked += 1;
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let shown = file.strip_prefix(root).unwrap().display();
                if !dest.exists() {
                    broken.push(format!("{shown} (prose line {}): no file {target}", n + 1));
                } else if !fragment.is_empty()
                    && dest.extension().is_some_and(|e| e == "md")
                    && !anchors(&dest).contains(fragment)
                {
                    broken.push(format!(
                        "{shown} (prose line {}): no heading #{fragment} in {path}",
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: the scan is not reading the pages"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_github_s_rule_on_headings_with_code_punctuation_and_numbers() {
    // Written by hand from GitHub's rendering of these headings.
    assert_eq!(
        anchor("`results.csv` with several seeds"),
        "resultscsv-with-several-seeds"
    );
    assert_eq!(
        anchor("The study at scale: full-depth jobs on 1,024 and 8,192 GPUs"),
        "the-study-at-scale-full-depth-jobs-on-1024-and-8192-gpus"
    );
    assert_eq!(
        anchor("How far to trust the replayer (measured against ns-3)"),
        "how-far-to-trust-the-replayer-measured-against-ns-3"
    );
    assert_eq!(anchor("What `make run` prints"), "what-make-run-prints");
}
