//! The house's rule on long functions, which no compiler checks by itself: clippy warns on a
//! function of more than 80 lines of code (`too_many_lines` in Cargo.toml, the limit in
//! clippy.toml) and CI denies warnings. A declarative table or a kernel's argument list may
//! say `#[allow(clippy::too_many_lines, reason = "…")]`; this test lists those allows, wants
//! a reason in each, and allows at most [`MAX_LONG_FUNCTIONS`] of them in the crate, its
//! examples and its tests.

use std::fs;
use std::path::{Path, PathBuf};

/// At most this many functions may be longer than clippy's limit.
const MAX_LONG_FUNCTIONS: usize = 10;

/// The lint an allow names, written so that this file's own text does not match it.
const LINT: &str = concat!("clippy::", "too_many_lines");

/// One `allow` of a long function: where, and its reason (empty when it gives none).
#[derive(Debug)]
struct Allow {
    at: String,
    reason: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every attribute under `root`'s `src`, `examples` and `tests` that allows a long function.
fn long_function_allows(root: &Path) -> Vec<Allow> {
    let mut files = Vec::new();
    for dir in ["src", "examples", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let relative = file.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        // An attribute may span lines: read from each `#[allow(` or `#![allow(` to its `)]`.
        for (start, _) in text.match_indices("allow(") {
            let head = text[..start].trim_end();
            if !(head.ends_with("#[") || head.ends_with("#![")) {
                continue;
            }
            let Some(len) = text[start..].find(")]") else { continue };
            let attribute = &text[start..start + len];
            if !attribute.contains(LINT) {
                continue;
            }
            let reason = attribute
                .split_once("reason")
                .and_then(|(_, r)| r.split_once('"'))
                .and_then(|(_, r)| r.rsplit_once('"'))
                .map_or(String::new(), |(r, _)| r.trim().to_string());
            let line = text[..start].matches('\n').count() + 1;
            found.push(Allow { at: format!("{relative}:{line}"), reason });
        }
    }
    found
}

/// What breaks the rule under `root`, with `max` allows at most.
fn check(root: &Path, max: usize) -> Vec<String> {
    let allows = long_function_allows(root);
    let mut problems: Vec<String> = allows
        .iter()
        .filter(|a| a.reason.is_empty())
        .map(|a| format!("{}: allows a long function without saying why (add reason = \"…\")", a.at))
        .collect();
    if allows.len() > max {
        let listed: Vec<String> = allows.iter().map(|a| format!("    {}: {}", a.at, a.reason)).collect();
        problems.push(format!(
            "{} functions are allowed to be longer than clippy's limit, and at most {max} may be (split one by \
             what it does):\n{}",
            allows.len(),
            listed.join("\n")
        ));
    }
    problems
}

#[test]
fn few_functions_are_long_and_each_says_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let allows = long_function_allows(root);
    for a in &allows {
        println!("{}: {}", a.at, a.reason);
    }
    let problems = check(root, MAX_LONG_FUNCTIONS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn an_allow_without_a_reason_or_one_too_many_is_caught() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("house-rules-long-functions");
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(root.join("tests")).unwrap();
    let allow = |reason: &str| format!("#[allow({LINT}, reason = \"{reason}\")]\nfn f() {{}}\n");
    fs::write(root.join("src/table.rs"), allow("a declarative table") + &allow("a kernel's arguments")).unwrap();
    fs::write(
        root.join("tests/t.rs"),
        format!("#![allow(dead_code)]\n#[allow(\n    {LINT}\n)]\nfn g() {{}}\n// allow({LINT}) in a comment\n"),
    )
    .unwrap();
    let found = check(&root, 3);
    assert_eq!(found, ["tests/t.rs:2: allows a long function without saying why (add reason = \"…\")"]);
    let found = check(&root, 2);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[1].starts_with("3 functions are allowed to be longer than clippy's limit, and at most 2"));
    assert!(found[1].contains("    src/table.rs:3: a kernel's arguments"), "{}", found[1]);
}
