//! The JSON-lines layer (`--log-format json`): the ids of each span kept in its extensions, and
//! each event written as one line in one `write_all`. The module above says what a line holds
//! and why this is a layer of its own.

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The span fields a JSON line lifts to its top level.
#[derive(Debug, Default, Clone)]
struct Ids {
    tenant: Option<String>,
    execution_id: Option<String>,
    request_id: Option<String>,
}

impl Ids {
    /// The slot a field of this name fills, if it is one of the ids.
    fn slot(&mut self, name: &str) -> Option<&mut Option<String>> {
        match name {
            "tenant" => Some(&mut self.tenant),
            "execution_id" => Some(&mut self.execution_id),
            "request_id" => Some(&mut self.request_id),
            _ => None,
        }
    }

    fn any(&self) -> bool {
        self.tenant.is_some() || self.execution_id.is_some() || self.request_id.is_some()
    }

    /// Fills what is still unknown from `outer` (a span further out).
    fn fill_from(&mut self, outer: &Ids) {
        for (mine, theirs) in [
            (&mut self.tenant, &outer.tenant),
            (&mut self.execution_id, &outer.execution_id),
            (&mut self.request_id, &outer.request_id),
        ] {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
    }
}

impl Visit for Ids {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(slot) = self.slot(field.name()) {
            *slot = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if let Some(slot) = self.slot(field.name()) {
            *slot = Some(format!("{value:?}"));
        }
    }
}

/// What one event says: its message, ids, the `log` record's target, and its other fields.
#[derive(Default)]
struct EventFields {
    message: Option<String>,
    ids: Ids,
    log_target: Option<String>,
    fields: Vec<(&'static str, Value)>,
}

impl EventFields {
    fn put(&mut self, field: &Field, value: Value) {
        let text = |value: Value| match value {
            Value::String(s) => s,
            other => other.to_string(),
        };
        match field.name() {
            "message" => self.message = Some(text(value)),
            "log.target" => self.log_target = Some(text(value)),
            // The rest of a `log` record's metadata: where in a library it was logged.
            "log.module_path" | "log.file" | "log.line" => {}
            name => match self.ids.slot(name) {
                Some(slot) => *slot = Some(text(value)),
                None => self.fields.push((field.name(), value)),
            },
        }
    }
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        let value =
            i64::try_from(value).map_or_else(|_| Value::from(value.to_string()), Value::from);
        self.put(field, value);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        let value =
            u64::try_from(value).map_or_else(|_| Value::from(value.to_string()), Value::from);
        self.put(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinities: those go as text.
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| Value::from(value.to_string()), Value::Number);
        self.put(field, value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(text, ": {cause}");
            source = cause.source();
        }
        self.put(field, Value::from(text));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
}

/// The JSON line layer: see the module's documentation. `W` makes the writer of each line
/// (stderr for the server; a buffer in tests).
pub struct JsonLines<W> {
    make_writer: W,
}

impl<W> JsonLines<W> {
    pub fn new(make_writer: W) -> Self {
        Self { make_writer }
    }
}

impl<S, W> Layer<S> for JsonLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut ids = Ids::default();
        attrs.record(&mut ids);
        if ids.any()
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(ids);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        match extensions.get_mut::<Ids>() {
            Some(ids) => values.record(ids),
            None => {
                let mut ids = Ids::default();
                values.record(&mut ids);
                if ids.any() {
                    extensions.insert(ids);
                }
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = EventFields::default();
        event.record(&mut fields);
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                if let Some(ids) = span.extensions().get::<Ids>() {
                    fields.ids.fill_from(ids);
                }
            }
        }
        let metadata = event.metadata();
        let target = fields.log_target.as_deref().unwrap_or(metadata.target());
        let line = json_line(
            &chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            metadata.level().as_str(),
            target,
            &fields,
        );
        // One write of the whole line, under the writer's lock (stderr's).
        let _ = self.make_writer.make_writer_for(metadata).write_all(&line);
    }
}

/// One event as a JSON line, its keys in their fixed order, ending in a newline. serde_json
/// escapes quotes, backslashes and control characters, so a line never breaks inside a value.
fn json_line(time: &str, level: &str, target: &str, event: &EventFields) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    // The keys are plain words: only the values need escaping.
    let key = |line: &mut Vec<u8>, name: &str, value: &str| {
        line.push(if line.is_empty() { b'{' } else { b',' });
        line.extend_from_slice(format!("\"{name}\":").as_bytes());
        let _ = serde_json::to_writer(&mut *line, value);
    };
    key(&mut line, "time", time);
    key(&mut line, "level", level);
    key(&mut line, "target", target);
    key(&mut line, "message", event.message.as_deref().unwrap_or(""));
    let ids = &event.ids;
    for (name, value) in [
        ("tenant", &ids.tenant),
        ("execution_id", &ids.execution_id),
        ("request_id", &ids.request_id),
    ] {
        if let Some(value) = value {
            key(&mut line, name, value);
        }
    }
    if !event.fields.is_empty() {
        line.extend_from_slice(b",\"fields\":{");
        for (i, (name, value)) in event.fields.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            let _ = serde_json::to_writer(&mut line, name);
            line.push(b':');
            let _ = serde_json::to_writer(&mut line, value);
        }
        line.push(b'}');
    }
    line.extend_from_slice(b"}\n");
    line
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::logging::{execution_span, request_span, tenant_span};

    /// Every write a layer made, each kept apart (to see that a line is one write).
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl std::io::Write for Writes {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(bytes.to_vec());
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Writes {
        type Writer = Writes;

        fn make_writer(&'a self) -> Writes {
            self.clone()
        }
    }

    /// The lines `log` wrote through a [`JsonLines`] layer (filtered by `filter`), each
    /// checked to be one write of one line of JSON.
    fn lines_filtered(filter: &str, log: impl FnOnce()) -> Vec<Value> {
        let writes = Writes::default();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(filter))
            .with(JsonLines::new(writes.clone()));
        tracing::subscriber::with_default(subscriber, log);
        let writes = writes.0.lock().unwrap().clone();
        writes
            .iter()
            .map(|write| {
                let text = std::str::from_utf8(write).expect("UTF-8");
                assert!(
                    text.ends_with('\n') && !text[..text.len() - 1].contains('\n'),
                    "one write is one whole line: {text:?}"
                );
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
            })
            .collect()
    }

    fn lines(log: impl FnOnce()) -> Vec<Value> {
        lines_filtered("trace", log)
    }

    /// A line's keys, sorted (their order in the text is checked apart).
    fn keys(line: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        keys
    }

    fn one(mut lines: Vec<Value>) -> Value {
        assert_eq!(lines.len(), 1, "{lines:?}");
        lines.pop().unwrap()
    }

    #[test]
    fn a_line_has_time_level_target_and_message() {
        let lines = lines(|| {
            tracing::info!("pool filled");
            tracing::warn!(target: "elsewhere", "careful");
            tracing::error!("broken");
            tracing::debug!("detail");
            tracing::trace!("more detail");
        });
        assert_eq!(lines.len(), 5);
        for line in &lines {
            assert_eq!(keys(line), ["level", "message", "target", "time"], "{line}");
        }
        let levels: Vec<&str> = lines.iter().map(|l| l["level"].as_str().unwrap()).collect();
        assert_eq!(levels, ["INFO", "WARN", "ERROR", "DEBUG", "TRACE"]);
        assert_eq!(lines[0]["target"], module_path!());
        assert_eq!(lines[1]["target"], "elsewhere");
        assert_eq!(lines[0]["message"], "pool filled");
        let time = lines[0]["time"].as_str().unwrap();
        let parsed = chrono::DateTime::parse_from_rfc3339(time).expect(time);
        assert_eq!(parsed.offset().local_minus_utc(), 0, "{time}");
        assert!(time.ends_with('Z'), "{time}");
        // 2026-01-02T03:04:05.678Z: milliseconds.
        assert_eq!(time.len(), 24, "{time}");
        assert_eq!(&time[19..20], ".", "{time}");
    }

    #[test]
    fn the_keys_are_written_in_a_fixed_order() {
        let writes = Writes::default();
        let subscriber = tracing_subscriber::registry().with(JsonLines::new(writes.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let _t = tenant_span(Some("acme")).entered();
            let _r = request_span(&5, None).entered();
            let _e = execution_span("exe_0123456789abcdef").entered();
            tracing::info!(n = 1, "ran");
        });
        let text = String::from_utf8(writes.0.lock().unwrap().concat()).unwrap();
        let order = [
            "\"time\":",
            "\"level\":",
            "\"target\":",
            "\"message\":",
            "\"tenant\":",
            "\"execution_id\":",
            "\"request_id\":",
            "\"fields\":",
        ]
        .map(|k| text.find(k).unwrap_or_else(|| panic!("{k} in {text}")));
        assert!(order.is_sorted(), "{text}");
    }

    #[test]
    fn quotes_newlines_and_control_characters_stay_inside_their_line() {
        let nasty = "a \"quoted\" \\ word\nsecond line\r\tand \u{1}\u{1b}[31m\u{7f} é 🦀";
        let line = one(lines(|| {
            tracing::warn!(path = nasty, "{nasty}");
        }));
        assert_eq!(line["message"], nasty);
        assert_eq!(line["fields"]["path"], nasty);
        let line = one(lines(|| {
            tracing::warn!(reason = ?nasty, "x");
        }));
        assert_eq!(line["fields"]["reason"], format!("{nasty:?}"));
    }

    #[test]
    fn ids_come_from_the_nearest_enclosing_span() {
        let lines = lines(|| {
            let _tenant = tenant_span(Some("acme")).entered();
            tracing::info!("opening");
            let _request = request_span(&7, Some("other")).entered();
            tracing::info!("in the request");
            {
                let _execution = execution_span("exe_0123456789abcdef").entered();
                tracing::debug!(status = "ok", "ended");
                // The event's own field beats every span.
                tracing::debug!(execution_id = "exe_ffffffffffffffff", "named");
            }
            tracing::info!("after the execution");
        });
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0]["tenant"], "acme");
        assert!(lines[0].get("request_id").is_none(), "{}", lines[0]);
        assert_eq!(
            lines[1]["tenant"], "other",
            "the request's own tenant is nearer"
        );
        assert_eq!(
            lines[1]["request_id"], "7",
            "a number id is written as a string"
        );
        assert!(lines[1].get("execution_id").is_none(), "{}", lines[1]);
        assert_eq!(lines[2]["execution_id"], "exe_0123456789abcdef");
        assert_eq!(lines[2]["request_id"], "7");
        assert_eq!(lines[2]["tenant"], "other");
        assert_eq!(lines[2]["fields"], json!({"status": "ok"}));
        assert_eq!(lines[3]["execution_id"], "exe_ffffffffffffffff");
        assert!(
            lines[3].get("fields").is_none(),
            "an id is not also a field"
        );
        assert!(lines[4].get("execution_id").is_none(), "{}", lines[4]);
    }

    #[test]
    fn no_tenant_key_without_a_tenant() {
        let line = one(lines(|| {
            let _tenant = tenant_span(None).entered();
            let _request = request_span(&"req-1", None).entered();
            tracing::info!("single tenant");
        }));
        assert_eq!(
            keys(&line),
            ["level", "message", "request_id", "target", "time"]
        );
        assert_eq!(line["request_id"], "req-1");
    }

    #[test]
    fn an_id_recorded_after_the_span_opened_is_picked_up() {
        let line = one(lines(|| {
            let span = tracing::info_span!("late", request_id = tracing::field::Empty);
            let _in = span.enter();
            span.record("request_id", "r9");
            tracing::info!("recorded");
        }));
        assert_eq!(line["request_id"], "r9");
    }

    #[test]
    fn ids_stay_on_the_lines_of_a_server_filtered_to_warnings() {
        let lines = lines_filtered("warn", || {
            let _tenant = tenant_span(Some("acme")).entered();
            let _request = request_span(&1, Some("acme")).entered();
            let _execution = execution_span("exe_0123456789abcdef").entered();
            tracing::info!("filtered out");
            tracing::warn!("kept");
        });
        let line = one(lines);
        assert_eq!(line["message"], "kept");
        assert_eq!(line["tenant"], "acme");
        assert_eq!(line["request_id"], "1");
        assert_eq!(line["execution_id"], "exe_0123456789abcdef");
    }

    #[test]
    fn other_fields_keep_their_types_under_fields() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let error = Outer(std::io::Error::other("inner"));
        let line = one(lines(|| {
            tracing::info!(
                count = 3u64,
                delta = -2i64,
                ok = true,
                ratio = 0.5,
                nan = f64::NAN,
                big = u128::MAX,
                name = "x",
                shown = %"displayed",
                debugged = ?vec![1, 2],
                error = &error as &(dyn std::error::Error + 'static),
                "typed"
            );
        }));
        assert_eq!(
            line["fields"],
            json!({
                "count": 3,
                "delta": -2,
                "ok": true,
                "ratio": 0.5,
                "nan": "NaN",
                "big": u128::MAX.to_string(),
                "name": "x",
                "shown": "displayed",
                "debugged": "[1, 2]",
                "error": "outer: inner",
            })
        );
    }

    #[test]
    fn an_event_without_a_message_has_an_empty_one() {
        let line = one(lines(|| tracing::info!(n = 1)));
        assert_eq!(line["message"], "");
        assert_eq!(line["fields"], json!({"n": 1}));
    }
}
