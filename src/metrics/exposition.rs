//! Prometheus' text exposition format (version 0.0.4), written by hand: counters, gauges and
//! histograms with escaped help and label values are all the endpoint needs, and a client
//! library's registry would hold a second copy of statistics the server already keeps. The
//! tests scrape it with a real Prometheus and lint it with `promtool check metrics`.

use std::fmt::Write;

use crate::sandbox::stats::histogram::HistogramSnapshot;

/// The `Content-Type` of the format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One exposition being written: families in the order they are declared, each family's
/// samples right after its `# HELP` and `# TYPE` lines.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts the family `name`.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let help = help.replace('\\', r"\\").replace('\n', r"\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of the current family (a counter's name ends in `_total`).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        self.labels(labels, None);
        self.out.push(' ');
        push_value(&mut self.out, value);
        self.out.push('\n');
    }

    /// A histogram's series for `labels`: its cumulative buckets, `+Inf`, sum and count.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        for &(bound, count) in &h.cumulative {
            let _ = write!(self.out, "{name}_bucket");
            self.labels(labels, Some(&bound.to_string()));
            let _ = writeln!(self.out, " {count}");
        }
        let _ = write!(self.out, "{name}_bucket");
        self.labels(labels, Some("+Inf"));
        let _ = writeln!(self.out, " {}", h.count);
        let _ = write!(self.out, "{name}_sum");
        self.labels(labels, None);
        self.out.push(' ');
        push_value(&mut self.out, h.sum_seconds);
        let _ = write!(self.out, "\n{name}_count");
        self.labels(labels, None);
        let _ = writeln!(self.out, " {}", h.count);
    }

    fn labels(&mut self, labels: &[(&str, &str)], le: Option<&str>) {
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.out.push('{');
        let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
        for (i, (name, value)) in all.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.out.push_str(name);
            self.out.push_str("=\"");
            for c in value.chars() {
                match c {
                    '\\' => self.out.push_str(r"\\"),
                    '"' => self.out.push_str("\\\""),
                    '\n' => self.out.push_str(r"\n"),
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }
        self.out.push('}');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A value as the format writes it: integers without a fraction, `NaN` and `±Inf` by name.
fn push_value(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        let _ = write!(out, "{}", value as i64);
    } else {
        let _ = write!(out, "{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escaping() {
        let mut e = Exposition::default();
        e.family("cem_x_total", Kind::Counter, "Things.\nCounted \\ here.");
        e.sample("cem_x_total", &[("tenant", "a\"b\\c\nd")], 3.0);
        e.sample("cem_x_total", &[], 0.25);
        assert_eq!(
            e.finish(),
            "# HELP cem_x_total Things.\\nCounted \\\\ here.\n# TYPE cem_x_total counter\n\
             cem_x_total{tenant=\"a\\\"b\\\\c\\nd\"} 3\ncem_x_total 0.25\n"
        );
    }

    #[test]
    fn histograms_write_buckets_inf_sum_and_count() {
        let mut e = Exposition::default();
        let h = HistogramSnapshot {
            cumulative: vec![(0.5, 1), (1.0, 2)],
            count: 3,
            sum_seconds: 4.5,
        };
        e.histogram("cem_d_seconds", &[("tenant", "")], &h);
        assert_eq!(
            e.finish(),
            "cem_d_seconds_bucket{tenant=\"\",le=\"0.5\"} 1\n\
             cem_d_seconds_bucket{tenant=\"\",le=\"1\"} 2\n\
             cem_d_seconds_bucket{tenant=\"\",le=\"+Inf\"} 3\n\
             cem_d_seconds_sum{tenant=\"\"} 4.5\n\
             cem_d_seconds_count{tenant=\"\"} 3\n"
        );
    }

    #[test]
    fn values_print_as_the_format_wants() {
        let text = |v: f64| {
            let mut s = String::new();
            push_value(&mut s, v);
            s
        };
        assert_eq!(text(7.0), "7");
        assert_eq!(text(0.001), "0.001");
        assert_eq!(text(f64::INFINITY), "+Inf");
        assert_eq!(text(f64::NAN), "NaN");
    }
}
