//! Layering, enforced. Reads every `.rs` file under `src/`, finds every path that names a
//! top-level module (`crate::…` and `$crate::…` paths, in `use` items, grouped or not, and
//! inline; `super::…` paths that climb out of the file's top-level module), and fails on
//!
//! * an import cycle among top-level modules,
//! * one backend (`backend::cpu`, `backend::cuda`, `backend::cuda_stub`) importing another
//!   (`backend/mod.rs` and `backend/refit.rs` are the layer the backends share),
//! * an import that points up [`LAYERS`],
//! * a path outside `src/backend/` that names a backend (`backend::cpu::…`,
//!   `backend::cuda::…`): the rest of the crate reaches the backends only through the
//!   `backend` layer's seam (`Engine`, `Learner`, `Predictor`), [`NAMES_A_BACKEND`] aside.
//!   Where a file brings the `backend` module in by its name (`use crate::backend;`), its
//!   `backend::…` paths are read too;
//!
//! and, one level down, on an import cycle among the sibling files of one module (a
//! subdirectory counts as one sibling; names a parent re-exports are followed to the file
//! that defines them), [`SIBLING_CYCLES`] aside.
//!
//! Comments and string literals are blanked first, so a path in a doc comment or a message
//! does not count. Code under `#[cfg(test)]` does not count either: unit tests may drive the
//! whole crate, as the tests in `tests/` do (the GPU's SHAP test compares with the CPU's).
//! `lib.rs` is the root: it declares and re-exports, and `crate::Name` paths to its
//! re-exports are read as paths to the module it re-exports them from.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

/// `src/`'s top-level modules, bottom to top: a module imports only modules listed before
/// it. `docs/architecture.md` ("Layering") draws the same order.
const LAYERS: &[&str] = &[
    "error",      // the crate's error type
    "profile",    // POLARS_GBT_PROFILE: whether steps time themselves
    "random",     // the seeded generator and row hashes
    "simd",       // which vector instructions the CPU's hot loops run with
    "math",       // float functions that round alike on the host and the device
    "params",     // small parameter types several layers share (QuantileAlphas, AFT, TaskKind)
    "data",       // Arrow columns, frames, cut points, binned matrix, targets
    "tree",       // trees, gradients, the growth driver
    "collective", // how the workers of one fit agree (sums, gathers, shards, sharded cuts)
    "metric",     // evaluation metrics
    "objective",  // objectives' descriptors and losses
    "config",     // TrainConfig, which builds the parameters of the layers below
    "prediction", // prediction outputs and the forest a backend predicts with
    "backend",    // CPU and CUDA learners and predictors
    "model",      // the trained model, its formats and imports
    "booster",    // the boosting loop
    "python",     // the Polars plugin
];

/// The backends, as (their directory or file under `src/backend/`, the module they are
/// mounted as): without the `cuda` feature, `cuda_stub.rs` is mounted as `backend::cuda`.
const BACKENDS: &[(&str, &str)] = &[("cpu", "cpu"), ("cuda", "cuda"), ("cuda_stub", "cuda")];

/// Paths outside `src/backend/` allowed to name a backend, as (file, the path it names or a
/// prefix of it, why). None today: the booster, the model and the plugin reach the backends
/// through the seam. An entry that no path needs any more is an error.
const NAMES_A_BACKEND: &[(&str, &str, &str)] = &[];

/// One path to a top-level module other than the file's own, or to a backend.
#[derive(Clone, Debug)]
struct Import {
    file: String,
    line: usize,
    /// The file's top-level module and, in a backend, the module that backend is mounted as.
    from: (String, Option<String>),
    /// The path, resolved from the crate root (`super::` and root re-exports resolved).
    path: Vec<String>,
}

impl Import {
    fn to(&self) -> &str {
        &self.path[0]
    }

    fn at(&self) -> String {
        format!("{}:{}: crate::{}", self.file, self.line, self.path.join("::"))
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments, string literals and character literals blanked (newlines
/// kept, so line numbers stay right).
fn strip(src: &str) -> Vec<char> {
    let c: Vec<char> = src.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(c.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        i = if c[i] == '/' && next == Some('/') {
            let end = (i..c.len()).find(|&k| c[k] == '\n').unwrap_or(c.len());
            blank(&mut out, &c[i..end]);
            end
        } else if c[i] == '/' && next == Some('*') {
            blank_block_comment(&c, i, &mut out)
        } else if let Some((open, hashes)) = raw_string_start(&c, i) {
            blank_raw_string(&c, i, open, hashes, &mut out)
        } else if c[i] == '"' {
            blank_string(&c, i, &mut out)
        } else if c[i] == '\'' && next == Some('\\') {
            // An escaped character literal: '\n', '\'', '\u{1F600}'.
            let end = (i + 3..c.len()).find(|&k| c[k] == '\'').map_or(c.len(), |k| k + 1);
            blank(&mut out, &c[i..end.min(c.len())]);
            end
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            blank(&mut out, &c[i..i + 3]);
            i + 3
        } else {
            // Anything else, lifetimes and labels ('a, 'outer) included.
            out.push(c[i]);
            i + 1
        };
    }
    out
}

/// `text` blanked onto `out`: spaces, newlines kept.
fn blank(out: &mut Vec<char>, text: &[char]) {
    out.extend(text.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
}

/// Blanks the (nesting) block comment at `i`; returns the position after it.
fn blank_block_comment(c: &[char], mut i: usize, out: &mut Vec<char>) -> usize {
    let mut depth = 0;
    while i < c.len() {
        let pair = (c[i], c.get(i + 1).copied());
        if pair == ('/', Some('*')) || pair == ('*', Some('/')) {
            depth += if pair.0 == '/' { 1 } else { -1 };
            out.extend([' ', ' ']);
            i += 2;
            if depth == 0 {
                break;
            }
        } else {
            blank(out, &c[i..=i]);
            i += 1;
        }
    }
    i
}

/// Blanks the raw string literal at `i` (r"…", r#"…"#, br#"…"#: `open` characters open it,
/// and it ends at a quote followed by `hashes` hashes); returns the position after it.
fn blank_raw_string(c: &[char], i: usize, open: usize, hashes: usize, out: &mut Vec<char>) -> usize {
    let body = i + open;
    let close = (body..c.len()).find(|&k| c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#')));
    let end = close.map_or(c.len(), |k| k + 1 + hashes);
    blank(out, &c[i..end]);
    end
}

/// Blanks the string literal at `i` (escapes skipped); returns the position after it.
fn blank_string(c: &[char], i: usize, out: &mut Vec<char>) -> usize {
    let mut k = i + 1;
    while k < c.len() && c[k] != '"' {
        k += if c[k] == '\\' { 2 } else { 1 };
    }
    let end = (k + 1).min(c.len());
    blank(out, &c[i..end]);
    end
}

/// At a raw string literal's start: the length of its opening (`r##"`) and its hashes.
fn raw_string_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && is_ident(c[i - 1]) {
        return None;
    }
    let r = match (c[i], c.get(i + 1)) {
        ('r', _) => i,
        ('b', Some('r')) => i + 1,
        _ => return None,
    };
    let hashes = c[r + 1..].iter().take_while(|&&h| h == '#').count();
    (c.get(r + 1 + hashes) == Some(&'"')).then_some((r + 2 + hashes - i, hashes))
}

fn skip_ws(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The identifier starting at `i` and the position after it.
fn word_at(c: &[char], i: usize) -> Option<(String, usize)> {
    if i >= c.len() || !(c[i].is_alphabetic() || c[i] == '_') {
        return None;
    }
    let end = (i..c.len()).find(|&j| !is_ident(c[j])).unwrap_or(c.len());
    Some((c[i..end].iter().collect(), end))
}

/// The position after `::` (whitespace allowed around it), if `i` is at one.
fn after_colons(c: &[char], i: usize) -> Option<usize> {
    let j = skip_ws(c, i);
    (c.get(j) == Some(&':') && c.get(j + 1) == Some(&':')).then(|| skip_ws(c, j + 2))
}

/// Reads a use tree (or an inline path) at `i` below `prefix`: `a::b`, `a::{b, c::{d}}`,
/// `a::*`, `a as b`. Pushes every path it names; returns the position after it.
fn use_tree(c: &[char], i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let i = skip_ws(c, i);
    match c.get(i) {
        Some('{') => {
            let mut j = i + 1;
            loop {
                j = skip_ws(c, j);
                match c.get(j) {
                    None => return j,
                    Some('}') => return j + 1,
                    Some(',') => j += 1,
                    _ => {
                        let k = use_tree(c, j, prefix.clone(), out);
                        j = if k == j { j + 1 } else { k };
                    }
                }
            }
        }
        Some('*') => {
            out.push(prefix);
            i + 1
        }
        _ => match word_at(c, i) {
            Some((w, end)) => {
                let mut path = prefix;
                path.push(w);
                match after_colons(c, end) {
                    // `a::<T>` (a turbofish) ends the path; `a::b`, `a::{…}`, `a::*` go on.
                    Some(k) if c.get(k).is_some_and(|&n| n == '{' || n == '*' || n.is_alphabetic() || n == '_') => {
                        use_tree(c, k, path, out)
                    }
                    _ => {
                        out.push(path);
                        // `a as b`: the alias is no path.
                        match word_at(c, skip_ws(c, end)) {
                            Some((a, e)) if a == "as" => word_at(c, skip_ws(c, e)).map_or(e, |(_, e)| e),
                            _ => end,
                        }
                    }
                }
            }
            None => {
                if !prefix.is_empty() {
                    out.push(prefix);
                }
                i
            }
        },
    }
}

/// Blanks every item under `#[cfg(test)]` (a `mod tests { … }`, a `use …;`, a function).
fn drop_test_items(c: &mut [char]) {
    let mut i = 0;
    while i < c.len() {
        if let Some(end) = cfg_test_at(c, i) {
            let stop = item_end(c, end);
            for ch in &mut c[i..stop] {
                if *ch != '\n' {
                    *ch = ' ';
                }
            }
            i = stop;
        } else {
            i += 1;
        }
    }
}

/// The position after `#[cfg(test)]` (any whitespace inside), if `i` is at one.
fn cfg_test_at(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    for piece in ["#", "[", "cfg", "(", "test", ")", "]"] {
        j = skip_ws(c, j);
        let p: Vec<char> = piece.chars().collect();
        if c.get(j..j + p.len()) != Some(&p[..]) {
            return None;
        }
        j += p.len();
        if p[0].is_alphabetic() && c.get(j).is_some_and(|&n| is_ident(n)) {
            return None;
        }
    }
    Some(j)
}

/// Where the item starting at `i` ends: after its `;` or `,`, after its closing brace (and a
/// `;` right after it, as in `use a::{b};`), or before a bracket that closes its parent.
fn item_end(c: &[char], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < c.len() {
        match c[i] {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return i;
                }
                if depth == 0 && c[i] == '}' {
                    let j = skip_ws(c, i + 1);
                    return if c.get(j) == Some(&';') { j + 1 } else { i + 1 };
                }
            }
            ';' | ',' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Every path from the crate root in `c` (stripped source) of the module `module`: each
/// with its line, resolved from the root. `super::` climbs from the module the path is in,
/// inline `mod name { … }` blocks included.
fn crate_paths(module: &[String], c: &[char]) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    // One entry per open brace: the inline module it opens, if it opens one.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\n' => line += 1,
            '{' => braces.push(inline_module(c, i)),
            '}' => {
                braces.pop();
            }
            _ => {}
        }
        let starts_word = is_ident(c[i]) && (i == 0 || !is_ident(c[i - 1]));
        let Some((w, end)) = starts_word.then(|| word_at(c, i)).flatten() else {
            i += 1;
            continue;
        };
        // Only where a path begins: not after `::` (`a::crate` is not a path from the root).
        let before = (0..i).rev().find(|&k| !c[k].is_whitespace() && c[k] != '$');
        let mid_path = before.is_some_and(|k| c[k] == ':' && k > 0 && c[k - 1] == ':');
        if !mid_path && (w == "crate" || w == "super") {
            let mut base: Option<Vec<String>> = Some(Vec::new());
            let mut k = after_colons(c, end);
            if w == "super" {
                let mut here: Vec<String> = module.to_vec();
                here.extend(braces.iter().flatten().cloned());
                base = here.pop().map(|_| here);
                // `super::super::…`
                while let Some(j) = k {
                    match word_at(c, j) {
                        Some((s, e)) if s == "super" => {
                            base = base.and_then(|mut b| b.pop().map(|_| b));
                            k = after_colons(c, e);
                        }
                        _ => break,
                    }
                }
            }
            if let (Some(base), Some(k)) = (base, k) {
                let mut paths = Vec::new();
                let stop = use_tree(c, k, base, &mut paths);
                found.extend(paths.into_iter().filter(|p| !p.is_empty()).map(|p| (line, p)));
                line += c[i..stop.max(i)].iter().filter(|&&ch| ch == '\n').count();
                i = stop.max(end);
                continue;
            }
        }
        i = end;
    }
    found
}

/// Every path in `c` (stripped source) that starts with `name::`, each with its line: in a
/// file that brought the module `name` in by its name, paths to it from the crate root.
fn paths_from(c: &[char], name: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\n' {
            line += 1;
        }
        let starts_word = is_ident(c[i]) && (i == 0 || !is_ident(c[i - 1]));
        let Some((w, end)) = starts_word.then(|| word_at(c, i)).flatten() else {
            i += 1;
            continue;
        };
        // Not after `::`: `crate::backend::…` is read as a path from the root already.
        let before = (0..i).rev().find(|&k| !c[k].is_whitespace());
        let mid_path = before.is_some_and(|k| c[k] == ':' && k > 0 && c[k - 1] == ':');
        if w == name && !mid_path && after_colons(c, end).is_some() {
            let mut paths = Vec::new();
            use_tree(c, i, Vec::new(), &mut paths);
            found.extend(paths.into_iter().map(|p| (line, p)));
        }
        i = end;
    }
    found
}

/// The inline module a `{` at `i` opens (`mod name {`), if it opens one.
fn inline_module(c: &[char], i: usize) -> Option<String> {
    let name_end = (0..i).rev().find(|&k| !c[k].is_whitespace())? + 1;
    let name_start = (0..name_end).rev().find(|&k| !is_ident(c[k])).map_or(0, |k| k + 1);
    let kw_end = (0..name_start).rev().find(|&k| !c[k].is_whitespace())? + 1;
    let kw_start = kw_end.checked_sub(3)?;
    let is_mod = c[kw_start..kw_end] == ['m', 'o', 'd'] && (kw_start == 0 || !is_ident(c[kw_start - 1]));
    (is_mod && name_start < name_end).then(|| c[name_start..name_end].iter().collect())
}

/// The top-level modules `lib.rs` declares, and the module each root re-export comes from.
fn read_root(src: &Path) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let c = strip(&fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut modules = BTreeSet::new();
    let mut uses = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let starts_word = i == 0 || !is_ident(c[i - 1]);
        match starts_word.then(|| word_at(&c, i)).flatten() {
            Some((w, end)) if w == "mod" => {
                if let Some((name, _)) = word_at(&c, skip_ws(&c, end)) {
                    modules.insert(name);
                }
                i = end;
            }
            Some((w, end)) if w == "use" => i = use_tree(&c, end, Vec::new(), &mut uses),
            Some((_, end)) => i = end,
            None => i += 1,
        }
    }
    let reexports = uses
        .into_iter()
        .filter(|p| p.len() > 1 && modules.contains(&p[0]))
        .map(|p| (p.last().unwrap().clone(), p[0].clone()))
        .collect();
    (modules, reexports)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/` (`backend/cpu/mod.rs` -> `backend::cpu`), with
/// backends under the name they are mounted as.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    if last != "mod.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    if parts.first().is_some_and(|p| p == "backend") && parts.len() > 1 {
        if let Some(&(_, mounted)) = BACKENDS.iter().find(|(unit, _)| *unit == parts[1]) {
            parts[1] = mounted.to_string();
        }
    }
    parts
}

/// Every import in `src/` of a top-level module other than the importer's own, and of a
/// backend; and what could not be placed.
fn imports(src: &Path) -> (Vec<Import>, Vec<String>) {
    let (modules, reexports) = read_root(src);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let name = format!("src/{}", relative.to_string_lossy());
        if relative == Path::new("lib.rs") {
            continue;
        }
        let module = module_of(relative);
        if !modules.contains(&module[0]) {
            problems.push(format!("{name}: its module `{}` is not declared in lib.rs", module[0]));
            continue;
        }
        let backend = (module[0] == "backend" && relative.iter().count() > 1)
            .then(|| relative.iter().nth(1).unwrap().to_string_lossy().trim_end_matches(".rs").to_string())
            .filter(|unit| BACKENDS.iter().any(|(u, _)| u == unit))
            .map(|_| module[1].clone());
        let mut c = strip(&fs::read_to_string(&file).unwrap());
        drop_test_items(&mut c);
        let mut paths = crate_paths(&module, &c);
        // `use crate::backend;` (or `backend::{self, …}`): then `backend::cpu::…` names a backend.
        if module[0] != "backend" && paths.iter().any(|(_, p)| *p == ["backend"] || *p == ["backend", "self"]) {
            paths.extend(paths_from(&c, "backend"));
        }
        for (line, mut path) in paths {
            if !modules.contains(&path[0]) {
                match reexports.get(&path[0]) {
                    Some(m) => path.insert(0, m.clone()),
                    None => {
                        problems.push(format!("{name}:{line}: cannot place crate::{}", path.join("::")));
                        continue;
                    }
                }
            }
            let other_backend = path[0] == "backend" && path.get(1).is_some_and(|p| BACKENDS.iter().any(|b| b.1 == p));
            if path[0] != module[0] || (backend.is_some() && other_backend) {
                found.push(Import { file: name.clone(), line, from: (module[0].clone(), backend.clone()), path });
            }
        }
    }
    (found, problems)
}

/// The shortest cycle through `start`, if it is on one.
fn shortest_cycle<'a>(edges: &'a BTreeMap<String, BTreeSet<String>>, start: &'a String) -> Option<Vec<String>> {
    // Breadth-first from `start` back to it.
    let mut parent: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue: VecDeque<&String> = VecDeque::from([start]);
    while let Some(m) = queue.pop_front() {
        for n in edges.get(m).into_iter().flatten() {
            if n == start {
                let mut cycle = vec![m.clone()];
                let mut k = m;
                while k != start {
                    k = parent[k];
                    cycle.push(k.clone());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !parent.contains_key(n) {
                parent.insert(n, m);
                queue.push_back(n);
            }
        }
    }
    None
}

/// Each set of modules that reach one another through imports (a strongly connected set of
/// more than one), with its shortest cycle.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<(BTreeSet<String>, Vec<String>)> {
    let mut out: Vec<(BTreeSet<String>, Vec<String>)> = Vec::new();
    for start in edges.keys() {
        let Some(cycle) = shortest_cycle(edges, start) else { continue };
        let members: BTreeSet<String> = edges
            .keys()
            .filter(|m| *m == start || cycle.contains(m) || on_cycle_with(edges, start, m))
            .cloned()
            .collect();
        match out.iter_mut().find(|(set, _)| *set == members) {
            Some((_, best)) if best.len() <= cycle.len() => {}
            Some((_, best)) => *best = cycle,
            None => out.push((members, cycle)),
        }
    }
    out
}

/// Whether `a` and `b` reach one another.
fn on_cycle_with(edges: &BTreeMap<String, BTreeSet<String>>, a: &String, b: &String) -> bool {
    let reaches = |from: &String, to: &String| {
        let mut seen = BTreeSet::from([from]);
        let mut stack = vec![from];
        while let Some(m) = stack.pop() {
            for n in edges.get(m).into_iter().flatten() {
                if n == to {
                    return true;
                }
                if seen.insert(n) {
                    stack.push(n);
                }
            }
        }
        false
    };
    reaches(a, b) && reaches(b, a)
}

/// The backend `imp` names from outside `src/backend/`, if it names one.
fn names_a_backend(imp: &Import) -> Option<&str> {
    let named = imp.from.0 != "backend" && imp.to() == "backend";
    let backend = imp.path.get(1).map(String::as_str).filter(|p| BACKENDS.iter().any(|b| b.1 == *p));
    backend.filter(|_| named)
}

/// What breaks the layering of the crate at `src`, with `allowed` as [`NAMES_A_BACKEND`].
fn check(src: &Path, allowed: &[(&str, &str, &str)]) -> Vec<String> {
    let (found, mut problems) = imports(src);
    let (modules, _) = read_root(src);
    let layers: BTreeSet<String> = LAYERS.iter().map(|s| s.to_string()).collect();
    for m in modules.difference(&layers) {
        problems.push(format!("module `{m}` is not in LAYERS: give it its place in tests/layering.rs"));
    }
    for m in layers.difference(&modules) {
        problems.push(format!("LAYERS names `{m}`, which lib.rs does not declare"));
    }
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);

    // (a) Cycles among top-level modules.
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut example: BTreeMap<(String, String), &Import> = BTreeMap::new();
    for imp in found.iter().filter(|i| i.from.0 != i.to()) {
        edges.entry(imp.from.0.clone()).or_default().insert(imp.to().to_string());
        example.entry((imp.from.0.clone(), imp.to().to_string())).or_insert(imp);
    }
    for (members, cycle) in cycles(&edges) {
        let mut text = format!("import cycle: {} -> {}", cycle.join(" -> "), cycle[0]);
        if members.len() > cycle.len() {
            let all: Vec<&str> = members.iter().map(String::as_str).collect();
            text += &format!(" (the shortest; {} all reach one another)", all.join(", "));
        }
        for k in 0..cycle.len() {
            let (a, b) = (&cycle[k], &cycle[(k + 1) % cycle.len()]);
            text += &format!("\n    {a} -> {b}: {}", example[&(a.clone(), b.clone())].at());
        }
        problems.push(text);
    }

    // (b) One backend importing another.
    for imp in &found {
        if let (Some(from), true) = (&imp.from.1, imp.to() == "backend") {
            if let Some(to) = imp.path.get(1).filter(|p| BACKENDS.iter().any(|b| b.1 == p.as_str()) && *p != from) {
                problems.push(format!("backend `{from}` imports backend `{to}`: {}", imp.at()));
            }
        }
    }

    // (c) A backend named outside `src/backend/`.
    let allows = |imp: &Import, &(file, path, _): &(&str, &str, &str)| {
        let named = imp.path.join("::");
        imp.file == file && (named == path || named.starts_with(&format!("{path}::")))
    };
    for imp in &found {
        if let Some(backend) = names_a_backend(imp) {
            if !allowed.iter().any(|entry| allows(imp, entry)) {
                problems.push(format!(
                    "`{}` names backend `{backend}`, which only src/backend/ may (reach it through the backend \
                     layer: Engine, Learner, Predictor): {}",
                    imp.from.0,
                    imp.at()
                ));
            }
        }
    }
    for entry in allowed {
        if !found.iter().any(|imp| names_a_backend(imp).is_some() && allows(imp, entry)) {
            problems.push(format!("NAMES_A_BACKEND allows {} to name {}, which it no longer does", entry.0, entry.1));
        }
    }

    // (d) Imports up the layers.
    for imp in found.iter().filter(|i| i.from.0 != i.to()) {
        if let (Some(a), Some(b)) = (rank(&imp.from.0), rank(imp.to())) {
            if b > a {
                problems.push(format!("`{}` imports `{}`, a layer above it: {}", imp.from.0, imp.to(), imp.at()));
            }
        }
    }
    problems
}

/// Cycles among the sibling files of one module that are honest, as (the module, the
/// siblings that reach one another, why). A subdirectory counts as one sibling. Any other
/// cycle is an error, and so is an entry that no cycle needs any more.
const SIBLING_CYCLES: &[(&str, &[&str], &str)] = &[(
    "backend::cuda",
    &[
        "binning",
        "buffers",
        "cuts",
        "evaluation",
        "forest",
        "gradients",
        "histogram",
        "layout",
        "partition",
        "predict",
        "ranking",
        "refit",
        "runtime",
        "shap",
        "split",
    ],
    "the kernel table (runtime.rs) and the layout probe (layout.rs) name every kernel's argument struct, which \
     lives beside the step that launches it, and every step launches through the runtime: a kernel's arguments \
     sit with its launch, so the table and its steps reach one another by design",
)];

/// Each module file's re-exports (`pub use`, `pub(crate) use`, …): (the module, the name it
/// re-exports) -> the path the name comes from, resolved from the crate root.
fn module_reexports(src: &Path, modules: &BTreeSet<Vec<String>>) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let module = module_of(file.strip_prefix(src).unwrap());
        let mut c = strip(&fs::read_to_string(&file).unwrap());
        drop_test_items(&mut c);
        let mut i = 0;
        while i < c.len() {
            let starts_word = i == 0 || !is_ident(c[i - 1]);
            let Some((w, end)) = starts_word.then(|| word_at(&c, i)).flatten() else {
                i += 1;
                continue;
            };
            // `use` after `pub` or `pub(…)`.
            let before = (0..i).rev().find(|&k| !c[k].is_whitespace());
            let public = match before {
                Some(k) if c[k] == ')' => {
                    (0..k).rev().find(|&j| c[j] == '(').is_some_and(|j| word_before(&c, j) == "pub")
                }
                Some(k) => word_before(&c, k + 1) == "pub",
                None => false,
            };
            if w != "use" || !public {
                i = end;
                continue;
            }
            let mut paths = Vec::new();
            i = use_tree(&c, end, Vec::new(), &mut paths);
            for p in paths {
                let from = match p[0].as_str() {
                    "crate" => p[1..].to_vec(),
                    "self" => [module.clone(), p[1..].to_vec()].concat(),
                    "super" => {
                        let ups = p.iter().take_while(|s| *s == "super").count();
                        let Some(base) = module.len().checked_sub(ups) else { continue };
                        [module[..base].to_vec(), p[ups..].to_vec()].concat()
                    }
                    // A child module's name (`pub use stream_bins::StreamedBins;`), or another crate's.
                    first if modules.contains(&[module.clone(), vec![first.to_string()]].concat()) => {
                        [module.clone(), p.clone()].concat()
                    }
                    _ => continue,
                };
                if let Some(name) = from.last().filter(|n| *n != "self") {
                    out.insert([module.clone(), vec![name.clone()]].concat(), from.clone());
                }
            }
        }
    }
    out
}

/// The identifier that ends right before `end`, whitespace before `end` skipped.
fn word_before(c: &[char], end: usize) -> String {
    let Some(last) = (0..end).rev().find(|&k| !c[k].is_whitespace()) else { return String::new() };
    let first = (0..=last).rev().take_while(|&k| is_ident(c[k])).last().unwrap_or(last + 1);
    c[first..=last].iter().filter(|ch| is_ident(**ch)).collect()
}

/// `path` with re-exported names followed to the module that defines them.
fn follow_reexports(
    mut path: Vec<String>,
    modules: &BTreeSet<Vec<String>>,
    reexports: &BTreeMap<Vec<String>, Vec<String>>,
) -> Vec<String> {
    for _ in 0..8 {
        let Some(k) = (1..=path.len()).rev().find(|&k| modules.contains(&path[..k])) else { break };
        match reexports.get(&path[..(k + 1).min(path.len())]) {
            Some(from) if k < path.len() && *from != path[..=k] => {
                path = [from.clone(), path[k + 1..].to_vec()].concat()
            }
            _ => break,
        }
    }
    path
}

/// The imports between sibling files of each module below the top level: (the module) ->
/// (sibling -> the siblings it imports), with one import for each edge as an example.
#[allow(clippy::type_complexity)]
fn sibling_imports(
    src: &Path,
) -> (BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>, BTreeMap<(Vec<String>, String, String), String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f.strip_prefix(src).unwrap())).collect();
    let reexports = module_reexports(src, &modules);
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut example = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let module = module_of(relative);
        let mut c = strip(&fs::read_to_string(&file).unwrap());
        drop_test_items(&mut c);
        for (line, path) in crate_paths(&module, &c) {
            let path = follow_reexports(path, &modules, &reexports);
            let k = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
            // Siblings below the top level (the top level has its own check), both modules.
            if k == 0 || k >= module.len() || k >= path.len() || !modules.contains(&path[..=k]) {
                continue;
            }
            let (parent, from, to) = (module[..k].to_vec(), module[k].clone(), path[k].clone());
            edges.entry(parent.clone()).or_default().entry(from.clone()).or_default().insert(to.clone());
            let at = format!("src/{}:{line}: crate::{}", relative.to_string_lossy(), path.join("::"));
            example.entry((parent, from, to)).or_insert(at);
        }
    }
    (edges, example)
}

/// The import cycles among sibling files that `allowed` (as [`SIBLING_CYCLES`]) does not allow,
/// and the entries of `allowed` that no cycle needs.
fn check_siblings(src: &Path, allowed: &[(&str, &[&str], &str)]) -> Vec<String> {
    let (edges, example) = sibling_imports(src);
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (parent, siblings) in &edges {
        let module = parent.join("::");
        for (members, cycle) in cycles(siblings) {
            let names: Vec<&str> = members.iter().map(String::as_str).collect();
            let entry =
                allowed.iter().position(|(m, set, _)| *m == module && set.iter().copied().eq(names.iter().copied()));
            if let Some(entry) = entry {
                used.insert(entry);
                continue;
            }
            let mut text =
                format!("import cycle among the files of `{module}`: {} -> {}", cycle.join(" -> "), cycle[0]);
            if members.len() > cycle.len() {
                text += &format!(" (the shortest; {} all reach one another)", names.join(", "));
            }
            for k in 0..cycle.len() {
                let (a, b) = (&cycle[k], &cycle[(k + 1) % cycle.len()]);
                text += &format!("\n    {a} -> {b}: {}", example[&(parent.clone(), a.clone(), b.clone())]);
            }
            problems.push(text);
        }
    }
    for (k, (module, set, _)) in allowed.iter().enumerate() {
        if !used.contains(&k) {
            problems
                .push(format!("SIBLING_CYCLES allows the cycle {} in `{module}`, which is not there", set.join(", ")));
        }
    }
    problems
}

#[test]
fn modules_import_only_downwards() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = check(&src, NAMES_A_BACKEND);
    assert!(
        problems.is_empty(),
        "the layering of src/ is broken (the order is LAYERS in tests/layering.rs):\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_backend_named_outside_the_backend_layer_is_caught() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layering-names-a-backend");
    let _ = fs::remove_dir_all(&root);
    let files = [
        ("lib.rs", "pub mod backend;\npub mod booster;\npub mod model;\npub mod python;\n"),
        ("backend/mod.rs", "pub mod cpu;\npub mod engine;\n"),
        // The shared layer may name the backends.
        ("backend/engine.rs", "use super::cpu::f;\n"),
        ("backend/cpu/mod.rs", "pub fn f() {}\n"),
        ("booster/mod.rs", "use crate::backend::{cpu::f, Engine};\n"),
        ("model/mod.rs", "use crate::backend;\nfn g() {\n    backend::cuda::h();\n    backend::select();\n}\n"),
        ("python/mod.rs", "fn g() {\n    crate::backend::cpu::f();\n}\n"),
    ];
    for (path, text) in files {
        let path = root.join("src").join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let named = |allowed: &[(&str, &str, &str)]| -> Vec<String> {
        let problems = check(&root.join("src"), allowed);
        problems.into_iter().filter(|p| p.contains("names backend") || p.contains("NAMES_A_BACKEND")).collect()
    };
    let found = named(&[]);
    let want = [
        ("`booster` names backend `cpu`", "src/booster/mod.rs:1: crate::backend::cpu::f"),
        ("`model` names backend `cuda`", "src/model/mod.rs:3: crate::backend::cuda::h"),
        ("`python` names backend `cpu`", "src/python/mod.rs:2: crate::backend::cpu::f"),
    ];
    assert_eq!(found.len(), want.len(), "{found:#?}");
    for (problem, (start, end)) in found.iter().zip(want) {
        assert!(problem.starts_with(start) && problem.ends_with(end), "{problem}");
    }
    // An entry allows its path; one that nothing needs is an error.
    let found =
        named(&[("src/python/mod.rs", "backend::cpu", "a test"), ("src/model/mod.rs", "backend::cpu", "stale")]);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[2].starts_with("NAMES_A_BACKEND allows src/model/mod.rs to name backend::cpu"), "{}", found[2]);
}

#[test]
fn sibling_files_import_one_another_without_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = check_siblings(&src, SIBLING_CYCLES);
    assert!(
        problems.is_empty(),
        "files of one module import one another in a cycle (move what both need into a file of its own, or \
         give an honest cycle its reason in SIBLING_CYCLES, tests/layering.rs):\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_cycle_among_sibling_files_is_caught() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layering-sibling-cycles");
    let _ = fs::remove_dir_all(&root);
    let files = [
        ("lib.rs", "pub mod data;\n"),
        ("data/mod.rs", "pub mod frame;\npub mod stream;\npub mod cuts;\nmod sub;\npub use frame::Dataset;\n"),
        // frame -> stream through the parent's re-export: the cycle frame -> stream -> frame.
        ("data/frame.rs", "pub struct Dataset;\nuse super::stream::Batch;\n"),
        ("data/stream.rs", "pub struct Batch;\nfn f(_: super::Dataset) {}\n"),
        // cuts -> sub: a subdirectory is one sibling, and `sub` reaches back to cuts.
        ("data/cuts.rs", "use crate::data::sub::deep::Thing;\n#[cfg(test)]\nuse super::frame::Dataset;\n"),
        ("data/sub/mod.rs", "pub mod deep;\n"),
        ("data/sub/deep.rs", "pub struct Thing;\nuse crate::data::cuts;\n"),
    ];
    for (path, text) in files {
        let path = root.join("src").join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let found = check_siblings(&root.join("src"), &[]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("import cycle among the files of `data`: cuts -> sub -> cuts"), "{}", found[0]);
    assert!(found[0].contains("cuts -> sub: src/data/cuts.rs:1: crate::data::sub::deep::Thing"), "{}", found[0]);
    assert!(found[1].starts_with("import cycle among the files of `data`: frame -> stream -> frame"), "{}", found[1]);
    assert!(found[1].contains("stream -> frame: src/data/stream.rs:2: crate::data::frame::Dataset"), "{}", found[1]);
    // An allowed cycle passes; an entry that no cycle needs is an error.
    let found =
        check_siblings(&root.join("src"), &[("data", &["frame", "stream"], "a test"), ("data", &["a", "b"], "stale")]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[1].starts_with("SIBLING_CYCLES allows the cycle a, b in `data`"), "{}", found[1]);
}

#[test]
fn the_reader_finds_every_form_of_path() {
    let src = r####"
//! crate::doc::comment is not a path
/* crate::block /* nested crate::x */ still a comment */
use crate::error::{Error, Result};
pub(crate) use crate::data::{self, frame::{Dataset, FeatureFrame as Frame}, *};
use crate::tree as t;
use super::sibling::Thing;
fn f<'a>(x: &'a str) -> char {
    let _ = "crate::in_a_string \" crate::still";
    let _ = r#"crate::raw "quoted" crate::raw2"#;
    let _ = crate::metric::weighted_average::<f32>(x);
    let _ = '"'; let _ = '\''; let _ = crate::random::hash64(1, 2);
    m!($crate::prediction::Out);
    'a'
}
#[cfg(feature = "cuda")]
use crate::collective::Solo;
#[cfg(test)]
mod tests {
    use crate::booster::train;
}
#[cfg(test)]
use crate::model::Model;
mod inner {
    use super::super::objective::Loss;
    use crate :: config
        :: {TrainConfig,
            Device};
}
"####;
    let module = vec!["backend".to_string(), "cpu".to_string()];
    let mut c = strip(src);
    drop_test_items(&mut c);
    let found: Vec<(usize, String)> = crate_paths(&module, &c).into_iter().map(|(l, p)| (l, p.join("::"))).collect();
    let want = [
        (4, "error::Error"),
        (4, "error::Result"),
        (5, "data::self"),
        (5, "data::frame::Dataset"),
        (5, "data::frame::FeatureFrame"),
        (5, "data"),
        (6, "tree"),
        (7, "backend::sibling::Thing"),
        (11, "metric::weighted_average"),
        (12, "random::hash64"),
        (13, "prediction::Out"),
        (17, "collective::Solo"),
        (25, "backend::objective::Loss"),
        (26, "config::TrainConfig"),
        (26, "config::Device"),
    ];
    let want: Vec<(usize, String)> = want.iter().map(|&(l, p)| (l, p.to_string())).collect();
    assert_eq!(found, want);
}
