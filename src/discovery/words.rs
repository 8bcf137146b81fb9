//! Tokenizer shared by the index and the query side, so both cut text the same way.
//!
//! Tool names come in every style (`get_pull_request`, `getPullRequest`, `get-pull-request`,
//! `files.read`, `s3_list_buckets`), descriptions in several languages. The rules:
//! - anything that is not a letter or digit separates words (snake, kebab, dotted, spaces);
//! - inside a word, case changes (`getPull`, `HTTPServer`) and letter/digit changes (`base64`)
//!   split it too; the whole word is kept beside its parts (`GitHub` gives `github`, `git`, `hub`),
//!   and one-character parts are dropped (`k8s` stays `k8s`, `s3` stays `s3`);
//! - Chinese, Japanese and Korean have no spaces, so runs of those scripts become overlapping
//!   character bigrams (a single character stays a unigram): a query `天气预报` shares `天气`
//!   with a description that says `查询天气`;
//! - everything is lowercased; stop words are the caller's business ([`is_stop_word`]).
//!
//! Stemming lives in `stem.rs`; this module only finds the words.

/// Tokens longer than this (hashes, base64 blobs, minified code) carry no meaning for search.
const MAX_TOKEN_BYTES: usize = 48;

/// Calls `emit` with every lowercased token of `text`, in order.
pub fn tokenize(text: &str, mut emit: impl FnMut(&str)) {
    let mut buf = String::new();
    let mut start = None::<usize>;
    let mut cjk = Vec::<char>::new();
    for (i, c) in text.char_indices() {
        if is_cjk(c) {
            if let Some(s) = start.take() {
                word(&text[s..i], &mut buf, &mut emit);
            }
            cjk.push(c);
        } else if c.is_alphanumeric() {
            if !cjk.is_empty() {
                cjk_run(&cjk, &mut buf, &mut emit);
                cjk.clear();
            }
            start.get_or_insert(i);
        } else {
            if let Some(s) = start.take() {
                word(&text[s..i], &mut buf, &mut emit);
            }
            if !cjk.is_empty() {
                cjk_run(&cjk, &mut buf, &mut emit);
                cjk.clear();
            }
        }
    }
    if let Some(s) = start {
        word(&text[s..], &mut buf, &mut emit);
    }
    if !cjk.is_empty() {
        cjk_run(&cjk, &mut buf, &mut emit);
    }
}

/// Chinese, Japanese and Korean scripts, which are not written with spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x31F0..=0x31FF   // Katakana extensions
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xF900..=0xFAFF   // compatibility ideographs
        | 0x1100..=0x11FF   // Hangul Jamo
        | 0x3130..=0x318F   // Hangul compatibility Jamo
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0x20000..=0x2FA1F // extensions B and later
    )
}

/// English function words and the filler an agent puts around a request ("I need a tool to…").
/// They match nearly every description, so they only add noise to ranking.
// A table: one line per stop word, as rustfmt lays out the pattern.
#[allow(clippy::too_many_lines)]
pub fn is_stop_word(token: &str) -> bool {
    matches!(
        token,
        "a" | "about"
            | "after"
            | "all"
            | "also"
            | "am"
            | "an"
            | "and"
            | "any"
            | "are"
            | "as"
            | "at"
            | "be"
            | "been"
            | "but"
            | "by"
            | "can"
            | "could"
            | "did"
            | "do"
            | "does"
            | "etc"
            | "for"
            | "from"
            | "had"
            | "has"
            | "have"
            | "how"
            | "i"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "its"
            | "just"
            | "me"
            | "mcp"
            | "my"
            | "need"
            | "of"
            | "on"
            | "or"
            | "our"
            | "please"
            | "s"
            | "should"
            | "so"
            | "some"
            | "something"
            | "such"
            | "t"
            | "than"
            | "that"
            | "the"
            | "their"
            | "them"
            | "then"
            | "there"
            | "these"
            | "this"
            | "those"
            | "to"
            | "tool"
            | "tools"
            | "use"
            | "using"
            | "via"
            | "want"
            | "was"
            | "we"
            | "were"
            | "what"
            | "when"
            | "where"
            | "which"
            | "who"
            | "will"
            | "with"
            | "would"
            | "you"
            | "your"
    )
}

/// Splits one alphanumeric run at camel-case and letter/digit boundaries (`HTTPServer` →
/// `http`, `server`; `base64` → `base`, `64`), emits the parts of two or more characters,
/// then the whole run.
fn word(run: &str, buf: &mut String, emit: &mut impl FnMut(&str)) {
    let mut part_start = 0;
    let mut split = false;
    let mut prev = None::<char>;
    let mut chars = run.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(p) = prev {
            let next_lower = chars.peek().is_some_and(|&(_, n)| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_numeric() != c.is_numeric());
            if boundary {
                emit_part(&run[part_start..i], buf, emit);
                part_start = i;
                split = true;
            }
        }
        prev = Some(c);
    }
    if split {
        emit_part(&run[part_start..], buf, emit);
    }
    emit_lower(run, buf, emit);
}

/// Emits a sub-word unless it is a single character (the `k` and `s` of `k8s`).
fn emit_part(part: &str, buf: &mut String, emit: &mut impl FnMut(&str)) {
    if part.chars().nth(1).is_some() {
        emit_lower(part, buf, emit);
    }
}

fn cjk_run(chars: &[char], buf: &mut String, emit: &mut impl FnMut(&str)) {
    if chars.len() == 1 {
        buf.clear();
        buf.push(chars[0]);
        emit(buf);
        return;
    }
    for pair in chars.windows(2) {
        buf.clear();
        buf.extend(pair);
        emit(buf);
    }
}

fn emit_lower(part: &str, buf: &mut String, emit: &mut impl FnMut(&str)) {
    if part.len() > MAX_TOKEN_BYTES {
        return;
    }
    buf.clear();
    if part.is_ascii() {
        buf.push_str(part);
        buf.make_ascii_lowercase();
    } else {
        buf.extend(part.chars().flat_map(char::to_lowercase));
    }
    emit(buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        tokenize(text, |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn splits_snake_kebab_dotted_and_spaces() {
        assert_eq!(tokens("get_pull_request"), ["get", "pull", "request"]);
        assert_eq!(tokens("get-pull-request"), ["get", "pull", "request"]);
        assert_eq!(tokens("files.read now"), ["files", "read", "now"]);
    }

    #[test]
    fn splits_camel_case_and_keeps_the_whole_word() {
        assert_eq!(
            tokens("getPullRequest"),
            ["get", "pull", "request", "getpullrequest"]
        );
        assert_eq!(tokens("HTTPServer"), ["http", "server", "httpserver"]);
        assert_eq!(tokens("GitHub"), ["git", "hub", "github"]);
    }

    #[test]
    fn splits_digits_but_drops_one_character_parts() {
        assert_eq!(tokens("base64"), ["base", "64", "base64"]);
        assert_eq!(tokens("k8s"), ["k8s"]);
        assert_eq!(tokens("s3_list_buckets"), ["s3", "list", "buckets"]);
        assert_eq!(tokens("ec2"), ["ec", "ec2"]);
    }

    #[test]
    fn cjk_becomes_bigrams() {
        assert_eq!(tokens("查询天气"), ["查询", "询天", "天气"]);
        assert_eq!(tokens("天"), ["天"]);
        assert_eq!(tokens("bing搜索API"), ["bing", "搜索", "api"]);
        assert_eq!(tokens("서울 날씨"), ["서울", "날씨"]);
    }

    #[test]
    fn lowercases_unicode_and_ignores_controls_and_symbols() {
        assert_eq!(
            tokens("Médicaments\u{0}\u{7}ÉTAT 🚀"),
            ["médicaments", "état"]
        );
        assert!(tokens("\n\t\r\u{1b}[0m").iter().all(|t| t == "0m"));
    }

    #[test]
    fn drops_overlong_tokens() {
        let blob = "a".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(tokens(&format!("x {blob} y")), ["x", "y"]);
    }

    #[test]
    fn stop_words_are_function_words_only() {
        assert!(is_stop_word("the") && is_stop_word("tool"));
        assert!(!is_stop_word("get") && !is_stop_word("list") && !is_stop_word("new"));
    }
}
