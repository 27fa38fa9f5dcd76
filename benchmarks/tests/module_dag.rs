//! The modules of `benchmarks/src` form a DAG: no chain of `crate::` references leads
//! from a module back to itself. A cycle means no module of it can be read, tested or
//! moved on its own (issue 14 found one of eleven modules, from the kind registry through
//! the kinds, acceptance, CRDs, sets and results back to the registry).
//!
//! The check is made at two levels. Between groups: nodes are the top-level modules of the
//! crate (`api`, `execution`, `kinds`, `set`, …). Between files: a group (a folder whose
//! `mod.rs` only declares its members) is no node itself, each of its members is
//! (`execution::plan`, `kinds::registry`, `kinds::fio`, …); any other top-level module is
//! one node. An edge `a -> b` is a `crate::b…` (or a `super::` path that leaves `a`) in
//! non-test code of `a`. Unit tests (`#[cfg(test)]` items and test-only modules) are left
//! out: they sit above everything they test. Comments, doc links and string literals are
//! not references.
//!
//! Plain text scanning with std only, so that the check needs no parser crate and runs in
//! milliseconds; the unit tests below show it finds what it must.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module graph: node → (neighbour → where the first reference to it is).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn benchmarks_modules_form_a_dag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = crate_graph(&src);
    let groups = group_graph(&files);
    // The scan must see the crate's real structure, or a DAG would be found trivially.
    for (graph, from, to) in [
        (&files, "kinds::registry", "kinds::fio"),
        (&files, "set", "kinds::registry"),
        (&files, "kinds::fio", "execution::plan"),
        (&groups, "set", "kinds"),
        (&groups, "kinds", "execution"),
    ] {
        assert!(
            graph.get(from).is_some_and(|out| out.contains_key(to)),
            "the scan missed the reference {from} -> {to}; graph: {graph:#?}"
        );
    }
    assert_acyclic(&groups, "a cycle between groups");
    assert_acyclic(&files, "a module cycle");
}

fn assert_acyclic(graph: &Graph, what: &str) {
    if let Some(cycle) = find_cycle(graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                format!(
                    "  {} -> {}   ({})",
                    pair[0], pair[1], graph[&pair[0]][&pair[1]]
                )
            })
            .collect();
        panic!(
            "benchmarks/src has {what}: {}\n{}\nMove the shared item into a lower module (or a leaf) instead.",
            cycle.join(" -> "),
            steps.join("\n")
        );
    }
}

/// The group graph: each node of `files` taken to its top-level module.
fn group_graph(files: &Graph) -> Graph {
    let top = |node: &str| node.split("::").next().unwrap_or(node).to_owned();
    let mut graph = Graph::new();
    for (from, edges) in files {
        let out = graph.entry(top(from)).or_default();
        for (to, at) in edges {
            if top(to) != top(from) {
                out.entry(top(to)).or_insert_with(|| at.clone());
            }
        }
    }
    graph
}

/// The module graph of the crate whose sources are under `src`, at the level of files.
fn crate_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut test_only = BTreeSet::new();
    let mut scanned = Vec::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let module = module_path(src, file);
        let (code, test_children) = production_code(&text);
        for child in test_children {
            test_only.insert([module.clone(), vec![child]].concat());
        }
        scanned.push((file, module, code));
    }
    // A group's `mod.rs` declares its members and nothing else.
    let group_names: BTreeSet<String> = scanned
        .iter()
        .filter(|(file, module, code)| {
            module.len() == 1 && file.ends_with("mod.rs") && declares_only(code)
        })
        .map(|(_, module, _)| module[0].clone())
        .collect();
    let mut groups = Groups::new();
    for (_, module, _) in &scanned {
        if module.len() >= 2
            && group_names.contains(&module[0])
            && !test_only.contains(&module[..2])
        {
            groups
                .entry(module[0].clone())
                .or_default()
                .insert(module[1].clone());
        }
    }
    let mut graph = Graph::new();
    for (file, module, code) in &scanned {
        if (1..=module.len()).any(|len| test_only.contains(&module[..len])) || module.is_empty() {
            continue;
        }
        let from = node(module, &groups);
        let edges = graph.entry(from.clone()).or_default();
        for (path, line) in references(module, code) {
            let to = node(&path, &groups);
            if to != from && !to.is_empty() {
                let rel = file
                    .strip_prefix(src.parent().unwrap_or(src))
                    .unwrap_or(file);
                edges
                    .entry(to)
                    .or_insert_with(|| format!("{}:{line}", rel.display()));
            }
        }
    }
    // A group declares every member: a path that names the group alone (`use crate::kinds;`
    // then `kinds::fio::…`) may lead to any of them.
    for (group, members) in &groups {
        let declared = graph.entry(group.clone()).or_default();
        for member in members {
            declared
                .entry(format!("{group}::{member}"))
                .or_insert_with(|| format!("src/{group}/mod.rs"));
        }
    }
    graph
}

/// Group → its members (the modules its `mod.rs` declares).
type Groups = BTreeMap<String, BTreeSet<String>>;

/// Whether production `code` only declares modules and hands names on (`mod`, `pub mod`,
/// `pub use`): a group's `mod.rs`.
fn declares_only(code: &str) -> bool {
    code.split(';').map(str::trim).all(|item| {
        item.is_empty()
            || ["mod ", "pub mod ", "pub use "]
                .iter()
                .any(|p| item.starts_with(p))
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/kinds/fio/plan.rs` → `[kinds, fio, plan]`; `mod.rs` and `lib.rs` name their folder.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The graph node a module path belongs to: a group's member (`kinds::fio`), or its
/// top-level module; empty for the crate root (`crate::API_VERSION`), which is no node.
fn node(path: &[String], groups: &Groups) -> String {
    match path {
        [top, member, ..] if groups.get(top).is_some_and(|m| m.contains(member)) => {
            format!("{top}::{member}")
        }
        // Modules are snake_case; anything else directly under `crate` is the root's.
        [top, ..] if top.starts_with(|c: char| c.is_ascii_lowercase()) => top.clone(),
        // The crate root (`crate::API_VERSION`) and anything not a module is no node.
        _ => String::new(),
    }
}

/// The source with comments, string and char literals blanked (newlines kept, so line
/// numbers hold) and `#[cfg(test)]` items removed; and the names of the child modules
/// declared test-only (`#[cfg(test)] mod name;`).
fn production_code(text: &str) -> (String, Vec<String>) {
    let code = blank_literals(text);
    let bytes = code.as_bytes();
    let mut out = code.clone().into_bytes();
    let mut test_children = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let start = from + found;
        let mut i = start + "#[cfg(test)]".len();
        // Further attributes, then visibility.
        loop {
            i = skip_space(bytes, i);
            if code[i..].starts_with("#[") {
                i = matching(bytes, i + 1, b'[', b']');
            } else {
                break;
            }
        }
        let item = &code[i..];
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(brace)) if semi < brace => i + semi + 1,
            (Some(semi), None) => i + semi + 1,
            (_, Some(brace)) => matching(bytes, i + brace, b'{', b'}'),
            (None, None) => code.len(),
        };
        let words: Vec<&str> = code[i..end]
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        if code[i..end].trim_end().ends_with(';')
            && let Some(at) = words.iter().position(|w| *w == "mod")
            && let Some(name) = words.get(at + 1)
        {
            test_children.push((*name).to_owned());
        }
        for byte in &mut out[start..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        from = end;
    }
    (
        String::from_utf8(out).expect("ASCII blanks keep UTF-8"),
        test_children,
    )
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The index after the bracket that closes the one at `open`.
fn matching(bytes: &[u8], open: usize, left: u8, right: u8) -> usize {
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if b == left {
            depth += 1;
        } else if b == right {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
    }
    bytes.len()
}

/// `text` with every comment, string literal (raw or not) and char literal replaced by
/// spaces, newlines kept.
fn blank_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let at = |i: usize, n: usize| chars.get(i + n).copied();
        let c = chars[i];
        if c == '/' && at(i, 1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && at(i, 1) == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i, 1) == Some('*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && at(i, 1) == Some('/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || c == 'b')
            && !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && raw_string_hashes(&chars[i..]).is_some()
        {
            let (skip, hashes) = raw_string_hashes(&chars[i..]).expect("checked");
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            for _ in 0..skip {
                out.push(' ');
            }
            i += skip;
            while i < chars.len() && !chars[i..].starts_with(&closing) {
                out.push(blank(chars[i]));
                i += 1;
            }
            for _ in 0..closing.len().min(chars.len() - i) {
                out.push(' ');
            }
            i += closing.len();
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (at(i, 1) == Some('\\') || at(i, 2) == Some('\'')) {
            // A char literal ('x', '\n', '\u{1b}'); a lifetime ('a) has no closing quote.
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(' ');
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// For `r"`, `r#"`, `br##"`…: the length of the opening and the number of `#`.
fn raw_string_hashes(chars: &[char]) -> Option<(usize, usize)> {
    let mut i = usize::from(chars.first() == Some(&'b'));
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
    (chars.get(i + hashes) == Some(&'"')).then_some((i + hashes + 1, hashes))
}

/// Every module path `code` (of the module at `module`) refers to outside itself, with the
/// line of the reference: `crate::a::b…` and `super::…` paths, `use` trees expanded.
fn references(module: &[String], code: &str) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for anchor in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(anchor) {
            let at = from + found;
            from = at + anchor.len();
            let before = at.checked_sub(1).map(|i| bytes[i]);
            if before
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b':')
            {
                continue;
            }
            let line = code[..at].matches('\n').count() + 1;
            let base: Vec<String> = if anchor == "crate::" {
                Vec::new()
            } else {
                // Each leading `super` leaves one module.
                let mut base = module.to_vec();
                let mut rest = &code[at..];
                while let Some(after) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = after.trim_start();
                    from = code.len() - rest.len();
                }
                base
            };
            let mut paths = Vec::new();
            use_tree(&code[from..], &base, &mut paths);
            out.extend(paths.into_iter().map(|path| (path, line)));
        }
    }
    out
}

/// Expands a path or `use` tree (`a::b`, `a::{b, c::{d}}`) after `prefix`, keeping the
/// first two segments of each path (enough to name a node).
fn use_tree(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let text = text.trim_start();
    if let Some(inner) = text.strip_prefix('{') {
        let close = matching(text.as_bytes(), 0, b'{', b'}') - 1;
        let inner = &inner[..close - 1];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_tree(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_tree(&inner[start..], prefix, out);
        return;
    }
    let ident: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() || ident == "self" {
        if !prefix.is_empty() {
            out.push(prefix.to_vec());
        }
        return;
    }
    let path = [prefix, std::slice::from_ref(&ident)].concat();
    let rest = text[ident.len()..].trim_start();
    match rest.strip_prefix("::") {
        Some(rest) if path.len() < 2 => use_tree(rest, &path, out),
        _ => out.push(path),
    }
}

/// A cycle (first node repeated at the end) when `graph` has one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_owned(), Mark::Open);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let start = stack
                        .iter()
                        .position(|n| n == next)
                        .expect("open nodes are stacked");
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, marks, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if !marks.contains_key(node)
            && let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

fn graph_of(edges: &[(&str, &str)]) -> Graph {
    let mut graph = Graph::new();
    for (from, to) in edges {
        graph
            .entry((*from).to_owned())
            .or_default()
            .insert((*to).to_owned(), String::new());
    }
    graph
}

#[test]
fn the_cycle_finder_names_a_cycle() {
    let graph = graph_of(&[("a", "b"), ("b", "c"), ("c", "d"), ("c", "a"), ("d", "e")]);
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    // Two modules naming each other is the smallest cycle.
    let pair = graph_of(&[("x", "y"), ("y", "x")]);
    assert_eq!(
        find_cycle(&pair),
        Some(vec!["x".into(), "y".into(), "x".into()])
    );
}

#[test]
fn the_cycle_finder_accepts_a_dag_with_shared_descendants() {
    let diamond = graph_of(&[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("e", "a")]);
    assert_eq!(find_cycle(&diamond), None);
}

#[test]
// The source holds a raw string ending in `"#`, so the outer literal needs two hashes.
#[allow(clippy::needless_raw_string_hashes)]
fn references_expand_use_trees_and_skip_comments_strings_and_unit_tests() {
    let source = r##"
//! See [`crate::docs_only`].
use crate::{kinds::{registry::{self, lookup}, fio::Fio}};
use super::super::sibling::Item;
fn f() -> &'static str { let _ = crate::judging::metrics::find; "crate::in_a_string" }
const RAW: &str = r#"crate::in_raw "string""#;
const C: char = '{';
#[cfg(test)]
mod tests { use crate::set; fn g() { let _ = '}'; } }
#[cfg(test)]
mod mutated;
pub fn h() { crate::set::expand(); }
"##;
    let module: Vec<String> = vec!["kinds".into(), "llm".into(), "plan".into()];
    let (code, test_children) = production_code(source);
    assert_eq!(test_children, vec!["mutated".to_owned()]);
    let groups: Groups = [
        (
            "kinds".to_owned(),
            ["fio".to_owned(), "llm".to_owned(), "registry".to_owned()].into(),
        ),
        ("judging".to_owned(), ["metrics".to_owned()].into()),
    ]
    .into();
    let found: BTreeSet<(String, usize)> = references(&module, &code)
        .into_iter()
        .map(|(path, line)| (node(&path, &groups), line))
        .collect();
    let expected: BTreeSet<(String, usize)> = [
        ("kinds::registry", 3),
        ("kinds::fio", 3),
        ("kinds", 4), // super::super from kinds::llm::plan is `kinds`
        ("judging::metrics", 5),
        ("set", 12), // not a group: one node
    ]
    .into_iter()
    .map(|(n, l)| (n.to_owned(), l))
    .collect();
    assert_eq!(found, expected);
}

#[test]
fn groups_are_folders_that_only_declare_and_collapse_to_one_node() {
    let group = "//! A group.\n\npub mod a;\npub mod b;\n// Handed on.\npub use other::c;\n";
    assert!(declares_only(&production_code(group).0));
    assert!(!declares_only(
        &production_code("pub mod a;\npub struct S;\n").0
    ));
    let files = graph_of(&[
        ("kinds::registry", "kinds::fio"),
        ("kinds::fio", "execution::plan"),
        ("set", "kinds::registry"),
        ("execution::plan", "execution::reason"),
    ]);
    let groups = group_graph(&files);
    let edges: Vec<(&str, &str)> = groups
        .iter()
        .flat_map(|(from, out)| out.keys().map(move |to| (from.as_str(), to.as_str())))
        .collect();
    assert_eq!(edges, [("kinds", "execution"), ("set", "kinds")]);
}
