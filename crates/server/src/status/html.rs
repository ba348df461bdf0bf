//! Rendering the status page: plain HTML with a little inline CSS and no script. Every
//! text that comes from a repository (names, paths, ref names, committers) is escaped.
//! Numbers carry their exact value in `data-*` attributes next to the readable one.

use std::fmt::Write;

use super::{RepoStatus, StatusPage};
use crate::index::stats::Usage;
use crate::time::utc;

/// `s` safe as HTML text and as a double-quoted attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A size for people: bytes up to 1 KiB, then KiB, MiB, GiB with one decimal.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The dedup ratio as shown: two decimals and a times sign, or a dash when nothing is
/// stored.
pub fn ratio(usage: &Usage) -> String {
    usage
        .dedup_ratio()
        .map(|r| format!("{r:.2}×"))
        .unwrap_or_else(|| "–".into())
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;\
padding:0 1em;color:#1d232a}h1{font-size:1.5em;margin-bottom:.2em}h2{margin-top:1.6em;\
border-bottom:1px solid #d6dde4;padding-bottom:.2em}table{border-collapse:collapse;\
width:100%;margin:.5em 0}th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid \
#e6ebf0}th{background:#f3f6f9}td.num,th.num{text-align:right;font-variant-numeric:\
tabular-nums}code{font-size:.9em;color:#4a5866}dl.usage{display:grid;grid-template-columns:\
max-content auto;gap:.2em 1.2em}dl.usage dt{color:#4a5866}dl.usage dd{margin:0;font-weight:\
600}.muted{color:#6b7785}a{color:#0b5cad}";

fn usage_list(out: &mut String, id: &str, usage: &Usage) {
    let _ = write!(
        out,
        "<dl class=\"usage\" id=\"{id}\">\
         <dt>Files registered</dt><dd class=\"files\" data-value=\"{files}\">{files}</dd>\
         <dt>Logical bytes</dt><dd class=\"logical\" data-bytes=\"{logical}\">{logical_h} \
         <span class=\"muted\">({logical} bytes)</span></dd>\
         <dt>Stored bytes</dt><dd class=\"stored\" data-bytes=\"{stored}\">{stored_h} \
         <span class=\"muted\">({stored} bytes in {xorbs} xorbs)</span></dd>\
         <dt>Dedup ratio</dt><dd class=\"ratio\">{ratio}</dd></dl>",
        files = usage.files,
        logical = usage.logical_bytes,
        logical_h = human_bytes(usage.logical_bytes),
        stored = usage.stored_bytes,
        stored_h = human_bytes(usage.stored_bytes),
        xorbs = usage.xorbs,
        ratio = ratio(usage),
    );
}

fn repo_section(out: &mut String, repo: &RepoStatus) {
    let name = escape(&repo.name);
    let _ = write!(
        out,
        "<section class=\"repo\" data-repo=\"{name}\"><h2><a href=\"/{name}\">{name}</a></h2>"
    );
    usage_list(out, &format!("usage-{name}"), &repo.usage);
    let head = &repo.head;
    let _ = write!(
        out,
        "<h3>LFS files at HEAD: <span class=\"lfs-count\" data-value=\"{n}\">{n}</span>, \
         <span class=\"lfs-bytes\" data-bytes=\"{b}\">{bh}</span></h3>",
        n = head.total,
        b = head.total_bytes,
        bh = human_bytes(head.total_bytes),
    );
    if head.files.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
    } else {
        out.push_str(
            "<table class=\"files\"><tr><th>Path</th><th class=\"num\">Size</th>\
             <th>sha256</th><th>On this server</th></tr>",
        );
        for (file, stored) in head.files.iter().zip(&repo.stored) {
            let _ = write!(
                out,
                "<tr class=\"lfs-file\"><td class=\"path\">{path}</td>\
                 <td class=\"num size\" data-bytes=\"{size}\">{size_h}</td>\
                 <td><code>{oid}</code></td><td class=\"stored\">{stored}</td></tr>",
                path = escape(&file.path),
                size = file.size,
                size_h = human_bytes(file.size),
                oid = &file.oid.to_hex()[..16],
                stored = if *stored { "yes" } else { "missing" },
            );
        }
        out.push_str("</table>");
        if head.total > head.files.len() {
            let _ = write!(
                out,
                "<p class=\"muted\">and {} more</p>",
                head.total - head.files.len()
            );
        }
    }
    out.push_str("<h3>Recent pushes</h3>");
    if repo.pushes.is_empty() {
        out.push_str("<p class=\"muted\">None recorded.</p>");
    } else {
        out.push_str(
            "<table class=\"pushes\"><tr><th>When</th><th>Ref</th><th>By</th>\
             <th>Update</th></tr>",
        );
        for push in &repo.pushes {
            let short = |h: &str| escape(&h[..h.len().min(10)]);
            let _ = write!(
                out,
                "<tr class=\"push\"><td>{when}</td><td>{r}</td><td>{who}</td>\
                 <td><code>{old}</code> → <code>{new}</code></td></tr>",
                when = utc(push.time),
                r = escape(&push.refname),
                who = escape(&push.who),
                old = short(&push.old),
                new = short(&push.new),
            );
        }
        out.push_str("</table>");
    }
    locks_table(out, repo);
    out.push_str("</section>");
}

/// The locks held in `repo` (git-lfs's `git lfs locks`, for people without a clone).
fn locks_table(out: &mut String, repo: &RepoStatus) {
    out.push_str("<h3>Locks</h3>");
    if repo.locks.is_empty() {
        out.push_str("<p class=\"muted\">None held.</p>");
        return;
    }
    out.push_str("<table class=\"locks\"><tr><th>Path</th><th>Owner</th><th>Since</th></tr>");
    for lock in &repo.locks {
        let _ = write!(
            out,
            "<tr class=\"lock\" data-id=\"{id}\"><td class=\"path\">{path}</td>\
             <td class=\"owner\">{owner}</td><td class=\"since\" data-time=\"{t}\">{since}</td></tr>",
            id = escape(&lock.id),
            path = escape(&lock.path),
            owner = escape(&lock.owner),
            t = lock.locked_at,
            since = utc(i64::try_from(lock.locked_at).unwrap_or(i64::MAX)),
        );
    }
    out.push_str("</table>");
    if repo.more_locks {
        let _ = write!(
            out,
            "<p class=\"muted\">Only the first {} are listed; <code>git lfs locks</code> lists all.</p>",
            super::MAX_LOCKS
        );
    }
}

/// The whole page.
pub fn render(page: &StatusPage) -> String {
    let mut out = String::with_capacity(16 << 10);
    let title = match &page.only {
        Some(name) => format!("{} · git-xet server", escape(name)),
        None => "git-xet server".into(),
    };
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title>\
         <style>{STYLE}</style></head><body><h1>{title}</h1>\
         <p class=\"muted\">Generated {when}. <a href=\"/\">All repositories</a></p>\
         <h2>{scope}</h2>",
        when = utc(page.generated),
        scope = match page.server_wide {
            true => "All repositories on this server",
            false => "Repositories this token may read",
        },
    );
    usage_list(&mut out, "usage-total", &page.total);
    if page.only.is_none() {
        repo_table(&mut out, page);
    }
    for repo in &page.repos {
        repo_section(&mut out, repo);
    }
    out.push_str("</body></html>\n");
    out
}

/// One row per repository, linking to its page.
fn repo_table(out: &mut String, page: &StatusPage) {
    out.push_str(
        "<table class=\"repos\"><tr><th>Repository</th><th class=\"num\">LFS files at HEAD</th>\
         <th class=\"num\">Logical</th><th class=\"num\">Stored</th><th class=\"num\">Dedup</th>\
         </tr>",
    );
    for repo in &page.repos {
        let name = escape(&repo.name);
        let _ = write!(
            out,
            "<tr><td><a href=\"/{name}\">{name}</a></td><td class=\"num\">{n}</td>\
             <td class=\"num\">{l}</td><td class=\"num\">{s}</td><td class=\"num\">{r}</td></tr>",
            n = repo.head.total,
            l = human_bytes(repo.usage.logical_bytes),
            s = human_bytes(repo.usage.stored_bytes),
            r = ratio(&repo.usage),
        );
    }
    if page.repos.is_empty() {
        out.push_str("<tr><td colspan=\"5\" class=\"muted\">No repositories yet.</td></tr>");
    }
    out.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_escaped() {
        assert_eq!(
            escape("<img src=x onerror=\"a('b')\">&\u{7}"),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;\u{FFFD}"
        );
    }

    #[test]
    fn locks_are_listed_escaped_with_owner_and_time() {
        let lock = |path: &str, owner: &str| crate::index::Lock {
            id: "00ff".into(),
            path: path.into(),
            owner: owner.into(),
            locked_at: 1_700_000_000,
        };
        let mut repo = RepoStatus {
            name: "org/m".into(),
            usage: Usage::default(),
            head: Default::default(),
            stored: vec![],
            pushes: vec![],
            locks: vec![],
            more_locks: false,
        };
        let mut out = String::new();
        locks_table(&mut out, &repo);
        assert!(out.contains("None held."), "{out}");
        repo.locks = vec![lock("<b>x.psd", "a\"lice")];
        repo.more_locks = true;
        let mut out = String::new();
        locks_table(&mut out, &repo);
        assert!(
            out.contains("<td class=\"path\">&lt;b&gt;x.psd</td>"),
            "{out}"
        );
        assert!(
            out.contains("<td class=\"owner\">a&quot;lice</td>"),
            "{out}"
        );
        assert!(out.contains("2023-11-14 22:13:20 UTC"), "{out}");
        assert!(out.contains("Only the first"), "{out}");
    }

    #[test]
    fn sizes_ratios_and_dates_read_well() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(5 << 30), "5.0 GiB");
        let u = |logical, stored| Usage {
            files: 1,
            logical_bytes: logical,
            xorbs: 1,
            stored_bytes: stored,
        };
        assert_eq!(ratio(&u(300, 100)), "3.00×");
        assert_eq!(ratio(&u(0, 0)), "–");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
    }
}
