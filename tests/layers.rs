//! The one-way rule, checked rather than kept by eye: `src/lib.rs` declares the modules in
//! layers, top to bottom, one block of `mod` lines per layer. A module may use a module of a
//! layer below its own, never one above and never another of its own layer (the subsystems do
//! not know each other). Inside every folder, the files and subfolders that sit beside each
//! other use each other without a cycle (a folder's `mod.rs`, its front, is left out: it
//! declares its children and they use what it defines).
//!
//! Every path in every file of `src/` counts, `use` lines and paths in code alike, tests
//! included; only doc links and macro bodies are not read. A reader that found next to nothing
//! would pass every rule, so it must find at least [`MIN_PATHS_READ`]. `src/lib.rs`'s
//! `//! # Layout` list, the map a newcomer reads first, is held to the same blocks: one bullet
//! per layer, naming the same modules in the same order. Beside it, the size rules: no file in
//! `src/` over 600 lines, at most four loose at its top. No engine needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

type ModPath = Vec<String>;

/// The layers of `src/lib.rs`: each block of consecutive `mod` lines is one layer.
fn layers(lib_rs: &str) -> Vec<Vec<String>> {
    let mut layers: Vec<Vec<String>> = vec![Vec::new()];
    for line in lib_rs.lines() {
        let line = line.trim();
        let decl = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("pub(crate) mod "))
            .or_else(|| line.strip_prefix("mod "));
        match decl.and_then(|rest| rest.strip_suffix(';')) {
            Some(name) => layers.last_mut().unwrap().push(name.to_string()),
            None if !layers.last().unwrap().is_empty() => layers.push(Vec::new()),
            None => {}
        }
    }
    layers.retain(|layer| !layer.is_empty());
    layers
}

/// The modules the `//! # Layout` list of `src/lib.rs` names, one list per bullet. A bullet
/// names a module as a link followed by a colon (`` [`sandbox`]: ``), or a private one in
/// backticks followed by one (`` `text`: ``); other links and code in the prose are not names.
fn layout_list(lib_rs: &str) -> Vec<Vec<String>> {
    let mut bullets: Vec<String> = Vec::new();
    let mut in_layout = false;
    for line in lib_rs.lines().map_while(|l| l.strip_prefix("//!")) {
        let line = line.trim();
        if let Some(heading) = line.strip_prefix('#') {
            in_layout = heading.trim_start_matches('#').trim() == "Layout";
        } else if !in_layout || line.is_empty() {
        } else if let Some(first) = line.strip_prefix("- ") {
            bullets.push(first.to_string());
        } else if let Some(bullet) = bullets.last_mut() {
            bullet.push(' ');
            bullet.push_str(line);
        }
    }
    bullets.iter().map(|bullet| named_modules(bullet)).collect()
}

fn named_modules(bullet: &str) -> Vec<String> {
    // Between backticks: the odd pieces. A name's next piece starts with `]:` or `:`.
    let pieces: Vec<&str> = bullet.split('`').collect();
    (1..pieces.len())
        .step_by(2)
        .filter(|&i| {
            let name = pieces[i];
            let after = pieces.get(i + 1).copied().unwrap_or("");
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && (after.starts_with("]:") || after.starts_with(':'))
        })
        .map(|i| pieces[i].to_string())
        .collect()
}

/// Every `.rs` file under `dir` with its module path (`src/a/b.rs` and `src/a/b/mod.rs` are
/// `a::b`).
fn source_files(src: &Path) -> Vec<(PathBuf, ModPath)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: ModPath = rel
                    .iter()
                    .map(|part| part.to_string_lossy().into_owned())
                    .collect();
                if module.last().is_some_and(|last| last == "mod") {
                    module.pop();
                }
                out.push((path, module));
            }
        }
    }
    out.sort();
    out
}

/// The crate paths one file names, each resolved to an absolute module path.
struct PathsOfFile<'a> {
    /// The module whose code is being read (the file's, then inline modules inside it).
    scope: ModPath,
    modules: &'a BTreeSet<ModPath>,
    found: Vec<ModPath>,
}

impl PathsOfFile<'_> {
    fn resolve(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut base = self.scope.clone();
        let rest = match first.as_str() {
            "crate" => {
                base.clear();
                &segments[1..]
            }
            "self" => &segments[1..],
            "super" => {
                let supers = segments.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    base.pop();
                }
                &segments[supers..]
            }
            // A path through a child module (`pool::Pool`); one segment is a name in scope.
            _ if segments.len() > 1 => {
                let mut child = base.clone();
                child.push(first.clone());
                if !self.modules.contains(&child) {
                    return; // another crate, or an item in scope
                }
                segments
            }
            _ => return,
        };
        base.extend(rest.iter().cloned());
        self.found.push(base);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.named(prefix, &name.ident),
            syn::UseTree::Rename(rename) => self.named(prefix, &rename.ident),
            syn::UseTree::Glob(_) => self.resolve(&prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn named(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut segments = prefix.to_vec();
        if ident != "self" {
            segments.push(ident.to_string());
        }
        self.resolve(&segments);
    }
}

impl<'ast> Visit<'ast> for PathsOfFile<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.scope.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.scope.pop();
    }
}

/// The longest prefix of `path` that is a module of the crate.
fn module_of(path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// `src/lib.rs` and `src/main.rs`.
fn is_root(module: &ModPath) -> bool {
    matches!(module.as_slice(), [only] if only == "lib" || only == "main")
}

struct Crate {
    /// Each file's module and the modules its paths name.
    uses: Vec<(PathBuf, ModPath, BTreeSet<ModPath>)>,
}

/// The fewest paths to another module the reader must find in `src/`: it found 942 in a crate
/// of 21 modules; under half that, it has stopped reading some kind of path.
const MIN_PATHS_READ: usize = 400;

fn read_crate() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = source_files(&src);
    let modules: BTreeSet<ModPath> = files
        .iter()
        .map(|(_, module)| module.clone())
        .filter(|module| !is_root(module))
        .collect();
    let mut uses = Vec::new();
    for (path, module) in files {
        if is_root(&module) {
            continue; // the crate root and the binary may name any module
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&source)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut visitor = PathsOfFile {
            scope: module.clone(),
            modules: &modules,
            found: Vec::new(),
        };
        visitor.visit_file(&file);
        let named: BTreeSet<ModPath> = visitor
            .found
            .iter()
            .filter_map(|path| module_of(path, &modules))
            .collect();
        uses.push((path, module, named));
    }
    let read: usize = uses
        .iter()
        .map(|(_, module, named)| named.iter().filter(|target| *target != module).count())
        .sum();
    assert!(
        read >= MIN_PATHS_READ,
        "the reader found {read} paths from one module of src/ to another, fewer than \
         {MIN_PATHS_READ}: it is not reading the code, and every rule here would pass unchecked"
    );
    Crate { uses }
}

#[test]
fn modules_use_only_layers_below_their_own() {
    let lib_rs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let layers = layers(&lib_rs);
    assert!(
        layers.len() > 5,
        "src/lib.rs declares its modules in layers: {layers:?}"
    );
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |name| (name.as_str(), i)))
        .collect();
    let mut broken = Vec::new();
    for (path, module, named) in &read_crate().uses {
        let own = layer_of
            .get(module[0].as_str())
            .unwrap_or_else(|| panic!("{} belongs to no layer of src/lib.rs", path.display()));
        for target in named.iter().filter(|target| target[0] != module[0]) {
            let theirs = layer_of[target[0].as_str()];
            if theirs <= *own {
                broken.push(format!(
                    "{} uses {} ({}layer {theirs}, its own is {own})",
                    path.display(),
                    target.join("::"),
                    if theirs == *own { "the same " } else { "" },
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the layers of src/lib.rs:\n{}",
        broken.join("\n")
    );
}

#[test]
fn files_beside_each_other_use_each_other_without_a_cycle() {
    // Edges between the children of each folder: `parent::a` uses `parent::b`.
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (_, module, named) in &read_crate().uses {
        for target in named {
            let common = module
                .iter()
                .zip(target)
                .take_while(|(a, b)| a == b)
                .count();
            if common == 0 || common >= module.len() || common >= target.len() {
                continue; // across the crate root (the layers' test), or a folder's front
            }
            edges
                .entry(module[..common].to_vec())
                .or_default()
                .entry(module[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    let cycles: Vec<String> = edges
        .iter()
        .filter_map(|(folder, graph)| {
            find_cycle(graph).map(|cycle| format!("{}: {}", folder.join("::"), cycle.join(" → ")))
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "cycles between files of one folder:\n{}",
        cycles.join("\n")
    );
}

/// One cycle of `graph`, if it has any (a depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_layout_list_names_the_modules_of_the_mod_blocks_in_their_order() {
    let lib_rs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let (text, blocks) = (layout_list(&lib_rs), layers(&lib_rs));
    assert!(
        text == blocks,
        "the `//! # Layout` list of src/lib.rs does not match its `mod` blocks: write one bullet \
         per block, naming its modules in their order as [`name`]: (`name`: for a private \
         one)\nthe list: {text:?}\nthe blocks: {blocks:?}"
    );
}

#[test]
fn the_layer_reader_sees_blocks_and_the_cycle_finder_sees_cycles() {
    let lib = "//! doc\n\npub mod a;\npub mod b;\n\n// below\nmod c;\n";
    assert_eq!(layers(lib), vec![vec!["a", "b"], vec!["c"]]);
    let doc = "//! # Layout\n//!\n//! - [`a`]: uses [`c`] and `b`;\n//!   [`b`]: the next\n\
               //! - `c`: private, see [`a::X`].\n//!\n//! # Other\n//! - [`e`]: elsewhere\n";
    assert_eq!(layout_list(doc), vec![vec!["a", "b"], vec!["c"]]);
    // The path reader resolves `crate::`, `super::` and child-module paths to modules.
    let modules: BTreeSet<ModPath> = [&["a"][..], &["a", "b"], &["x"], &["x", "y"]]
        .iter()
        .map(|m| m.iter().map(|s| s.to_string()).collect())
        .collect();
    let code = "use crate::a::b::Item;\nuse super::a;\nfn f() { y::g(); std::mem::drop(1); }";
    let mut reader = PathsOfFile {
        scope: vec!["x".to_string()],
        modules: &modules,
        found: Vec::new(),
    };
    reader.visit_file(&syn::parse_file(code).unwrap());
    let named: BTreeSet<ModPath> = reader
        .found
        .iter()
        .filter_map(|path| module_of(path, &modules))
        .collect();
    let want: BTreeSet<ModPath> = [vec!["a", "b"], vec!["a"], vec!["x", "y"]]
        .into_iter()
        .map(|m| m.into_iter().map(String::from).collect())
        .collect();
    assert_eq!(named, want);
    let graph: BTreeMap<String, BTreeSet<String>> = [("x", "y"), ("y", "z"), ("z", "x")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), BTreeSet::from([b.to_string()])))
        .collect();
    assert_eq!(find_cycle(&graph).unwrap().len(), 4);
    let mut acyclic = graph.clone();
    acyclic.remove("z");
    assert_eq!(find_cycle(&acyclic), None);
}

/// Longest file in `src/`: past it, a file holds more than one job.
const MAX_FILE_LINES: usize = 600;
/// Files loose at the top of `src/` (beside the folders that are the layers' modules).
const MAX_LOOSE_FILES: usize = 4;

#[test]
fn no_file_in_src_is_over_600_lines_and_few_sit_loose_at_the_top() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long: Vec<String> = source_files(&src)
        .iter()
        .filter_map(|(path, _)| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by job):\n{}",
        long.join("\n")
    );
    let loose: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        loose.len() <= MAX_LOOSE_FILES,
        "{} files loose at the top of src/ (at most {MAX_LOOSE_FILES}; give the rest a folder): {loose:?}",
        loose.len()
    );
}
