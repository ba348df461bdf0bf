//! Inline SVG charts (no script, no external file): each is an `img` for assistive
//! technology with a text title, and every number it draws is also in a table beside it.

use maud::{html, Markup};

use crate::costs::Cost;
use crate::format::{day, human_bytes};
use crate::model::PushBytes;

const WIDTH: f64 = 640.0;
const LABEL: f64 = 110.0;
const ROW: f64 = 22.0;
/// The colours of new and shared bytes (each over 4.5:1 against white).
pub const NEW_FILL: &str = "#b45309";
pub const SHARED_FILL: &str = "#0e7490";

/// One horizontal bar per version, new bytes then shared bytes, scaled to the largest.
pub fn cost_bars(title: &str, rows: &[(String, Cost)]) -> Markup {
    let max = rows
        .iter()
        .map(|(_, c)| c.total())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let height = ROW * rows.len() as f64 + 28.0;
    let span = WIDTH - LABEL - 10.0;
    html! {
        figure.chart {
            svg role="img" aria-label=(title) viewBox={ "0 0 " (WIDTH) " " (height) }
                width=(WIDTH) height=(height) xmlns="http://www.w3.org/2000/svg" {
                title { (title) }
                @for (i, (label, cost)) in rows.iter().enumerate() {
                    @let y = ROW * i as f64 + 4.0;
                    @let new_w = span * cost.new as f64 / max;
                    @let shared_w = span * cost.shared as f64 / max;
                    text x="0" y=(y + 14.0) font-size="12" font-family="monospace" fill="#1d232a" { (label) }
                    rect x=(LABEL) y=(y) width=(fmt(new_w)) height="16" fill=(NEW_FILL) {}
                    rect x=(fmt(LABEL + new_w)) y=(y) width=(fmt(shared_w)) height="16" fill=(SHARED_FILL) {}
                }
                (legend(height - 10.0))
            }
            figcaption { (title) }
        }
    }
}

fn legend(y: f64) -> Markup {
    html! {
        rect x=(LABEL) y=(y - 9.0) width="10" height="10" fill=(NEW_FILL) {}
        text x=(LABEL + 14.0) y=(y) font-size="12" fill="#1d232a" { "new on the server" }
        rect x=(LABEL + 150.0) y=(y - 9.0) width="10" height="10" fill=(SHARED_FILL) {}
        text x=(LABEL + 164.0) y=(y) font-size="12" fill="#1d232a" { "shared with earlier versions" }
    }
}

/// Cumulative bytes over the pushes (oldest first): LFS bytes pushed, and of them the
/// bytes that were new on the server.
pub fn growth(title: &str, pushes: &[PushBytes]) -> Markup {
    let (mut logical, mut new) = (0u64, 0u64);
    let cumulative: Vec<(i64, u64, u64)> = pushes
        .iter()
        .map(|p| {
            logical = logical.saturating_add(p.logical);
            new = new.saturating_add(p.new);
            (p.time, logical, new)
        })
        .collect();
    let (height, left, bottom) = (220.0, 80.0, 190.0);
    let top = 12.0;
    let t0 = cumulative.first().map_or(0, |c| c.0);
    let t1 = cumulative.last().map_or(1, |c| c.0).max(t0 + 1);
    let ymax = logical.max(1) as f64;
    let x = |t: i64| left + (WIDTH - left - 10.0) * (t - t0) as f64 / (t1 - t0) as f64;
    let y = |v: u64| bottom - (bottom - top) * v as f64 / ymax;
    let line = |pick: fn(&(i64, u64, u64)) -> u64| -> String {
        cumulative
            .iter()
            .map(|c| format!("{},{}", fmt(x(c.0)), fmt(y(pick(c)))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    html! {
        figure.chart {
            svg role="img" aria-label=(title) viewBox={ "0 0 " (WIDTH) " " (height) }
                width=(WIDTH) height=(height) xmlns="http://www.w3.org/2000/svg" {
                title { (title) }
                line x1=(left) y1=(bottom) x2=(WIDTH - 10.0) y2=(bottom) stroke="#4a5866" {}
                line x1=(left) y1=(top) x2=(left) y2=(bottom) stroke="#4a5866" {}
                text x=(left - 4.0) y=(top + 4.0) font-size="11" text-anchor="end" fill="#1d232a" { (human_bytes(logical)) }
                text x=(left - 4.0) y=(bottom) font-size="11" text-anchor="end" fill="#1d232a" { "0" }
                text x=(left) y=(bottom + 16.0) font-size="11" fill="#1d232a" { (day(t0)) }
                text x=(WIDTH - 10.0) y=(bottom + 16.0) font-size="11" text-anchor="end" fill="#1d232a" { (day(t1)) }
                polyline points=(line(|c| c.1)) fill="none" stroke=(SHARED_FILL) stroke-width="2" {}
                polyline points=(line(|c| c.2)) fill="none" stroke=(NEW_FILL) stroke-width="2" stroke-dasharray="6 3" {}
                @for c in &cumulative {
                    circle cx=(fmt(x(c.0))) cy=(fmt(y(c.1))) r="3" fill=(SHARED_FILL) {}
                    circle cx=(fmt(x(c.0))) cy=(fmt(y(c.2))) r="3" fill=(NEW_FILL) {}
                }
                rect x=(left + 10.0) y=(height - 12.0) width="10" height="3" fill=(SHARED_FILL) {}
                text x=(left + 24.0) y=(height - 8.0) font-size="11" fill="#1d232a" { "LFS bytes pushed" }
                rect x=(left + 150.0) y=(height - 12.0) width="10" height="3" fill=(NEW_FILL) {}
                text x=(left + 164.0) y=(height - 8.0) font-size="11" fill="#1d232a" { "new bytes stored (dashed)" }
            }
            figcaption { (title) }
        }
    }
}

/// A coordinate with at most one decimal (short, stable output).
fn fmt(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_scaled_and_labelled() {
        let rows = vec![
            (
                "v1 <a>".to_string(),
                Cost {
                    new: 100,
                    shared: 0,
                },
            ),
            (
                "v2".to_string(),
                Cost {
                    new: 10,
                    shared: 90,
                },
            ),
        ];
        let svg = cost_bars("What each version cost", &rows).into_string();
        assert!(svg.contains("v1 &lt;a&gt;"), "{svg}");
        assert!(
            svg.contains("width=\"520\" height=\"16\" fill=\"#b45309\""),
            "{svg}"
        );
        assert!(
            svg.contains("width=\"52\" height=\"16\" fill=\"#b45309\""),
            "{svg}"
        );
        assert!(svg.contains("role=\"img\""));
        assert!(!svg.contains("NaN"));
        assert!(!cost_bars("empty", &[]).into_string().contains("NaN"));
    }

    #[test]
    fn growth_is_cumulative() {
        let pushes = [
            PushBytes {
                time: 1_700_000_000,
                logical: 100,
                new: 100,
            },
            PushBytes {
                time: 1_700_086_400,
                logical: 100,
                new: 10,
            },
        ];
        let svg = growth("Storage", &pushes).into_string();
        assert!(svg.contains("200 B") && svg.contains("2023-11-15"), "{svg}");
        assert!(svg.contains("points=\"80,101 630,12\""), "{svg}");
        for one in [&pushes[..1], &[]] {
            let svg = growth("one", one).into_string();
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        }
    }
}
