//! What the binary carries: the tool catalog (`tools_registry/*.json`) and the starter skills
//! (`skills/*.py` with their `*.json`), embedded at build time by `build.rs`. An installed
//! binary then serves every shipped tool and seeds the starter skills from any directory, with
//! no source tree and no `share/` directory beside it. (The sandbox image's build context is
//! embedded the same way, by `sandbox::image`.)

/// One embedded file: its name in the shipped directory and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct ShippedFile {
    pub name: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/shipped.rs"));

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn on_disk(dir: &str, extensions: &[&str]) -> Vec<(String, Vec<u8>)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| extensions.contains(&e))
            })
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).unwrap())
            })
            .collect();
        files.sort();
        files
    }

    fn embedded(files: &[ShippedFile]) -> Vec<(String, Vec<u8>)> {
        files
            .iter()
            .map(|f| (f.name.to_owned(), f.bytes.to_vec()))
            .collect()
    }

    #[test]
    fn the_binary_carries_every_shipped_file_as_it_is_on_disk() {
        assert_eq!(
            embedded(TOOLS_REGISTRY),
            on_disk("tools_registry", &["json"])
        );
        assert_eq!(embedded(STARTER_SKILLS), on_disk("skills", &["py", "json"]));
        assert!(TOOLS_REGISTRY.len() >= 25, "{}", TOOLS_REGISTRY.len());
        assert!(
            STARTER_SKILLS
                .iter()
                .any(|f| f.name == "filter_high_risk.py")
        );
    }
}
