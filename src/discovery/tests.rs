//! Behaviour of a whole `Registry`: ranking, filters, lookups, suggestions, hostile queries.
//! A small hand-made catalog for exact expectations, the shipped one for realistic ones.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn fixture() -> (tempfile::TempDir, Registry) {
    let d = tempfile::tempdir().unwrap();
    let doc = json!({"categories": {
        "research-reference": {"description": "Weather and reference data", "tools": {
            "weather/get_forecast": {"description": "Weather forecast for a city for the next days",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}}},
            "almanac/sunrise": {"description": "Sunrise and sunset times; does not give the weather."}
        }},
        "developer-tools": {"description": "Code hosting", "tools": {
            "github/create_issue": {"description": "Open a new issue in a repository"},
            "github/create_pull_request": {"description": "Open a pull request"},
            "gitlab/create_issue": {"description": "Create a GitLab issue"},
            "github/list_branches": {"description": "List branches of a repository"}
        }},
        "files": {"description": "Local files", "tools": {
            "filesystem/delete_file": {"description": "Delete a file from disk"},
            "filesystem/readFile": {"description": "Read the contents of a file"}
        }},
        "search-web": {"description": "Web search", "tools": {
            "bing-cn/bing_search": {"description": "使用必应搜索指定的关键词，并返回搜索结果列表"}
        }}
    }});
    std::fs::write(d.path().join("catalog.json"), doc.to_string()).unwrap();
    let reg = Registry::load(d.path()).unwrap();
    assert!(reg.problems().is_empty(), "{:?}", reg.problems());
    (d, reg)
}

fn ids(results: &SearchResults<'_>) -> Vec<String> {
    results.hits.iter().map(|h| h.id.to_owned()).collect()
}

fn shipped() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        // The catalog the binary carries, with no directory of additions.
        let none = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/no-such-registry-dir");
        Registry::load_over(crate::shipped::TOOLS_REGISTRY, &none).unwrap()
    })
}

#[test]
fn a_name_match_beats_a_mention() {
    let (_d, reg) = fixture();
    let r = reg.search("weather", None, 10).unwrap();
    assert_eq!(ids(&r)[..2], ["weather/get_forecast", "almanac/sunrise"]);
    assert!(r.hits[0].score > r.hits[1].score);
}

#[test]
fn parameters_and_word_forms_are_searched() {
    let (_d, reg) = fixture();
    assert_eq!(
        ids(&reg.search("city", None, 1).unwrap()),
        ["weather/get_forecast"]
    );
    assert_eq!(
        ids(&reg.search("deleting files", None, 1).unwrap()),
        ["filesystem/delete_file"]
    );
    assert_eq!(
        ids(&reg.search("read file", None, 1).unwrap()),
        ["filesystem/readFile"]
    );
}

#[test]
fn typos_are_tolerated() {
    let (_d, reg) = fixture();
    assert_eq!(
        ids(&reg.search("wether", None, 1).unwrap()),
        ["weather/get_forecast"]
    );
    assert_eq!(
        ids(&reg.search("pull reqest", None, 1).unwrap()),
        ["github/create_pull_request"]
    );
    let off = SearchOptions {
        typos: false,
        synonyms: true,
        ..SearchOptions::default()
    };
    assert!(
        reg.search_with("wether", None, 5, off)
            .unwrap()
            .hits
            .is_empty()
    );
}

#[test]
fn synonyms_bridge_agent_words() {
    let (_d, reg) = fixture();
    assert_eq!(
        ids(&reg.search("remove a file", None, 1).unwrap()),
        ["filesystem/delete_file"]
    );
    assert_eq!(
        ids(&reg.search("open a PR", None, 1).unwrap()),
        ["github/create_pull_request"]
    );
}

#[test]
fn chinese_queries_match_chinese_descriptions() {
    let (_d, reg) = fixture();
    assert_eq!(
        ids(&reg.search("必应搜索", None, 3).unwrap()),
        ["bing-cn/bing_search"]
    );
}

#[test]
fn category_filter_is_exact_and_case_insensitive() {
    let (_d, reg) = fixture();
    let r = reg
        .search("create issue", Some("Developer-Tools"), 10)
        .unwrap();
    assert!(r.hits.iter().all(|h| h.tool.category == "developer-tools"));
    assert!(!r.hits.is_empty());
    let r = reg.search("create issue", Some("files"), 10).unwrap();
    assert!(r.hits.is_empty());
    assert!(
        r.suggestions[0].contains("developer-tools"),
        "{:?}",
        r.suggestions
    );
    assert_eq!(
        reg.search("weather", Some(""), 1).unwrap().hits.len(),
        1,
        "empty = no filter"
    );
}

#[test]
fn unknown_category_lists_the_known_ones() {
    let (_d, reg) = fixture();
    let e = reg.search("x", Some("weather"), 5).unwrap_err().to_string();
    assert!(
        e.contains("unknown category 'weather'") && e.contains("developer-tools, files"),
        "{e}"
    );
}

#[test]
fn limit_is_clamped() {
    let (_d, reg) = fixture();
    assert_eq!(reg.search("create", None, 0).unwrap().hits.len(), 1);
    assert!(shipped().search("get", None, 1000).unwrap().hits.len() == MAX_LIMIT);
}

#[test]
fn an_exact_id_or_name_comes_first() {
    let (_d, reg) = fixture();
    assert_eq!(
        ids(&reg.search("gitlab/create_issue", None, 3).unwrap())[0],
        "gitlab/create_issue"
    );
    assert_eq!(
        ids(&reg.search("list_branches", None, 3).unwrap())[0],
        "github/list_branches"
    );
}

#[test]
fn get_by_id_and_by_unique_bare_name() {
    let (_d, reg) = fixture();
    assert_eq!(
        reg.get("github/create_issue", None).unwrap().mcp_server,
        "github"
    );
    assert_eq!(
        reg.get("GitHub/Create_Issue", None).unwrap().id,
        "github/create_issue"
    );
    assert_eq!(
        reg.get("delete_file", None).unwrap().id,
        "filesystem/delete_file"
    );
    assert_eq!(
        reg.get("readfile", Some("files")).unwrap().id,
        "filesystem/readFile"
    );
}

#[test]
fn get_with_a_shared_name_lists_the_ids() {
    let (_d, reg) = fixture();
    let e = reg.get("create_issue", None).unwrap_err();
    assert!(matches!(&e, DiscoveryError::AmbiguousTool { ids, .. } if ids.len() == 2));
    let m = e.to_string();
    assert!(
        m.contains("github/create_issue") && m.contains("gitlab/create_issue"),
        "{m}"
    );
    // A category narrows the candidates; both are developer tools, so it stays ambiguous.
    assert!(reg.get("create_issue", Some("developer-tools")).is_err());
}

#[test]
fn get_unknown_lists_the_closest_ids() {
    let (_d, reg) = fixture();
    let e = reg.get("delete_fille", None).unwrap_err();
    let DiscoveryError::ToolNotFound { closest, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(closest[0], "filesystem/delete_file");
    assert!(e.to_string().contains("search_tools"));

    let e = reg.get("github/create_isue", None).unwrap_err();
    let DiscoveryError::ToolNotFound { closest, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(closest[0], "github/create_issue");

    assert!(matches!(
        reg.get("x", Some("nope")),
        Err(DiscoveryError::UnknownCategory { .. })
    ));
}

#[test]
fn categories_are_counted() {
    let (_d, reg) = fixture();
    let cats = reg.categories();
    let names: Vec<&str> = cats.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "developer-tools",
            "files",
            "research-reference",
            "search-web"
        ]
    );
    assert_eq!(cats[0].tool_count, 4);
    assert_eq!(cats[0].description, "Code hosting");
    assert_eq!(reg.total_tools(), 9);
}

#[test]
fn nothing_matched_gives_suggestions() {
    let (_d, reg) = fixture();
    let empty = reg.search("  \u{0} ?! ", None, 5).unwrap();
    assert!(empty.hits.is_empty() && empty.suggestions[0].contains("Describe the tool"));

    let r = reg.search("xylophone", None, 5).unwrap();
    assert!(r.hits.is_empty() && !r.suggestions.is_empty());

    let r = reg
        .search_with(
            "wetherr",
            None,
            5,
            SearchOptions {
                typos: false,
                synonyms: false,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert!(
        r.suggestions.iter().any(|s| s.contains("weather")),
        "{:?}",
        r.suggestions
    );

    let r = reg
        .search_with(
            "fils",
            None,
            5,
            SearchOptions {
                typos: false,
                synonyms: false,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert!(
        r.suggestions
            .iter()
            .any(|s| s.contains("Categories that may fit: files")),
        "{:?}",
        r.suggestions
    );
}

#[test]
fn a_missing_directory_is_an_empty_registry() {
    let d = tempfile::tempdir().unwrap();
    let reg = Registry::load(&d.path().join("absent")).unwrap();
    assert_eq!(reg.total_tools(), 0);
    assert!(reg.search("anything", None, 5).unwrap().hits.is_empty());
    assert!(reg.categories().is_empty());
}

#[test]
fn a_file_instead_of_a_directory_is_an_error() {
    let d = tempfile::NamedTempFile::new().unwrap();
    let e = Registry::load(d.path()).unwrap_err();
    assert!(
        e.to_string().contains("cannot read the tool registry"),
        "{e}"
    );
}

#[test]
fn malformed_files_are_skipped_and_the_rest_loads() {
    let (d, _) = fixture();
    std::fs::write(d.path().join("zz-broken.json"), "{ not json").unwrap();
    let reg = Registry::load(d.path()).unwrap();
    assert_eq!(reg.total_tools(), 9);
    assert_eq!(reg.problems().len(), 1);
    assert!(reg.problems()[0].file.ends_with("zz-broken.json"));
}

#[test]
fn the_shipped_catalog_loads_whole() {
    let reg = shipped();
    assert!(reg.problems().is_empty(), "{:?}", reg.problems());
    assert_eq!(reg.total_tools(), 5558);
    assert_eq!(reg.categories().len(), 29);
    assert!(
        reg.categories()
            .iter()
            .all(|c| !c.description.is_empty() && c.tool_count > 0)
    );
    assert_eq!(
        reg.get("github/create_issue", None).unwrap().mcp_server,
        "github"
    );
}

#[test]
fn the_shipped_catalog_answers_plain_requests() {
    let reg = shipped();
    let top5 = |q: &str| ids(&reg.search(q, None, 5).unwrap());
    assert!(
        top5("wether forecast")
            .iter()
            .any(|id| id.starts_with("weather/")),
        "{:?}",
        top5("wether forecast")
    );
    assert!(top5("create a github issue").contains(&"github/create_issue".to_owned()));
    assert!(!top5("查询火车票").is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_query_is_safe(q in any::<String>(), cat in proptest::option::of("[a-z-]{0,20}"), limit in any::<usize>()) {
        let reg = shipped();
        if let Ok(r) = reg.search(&q, cat.as_deref(), limit) {
            prop_assert!(r.hits.len() <= MAX_LIMIT);
            prop_assert!(!r.hits.is_empty() || !r.suggestions.is_empty());
            prop_assert!(r.hits.windows(2).all(|w| w[0].score >= w[1].score));
        }
        let _ = reg.get(&q, cat.as_deref());
    }

    #[test]
    fn long_and_odd_queries_are_safe(
        unit in "[a-zA-Z\u{4e00}-\u{9fff}\u{0}-\u{1f}_ -]{1,12}",
        repeat in 1usize..20_000,
    ) {
        let q = unit.repeat(repeat);
        let r = shipped().search(&q, None, 10).unwrap();
        prop_assert!(r.hits.len() <= 10);
        let _ = shipped().get(&q, None);
    }
}

#[test]
fn a_directory_adds_to_and_overrides_the_built_in_catalog() {
    let d = tempfile::tempdir().unwrap();
    let doc = json!({"categories": {"developer-tools": {"description": "", "tools": {
        "github/create_issue": {"description": "Open an issue in the company tracker"},
        "acme/deploy_service": {"description": "Deploy an Acme service"}
    }}}});
    std::fs::write(d.path().join("local.json"), doc.to_string()).unwrap();
    let discovery = Discovery::shipped_and(d.path(), semantic::Ranking::lexical()).unwrap();
    assert!(discovery.has_built_in());
    let reg = discovery.current();
    assert!(reg.problems().is_empty(), "{:?}", reg.problems());
    assert_eq!(reg.total_tools(), 5559, "one added, one overridden");
    assert_eq!(
        reg.get("github/create_issue", None).unwrap().description,
        "Open an issue in the company tracker"
    );
    assert_eq!(
        reg.search("deploy acme service", None, 1).unwrap().hits[0].id,
        "acme/deploy_service"
    );
    // Without the directory, the built-in catalog alone.
    let none =
        Discovery::shipped_and(d.path().join("absent"), semantic::Ranking::lexical()).unwrap();
    assert_eq!(none.current().total_tools(), 5558);
}
