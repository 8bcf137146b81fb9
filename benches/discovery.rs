//! Discovery quality and speed, on the shipped catalog and a synthetic 10,000-tool one.
//!
//! Quality: `benches/data/discovery_queries.jsonl` holds labeled queries phrased the way an
//! agent asks (paraphrases, synonyms, a few typos and non-English queries), each with the
//! `server/name` ids that would satisfy it; some carry a category filter, and `"hard": true`
//! marks those whose key concept the target tool names in other words. For each ranker:
//! - recall@k: share of queries with at least one acceptable tool among the first k results;
//! - MRR: mean of 1 / rank of the first acceptable tool (0 when none in the top 10).
//!
//! Rankers: this crate's search (and with synonyms or typo tolerance switched off, to show
//! what each brings), beside the original project's search: a case-insensitive substring test
//! of the whole query against name + description + functions + use cases, in catalog order.
//!
//! Speed: search latency over the query set on 10,000 tools (the catalog plus one variant of
//! most tools under another server name, descriptions reordered), and load + index time.
//!
//! The sentence model beside BM25F (the shipped ranker) is scored on the development set and
//! on a held-out set labeled apart from any ranker (`discovery_heldout.jsonl`: keyword,
//! paraphrase and own-words queries), with recall@5 per kind; its latency, load time, the
//! first search on a fresh registry and the resident memory it adds are printed after.
//!
//! Run: `cargo bench --bench discovery` (set DISCOVERY_BENCH_VERBOSE=1 to list every query's
//! top results, DISCOVERY_BENCH_SWEEP=1 for recall@5 over a range of lexical weights).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use code_execution_mcp::discovery::semantic::{ModelSource, Ranking, SentenceModel};
use code_execution_mcp::discovery::{Registry, SearchOptions, ToolEntry};
use serde_json::{Value, json};

const TOP: usize = 10;
const SYNTHETIC_TOOLS: usize = 10_000;
const LATENCY_ROUNDS: usize = 20;
const LOAD_ROUNDS: usize = 7;

/// A ranker under test: the ids it returns for a labeled query, best first.
type RankFn<'a> = Box<dyn Fn(&Labeled) -> Vec<String> + 'a>;

struct Labeled {
    query: String,
    relevant: Vec<String>,
    category: Option<String>,
    /// `hard` or `other` (development set); `keyword`, `paraphrase` or `own_words` (held out).
    kind: String,
}

#[derive(Default, Clone, Copy)]
struct Scores {
    queries: usize,
    at1: usize,
    at5: usize,
    rr: f64,
}

impl Scores {
    fn add(&mut self, rank: Option<usize>) {
        self.queries += 1;
        if let Some(r) = rank {
            self.at1 += usize::from(r == 1);
            self.at5 += usize::from(r <= 5);
            self.rr += 1.0 / r as f64;
        }
    }
    fn row(&self, name: &str) -> String {
        let n = self.queries.max(1) as f64;
        format!(
            "| {name:<34} | {:>4} | {:>8.3} | {:>8.3} | {:>6.3} |",
            self.queries,
            self.at1 as f64 / n,
            self.at5 as f64 / n,
            self.rr / n
        )
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let registry_dir = root.join("tools_registry");
    let queries = read_queries(&root.join("benches/data/discovery_queries.jsonl"));
    let heldout = read_queries(&root.join("benches/data/discovery_heldout.jsonl"));
    let verbose = std::env::var_os("DISCOVERY_BENCH_VERBOSE").is_some();

    let (load_real, registry) = time_load(&registry_dir);
    assert!(
        registry.total_tools() > 0,
        "no tools under {}",
        registry_dir.display()
    );

    let started = Instant::now();
    let semantic = Registry::load(&registry_dir)
        .expect("registry loads")
        .ranked_by(Ranking::semantic(ModelSource::Builtin));
    let before = resident_mib();
    semantic.prepare();
    std::hint::black_box(
        semantic
            .search("send a message to the team channel", None, TOP)
            .ok(),
    );
    let ready = started.elapsed();
    let added = resident_mib().saturating_sub(before);
    let model_load = time_model_load();
    let sets = [
        ("development set", queries.as_slice()),
        ("held-out set", heldout.as_slice()),
    ];
    let rankers = rankers(&registry, &semantic);
    for (set, queries) in sets {
        quality_table(set, queries, &rankers, verbose);
    }
    if std::env::var_os("DISCOVERY_BENCH_SWEEP").is_some() {
        for (set, queries) in sets {
            sweep(set, queries, &semantic);
        }
    }

    let synthetic = tempfile::tempdir().expect("temp dir");
    write_synthetic(&registry, synthetic.path(), SYNTHETIC_TOOLS);
    let (load_synthetic, big) = time_load(synthetic.path());
    let latency_real = latency(&registry, &queries);
    let latency_big = latency(&big, &queries);

    println!("\n## Discovery speed (release build, one thread)\n");
    println!(
        "| catalog          | tools  | load + index (median of {LOAD_ROUNDS}) | search p50 | search p99 | search max |"
    );
    println!(
        "|------------------|--------|---------------------------|------------|------------|------------|"
    );
    let latency_semantic = latency(&semantic, &queries);
    for (name, reg, load, lat) in [
        ("shipped", &registry, load_real, latency_real),
        ("synthetic 10k", &big, load_synthetic, latency_big),
        (
            "shipped, semantic",
            &semantic,
            load_real + model_load,
            latency_semantic,
        ),
    ] {
        println!(
            "| {name:<18} | {:>6} | {:>22.1} ms | {:>7.1} µs | {:>7.1} µs | {:>7.1} µs |",
            reg.total_tools(),
            ms(load),
            us(lat.0),
            us(lat.1),
            us(lat.2)
        );
    }
    println!(
        "\n(latency: {} queries × {LATENCY_ROUNDS} rounds, limit {TOP}, after one warm-up round; \
         the semantic row's load adds the model's: {:.0} ms)",
        queries.len(),
        ms(model_load)
    );
    println!(
        "first search on a fresh registry (catalog loaded, model loaded, vectors made, one query): {:.0} ms; \
         the model and vectors add {added} MiB of resident memory",
        ms(ready)
    );
}

/// The rankers compared: the shipped one, its parts, and the original project's search.
fn rankers<'a>(lexical: &'a Registry, semantic: &'a Registry) -> Vec<(&'static str, RankFn<'a>)> {
    let lex = |synonyms, typos| SearchOptions {
        synonyms,
        typos,
        ..SearchOptions::default()
    };
    vec![
        (
            "semantic + bm25f (shipped)",
            Box::new(move |q| ours(semantic, q, SearchOptions::default())),
        ),
        (
            "semantic only",
            Box::new(move |q| {
                let only = SearchOptions {
                    lexical_weight: 0.0,
                    ..SearchOptions::default()
                };
                ours(semantic, q, only)
            }),
        ),
        (
            "bm25f + synonyms + typos",
            Box::new(move |q| ours(lexical, q, lex(true, true))),
        ),
        (
            "bm25f + typos (no synonyms)",
            Box::new(move |q| ours(lexical, q, lex(false, true))),
        ),
        (
            "bm25f + synonyms (no typos)",
            Box::new(move |q| ours(lexical, q, lex(true, false))),
        ),
        (
            "bm25f only",
            Box::new(move |q| ours(lexical, q, lex(false, false))),
        ),
        (
            "original: substring, catalog order",
            Box::new(move |q| substring(lexical, q)),
        ),
    ]
}

/// The kinds of a query set, in order of first appearance.
fn kinds(queries: &[Labeled]) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for q in queries {
        if !kinds.contains(&q.kind) {
            kinds.push(q.kind.clone());
        }
    }
    kinds
}

/// Scores of one ranker on a set: all queries, then each kind.
fn score(
    queries: &[Labeled],
    kinds: &[String],
    rank: &dyn Fn(&Labeled) -> Vec<String>,
) -> (Scores, Vec<Scores>, String) {
    let mut all = Scores::default();
    let mut by_kind = vec![Scores::default(); kinds.len()];
    let mut log = String::new();
    for q in queries {
        let ids = rank(q);
        let first = ids
            .iter()
            .position(|id| q.relevant.contains(id))
            .map(|p| p + 1);
        all.add(first);
        by_kind[kinds
            .iter()
            .position(|k| *k == q.kind)
            .expect("a listed kind")]
        .add(first);
        let mark = match first {
            Some(1) => "ok ",
            Some(r) if r <= 5 => "top5",
            _ => "MISS",
        };
        let top3 = ids.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        let _ = writeln!(log, "{mark:<4} {:<10} {:<60} -> {top3}", q.kind, q.query);
    }
    (all, by_kind, log)
}

fn quality_table(set: &str, queries: &[Labeled], rankers: &[(&str, RankFn<'_>)], verbose: bool) {
    let kinds = kinds(queries);
    println!(
        "\n## Discovery quality, {set}: {} labeled queries\n",
        queries.len()
    );
    let kind_heads: String = kinds.iter().map(|k| format!(" R@5 {k} (n) |")).collect();
    println!(
        "| ranker                             |    n | recall@1 | recall@5 |    MRR |{kind_heads}"
    );
    println!("|---|---|---|---|---|{}", "---|".repeat(kinds.len()));
    let mut shipped_log = String::new();
    for (name, rank) in rankers {
        let (all, by_kind, log) = score(queries, &kinds, rank);
        let cells: String = by_kind
            .iter()
            .map(|s| {
                format!(
                    " {:.3} ({}) |",
                    s.at5 as f64 / s.queries.max(1) as f64,
                    s.queries
                )
            })
            .collect();
        println!("{}{cells}", all.row(name));
        if name.ends_with("(shipped)") {
            shipped_log = log;
        }
    }
    if verbose {
        println!("\n{shipped_log}");
    }
}

/// recall@5 of the fused ranker for several lexical weights (`DISCOVERY_BENCH_SWEEP=1`).
fn sweep(set: &str, queries: &[Labeled], semantic: &Registry) {
    let kinds = kinds(queries);
    println!("\n### Lexical weight, {set}\n");
    println!(
        "| weight | recall@5 | MRR |{}",
        kinds.iter().map(|k| format!(" {k} |")).collect::<String>()
    );
    println!("|---|---|---|{}", "---|".repeat(kinds.len()));
    for weight in [0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 1.0] {
        let options = SearchOptions {
            lexical_weight: weight,
            ..SearchOptions::default()
        };
        let (all, by_kind, _) = score(queries, &kinds, &|q| ours(semantic, q, options));
        let n = all.queries.max(1) as f64;
        let cells: String = by_kind
            .iter()
            .map(|s| format!(" {:.3} |", s.at5 as f64 / s.queries.max(1) as f64))
            .collect();
        println!(
            "| {weight} | {:.3} | {:.3} |{cells}",
            all.at5 as f64 / n,
            all.rr / n
        );
    }
}

/// This process's resident set (VmRSS), in MiB.
fn resident_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// How long the sentence model takes to load (a fresh copy from the binary's bytes).
fn time_model_load() -> Duration {
    let t = Instant::now();
    let model = SentenceModel::from_bytes(code_execution_mcp::discovery::semantic::BUILTIN_MODEL)
        .expect("the built-in model loads");
    std::hint::black_box(&model);
    t.elapsed()
}

/// This crate's ranking: ids of the top results.
fn ours(registry: &Registry, q: &Labeled, options: SearchOptions) -> Vec<String> {
    registry
        .search_with(&q.query, q.category.as_deref(), TOP, options)
        .expect("labeled categories exist")
        .hits
        .iter()
        .map(|h| h.id.to_owned())
        .collect()
}

/// The original project's search: the whole query as a case-insensitive substring of
/// name + description + functions + use cases; matches in catalog order.
fn substring(registry: &Registry, q: &Labeled) -> Vec<String> {
    let needle = q.query.to_lowercase();
    registry
        .tools()
        .iter()
        .filter(|t| {
            q.category
                .as_deref()
                .is_none_or(|c| t.category.eq_ignore_ascii_case(c))
        })
        .filter(|t| {
            let hay = format!(
                "{} {} {} {}",
                t.name,
                t.description,
                t.functions.join(" "),
                t.use_cases.join(" ")
            );
            hay.to_lowercase().contains(&needle)
        })
        .take(TOP)
        .map(|t| t.id.clone())
        .collect()
}

fn read_queries(path: &Path) -> Vec<Labeled> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            Labeled {
                query: v["query"].as_str().expect("query").to_owned(),
                relevant: v["relevant"]
                    .as_array()
                    .expect("relevant")
                    .iter()
                    .map(|id| id.as_str().expect("id").to_owned())
                    .collect(),
                category: v.get("category").and_then(Value::as_str).map(str::to_owned),
                kind: match v.get("kind").and_then(Value::as_str) {
                    Some(k) => k.to_owned(),
                    None if v.get("hard").and_then(Value::as_bool) == Some(true) => "hard".into(),
                    None => "other".into(),
                },
            }
        })
        .collect()
}

/// Loads `dir` `LOAD_ROUNDS` times; the median duration and the last registry.
fn time_load(dir: &Path) -> (Duration, Registry) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..LOAD_ROUNDS {
        let t = Instant::now();
        let reg = Registry::load(dir).expect("registry loads");
        times.push(t.elapsed());
        last = Some(reg);
    }
    times.sort();
    (times[times.len() / 2], last.expect("at least one round"))
}

/// p50, p99 and max of one search per query, over several rounds.
fn latency(registry: &Registry, queries: &[Labeled]) -> (Duration, Duration, Duration) {
    let run = |q: &Labeled| {
        registry
            .search(&q.query, q.category.as_deref(), TOP)
            .map(|r| r.hits.len())
    };
    queries.iter().for_each(|q| {
        std::hint::black_box(run(q).ok());
    });
    let mut samples = Vec::with_capacity(queries.len() * LATENCY_ROUNDS);
    for _ in 0..LATENCY_ROUNDS {
        for q in queries {
            let t = Instant::now();
            std::hint::black_box(run(q).ok());
            samples.push(t.elapsed());
        }
    }
    samples.sort();
    let pick = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    (pick(0.5), pick(0.99), *samples.last().expect("samples"))
}

/// Writes the real tools plus variants up to `total` tools as one registry file in `dir`:
/// variant i of a tool lives on server `<server>-alt<i>` and has its description's sentences
/// rotated, so postings grow the way a larger real catalog's would.
fn write_synthetic(registry: &Registry, dir: &Path, total: usize) {
    let real = registry.tools();
    let mut categories = serde_json::Map::new();
    let mut add = |t: &ToolEntry, server: &str, description: String| {
        let cat = categories
            .entry(t.category.clone())
            .or_insert_with(|| json!({"description": "", "tools": {}}));
        cat["tools"][format!("{server}/{}", t.name)] = json!({
            "name": t.name, "mcp_server": server, "description": description,
            "functions": t.functions, "use_cases": t.use_cases, "input_schema": t.input_schema,
        });
    };
    for t in real {
        add(t, &t.mcp_server, t.description.clone());
    }
    for i in 0..total.saturating_sub(real.len()) {
        let t = &real[i % real.len()];
        let round = i / real.len() + 1;
        let mut sentences: Vec<&str> = t.description.split_inclusive(". ").collect();
        if !sentences.is_empty() {
            sentences.rotate_left(1);
        }
        add(
            t,
            &format!("{}-alt{round}", t.mcp_server),
            sentences.concat(),
        );
    }
    let path: PathBuf = dir.join("synthetic.json");
    let doc = json!({ "categories": categories });
    std::fs::write(&path, serde_json::to_vec(&doc).expect("json"))
        .expect("write synthetic catalog");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
