//! The model against the reference implementation's numbers (sentence-transformers' tokenizer
//! and a float32 forward pass of the original weights), on texts of several kinds; then whole
//! registries ranked with it: what it finds that BM25F cannot (and the reverse), dropped-in
//! tools, the shipped vectors, determinism, and the fallback when the model file is bad.

use super::*;

/// Texts with the ids the reference tokenizer gives them.
const TOKENIZED: &[(&str, &[u32])] = &[
    (
        "A man is eating food.",
        &[101, 1037, 2158, 2003, 5983, 2833, 1012, 102],
    ),
    (
        "is it going to rain tomorrow in Lyon?",
        &[
            101, 2003, 2009, 2183, 2000, 4542, 4826, 1999, 10241, 1029, 102,
        ],
    ),
    (
        "Créer un ticket — dans Jira!",
        &[
            101, 27831, 2099, 4895, 7281, 1517, 18033, 10147, 2527, 999, 102,
        ],
    ),
    (
        "get_pull_request: Get details of a specific pull request in a GitHub repository.",
        &[
            101, 2131, 1035, 4139, 1035, 5227, 1024, 2131, 4751, 1997, 1037, 3563, 4139, 5227,
            1999, 1037, 21025, 2705, 12083, 22409, 1012, 102,
        ],
    ),
    ("天气预报 weather", &[101, 1811, 100, 100, 100, 4633, 102]),
];

fn model() -> Arc<SentenceModel> {
    SentenceModel::builtin().expect("the built-in model loads")
}

#[test]
fn tokenizes_as_the_reference_does() {
    let m = model();
    for (text, ids) in TOKENIZED {
        assert_eq!(m.words.encode(text, MAX_TOKENS), *ids, "{text}");
    }
}

/// Pairs with the cosine similarity and first components of the first text's vector that the
/// reference computes in float32 from the original weights.
const REFERENCE: &[(&str, &str, f32, [f32; 4])] = &[
    (
        "A man is eating food.",
        "A man is eating a piece of bread.",
        0.7553,
        [0.0332, 0.0044, -0.0063, 0.0484],
    ),
    (
        "is it going to rain tomorrow in Lyon?",
        "get_weather_forecast: Get the weather forecast for a city",
        0.3587,
        [-0.0063, -0.0274, 0.0508, 0.0008],
    ),
    (
        "Créer un ticket — dans Jira!",
        "create_issue: Create a new issue in a Jira project",
        0.2494,
        [-0.1237, 0.1119, -0.0013, -0.0705],
    ),
    (
        "The new movie is awesome",
        "The cat sits outside",
        -0.0247,
        [-0.1004, -0.0774, -0.0014, -0.0485],
    ),
];

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn embeds_as_the_reference_does_within_int8_rounding() {
    let m = model();
    for (a, b, cosine, head) in REFERENCE {
        let (va, vb) = (m.embed(a), m.embed(b));
        assert_eq!(va.len(), 384);
        assert!((dot(&va, &va) - 1.0).abs() < 1e-4, "unit length");
        let got = dot(&va, &vb);
        assert!((got - cosine).abs() < 0.01, "{a} / {b}: {got} vs {cosine}");
        for (g, w) in va.iter().zip(head) {
            assert!((g - w).abs() < 0.005, "{a}: {:?} vs {head:?}", &va[..4]);
        }
    }
}

#[test]
fn the_same_text_gives_the_same_vector_every_time() {
    let m = model();
    let text = "list the open pull requests of a repository";
    let first = m.embed(text);
    for _ in 0..3 {
        assert_eq!(m.embed(text), first);
    }
}

mod registries {
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    use serde_json::json;

    use super::super::{BUILTIN_MODEL, ModelError, ModelSource, Ranking, SentenceModel};
    use crate::discovery::{Registry, SearchOptions};

    fn no_additions() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/no-such-registry-dir")
    }

    fn catalog(dir: &Path, ranking: Ranking) -> Registry {
        Registry::load_over(crate::shipped::TOOLS_REGISTRY, dir)
            .unwrap()
            .ranked_by(ranking)
    }

    fn semantic() -> &'static Registry {
        static REG: OnceLock<Registry> = OnceLock::new();
        REG.get_or_init(|| catalog(&no_additions(), Ranking::semantic(ModelSource::Builtin)))
    }

    fn lexical() -> &'static Registry {
        static REG: OnceLock<Registry> = OnceLock::new();
        REG.get_or_init(|| catalog(&no_additions(), Ranking::lexical()))
    }

    fn top(registry: &Registry, query: &str, options: SearchOptions) -> Vec<String> {
        let r = registry.search_with(query, None, 5, options).unwrap();
        r.hits.iter().map(|h| h.id.to_owned()).collect()
    }

    #[test]
    fn the_model_finds_a_tool_described_in_other_words() {
        let q = "who has been editing this file lately";
        let lex = top(lexical(), q, SearchOptions::default());
        let fused = top(semantic(), q, SearchOptions::default());
        assert!(!lex.contains(&"fastfs/fastfs_blame".into()), "{lex:?}");
        assert!(fused.contains(&"fastfs/fastfs_blame".into()), "{fused:?}");
    }

    #[test]
    fn bm25f_keeps_what_the_model_misses() {
        // Typos: the model reads "transcibe" and "vidoe" as pieces of nothing; BM25F's typo
        // tolerance reads them as the words they should be.
        let q = "transcibe a youtube vidoe";
        let model_only = SearchOptions {
            lexical_weight: 0.0,
            ..SearchOptions::default()
        };
        let transcript = |ids: &[String]| ids.iter().any(|id| id.ends_with("/get_transcript"));
        assert!(transcript(&top(lexical(), q, SearchOptions::default())));
        assert!(!transcript(&top(semantic(), q, model_only)));
        let fused = top(semantic(), q, SearchOptions::default());
        assert!(transcript(&fused), "{fused:?}");
    }

    #[test]
    fn nonsense_gets_suggestions_not_random_tools() {
        let r = semantic().search("xqzv blorft wuggle", None, 5).unwrap();
        assert!(
            r.hits.is_empty() && !r.suggestions.is_empty(),
            "{:?}",
            r.hits
        );
    }

    #[test]
    fn every_shipped_tool_has_its_shipped_vector() {
        let reg = semantic();
        reg.prepare();
        let status = reg.ranking();
        assert_eq!(status.ranker, "semantic");
        assert_eq!(
            (status.vectors_shipped, status.vectors_embedded),
            (Some(reg.total_tools()), Some(0)),
            "tools_registry/model/catalog.vectors does not match the catalog: run \
             `cargo run --release --example embed-catalog`"
        );
    }

    #[test]
    fn a_dropped_in_tool_is_embedded_and_found_by_meaning() {
        let d = tempfile::tempdir().unwrap();
        let doc = json!({"categories": {"home-iot": {"description": "Home", "tools": {
            "aquarium/set_heater": {"description": "Set the target temperature of the fish tank's heater"}
        }}}});
        std::fs::write(d.path().join("mine.json"), doc.to_string()).unwrap();
        let reg = catalog(d.path(), Ranking::semantic(ModelSource::Builtin));
        let q = "keep my goldfish warm";
        let found = top(&reg, q, SearchOptions::default());
        assert!(found.contains(&"aquarium/set_heater".into()), "{found:?}");
        let by_words = top(
            &catalog(d.path(), Ranking::lexical()),
            q,
            SearchOptions::default(),
        );
        assert!(
            !by_words.contains(&"aquarium/set_heater".into()),
            "{by_words:?}"
        );
        let status = reg.ranking();
        assert_eq!(status.vectors_embedded, Some(1));
    }

    #[test]
    fn results_are_the_same_on_every_run() {
        let again = catalog(&no_additions(), Ranking::semantic(ModelSource::Builtin));
        for q in [
            "send a message to the team channel",
            "is it going to rain tomorrow",
        ] {
            let a = semantic().search(q, None, 10).unwrap();
            let b = again.search(q, None, 10).unwrap();
            let pairs = |r: &crate::discovery::SearchResults<'_>| {
                r.hits
                    .iter()
                    .map(|h| (h.id.to_owned(), h.score))
                    .collect::<Vec<_>>()
            };
            assert_eq!(pairs(&a), pairs(&b));
        }
    }

    #[test]
    fn a_damaged_model_file_is_refused_with_the_reason() {
        let damaged = |bytes: &[u8]| match SentenceModel::from_bytes(bytes) {
            Err(ModelError::Damaged(why)) => why,
            other => panic!("{:?}", other.map(|m| m.name().to_owned())),
        };
        let cut = &BUILTIN_MODEL[..BUILTIN_MODEL.len() / 2];
        assert!(damaged(cut).contains("checksum"));
        let mut flipped = BUILTIN_MODEL.to_vec();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(damaged(&flipped).contains("checksum"));
        let pointer =
            b"version https://git-lfs.github.com/spec/v1\noid sha256:36e4\nsize 23848358\n";
        assert!(damaged(pointer).contains("CEMSENT1"));
        assert!(damaged(b"CEMSENT1\xff\xff\xff\x7f").contains("header length"));
    }

    #[test]
    fn without_a_usable_model_file_discovery_ranks_lexically_and_says_why() {
        let d = tempfile::tempdir().unwrap();
        let damaged = d.path().join("model.q8");
        std::fs::write(&damaged, &BUILTIN_MODEL[..1000]).unwrap();
        for (path, says) in [
            (d.path().join("missing.q8"), "cannot read"),
            (damaged, "damaged"),
        ] {
            let reg = catalog(&no_additions(), Ranking::semantic(ModelSource::File(path)));
            let q = "add documents to a meilisearch index";
            assert_eq!(
                top(&reg, q, SearchOptions::default()),
                top(lexical(), q, SearchOptions::default())
            );
            let status = reg.ranking();
            assert_eq!(status.ranker, "lexical");
            let note = status.note.unwrap_or_default();
            assert!(note.contains(says) && note.contains("lexically"), "{note}");
        }
    }
}
