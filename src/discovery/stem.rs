//! English stemmer: Porter's 1980 algorithm, so "creating", "created", "creates" and "create"
//! meet at one index term, as do "deletion"/"delete", "listing"/"lists", "queries"/"query".
//!
//! Why Porter and not something lighter: agents phrase the same need with different word forms
//! ("list repositories" vs "listing repos"), and tool descriptions are short, so every form that
//! fails to meet costs a hit. Porter is the well-known trade-off; its over-stemming (e.g.
//! "organization" → "organ") hurts little on tool descriptions. Only lowercase ASCII words of
//! three or more letters are touched; digits, non-English words and CJK pass through unchanged.
//! A few words Porter would merge with unrelated ones are kept as they are (`KEEP`).

/// Words Porter would collapse into a different, common word ("news" → "new").
const KEEP: &[&str] = &[
    "news", "aws", "dns", "gas", "bus", "plus", "always", "series", "species",
];

/// Returns the stem of a lowercased token.
pub fn stem(word: &str) -> String {
    let b = word.as_bytes();
    if b.len() < 3 || !b.iter().all(u8::is_ascii_lowercase) || KEEP.contains(&word) {
        return word.to_owned();
    }
    let mut w = b.to_vec();
    step1a(&mut w);
    step1b(&mut w);
    step1c(&mut w);
    step2(&mut w);
    step3(&mut w);
    step4(&mut w);
    step5(&mut w);
    String::from_utf8(w).expect("ASCII in, ASCII out")
}

fn is_consonant(w: &[u8], i: usize) -> bool {
    match w[i] {
        b'a' | b'e' | b'i' | b'o' | b'u' => false,
        b'y' => i == 0 || !is_consonant(w, i - 1),
        _ => true,
    }
}

/// Porter's m: the number of vowel-consonant sequences in `w` ([C](VC)^m[V]).
fn measure(w: &[u8]) -> usize {
    let n = w.len();
    let mut i = 0;
    while i < n && is_consonant(w, i) {
        i += 1;
    }
    let mut m = 0;
    loop {
        while i < n && !is_consonant(w, i) {
            i += 1;
        }
        if i >= n {
            return m;
        }
        while i < n && is_consonant(w, i) {
            i += 1;
        }
        m += 1;
    }
}

fn has_vowel(w: &[u8]) -> bool {
    (0..w.len()).any(|i| !is_consonant(w, i))
}

fn ends_double_consonant(w: &[u8]) -> bool {
    let n = w.len();
    n >= 2 && w[n - 1] == w[n - 2] && is_consonant(w, n - 1)
}

/// consonant-vowel-consonant at the end, the last not w, x or y ("hop", not "how").
fn ends_cvc(w: &[u8]) -> bool {
    let n = w.len();
    n >= 3
        && is_consonant(w, n - 3)
        && !is_consonant(w, n - 2)
        && is_consonant(w, n - 1)
        && !matches!(w[n - 1], b'w' | b'x' | b'y')
}

/// The part of `w` before `suffix`, when `w` ends with it.
fn stem_of<'a>(w: &'a [u8], suffix: &str) -> Option<&'a [u8]> {
    w.strip_suffix(suffix.as_bytes())
}

fn replace_suffix(w: &mut Vec<u8>, suffix: &str, with: &str) {
    w.truncate(w.len() - suffix.len());
    w.extend_from_slice(with.as_bytes());
}

fn step1a(w: &mut Vec<u8>) {
    if w.ends_with(b"sses") || w.ends_with(b"ies") {
        w.truncate(w.len() - 2);
    } else if w.ends_with(b"s") && !w.ends_with(b"ss") {
        w.pop();
    }
}

fn step1b(w: &mut Vec<u8>) {
    if let Some(s) = stem_of(w, "eed") {
        if measure(s) > 0 {
            w.pop();
        }
        return;
    }
    let cut = ["ed", "ing"]
        .into_iter()
        .find(|suffix| stem_of(w, suffix).is_some_and(has_vowel));
    let Some(suffix) = cut else { return };
    w.truncate(w.len() - suffix.len());
    if w.ends_with(b"at") || w.ends_with(b"bl") || w.ends_with(b"iz") {
        w.push(b'e');
    } else if ends_double_consonant(w) && !matches!(w[w.len() - 1], b'l' | b's' | b'z') {
        w.pop();
    } else if measure(w) == 1 && ends_cvc(w) {
        w.push(b'e');
    }
}

fn step1c(w: &mut [u8]) {
    let n = w.len();
    if w.ends_with(b"y") && has_vowel(&w[..n - 1]) {
        w[n - 1] = b'i';
    }
}

/// Applies the first rule whose suffix `w` ends with, if the stem before it has m > `min_m`.
fn apply_rules(w: &mut Vec<u8>, rules: &[(&str, &str)], min_m: usize) {
    if let Some(&(suffix, with)) = rules.iter().find(|(s, _)| w.ends_with(s.as_bytes()))
        && measure(&w[..w.len() - suffix.len()]) > min_m
    {
        replace_suffix(w, suffix, with);
    }
}

fn step2(w: &mut Vec<u8>) {
    // Longer suffixes first where one ends another ("ational" before "tional").
    const RULES: &[(&str, &str)] = &[
        ("ational", "ate"),
        ("tional", "tion"),
        ("enci", "ence"),
        ("anci", "ance"),
        ("izer", "ize"),
        ("bli", "ble"),
        ("alli", "al"),
        ("entli", "ent"),
        ("eli", "e"),
        ("ousli", "ous"),
        ("ization", "ize"),
        ("ation", "ate"),
        ("ator", "ate"),
        ("alism", "al"),
        ("iveness", "ive"),
        ("fulness", "ful"),
        ("ousness", "ous"),
        ("aliti", "al"),
        ("iviti", "ive"),
        ("biliti", "ble"),
        ("logi", "log"),
    ];
    apply_rules(w, RULES, 0);
}

fn step3(w: &mut Vec<u8>) {
    const RULES: &[(&str, &str)] = &[
        ("icate", "ic"),
        ("ative", ""),
        ("alize", "al"),
        ("iciti", "ic"),
        ("ical", "ic"),
        ("ful", ""),
        ("ness", ""),
    ];
    apply_rules(w, RULES, 0);
}

fn step4(w: &mut Vec<u8>) {
    const SUFFIXES: &[&str] = &[
        "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion",
        "ou", "ism", "ate", "iti", "ous", "ive", "ize",
    ];
    // Porter takes the longest matching suffix.
    let Some(suffix) = SUFFIXES
        .iter()
        .filter(|s| w.ends_with(s.as_bytes()))
        .max_by_key(|s| s.len())
    else {
        return;
    };
    let stem = &w[..w.len() - suffix.len()];
    let ion_ok = *suffix != "ion" || matches!(stem.last(), Some(b's' | b't'));
    if measure(stem) > 1 && ion_ok {
        w.truncate(stem.len());
    }
}

fn step5(w: &mut Vec<u8>) {
    if let Some(s) = stem_of(w, "e") {
        let m = measure(s);
        if m > 1 || (m == 1 && !ends_cvc(s)) {
            w.pop();
        }
    }
    if measure(w) > 1 && ends_double_consonant(w) && w.ends_with(b"l") {
        w.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn porter_reference_examples() {
        // Examples from Porter's paper and its reference vocabulary.
        for (word, want) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("hopping", "hop"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("conditional", "condit"),
            ("generalization", "gener"),
            ("electrical", "electr"),
            ("adjustment", "adjust"),
            ("controlling", "control"),
            ("rate", "rate"),
            ("generate", "gener"),
        ] {
            assert_eq!(stem(word), want, "{word}");
        }
    }

    #[test]
    fn word_forms_an_agent_uses_meet() {
        let same = |a: &str, b: &str| assert_eq!(stem(a), stem(b), "{a} vs {b}");
        same("create", "creating");
        same("created", "creates");
        same("deletion", "delete");
        same("listing", "lists");
        same("queries", "query");
        same("repositories", "repository");
        same("forecasts", "forecast");
        same("information", "inform");
        same("searching", "searches");
    }

    #[test]
    fn leaves_short_non_ascii_and_kept_words_alone() {
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("news"), "news");
        assert_eq!(stem("k8s"), "k8s");
        assert_eq!(stem("médicaments"), "médicaments");
        assert_eq!(stem("天气"), "天气");
    }
}
