//! The shim's layering and the analyzer's module graph, checked from the source text
//! (docs/design.md, "Layers of the shim").
//!
//! Every `.rs` file of `shim/src` and of the analyzer library (`crates/seedance-analyze/src`,
//! without its binaries) is read as Rust tokens (`proc-macro2`'s lexer, so comments and string
//! literals never count). A file references a module when it names it by a path: `crate::a::b`,
//! `$crate::a` inside a macro, `super::x`, `self::x`, a path that starts with a name the file
//! imported (`use crate::rt::session;` then `session::count`), or a child module; `use` trees
//! with braces are expanded, and a name re-exported by `pub use` (or found through a glob) is
//! followed to the file that defines it. `mod x;` declarations are not references, and the
//! crate root (`lib.rs`), which declares and re-exports everything, is above every module: its
//! own references count for no cycle and break no layer. `LAYERS_SOURCE_ROOT` checks another
//! checkout (a branch's worktree) instead of this one.
//!
//! Three checks, each failing with the list of what breaks it:
//! * no cycle of more than two files (in either source tree);
//! * no shim file over 450 lines;
//! * in the shim, no reference up the layers: wrappers (`hooks.rs`, `hooks/` but its ids) and
//!   `interpose/` -> `faults/` -> `rt/`, `driver/`, and the ids (`hooks/ids.rs`) -> `platform/`
//!   (the OS, which uses nothing else of the shim); `exit.rs` (and `exit/`) is named only by
//!   `lib.rs`, and by the wrappers for `exit/record.rs` (cuInit's wrapper starts the session
//!   record).

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Most lines in one shim file.
const MAX_LINES: usize = 450;

/// One source file, lexed.
struct File {
    /// Path relative to the source root, `/`-separated (`faults/lifetime/streams.rs`).
    rel: String,
    /// Module path of the file (`["faults", "lifetime", "streams"]`; `[]` for `lib.rs`).
    module: Vec<String>,
    lines: usize,
    tokens: Vec<TokenTree>,
}

/// A module reference found in a file: the line it is on, how it reads, and its path as
/// written (resolved by [`Tree::resolve`]).
struct Reference {
    line: usize,
    written: String,
    path: Vec<String>,
}

/// What one module scope (a file, or an inline `mod x { .. }` in it) declares. Import and
/// glob paths are kept as written, resolved from this scope when followed.
#[derive(Default)]
struct Scope {
    /// `use` imports: the name in scope -> the path as written.
    imports: BTreeMap<String, Vec<String>>,
    /// `use a::b::*`: the paths of glob imports as written.
    globs: Vec<Vec<String>>,
    /// Items defined here (functions, types, constants, macros, modules).
    items: BTreeSet<String>,
}

/// A source tree: files by module path, scopes by module path (files and inline modules).
struct Tree {
    root: String,
    files: BTreeMap<Vec<String>, File>,
    scopes: BTreeMap<Vec<String>, Scope>,
}

fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
        parts.pop();
    }
    parts
}

fn collect(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, base, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

fn joined(a: &[String], b: &[String]) -> Vec<String> {
    let mut v = a.to_vec();
    v.extend_from_slice(b);
    v
}

impl Tree {
    /// Reads every `.rs` file below `root` (relative to the workspace), leaving out the
    /// binaries (`main.rs`, `bin/`), which are crates of their own.
    fn read(root: &str) -> Tree {
        // LAYERS_SOURCE_ROOT: another checkout to check (a branch's worktree), else this one.
        let workspace = std::env::var_os("LAYERS_SOURCE_ROOT")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        let base = workspace.join(root);
        let mut sources = Vec::new();
        collect(&base, &base, &mut sources);
        sources.retain(|(rel, _)| rel != "main.rs" && !rel.starts_with("bin/"));
        Tree::from_sources(root, sources)
    }

    fn from_sources(root: &str, sources: Vec<(String, String)>) -> Tree {
        let mut files = BTreeMap::new();
        for (rel, text) in sources {
            let tokens: TokenStream = text
                .parse()
                .unwrap_or_else(|e| panic!("{root}/{rel}: not lexable as Rust: {e:?}"));
            let module = module_of(&rel);
            files.insert(
                module.clone(),
                File {
                    rel,
                    module,
                    lines: text.lines().count(),
                    tokens: tokens.into_iter().collect(),
                },
            );
        }
        let mut scopes = BTreeMap::new();
        for file in files.values() {
            declare(&file.tokens, &file.module, true, &mut scopes);
        }
        Tree {
            root: root.to_owned(),
            files,
            scopes,
        }
    }

    /// Makes `written` (a path as written in module `at`) absolute, without the leading
    /// `crate`; `None` for a path outside the crate (`std::..`, `libc::..`, a local name).
    fn resolve(&self, written: &[String], at: &[String], depth: usize) -> Option<Vec<String>> {
        let first = written.first()?;
        if depth > 8 {
            return None;
        }
        match first.as_str() {
            "crate" => Some(written[1..].to_vec()),
            "self" => Some(joined(at, &written[1..])),
            "super" => {
                let mut base = at.to_vec();
                let mut rest = written;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some(joined(&base, rest))
            }
            _ => {
                let scope = self.scopes.get(at)?;
                if scope.items.contains(first) {
                    return Some(joined(at, written));
                }
                if let Some(target) = scope.imports.get(first) {
                    return self.resolve(&joined(target, &written[1..]), at, depth + 1);
                }
                for glob in &scope.globs {
                    let Some(g) = self.resolve(glob, at, depth + 1) else {
                        continue;
                    };
                    if self
                        .scopes
                        .get(&g)
                        .is_some_and(|s| s.items.contains(first) || s.imports.contains_key(first))
                    {
                        return Some(joined(&g, written));
                    }
                }
                None
            }
        }
    }

    /// The file that defines `path` (absolute): the file of the longest module prefix, after
    /// following an import, re-export or glob of the next name.
    fn file_of(&self, path: &[String], depth: usize) -> Option<&File> {
        let mut k = path.len();
        while k > 0 && !self.scopes.contains_key(&path[..k]) {
            k -= 1;
        }
        if depth < 8 && k < path.len() {
            let (at, name) = (&path[..k], &path[k]);
            let scope = &self.scopes[at];
            if !scope.items.contains(name) {
                let via = scope
                    .imports
                    .get(name)
                    .and_then(|t| self.resolve(&joined(t, &path[k + 1..]), at, depth + 1))
                    .or_else(|| {
                        let mut globbed = scope.globs.iter().filter_map(|g| {
                            let g = self.resolve(g, at, depth + 1)?;
                            let s = self.scopes.get(&g)?;
                            (s.items.contains(name) || s.imports.contains_key(name))
                                .then(|| joined(&g, &path[k..]))
                        });
                        globbed.next()
                    });
                if let Some(p) = via {
                    return self.file_of(&p, depth + 1);
                }
            }
        }
        let mut f = k;
        while f > 0 && !self.files.contains_key(&path[..f]) {
            f -= 1;
        }
        self.files.get(&path[..f])
    }

    /// Every file each file references (itself left out), with the references that make
    /// each edge.
    fn edges(&self) -> BTreeMap<String, BTreeMap<String, Vec<Reference>>> {
        let mut out: BTreeMap<String, BTreeMap<String, Vec<Reference>>> = BTreeMap::new();
        for file in self.files.values() {
            let mut refs = Vec::new();
            references(&file.tokens, &file.module, &mut refs);
            let edges = out.entry(file.rel.clone()).or_default();
            if file.module.is_empty() {
                // The crate root declares and re-exports every module and may name any of
                // them (the layer rule exempts it too): it is above them all, never part of
                // a cycle.
                continue;
            }
            for (at, r) in refs {
                let Some(path) = self.resolve(&r.path, &at, 0) else {
                    continue;
                };
                if let Some(target) = self.file_of(&path, 0) {
                    if target.rel != file.rel {
                        edges.entry(target.rel.clone()).or_default().push(r);
                    }
                }
            }
        }
        out
    }
}

fn ident(t: &TokenTree) -> Option<String> {
    match t {
        TokenTree::Ident(i) => Some(i.to_string()),
        _ => None,
    }
}

fn is_punct(t: Option<&TokenTree>, c: char) -> bool {
    matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

/// `::` at `tokens[i]`.
fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
        && is_punct(tokens.get(i + 1), ':')
}

/// Parses the `use` tree that starts at `tokens[i]` into (path as written, name in scope)
/// pairs, `*` as the name of a glob; returns the index after it.
fn use_tree(
    tokens: &[TokenTree],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, String)>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match tokens.get(i) {
            Some(TokenTree::Ident(id)) => {
                path.push(id.to_string());
                i += 1;
                if is_path_sep(tokens, i) {
                    i += 2;
                    continue;
                }
                let mut name = path.last().cloned().unwrap_or_default();
                if tokens.get(i).and_then(ident).as_deref() == Some("as") {
                    if let Some(alias) = tokens.get(i + 1).and_then(ident) {
                        name = alias;
                    }
                    i += 2;
                }
                if path.last().map(String::as_str) == Some("self") {
                    path.pop();
                    if name == "self" {
                        name = path.last().cloned().unwrap_or_default();
                    }
                }
                out.push((path, name));
                return i;
            }
            Some(TokenTree::Punct(p)) if p.as_char() == '*' => {
                out.push((path, "*".to_owned()));
                return i + 1;
            }
            // `$crate` in a macro.
            Some(TokenTree::Punct(p)) if p.as_char() == '$' => i += 1,
            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                let mut j = 0;
                while j < inner.len() {
                    j = use_tree(&inner, j, &path, out);
                    while j < inner.len() && !is_punct(inner.get(j), ',') {
                        j += 1;
                    }
                    j += 1;
                }
                return i + 1;
            }
            _ => return i,
        }
    }
}

/// Collects, for module `at`, its imports, globs and items (`module`: `tokens` is the
/// module's own body, so its item names count), descending into inline modules; the `use`s
/// of function bodies, impl blocks and macros count for the module they are in.
fn declare(
    tokens: &[TokenTree],
    at: &[String],
    module: bool,
    scopes: &mut BTreeMap<Vec<String>, Scope>,
) {
    scopes.entry(at.to_vec()).or_default();
    let mut i = 0;
    while i < tokens.len() {
        match ident(&tokens[i]).as_deref() {
            Some("use") => {
                let mut found = Vec::new();
                let end = use_tree(tokens, i + 1, &[], &mut found);
                let scope = scopes.get_mut(at).unwrap();
                for (path, name) in found {
                    if name == "*" {
                        scope.globs.push(path);
                    } else {
                        scope.imports.entry(name).or_insert(path);
                    }
                }
                i = end;
                continue;
            }
            Some("mod") => {
                if let Some(name) = tokens.get(i + 1).and_then(ident) {
                    scopes.get_mut(at).unwrap().items.insert(name.clone());
                    if let Some(TokenTree::Group(g)) = tokens.get(i + 2) {
                        let body: Vec<TokenTree> = g.stream().into_iter().collect();
                        declare(&body, &joined(at, &[name]), true, scopes);
                        i += 3;
                        continue;
                    }
                }
            }
            Some("fn" | "struct" | "enum" | "union" | "trait" | "type" | "const" | "static")
                if module =>
            {
                if let Some(name) = tokens.get(i + 1).and_then(ident) {
                    scopes.get_mut(at).unwrap().items.insert(name);
                }
            }
            Some("macro_rules") if module && is_punct(tokens.get(i + 1), '!') => {
                if let Some(name) = tokens.get(i + 2).and_then(ident) {
                    scopes.get_mut(at).unwrap().items.insert(name);
                }
            }
            _ => {}
        }
        if let TokenTree::Group(g) = &tokens[i] {
            let body: Vec<TokenTree> = g.stream().into_iter().collect();
            declare(&body, at, false, scopes);
        }
        i += 1;
    }
}

fn line_of(t: &TokenTree) -> usize {
    t.span().start().line
}

/// Collects every module reference in `tokens` (module `at`), descending into groups:
/// (the module it is written in, the reference with its path as written).
fn references(tokens: &[TokenTree], at: &[String], out: &mut Vec<(Vec<String>, Reference)>) {
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        match t {
            TokenTree::Ident(id) if id == "use" => {
                let mut found = Vec::new();
                let end = use_tree(tokens, i + 1, &[], &mut found);
                for (path, _) in found {
                    let written = format!("use {}", path.join("::"));
                    out.push((
                        at.to_vec(),
                        Reference {
                            line: line_of(t),
                            written,
                            path,
                        },
                    ));
                }
                i = end;
                continue;
            }
            TokenTree::Ident(id) if id == "mod" => {
                if let (Some(name), Some(TokenTree::Group(g))) =
                    (tokens.get(i + 1).and_then(ident), tokens.get(i + 2))
                {
                    let body: Vec<TokenTree> = g.stream().into_iter().collect();
                    references(&body, &joined(at, &[name]), out);
                    i += 3;
                } else {
                    i += 2; // `mod x;` declares, it does not reference
                }
                continue;
            }
            TokenTree::Ident(id) if is_path_sep(tokens, i + 1) => {
                let mut path = vec![id.to_string()];
                let mut j = i + 1;
                while is_path_sep(tokens, j) {
                    match tokens.get(j + 2).and_then(ident) {
                        Some(seg) => path.push(seg),
                        None => break,
                    }
                    j += 3;
                }
                out.push((
                    at.to_vec(),
                    Reference {
                        line: line_of(t),
                        written: path.join("::"),
                        path,
                    },
                ));
                i = j;
                continue;
            }
            TokenTree::Punct(p) if p.as_char() == ':' && is_path_sep(tokens, i) => {
                // `<T as Trait>::x`, `::std::x`: the path goes on past a non-name; skip it.
                i += 2;
                while tokens.get(i).and_then(ident).is_some() && is_path_sep(tokens, i + 1) {
                    i += 3;
                }
                i += 1;
                continue;
            }
            TokenTree::Group(g) => {
                let body: Vec<TokenTree> = g.stream().into_iter().collect();
                references(&body, at, out);
            }
            _ => {}
        }
        i += 1;
    }
}

/// Strongly connected components of more than two files that hold a cycle through more
/// than two files, each with one such cycle.
fn long_cycles(
    edges: &BTreeMap<String, BTreeMap<String, Vec<Reference>>>,
) -> Vec<(Vec<String>, Vec<String>)> {
    let nodes: Vec<&String> = edges.keys().collect();
    let index: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            edges[*n]
                .keys()
                .filter_map(|t| index.get(t).copied())
                .collect()
        })
        .collect();
    // Tarjan's algorithm, iterative enough for a few hundred files.
    struct T<'a> {
        adj: &'a [Vec<usize>],
        idx: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.idx[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.adj[v] {
            match t.idx[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.idx[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            t.out.push(comp);
        }
    }
    let mut t = T {
        adj: &adj,
        idx: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on: vec![false; nodes.len()],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..nodes.len() {
        if t.idx[v].is_none() {
            visit(&mut t, v);
        }
    }
    let mut found = Vec::new();
    for comp in t.out.iter().filter(|c| c.len() > 2) {
        let inside: BTreeSet<usize> = comp.iter().copied().collect();
        // The shortest cycle through three or more files: for each edge u -> v, the shortest
        // path back from v to u that does not take the edge v -> u (it has two or more
        // steps, so with u -> v it is a simple cycle of three or more files). Every such
        // cycle shows up so: if none does, the component is made of two-file cycles only.
        let mut best: Option<Vec<usize>> = None;
        for &u in comp {
            for &v in adj[u].iter().filter(|w| inside.contains(w)) {
                if let Some(back) = shortest_path(&adj, &inside, v, u) {
                    if best.as_ref().is_none_or(|b| back.len() < b.len()) {
                        let mut cycle = vec![u];
                        cycle.extend(&back[..back.len() - 1]);
                        best = Some(cycle);
                    }
                }
            }
        }
        if let Some(mut c) = best {
            // From its first file by name, so the same tree always reads the same.
            let first = (0..c.len()).min_by_key(|&k| &nodes[c[k]]).unwrap_or(0);
            c.rotate_left(first);
            let mut names: Vec<String> = comp.iter().map(|&i| nodes[i].clone()).collect();
            names.sort();
            found.push((c.iter().map(|&i| nodes[i].clone()).collect(), names));
        }
    }
    found
}

/// The shortest path `from` .. `to` inside `inside` that does not take the edge
/// `from -> to` (so at least two steps), breadth-first; `None` if there is none.
fn shortest_path(
    adj: &[Vec<usize>],
    inside: &BTreeSet<usize>,
    from: usize,
    to: usize,
) -> Option<Vec<usize>> {
    let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(x) = queue.pop_front() {
        for &y in &adj[x] {
            if !inside.contains(&y) || (x == from && y == to) || y == from || prev.contains_key(&y)
            {
                continue;
            }
            prev.insert(y, x);
            if y == to {
                let mut path = vec![to];
                let mut at = to;
                while at != from {
                    at = prev[&at];
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            queue.push_back(y);
        }
    }
    None
}

/// The cycles of more than two files in `tree`: one entry per strongly connected component
/// that has one, its shortest such cycle with a line per edge.
fn cycle_report(tree: &Tree) -> Vec<String> {
    let edges = tree.edges();
    let mut out = Vec::new();
    for (cycle, members) in long_cycles(&edges) {
        let mut text = format!(
            "{}: a cycle of {} files, among the {} files of one strongly connected component ({}):",
            tree.root,
            cycle.len(),
            members.len(),
            members.join(", ")
        );
        for k in 0..cycle.len() {
            let (a, b) = (&cycle[k], &cycle[(k + 1) % cycle.len()]);
            let r = &edges[a][b][0];
            text.push_str(&format!("\n    {a}:{} -> {b} ({})", r.line, r.written));
        }
        out.push(text);
    }
    out
}

/// Layer of `exit.rs` and `exit/`.
const EXIT: u8 = 5;

/// Layer of a shim file (docs/design.md, "Layers of the shim"); `None` when it is in none.
fn layer(rel: &str) -> Option<(u8, &'static str)> {
    let top = rel.split('/').next().unwrap_or(rel).trim_end_matches(".rs");
    Some(match top {
        "lib" if rel == "lib.rs" => (9, "the crate root"),
        "exit" => (EXIT, "exit"),
        "hooks" if rel.starts_with("hooks/ids") => (1, "ids"),
        "hooks" => (4, "wrappers"),
        "interpose" => (4, "interpose"),
        "faults" => (3, "faults"),
        "rt" => (2, "rt"),
        "driver" => (2, "driver"),
        "platform" => (0, "platform"),
        _ => return None,
    })
}

/// Rank the layer rule gives each layer: a file may reference files of its own rank or lower.
/// rt, driver and the ids share one: the ids hold the slots, which the driver layer fills,
/// beside the runtime's hot words (`rt::hot`).
fn rank(layer: u8) -> u8 {
    match layer {
        1 | 2 => 1,
        n => n,
    }
}

fn layer_report(tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for file in tree.files.values() {
        if layer(&file.rel).is_none() {
            out.push(format!(
                "shim/src/{}: in no layer (hooks, interpose, faults, rt, driver, platform, exit.rs: docs/design.md)",
                file.rel
            ));
        }
    }
    for (from, targets) in tree.edges() {
        let Some((lf, name_f)) = layer(&from) else {
            continue;
        };
        for (to, refs) in targets {
            let Some((lt, name_t)) = layer(&to) else {
                continue;
            };
            // cuInit's wrapper starts the session record: the one name of exit/ from below lib.rs.
            let starts_record = from == "hooks/wrappers.rs" && to == "exit/record.rs";
            let why = if starts_record {
                continue;
            } else if lt == EXIT && lf != EXIT && from != "lib.rs" {
                "only lib.rs may name exit.rs"
            } else if from != "lib.rs" && rank(lt) > rank(lf) {
                "up the layers"
            } else {
                continue;
            };
            let r = &refs[0];
            let more = if refs.len() > 1 {
                format!(" and {} more", refs.len() - 1)
            } else {
                String::new()
            };
            out.push(format!(
                "shim/src/{from}:{} ({name_f}) -> shim/src/{to} ({name_t}): {why}: `{}`{more}",
                r.line, r.written
            ));
        }
    }
    out
}

fn fail_with(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{what} ({} found; the layers: docs/design.md):\n{}\n",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn no_cycle_of_more_than_two_files() {
    let mut problems = cycle_report(&Tree::read("shim/src"));
    problems.extend(cycle_report(&Tree::read("crates/seedance-analyze/src")));
    fail_with("module cycles of more than two files", &problems);
}

#[test]
fn no_shim_file_over_450_lines() {
    let tree = Tree::read("shim/src");
    let problems: Vec<String> = tree
        .files
        .values()
        .filter(|f| f.lines > MAX_LINES)
        .map(|f| {
            format!(
                "shim/src/{}: {} lines (at most {MAX_LINES})",
                f.rel, f.lines
            )
        })
        .collect();
    fail_with("shim files over 450 lines", &problems);
}

#[test]
fn shim_references_go_down_the_layers() {
    fail_with(
        "shim references that break the layering",
        &layer_report(&Tree::read("shim/src")),
    );
}

// The checks themselves, on small made-up trees.

fn tree(files: &[(&str, &str)]) -> Tree {
    Tree::from_sources(
        "src",
        files
            .iter()
            .map(|(r, t)| (r.to_string(), t.to_string()))
            .collect(),
    )
}

#[test]
fn a_three_file_cycle_is_found_with_its_references() {
    let t = tree(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "use crate::b::f;\npub fn g() {}"),
        ("b.rs", "pub fn f() { crate::c::h() }"),
        (
            "c.rs",
            "use crate::{a::{self}, b};\n// crate::b::f in a comment\npub fn h() { a::g() }",
        ),
    ]);
    assert_eq!(
        cycle_report(&t),
        [
            "src: a cycle of 3 files, among the 3 files of one strongly connected component \
          (a.rs, b.rs, c.rs):\n    \
          a.rs:1 -> b.rs (use crate::b::f)\n    \
          b.rs:1 -> c.rs (crate::c::h)\n    \
          c.rs:1 -> a.rs (use crate::a)"
        ],
    );
}

#[test]
fn two_file_cycles_and_inline_test_modules_are_not_reported() {
    let t = tree(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "use super::b::f; pub fn g() {} #[cfg(test)] mod tests { use super::*; fn t() { super::g() } }"),
        ("b.rs", "pub fn f() { crate::a::g(); crate::c::h() }"),
        ("c.rs", "pub fn h() { crate::b::f() }"),
    ]);
    assert!(cycle_report(&t).is_empty());
}

#[test]
fn references_up_the_layers_and_to_exit_are_named() {
    let t = tree(&[
        (
            "lib.rs",
            "mod exit; mod faults; mod hooks; mod rt; mod platform;",
        ),
        (
            "hooks.rs",
            "mod ids; pub use ids::HookId; pub fn wrapper() {}",
        ),
        ("hooks/ids.rs", "pub enum HookId {}"),
        (
            "faults.rs",
            "use crate::hooks::HookId;\nfn f() { crate::hooks::wrapper() }",
        ),
        ("rt.rs", "use crate::{exit, platform::tid};"),
        ("exit.rs", "fn e() { crate::faults::x() }"),
        ("platform.rs", "pub fn tid() {}"),
    ]);
    let report = layer_report(&t);
    assert_eq!(
        report,
        [
            "shim/src/faults.rs:2 (faults) -> shim/src/hooks.rs (wrappers): up the layers: `crate::hooks::wrapper`",
            "shim/src/rt.rs:1 (rt) -> shim/src/exit.rs (exit): only lib.rs may name exit.rs: `use crate::exit`",
        ],
    );
}

/// The hooked ABI variants of `shim/src/hooks.rs`'s table (its `wrapped` lines, each
/// `symbol (..) clauses;`) and their distinct base names, which the driver-ABI table
/// `crates/seedance-cuda/src/abi/table.rs` gives (rows `base (..) {`, variant lines
/// `symbol since form sides;`): (variants, functions).
fn hook_table_counts(hooks_rs: &str, abi_table_rs: &str) -> (usize, usize) {
    let mut base_of = std::collections::BTreeMap::new();
    let mut base = "";
    for line in abi_table_rs.lines().map(str::trim) {
        let Some(first) = line.split_whitespace().next() else {
            continue;
        };
        if !first.starts_with("cu") {
            continue;
        }
        if line.ends_with('{') {
            base = first;
        } else if line.ends_with(';') {
            base_of.insert(first, base);
        }
    }
    let wrapped = hooks_rs
        .split_once("wrapped {\n")
        .and_then(|(_, rest)| rest.split_once("custom {\n"))
        .map(|(w, _)| w)
        .unwrap_or("");
    let mut bases = BTreeSet::new();
    let mut variants = 0;
    for line in wrapped.lines() {
        let mut words = line.split_whitespace();
        if let (Some(sym), Some(args)) = (words.next(), words.next()) {
            if sym.starts_with("cu") && args.starts_with('(') {
                variants += 1;
                bases.insert(base_of.get(sym).copied().unwrap_or(sym));
            }
        }
    }
    (variants, bases.len())
}

#[test]
fn hook_table_counts_count_lines_and_base_names() {
    let table = "wrapped {\n    cuA_v2 (x: c_int);\n    cuA (x: c_int);\n    cuB () ok(f(r));\n}\ncustom {\n    cuC;\n}";
    let abi = "        cuA (x: c_int) {\n            cuA 0 legacy both;\n            cuA_v2 3020 legacy both;\n        }\n        cuB () {\n            cuB 0 legacy hooked;\n        }";
    assert_eq!(hook_table_counts(table, abi), (3, 2));
}

/// docs/model-coverage.md says how many driver functions and ABI variants the shim
/// intercepts: the numbers the table gives (one of the files a new hooked function edits
/// anyway, docs/design.md "Adding a hooked driver function").
#[test]
fn model_coverage_counts_what_the_hook_table_hooks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let hooks = std::fs::read_to_string(root.join("shim/src/hooks.rs")).expect("shim/src/hooks.rs");
    let abi = std::fs::read_to_string(root.join("crates/seedance-cuda/src/abi/table.rs"))
        .expect("crates/seedance-cuda/src/abi/table.rs");
    let readme = std::fs::read_to_string(root.join("docs/model-coverage.md"))
        .expect("docs/model-coverage.md");
    let (variants, functions) = hook_table_counts(&hooks, &abi);
    assert!(variants > 0, "no table lines found in shim/src/hooks.rs");
    let words = format!("{functions} driver functions in {variants}\nexported ABI variants");
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat(&readme).contains(&flat(&words)),
        "docs/model-coverage.md should say \"{}\" (the table in shim/src/hooks.rs has {variants} lines for {functions} functions)",
        flat(&words)
    );
}
