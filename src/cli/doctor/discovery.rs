//! Which ranker `search_tools` will use: the sentence model loads (and how long it takes), or
//! why discovery would be lexical.

use std::time::Instant;

use super::Check;
use crate::config::{Config, Ranker};
use crate::discovery::semantic::SentenceModel;

pub fn check(config: &Config) -> Check {
    let d = &config.discovery;
    if d.discovery == Ranker::Lexical {
        return Check::pass("discovery", "lexical (--discovery lexical): BM25F only");
    }
    let started = Instant::now();
    let loaded = match &d.discovery_model {
        Some(path) => SentenceModel::from_file(path).map(std::sync::Arc::new),
        None => SentenceModel::builtin(),
    };
    match loaded {
        Ok(model) => Check::pass(
            "discovery",
            format!(
                "semantic: {} {} loaded in {:.0} ms, fused with BM25F",
                model.name(),
                if d.discovery_model.is_some() {
                    "(--discovery-model)"
                } else {
                    "(built in)"
                },
                started.elapsed().as_secs_f64() * 1e3
            ),
        ),
        Err(e) => Check::fail(
            "discovery",
            format!("{e}; search_tools would rank lexically (BM25F)"),
            "leave out --discovery-model to use the built-in model, or give a file made by \
             tools_registry/model/convert.py; --discovery lexical asks for BM25F alone",
        ),
    }
}
