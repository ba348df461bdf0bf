//! One JSON object per log line (`--log-format json`), for log collectors: `timestamp`,
//! `level`, `target`, the fields of the spans the event is in (outermost first: a server
//! request's `request_id`), then the event's own fields (`message` among them). Written here,
//! on tracing-subscriber's formatting traits, rather than through its `json` feature, which
//! would add dependencies.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format.
pub struct JsonEvent;

/// The field format (of events and spans): `,"name":value` for each field.
pub struct JsonFields;

impl<S, N> FormatEvent<S, N> for JsonEvent
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        writer.write_str("{\"timestamp\":\"")?;
        SystemTime.format_time(&mut writer)?;
        write!(writer, "\",\"level\":\"{}\",\"target\":", meta.level())?;
        write_string(&mut writer, meta.target())?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<FormattedFields<N>>() {
                    writer.write_str(fields)?;
                }
            }
        }
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_str("}\n")
    }
}

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: Writer<'w>,
        fields: R,
    ) -> fmt::Result {
        let mut visitor = Visitor { out: String::new() };
        fields.record(&mut visitor);
        writer.write_str(&visitor.out)
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        // Each field carries its own leading comma: no separator to add.
        self.format_fields(current.as_writer(), fields)
    }
}

struct Visitor {
    out: String,
}

impl Visitor {
    fn key(&mut self, field: &Field) {
        self.out.push(',');
        let _ = write_string(&mut self.out, field.name());
        self.out.push(':');
    }
}

impl Visit for Visitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        let _ = write_string(&mut self.out, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.out, "{value}");
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = write!(self.out, "{value}");
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        let _ = write!(self.out, "{value}");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        if value.is_finite() {
            let _ = write!(self.out, "{value}");
        } else {
            let _ = write_string(&mut self.out, &value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.key(field);
        let _ = write_string(&mut self.out, &format!("{value:?}"));
    }
}

/// `text` as a JSON string.
fn write_string(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c\nd\u{1}é").unwrap();
        assert_eq!(out, r#""a\"b\\c\nd\u0001é""#);
    }
}
