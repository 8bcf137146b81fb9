//! What of an upstream's entry is secret, in every form it may come back in: the values the
//! entry's [`Redactor`] replaces in whatever the upstream returns.

use super::redact::{REDACTED, Redactor};
use super::upstreams_file::{UpstreamConfig, UpstreamTransport, shown_url};

impl UpstreamConfig {
    /// What keeps this entry's credentials out of everything the upstream sends back (see
    /// `redact.rs`): the upstream's full URL becomes the shown one (HTTP client errors quote
    /// the URL they failed on), and every secret of the entry becomes `[redacted]`: the values
    /// of `env` (but for [`NOT_SECRET_ENV`]) and `headers`, a bearer token without its scheme
    /// word, the URL's user info, query and fragment and each of their values; each also
    /// percent-encoded (a client may quote a normalised URL) and JSON-escaped (a text content
    /// may hold JSON). Values under 4 characters are left: replacing every "1" or "on" would
    /// garble messages and hide nothing.
    pub fn redactor(&self) -> Redactor {
        let mut found: Vec<String> = Vec::new();
        let mut pairs = Vec::new();
        match &self.transport {
            UpstreamTransport::Stdio { env, .. } => found.extend(
                env.iter()
                    .filter(|(name, _)| !is_not_secret_env(name))
                    .map(|(_, value)| value.clone()),
            ),
            UpstreamTransport::Http { url, headers } => {
                pairs.push((url.clone(), shown_url(url)));
                found.extend(headers.values().cloned());
                found.extend(
                    headers
                        .values()
                        .filter_map(|v| v.split_once(' ').map(|(_, t)| t.to_string())),
                );
                found.extend(url_secrets(url));
            }
        }
        pairs.extend(
            super::redact::secret_forms(found)
                .into_iter()
                .map(|s| (s, REDACTED.to_string())),
        );
        Redactor::new(pairs)
    }
}

/// Variables of an entry's `env` whose values are not credentials: where things are, who the
/// user is, the locale and time zone. Their values (a home directory, "Europe/Berlin") appear
/// in ordinary results, and replacing them would garble those results while hiding nothing.
pub const NOT_SECRET_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
];

/// Whether `name` is one of [`NOT_SECRET_ENV`] or a locale variable (`LC_*`).
fn is_not_secret_env(name: &str) -> bool {
    NOT_SECRET_ENV.contains(&name) || name.starts_with("LC_")
}

/// The parts of a URL that may carry credentials: user info, query, fragment, and each
/// `name=value` value in the query and fragment.
fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((user_info, _)) = authority.rsplit_once('@') {
            found.push(user_info.to_string());
            found.extend(user_info.split(':').map(str::to_string));
        }
    }
    if let Some(i) = url.find(['?', '#']) {
        let tail = &url[i + 1..];
        found.push(tail.to_string());
        for part in tail.split(['&', '#', ';', '?']) {
            found.push(part.to_string());
            if let Some((_, value)) = part.split_once('=') {
                found.push(value.to_string());
            }
        }
    }
    found
}
