//! Privacy by type, held to its word rather than kept by eye. What the model reads is made by
//! `src/privacy/` only: clippy.toml bans rmcp's ways around it, and this test checks what
//! clippy cannot:
//!
//! - `src/lib.rs` denies `clippy::disallowed_types` and `clippy::disallowed_methods` for the
//!   whole crate (without it the bans are silent everywhere), and allows neither;
//! - every other `allow` (or `expect`) of them, or of a lint group holding them, has a `//`
//!   comment on the line right above it saying why it is safe;
//! - no struct literal (or tuple constructor) of a banned type is written outside
//!   `src/privacy/`: clippy's `disallowed-types` sees a type where it is named as a type or
//!   imported, never in `rmcp::model::ErrorData { .. }`, whose public fields would carry any
//!   text to the model untokenized. `Refusal`, the privacy module's name for rmcp's error, is
//!   banned the same way.
//!
//! Every file of `src/` is read, tests included; a literal inside a macro is read when the
//! macro's arguments parse as expressions. No engine needed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::Visit;

const LINTS: [&str; 2] = ["disallowed_types", "disallowed_methods"];

/// Lint groups that hold the two lints: allowing one allows them.
const GROUPS: [&str; 2] = ["clippy::style", "clippy::all"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lint paths an attribute's list names, without spaces (`clippy::disallowed_types`).
fn lint_paths(attr: &syn::Attribute) -> Vec<String> {
    attr.parse_args_with(Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
        .map(|paths| {
            paths
                .iter()
                .map(|p| quote_path(p).replace(' ', ""))
                .collect()
        })
        .unwrap_or_default()
}

fn quote_path(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}

/// Whether the crate root `lib_rs` denies both lints, and allows neither.
fn root_denies(lib_rs: &str) -> Result<(), String> {
    let file = syn::parse_file(lib_rs).map_err(|e| format!("src/lib.rs does not parse: {e}"))?;
    let mut denied = Vec::new();
    for attr in &file.attrs {
        let level = attr.path().get_ident().map(|i| i.to_string());
        let lints = lint_paths(attr);
        match level.as_deref() {
            Some("deny" | "forbid") => denied.extend(lints),
            Some("allow" | "warn" | "expect") => {
                if let Some(l) = lints.iter().find(|l| names_a_ban(l)) {
                    return Err(format!("src/lib.rs lowers {l} for the whole crate"));
                }
            }
            _ => {}
        }
    }
    for lint in LINTS {
        if !denied.contains(&format!("clippy::{lint}")) {
            return Err(format!(
                "src/lib.rs does not deny clippy::{lint}: add \
                 #![deny(clippy::disallowed_types, clippy::disallowed_methods)] at the crate root"
            ));
        }
    }
    Ok(())
}

fn names_a_ban(lint: &str) -> bool {
    LINTS.iter().any(|l| lint == format!("clippy::{l}")) || GROUPS.contains(&lint)
}

/// Every attribute in `source` that allows (or expects) a banning lint with no `//` comment
/// on the line right above it, as `line N`.
fn allows_without_reason(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i].trim_start();
        if !(start.starts_with("#[") || start.starts_with("#![")) {
            i += 1;
            continue;
        }
        // The whole attribute, up to its closing bracket (it may span lines).
        let mut text = String::new();
        let mut depth = 0i32;
        let mut end = i;
        'lines: for (j, line) in lines.iter().enumerate().skip(i) {
            for c in line.chars() {
                text.push(c);
                depth += match c {
                    '[' => 1,
                    ']' => -1,
                    _ => 0,
                };
                if depth == 0 && c == ']' {
                    end = j;
                    break 'lines;
                }
            }
            text.push('\n');
            end = j;
        }
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let lowers = ["allow(", "expect("].iter().any(|l| compact.contains(l));
        let bans = LINTS
            .iter()
            .any(|l| compact.contains(&format!("clippy::{l}")))
            || GROUPS.iter().any(|g| compact.contains(g));
        if lowers && bans {
            let above = i.checked_sub(1).map(|k| lines[k].trim_start());
            let reasoned = above.is_some_and(|l| {
                l.starts_with("//") && !l.starts_with("///") && !l.starts_with("//!")
            });
            if !reasoned {
                found.push(format!("line {}", i + 1));
            }
        }
        i = end + 1;
    }
    found
}

/// The last segments of clippy.toml's `disallowed-types` paths.
fn banned_types(clippy_toml: &str) -> Vec<String> {
    let Some(start) = clippy_toml.find("disallowed-types") else {
        return Vec::new();
    };
    let block = &clippy_toml[start..];
    let block = &block[..block.find(']').unwrap_or(block.len())];
    block
        .split("path = \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter_map(|path| path.rsplit("::").next())
        .map(str::to_string)
        .collect()
}

/// The struct literals and tuple constructors of banned types one file writes.
struct Literals<'a> {
    banned: &'a [String],
    /// Names this file imports, with the path each stands for.
    imports: BTreeMap<String, Vec<String>>,
    /// Whether the file imports everything of some rmcp module.
    rmcp_glob: bool,
    found: Vec<String>,
}

impl Literals<'_> {
    /// The path with its first segment replaced by what the file imported under that name.
    fn resolved(&self, path: &syn::Path) -> Vec<String> {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        match segments.split_first() {
            Some((first, rest)) => match self.imports.get(first) {
                Some(full) => full.iter().chain(rest).cloned().collect(),
                None => segments,
            },
            None => segments,
        }
    }

    fn check(&mut self, path: &syn::Path) {
        let resolved = self.resolved(path);
        let from_rmcp = resolved.first().is_some_and(|s| s == "rmcp")
            || (self.rmcp_glob && resolved.len() <= 2);
        // `Refusal` is the privacy module's (other modules have refusals of their own).
        let hit = resolved.iter().enumerate().find(|(i, segment)| {
            (*segment == "Refusal" && resolved[..*i].iter().any(|s| s == "privacy"))
                || (self.banned.contains(segment) && (from_rmcp || *segment == "ErrorData"))
        });
        if let Some((_, name)) = hit {
            self.found.push(format!("{name} ({})", resolved.join("::")));
        }
    }

    fn imports_of(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.imports_of(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                full.push(n.ident.to_string());
                self.imports.insert(n.ident.to_string(), full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.imports.insert(r.rename.to_string(), full);
            }
            syn::UseTree::Glob(_) => {
                if prefix.first().is_some_and(|s| s == "rmcp") {
                    self.rmcp_glob = true;
                }
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.imports_of(tree, prefix);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Literals<'_> {
    fn visit_expr_struct(&mut self, expr: &'ast syn::ExprStruct) {
        self.check(&expr.path);
        syn::visit::visit_expr_struct(self, expr);
    }

    fn visit_expr_call(&mut self, expr: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*expr.func {
            // A tuple struct's constructor (`rmcp::handler::server::wrapper::Json(v)`), or a
            // variant's (`ContentBlock::Text(..)`), named in CamelCase; a function's name
            // (`ErrorData::new`) is clippy's `disallowed-methods`' to judge.
            let last = p.path.segments.last().map(|s| s.ident.to_string());
            if last.is_some_and(|name| name.starts_with(|c: char| c.is_ascii_uppercase())) {
                self.check(&p.path);
            }
        }
        syn::visit::visit_expr_call(self, expr);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let parser = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(args) = mac.parse_body_with(parser) {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }
}

/// The literals of banned types in `source` (imports are read first, wherever they are).
fn literals(source: &str, banned: &[String]) -> Result<Vec<String>, String> {
    let file = syn::parse_file(source).map_err(|e| e.to_string())?;
    let mut visitor = Literals {
        banned,
        imports: BTreeMap::new(),
        rmcp_glob: false,
        found: Vec::new(),
    };
    // Imports first (a `use` inside a function body counts for the whole file: enough here).
    struct Uses<'b, 'c>(&'b mut Literals<'c>);
    impl<'ast> Visit<'ast> for Uses<'_, '_> {
        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            self.0.imports_of(&item.tree, &mut Vec::new());
        }
    }
    Uses(&mut visitor).visit_file(&file);
    visitor.visit_file(&file);
    Ok(visitor.found)
}

#[test]
fn the_crate_root_denies_the_privacy_lints() {
    let lib_rs = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    root_denies(&lib_rs).unwrap();
}

#[test]
fn every_allow_of_the_privacy_lints_says_why_on_the_line_above() {
    let src = root().join("src");
    let files = rust_files(&src);
    assert!(files.len() > 50, "read only {} files of src/", files.len());
    let mut missing = Vec::new();
    let mut allows = 0;
    for path in &files {
        let source = std::fs::read_to_string(path).unwrap();
        allows += source.matches("clippy::disallowed_").count();
        for at in allows_without_reason(&source) {
            missing.push(format!(
                "{}, {at}",
                path.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(allows > 0, "no file of src/ names the privacy lints at all");
    assert!(
        missing.is_empty(),
        "an allow of clippy::disallowed_types or disallowed_methods needs a `//` comment on the \
         line right above it saying why it is safe (src/privacy/ is where rmcp's answer types \
         are made):\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_struct_literal_of_a_banned_type_outside_the_privacy_module() {
    let clippy_toml = std::fs::read_to_string(root().join("clippy.toml")).unwrap();
    let banned = banned_types(&clippy_toml);
    for name in [
        "ErrorData",
        "CallToolResult",
        "ContentBlock",
        "ResourceContents",
    ] {
        assert!(
            banned.iter().any(|b| b == name),
            "clippy.toml's disallowed-types does not name rmcp's {name}: {banned:?}"
        );
    }
    let src = root().join("src");
    let privacy = src.join("privacy");
    let mut found = Vec::new();
    let mut read = 0;
    for path in rust_files(&src) {
        if path.starts_with(&privacy) {
            continue;
        }
        read += 1;
        let source = std::fs::read_to_string(&path).unwrap();
        let rel = path.strip_prefix(root()).unwrap().display().to_string();
        match literals(&source, &banned) {
            Ok(hits) => found.extend(hits.into_iter().map(|h| format!("{rel}: {h}"))),
            Err(e) => found.push(format!("{rel} does not parse: {e}")),
        }
    }
    assert!(read > 50, "read only {read} files of src/");
    assert!(
        found.is_empty(),
        "rmcp's types that carry text to the model are built in src/privacy/ only (a literal's \
         public fields skip the PII engine):\n{}",
        found.join("\n")
    );
}

/// The checks themselves, on sources written to fail them: each catches what it is for.
#[test]
fn the_checks_catch_what_they_are_for() {
    let deny = "#![deny(clippy::disallowed_types, clippy::disallowed_methods)]\npub mod a;\n";
    assert!(root_denies(deny).is_ok());
    assert!(root_denies("#![deny(clippy::disallowed_types)]\npub mod a;\n").is_err());
    assert!(root_denies("#![forbid(unsafe_code)]\npub mod a;\n").is_err());
    let lowered = format!("{deny}#![allow(clippy::disallowed_methods)]\n");
    assert!(root_denies(&lowered).is_err());

    let source = "\
// rmcp's type in a signature: its value is made by privacy.
#[allow(clippy::disallowed_types)]
fn a() {}

#[allow(clippy::disallowed_methods)]
fn b() {}
/// A doc comment says what, not why.
#[allow(
    clippy::too_many_lines,
    clippy::disallowed_types
)]
fn c() {}
#[allow(clippy::style)]
fn d() {}
#[cfg_attr(test, expect(clippy::disallowed_methods))]
fn e() {}
#[allow(clippy::too_many_lines)]
fn f() {}
";
    assert_eq!(
        allows_without_reason(source),
        ["line 5", "line 8", "line 13", "line 15"]
    );

    let banned = banned_types(
        "disallowed-types = [\n { path = \"rmcp::model::ErrorData\", reason = \"x\" },\n \
         { path = \"rmcp::model::ResourceContents\", reason = \"x\" },\n \
         { path = \"rmcp::handler::server::wrapper::Json\", reason = \"x\" },\n]\n\
         disallowed-methods = [ { path = \"rmcp::model::Other::new\" } ]\n",
    );
    assert_eq!(banned, ["ErrorData", "ResourceContents", "Json"]);
    let source = r#"
use rmcp::model::ErrorData as E;
use rmcp::handler::server::wrapper::Json;
fn a() -> E { E { code: C, message: "x".into(), data: None } }
fn b() { let _ = rmcp::model::ErrorData { code: C, message: m, data: None }; }
fn c() { let _ = vec![rmcp::model::ResourceContents::TextResourceContents { uri, mime_type, text, meta }]; }
fn d() { let _ = Json(v); let _ = axum::Json(v); }
fn e() { let _ = crate::privacy::Refusal { code: C, message: m, data: None }; }
fn f() { let _ = Config { a: 1 }; let _ = Some(ErrorDataLike { a: 1 }); }
fn g() { let _ = Decision::Refuse(Refusal::Root); let _ = Refusal::Denied { a: 1 }; }
fn h() { let _ = rmcp::ErrorData::invalid_request("x", None); }
"#;
    let hits = literals(source, &banned).unwrap();
    assert_eq!(hits.len(), 5, "{hits:#?}");
}
