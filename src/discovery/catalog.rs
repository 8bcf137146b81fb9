//! Reading registry files into one validated, merged list of tools.
//!
//! Every file has the shape of the original project's `full_catalog.json`:
//! `{"categories": {"<category>": {"description": "…", "tools": {"<key>": {…}}}}}`.
//! A registry is built by people dropping files in, so nothing here trusts a file: a file that
//! is not JSON or not that shape is skipped whole, a category or tool that breaks a rule is
//! skipped alone, and each skip is logged and kept as a [`LoadProblem`] naming the file and
//! what is wrong. Nothing panics on input.
//!
//! Merging: files come in the order `files::list` gives (shallow first, then by path); a tool
//! is identified by `mcp_server/name` and a later definition replaces an earlier one in place.
//! Category names match case-insensitively (first spelling kept); a later non-empty category
//! description replaces an earlier one.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::files::FileStamp;
use crate::shipped::ShippedFile;

/// Files larger than this are refused: the whole shipped catalog is about 4 MB.
const MAX_FILE_BYTES: u64 = 32 << 20;
const SHAPE: &str =
    "expected an object {\"categories\": {\"<category>\": {\"description\": …, \"tools\": {…}}}}";
pub(crate) const MAX_NAME_CHARS: usize = 256;

/// One tool of the catalog, as `get_tool_definition` returns it (its schema is that tool's
/// output schema).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolEntry {
    /// `mcp_server/name`, unique in a registry.
    pub id: String,
    pub name: String,
    pub mcp_server: String,
    pub category: String,
    pub description: String,
    pub functions: Vec<String>,
    pub use_cases: Vec<String>,
    /// JSON Schema of the arguments (an object), or `None` when the source gives none.
    pub input_schema: Option<Value>,
    /// The registry file the definition came from.
    #[serde(skip)]
    pub source_file: PathBuf,
}

/// A file, category or tool that was skipped while loading, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadProblem {
    pub file: PathBuf,
    pub problem: String,
}

impl fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.problem)
    }
}

/// A declared category before counting: its name as first spelled and its description.
#[derive(Debug, Clone)]
pub(crate) struct Category {
    pub name: String,
    pub description: String,
}

/// The merged result of reading every registry file.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub tools: Vec<ToolEntry>,
    pub categories: Vec<Category>,
    pub problems: Vec<LoadProblem>,
}

impl Catalog {
    /// Merges `base` (the catalog embedded in the binary, or nothing) and then `files`, so a
    /// file's definitions override the embedded ones.
    pub fn read(base: &[ShippedFile], files: &[FileStamp]) -> Catalog {
        let mut merger = Merger::default();
        for file in base {
            let path = Path::new(BUILT_IN).join(file.name);
            match std::str::from_utf8(file.bytes) {
                Ok(text) => merger.text(&path, text),
                Err(e) => merger.problem(&path, format!("not UTF-8: {e}")),
            }
        }
        for file in files {
            merger.file(&file.path, file.len);
        }
        merger.finish()
    }
}

/// How the embedded catalog's files are named in logs and load problems.
pub(crate) const BUILT_IN: &str = "(built-in)";

#[derive(Default)]
struct Merger {
    catalog: Catalog,
    tool_at: HashMap<String, usize>,
    category_at: HashMap<String, usize>,
}

impl Merger {
    fn problem(&mut self, file: &Path, problem: String) {
        tracing::error!(file = %file.display(), "tool registry: skipped: {problem}");
        self.catalog.problems.push(LoadProblem {
            file: file.to_owned(),
            problem,
        });
    }

    fn file(&mut self, path: &Path, len: u64) {
        if len > MAX_FILE_BYTES {
            let limit = MAX_FILE_BYTES >> 20;
            return self.problem(
                path,
                format!("file is {len} bytes, over the {limit} MiB limit"),
            );
        }
        match std::fs::read_to_string(path) {
            Ok(text) => self.text(path, &text),
            Err(e) => self.problem(path, format!("cannot read file: {e}")),
        }
    }

    fn text(&mut self, path: &Path, text: &str) {
        let doc: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return self.problem(path, format!("not valid JSON: {e}")),
        };
        let categories = match doc {
            Value::Object(mut top) => match top.remove("categories") {
                Some(Value::Object(c)) => c,
                _ => return self.problem(path, SHAPE.to_owned()),
            },
            _ => return self.problem(path, SHAPE.to_owned()),
        };
        // Sorted, so a file that lists one id under two categories resolves the same way
        // whatever order the JSON map keeps.
        for (name, value) in sorted(categories) {
            if let Err(problem) = self.category(path, &name, value) {
                self.problem(path, format!("category '{name}': {problem}"));
            }
        }
    }

    fn category(&mut self, path: &Path, name: &str, value: Value) -> Result<(), String> {
        let name = checked_text(name, "category name")?;
        let Value::Object(mut obj) = value else {
            return Err("must be an object with \"tools\"".into());
        };
        let description = take_string(&mut obj, "description")?;
        let Some(Value::Object(tools)) = obj.remove("tools") else {
            return Err("\"tools\" must be an object of tool definitions".into());
        };

        let key = name.to_lowercase();
        let category = match self.category_at.get(&key) {
            Some(&i) => {
                if !description.is_empty() {
                    self.catalog.categories[i].description = description;
                }
                self.catalog.categories[i].name.clone()
            }
            None => {
                self.category_at.insert(key, self.catalog.categories.len());
                let name = name.to_owned();
                self.catalog.categories.push(Category {
                    name: name.clone(),
                    description,
                });
                name
            }
        };
        for (key, value) in sorted(tools) {
            match tool(&key, value, &category, path) {
                Ok(entry) => self.add(entry),
                Err(problem) => self.problem(
                    path,
                    format!("category '{category}', tool '{key}': {problem}"),
                ),
            }
        }
        Ok(())
    }

    fn add(&mut self, entry: ToolEntry) {
        match self.tool_at.get(&entry.id) {
            Some(&i) => {
                let old = &self.catalog.tools[i];
                tracing::info!(
                    id = %entry.id,
                    from = %old.source_file.display(),
                    by = %entry.source_file.display(),
                    "tool registry: later definition overrides earlier one"
                );
                self.catalog.tools[i] = entry;
            }
            None => {
                self.tool_at
                    .insert(entry.id.clone(), self.catalog.tools.len());
                self.catalog.tools.push(entry);
            }
        }
    }

    fn finish(self) -> Catalog {
        self.catalog
    }
}

/// Validates one tool definition. `key` is the map key: the tool's id in shipped files,
/// its bare name in the original project's files; it fills in a missing name or server.
fn tool(key: &str, value: Value, category: &str, file: &Path) -> Result<ToolEntry, String> {
    let Value::Object(mut obj) = value else {
        return Err("must be an object".into());
    };
    let (key_server, key_name) = match key.split_once('/') {
        Some((s, n)) => (Some(s), n),
        None => (None, key),
    };
    let name = match obj.remove("name") {
        None | Some(Value::Null) => key_name.to_owned(),
        Some(Value::String(s)) => s,
        Some(_) => return Err("\"name\" must be a string".into()),
    };
    let name = checked_text(&name, "\"name\"")?.to_owned();
    let server = match obj.remove("mcp_server") {
        None | Some(Value::Null) => key_server
            .ok_or("\"mcp_server\" is missing (or write the key as \"server/name\")")?
            .to_owned(),
        Some(Value::String(s)) => s,
        Some(_) => return Err("\"mcp_server\" must be a string".into()),
    };
    let server = checked_text(&server, "\"mcp_server\"")?.to_owned();
    if server.contains('/') {
        return Err("\"mcp_server\" must not contain '/'".into());
    }
    let input_schema = match obj.remove("input_schema") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v),
        Some(_) => return Err("\"input_schema\" must be a JSON Schema object or null".into()),
    };
    Ok(ToolEntry {
        id: format!("{server}/{name}"),
        description: take_string(&mut obj, "description")?,
        functions: take_strings(&mut obj, "functions")?,
        use_cases: take_strings(&mut obj, "use_cases")?,
        input_schema,
        category: category.to_owned(),
        source_file: file.to_owned(),
        name,
        mcp_server: server,
    })
}

/// A JSON object's entries sorted by key (serde_json's map order depends on its features).
fn sorted(map: Map<String, Value>) -> Vec<(String, Value)> {
    let mut entries: Vec<(String, Value)> = map.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

/// A name: non-empty after trimming, no control characters, not absurdly long.
fn checked_text<'a>(s: &'a str, what: &str) -> Result<&'a str, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if t.chars().any(char::is_control) {
        return Err(format!("{what} must not contain control characters"));
    }
    if t.chars().count() > MAX_NAME_CHARS {
        return Err(format!("{what} is longer than {MAX_NAME_CHARS} characters"));
    }
    Ok(t)
}

fn take_string(obj: &mut Map<String, Value>, field: &str) -> Result<String, String> {
    match obj.remove(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(format!("\"{field}\" must be a string")),
    }
}

fn take_strings(obj: &mut Map<String, Value>, field: &str) -> Result<Vec<String>, String> {
    let wrong = || format!("\"{field}\" must be a list of strings");
    match obj.remove(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(wrong()),
            })
            .collect(),
        Some(_) => Err(wrong()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::files;
    use serde_json::json;
    use std::fs;

    fn read_dir(dir: &Path) -> Catalog {
        Catalog::read(&[], &files::list(dir).unwrap().unwrap())
    }

    fn write(dir: &Path, rel: &str, v: &Value) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, serde_json::to_string(v).unwrap()).unwrap();
    }

    #[test]
    fn reads_the_original_shape_with_bare_name_keys() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "c.json",
            &json!({"categories": {"weather": {"description": "Forecasts",
            "tools": {"get_forecast": {"description": "Forecast for a city", "mcp_server": "wx",
                "functions": ["get_forecast"], "use_cases": ["plan a trip"],
                "input_schema": {"type": "object"}}}}}}),
        );
        let c = read_dir(d.path());
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        let t = &c.tools[0];
        assert_eq!(
            (t.id.as_str(), t.name.as_str(), t.category.as_str()),
            ("wx/get_forecast", "get_forecast", "weather")
        );
        assert_eq!(t.use_cases, ["plan a trip"]);
        assert_eq!(c.categories[0].description, "Forecasts");
    }

    #[test]
    fn fills_name_and_server_from_a_server_slash_name_key() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "c.json",
            &json!({"categories": {"x": {"tools": {"srv/do_it": {}}}}}),
        );
        let c = read_dir(d.path());
        assert_eq!(c.tools[0].id, "srv/do_it");
        assert_eq!(c.tools[0].input_schema, None);
    }

    #[test]
    fn malformed_files_are_skipped_with_a_problem_naming_them() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("broken.json"), "{\"categories\": {").unwrap();
        write(d.path(), "array.json", &json!([1, 2]));
        write(
            d.path(),
            "good.json",
            &json!({"categories": {"x": {"tools": {"s/t": {}}}}}),
        );
        let c = read_dir(d.path());
        assert_eq!(c.tools.len(), 1);
        let problems: Vec<String> = c.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("broken.json") && p.contains("not valid JSON"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("array.json") && p.contains("categories"))
        );
    }

    #[test]
    fn invalid_tools_are_skipped_alone() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "c.json",
            &json!({"categories": {
                "x": {"tools": {
                    "s/ok": {},
                    "s/empty": {"name": "  "},
                    "s/schema": {"input_schema": "string"},
                    "s/desc": {"description": 5},
                    "s/funcs": {"functions": ["a", 1]},
                    "bare": {"description": "no server"},
                    "s/slash": {"mcp_server": "a/b"},
                    "s/ctrl": {"name": "bad\u{7}"}
                }},
                "y": {"tools": []},
                "": {"tools": {}}
            }}),
        );
        let c = read_dir(d.path());
        assert_eq!(
            c.tools.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["s/ok"]
        );
        let all = c
            .problems
            .iter()
            .map(|p| p.problem.clone())
            .collect::<Vec<_>>()
            .join("\n");
        for needle in [
            "\"name\" must not be empty",
            "\"input_schema\" must be a JSON Schema object or null",
            "\"description\" must be a string",
            "\"functions\" must be a list of strings",
            "\"mcp_server\" is missing",
            "must not contain '/'",
            "control characters",
            "category 'y': \"tools\" must be an object",
            "category name must not be empty",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }

    #[test]
    fn deeper_files_override_shipped_ones_and_categories_merge_case_insensitively() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "z.json",
            &json!({"categories": {"Finance": {"description": "old",
            "tools": {"s/a": {"description": "shipped"}, "s/b": {}}}}}),
        );
        write(
            d.path(),
            "local/mine.json",
            &json!({"categories": {"finance": {"description": "new",
            "tools": {"s/a": {"description": "mine"}}}}}),
        );
        let c = read_dir(d.path());
        assert_eq!(c.tools.len(), 2);
        assert_eq!(c.tools[0].description, "mine");
        assert_eq!(c.tools[0].category, "Finance");
        assert_eq!(c.categories.len(), 1);
        assert_eq!(c.categories[0].description, "new");
    }

    #[test]
    fn oversized_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let big = FileStamp {
            path: d.path().join("big.json"),
            len: MAX_FILE_BYTES + 1,
            modified: None,
        };
        let c = Catalog::read(&[], &[big]);
        assert!(c.problems[0].problem.contains("MiB limit"));
    }
}
