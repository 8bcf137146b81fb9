//! MCP tool arguments: arbitrary JSON deserialized into every tool's argument type, as rmcp does
//! it (`serde_json::from_value` of the call's `arguments` object) and from raw bytes, then the
//! checks the tools run on what parsed: `execute_code`'s code and `context_vars` checks and
//! limit clamping, the skill-name allowlist, the restore budget, path validation, and search /
//! definition lookups in the shipped tool registry. Each check is compared with its documented
//! rule, not only run.
#![no_main]

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use code_execution_mcp::config::Config;
use code_execution_mcp::discovery::{MAX_LIMIT, Registry};
use code_execution_mcp::app::execution::request::{self, InputError, MIN_MEMORY_MB, MIN_TIMEOUT_SECS};
use code_execution_mcp::mcp::args::{
    DefinitionArgs, ExecuteCodeArgs, FileArgs, ListArgs, SaveSkillArgs, SearchArgs, SkillNameArgs,
    TextArgs, WriteArgs,
};
use code_execution_mcp::privacy::{MAX_TOKENS_PER_RESTORE, check_restore_budget};
use code_execution_mcp::skills::{self, MAX_NAME_LEN};
use code_execution_mcp::workspace::{
    DEFAULT_MAX_PATH_LEN, validate_relative_path, validate_relative_subpath,
};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde_json::Value;

static CONFIG: LazyLock<Config> = LazyLock::new(Config::defaults);
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools_registry");
    let registry = Registry::load(&dir).expect("the shipped registry loads");
    assert!(registry.total_tools() > 0);
    registry
});
static TOKEN_SHAPE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\[[A-Z_]+_[0-9a-f]{8,}\]").unwrap());

/// Python's hard keywords: not skill names.
const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Parses the way the server does (from the arguments object) and from the raw bytes; the raw
/// parse only has to not panic.
fn parse<T: DeserializeOwned>(data: &[u8], value: Option<&Value>) -> Option<T> {
    let _ = serde_json::from_slice::<T>(data);
    serde_json::from_value(value?.clone()).ok()
}

fuzz_target!(|data: &[u8]| {
    let value = serde_json::from_slice::<Value>(data).ok();
    let v = value.as_ref();

    if let Some(a) = parse::<ExecuteCodeArgs>(data, v) {
        check_execute(&a);
    }
    if let Some(a) = parse::<SaveSkillArgs>(data, v) {
        check_skill_name(&a.name);
        let _ = (a.code.len(), a.description.len());
    }
    if let Some(a) = parse::<SkillNameArgs>(data, v) {
        check_skill_name(&a.name);
    }
    if let Some(a) = parse::<TextArgs>(data, v) {
        let shapes = TOKEN_SHAPE.find_iter(&a.text).count();
        assert_eq!(
            check_restore_budget(&a.text).is_ok(),
            shapes <= MAX_TOKENS_PER_RESTORE
        );
    }
    if let Some(a) = parse::<WriteArgs>(data, v) {
        check_path(&a.filename);
        let _ = a.content.len();
    }
    if let Some(a) = parse::<FileArgs>(data, v) {
        check_path(&a.filename);
    }
    if let Some(a) = parse::<ListArgs>(data, v) {
        if v.and_then(|v| v.get("subpath")).is_none() {
            assert_eq!(a.subpath, ".", "the default subpath is the whole workspace");
        }
        if let Ok(comps) = validate_relative_subpath(&a.subpath, DEFAULT_MAX_PATH_LEN) {
            assert!(
                comps
                    .iter()
                    .all(|c| !c.is_empty() && *c != "." && *c != "..")
            );
        }
    }
    if let Some(a) = parse::<SearchArgs>(data, v) {
        check_search(&a);
    }
    if let Some(a) = parse::<DefinitionArgs>(data, v) {
        check_definition(&a);
    }
});

fn check_execute(a: &ExecuteCodeArgs) {
    let c = &*CONFIG;
    match request::check_code(&a.code, c.limits.max_code_bytes) {
        Ok(()) => {
            assert!(!a.code.trim().is_empty() && a.code.len() <= c.limits.max_code_bytes);
            assert!(!a.code.contains('\0'));
        }
        Err(InputError::NulInCode(at)) => assert_eq!(a.code.as_bytes()[at], 0),
        Err(_) => {}
    }
    let context = a.context_vars.clone().map(Value::Object);
    let named = request::check_context_vars(context.as_ref());
    let identifiers = a.context_vars.iter().flat_map(|m| m.keys()).all(|k| {
        let mut cs = k.chars();
        k.len() <= 128
            && cs.next().is_some_and(|c| c == '_' || c.is_alphabetic())
            && cs.all(|c| c == '_' || c.is_alphanumeric())
    });
    assert_eq!(named.is_ok(), identifiers, "{named:?}");
    let _ = request::check_job_size(&a.code, context.as_ref().unwrap_or(&Value::Null));
    // A session handle becomes a directory name: only the shape the server makes passes.
    if let Some(handle) = &a.session
        && code_execution_mcp::sessions::valid_handle(handle)
    {
        assert!(handle.len() == 36 && !handle.contains(['/', '.', '\0']), "{handle:?}");
    }

    // A requirement reaches pip as an argument: an accepted one is a normalized name and a
    // text that is no option and holds no control character.
    if let Some(packages) = &a.packages
        && let Ok(all) = code_execution_mcp::packages::requirement::parse_all(packages)
    {
        for r in all {
            let name_ok = (r.name.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            assert!(name_ok && !r.text.starts_with('-') && !r.text.contains(char::is_control), "{r:?}");
        }
    }

    let l = request::clamp(a.timeout_seconds, a.memory_mb, &request::RequestBounds::of(&c.limits)).expect("JSON numbers are finite");
    let (min_t, max_t) = (
        Duration::from_secs_f64(MIN_TIMEOUT_SECS),
        Duration::from_secs(c.limits.max_timeout_secs),
    );
    assert!(l.timeout >= min_t && l.timeout <= max_t, "{l:?}");
    let mib = 1024 * 1024;
    assert!(l.memory_bytes >= (MIN_MEMORY_MB * mib) as i64);
    assert!(l.memory_bytes <= (c.limits.max_memory_mb * mib) as i64);
    let out_of = |x: Option<f64>, lo: f64, hi: f64| x.is_some_and(|x| x < lo || x > hi);
    let expected = usize::from(out_of(
        a.timeout_seconds,
        MIN_TIMEOUT_SECS,
        c.limits.max_timeout_secs as f64,
    )) + usize::from(out_of(
        a.memory_mb,
        MIN_MEMORY_MB as f64,
        c.limits.max_memory_mb as f64,
    ));
    assert_eq!(l.adjustments.len(), expected, "{l:?}");
    if let (Some(t), true) = (a.timeout_seconds, expected == 0) {
        assert_eq!(l.timeout, Duration::from_secs_f64(t));
    }
}

/// `^[A-Za-z_][A-Za-z0-9_]{0,63}$`, not starting with `__`, not a keyword.
fn check_skill_name(name: &str) {
    let b = name.as_bytes();
    let allowed = !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && !name.starts_with("__")
        && !KEYWORDS.contains(&name);
    let got = skills::validate_name(name);
    assert_eq!(got.is_ok(), allowed, "{name:?}: {got:?}");
}

fn check_path(p: &str) {
    if let Ok(comps) = validate_relative_path(p, DEFAULT_MAX_PATH_LEN) {
        assert!(!comps.is_empty() && !p.starts_with('/'));
        assert!(
            comps
                .iter()
                .all(|c| !c.is_empty() && *c != "." && *c != "..")
        );
        assert!(comps.iter().all(|c| !c.contains(['/', '\\', '\0'])));
    }
}

fn check_search(a: &SearchArgs) {
    let r = &*REGISTRY;
    let Ok(results) = r.search(&a.query, a.category.as_deref(), a.limit) else {
        // Only an unknown category is refused.
        let c = a.category.as_deref().map(str::trim).unwrap_or("");
        assert!(!c.is_empty(), "search refused without a category");
        assert!(
            !r.categories()
                .iter()
                .any(|k| k.name.to_lowercase() == c.to_lowercase())
        );
        return;
    };
    assert!(results.hits.len() <= a.limit.clamp(1, MAX_LIMIT));
    assert!(results.hits.is_empty() || results.suggestions.is_empty());
    for w in results.hits.windows(2) {
        assert!(w[0].score >= w[1].score, "hits not best first");
    }
    let wanted = a
        .category
        .as_deref()
        .map(|c| c.trim().to_lowercase())
        .filter(|c| !c.is_empty());
    for h in &results.hits {
        assert!(h.score.is_finite());
        assert_eq!(h.id, h.tool.id);
        if let Some(c) = &wanted {
            assert_eq!(&h.tool.category.to_lowercase(), c);
        }
    }
    let mut ids: Vec<&str> = results.hits.iter().map(|h| h.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), results.hits.len(), "a tool listed twice");
}

fn check_definition(a: &DefinitionArgs) {
    let key = a.tool_name.trim().to_lowercase();
    if let Ok(tool) = REGISTRY.get(&a.tool_name, a.category.as_deref()) {
        assert!(tool.id.to_lowercase() == key || tool.name.to_lowercase() == key);
    }
}
