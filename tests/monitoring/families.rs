//! The metric families a real scrape of the server holds, held against the names the monitoring
//! depends on: the metric table of docs/operations.md (each family, its type and labels), and
//! every `cem_…` name the alert rules and their unit tests use. A family renamed or removed in
//! the server, or a doc or rule naming one it does not export, fails here instead of leaving an
//! alert that can never fire or a table that lies. Pure logic over what the test scraped.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Labels Prometheus adds to every series, and a histogram's bucket bound.
const NOT_THE_SERVERS: [&str; 4] = ["__name__", "job", "instance", "le"];

/// A metric family: its type (`counter`, `gauge`, `histogram`) and its label names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub kind: String,
    pub labels: BTreeSet<String>,
}

/// The families of the metric table of `markdown` (docs/operations.md): rows whose first cell
/// names one or more families in backticks, then the type, then the labels in backticks.
pub fn documented(markdown: &str) -> BTreeMap<String, Family> {
    let mut families = BTreeMap::new();
    for row in markdown.lines().filter(|l| l.starts_with("| `cem_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cells.len() >= 5, "not a metric table row: {row}");
        let family = Family {
            kind: cells[2].to_string(),
            labels: backticked(cells[3]).into_iter().collect(),
        };
        for name in backticked(cells[1]) {
            families.insert(name, family.clone());
        }
    }
    assert!(families.len() >= 20, "families documented: {families:?}");
    families
}

/// The `cem_…` names `text` mentions, wherever they stand (expressions, series, descriptions).
pub fn named(text: &str) -> BTreeSet<String> {
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("cem_") {
        if text[..at].ends_with(word) {
            continue;
        }
        let len = text[at..].find(|c| !word(c)).unwrap_or(text.len() - at);
        names.insert(text[at..at + len].to_string());
    }
    names
}

/// The family of the series name `name`: itself, or the histogram whose `_bucket`, `_sum` or
/// `_count` it is.
pub fn family_of<'a>(name: &'a str, kinds: &BTreeMap<String, String>) -> Option<&'a str> {
    if kinds.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|suffix| name.strip_suffix(suffix))
        .find(|family| kinds.get(*family).is_some_and(|k| k == "histogram"))
}

/// The server's families as Prometheus's `/api/v1/metadata` reports them: name to type.
pub fn exported(metadata: &Value) -> BTreeMap<String, String> {
    let kinds: BTreeMap<String, String> = (metadata.as_object().unwrap().iter())
        .filter(|(name, _)| name.starts_with("cem_"))
        .map(|(name, m)| (name.clone(), m[0]["type"].as_str().unwrap().to_string()))
        .collect();
    assert!(kinds.len() >= 20, "families scraped: {metadata}");
    kinds
}

/// What disagrees between the families Prometheus scraped (`kinds`, `series`: its metadata and
/// series answers), the metric table of docs/operations.md (`documented`), and the names other
/// files use (`named`: file and its text). Empty when all agree.
pub fn mismatches(
    kinds: &BTreeMap<String, String>,
    series: &Value,
    documented: &BTreeMap<String, Family>,
    named: &[(&str, &str)],
) -> Vec<String> {
    let mut wrong = BTreeSet::new();
    for (name, family) in documented {
        let problem = match kinds.get(name) {
            None => {
                format!("docs/operations.md documents {name}, which the server does not export")
            }
            Some(kind) if *kind != family.kind => format!(
                "docs/operations.md documents {name} as a {}, the server exports a {kind}",
                family.kind
            ),
            Some(_) => continue,
        };
        wrong.insert(problem);
    }
    for name in kinds.keys().filter(|n| !documented.contains_key(*n)) {
        wrong.insert(format!(
            "the server exports {name}, which docs/operations.md does not document"
        ));
    }
    for (file, text) in named {
        for name in self::named(text) {
            if family_of(&name, kinds).is_none() {
                wrong.insert(format!(
                    "{file} names {name}, which the server does not export"
                ));
            }
        }
    }
    for s in series.as_array().unwrap() {
        let name = s["__name__"].as_str().unwrap();
        let Some(family) = family_of(name, kinds) else {
            continue;
        };
        let Some(doc) = documented.get(family) else {
            continue;
        };
        let labels: BTreeSet<String> = (s.as_object().unwrap().keys())
            .filter(|l| !NOT_THE_SERVERS.contains(&l.as_str()))
            .cloned()
            .collect();
        // Prometheus stores an empty label as none: `tenant` on a server without tenants.
        let mut expected = doc.labels.clone();
        if !labels.contains("tenant") {
            expected.remove("tenant");
        }
        if labels != expected {
            wrong.insert(format!(
                "{family} has labels {labels:?}, docs/operations.md says {:?}",
                doc.labels
            ));
        }
    }
    wrong.into_iter().collect()
}

/// The texts between backticks in `cell`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}
