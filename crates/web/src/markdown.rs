//! READMEs: Markdown rendered by pulldown-cmark, then the HTML sanitized by ammonia, whose
//! allow-list drops every script, event handler, `javascript:` URL, style, form and frame
//! (raw HTML in Markdown passes through the parser by design, so the sanitizer is what
//! stands between a README and the reader's session; the pages' Content-Security-Policy is
//! the second wall). Relative links are made to point at the repository's own pages.

use std::borrow::Cow;

use maud::PreEscaped;
use pulldown_cmark::{html, Options, Parser};

use crate::urls;

/// Longest README rendered; a longer one is linked instead.
pub const MAX_README: usize = 512 << 10;

/// HTML that is safe to put into a page as it is: only [`render`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafeHtml(String);

impl SafeHtml {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// For the templates.
    pub fn markup(&self) -> PreEscaped<&str> {
        PreEscaped(&self.0)
    }
}

/// Where a README lives, so that its relative links reach the repository's pages.
#[derive(Debug, Clone)]
pub struct LinkBase {
    pub repo: String,
    pub rev: String,
    /// The README's directory ("" for the root).
    pub dir: String,
}

/// Markdown to sanitized HTML.
pub fn render(markdown: &str, base: &LinkBase) -> SafeHtml {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    options.insert(Options::ENABLE_FOOTNOTES);
    let mut raw = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut raw, Parser::new_ext(markdown, options));
    let (links, images) = (base.clone(), base.clone());
    let clean = ammonia::Builder::default()
        .link_rel(Some("noopener noreferrer nofollow"))
        // Images load the file's bytes (same origin, so the CSP's `img-src 'self'` lets
        // them); links go to the file's page.
        .attribute_filter(
            move |element, attribute, value| match (element, attribute) {
                ("img", "src") if is_relative(value) => {
                    Some(Cow::Owned(relative(&images, value, urls::resolve)))
                }
                _ => Some(Cow::Borrowed(value)),
            },
        )
        .url_relative(ammonia::UrlRelative::Custom(Box::new(ToPages(links))))
        .clean(&raw)
        .to_string();
    SafeHtml(clean)
}

/// Relative links of a README, pointed at the repository's file pages.
struct ToPages(LinkBase);

impl ammonia::UrlRelativeEvaluate<'_> for ToPages {
    fn evaluate<'a>(&self, url: &'a str) -> Option<Cow<'a, str>> {
        Some(Cow::Owned(relative(&self.0, url, urls::blob)))
    }
}

/// Whether `url` is relative to the README (no scheme, not from the root, not a fragment).
fn is_relative(url: &str) -> bool {
    let scheme = url
        .find(':')
        .is_some_and(|colon| !url[..colon].contains(['/', '?', '#']));
    !scheme && !url.starts_with(['/', '#'])
}

/// A relative URL of a README as a URL of the repository's pages: `#x` stays, `/x` stays
/// (this server's own path), `a/b.md` becomes `page` of `dir/a/b.md` (the file's page, or
/// its bytes for an image).
fn relative(base: &LinkBase, url: &str, page: fn(&str, &str, &str) -> String) -> String {
    if !is_relative(url) {
        return url.to_string();
    }
    let (target, fragment) = match url.split_once('#') {
        Some((t, f)) => (t, Some(f)),
        None => (url, None),
    };
    let mut parts: Vec<&str> = base.dir.split('/').filter(|s| !s.is_empty()).collect();
    for segment in target.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    // Already percent-encoded in the Markdown: decoded here, encoded again by urls.rs.
    let decoded: Vec<String> = parts
        .iter()
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let page = match decoded.is_empty() {
        true => urls::tree(&base.repo, &base.rev, ""),
        false => page(&base.repo, &base.rev, &decoded.join("/")),
    };
    match fragment {
        Some(f) => format!("{page}#{}", urls::segment(f)),
        None => page,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> LinkBase {
        LinkBase {
            repo: "o/m".into(),
            rev: "main".into(),
            dir: "docs".into(),
        }
    }

    #[test]
    fn markdown_renders() {
        let out = render(
            "# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n`x<y`",
            &base(),
        );
        let html = out.as_str();
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(
            html.contains("<table>") && html.contains("<td>1</td>"),
            "{html}"
        );
        assert!(html.contains("<code>x&lt;y</code>"), "{html}");
    }

    #[test]
    fn hostile_html_is_removed() {
        let hostile = "<script>alert(1)</script>\n\n\
            <img src=x onerror=\"alert(2)\">\n\n\
            [click](javascript:alert(3))\n\n\
            <a href=\"jAvAsCrIpT:alert(4)\">x</a>\n\n\
            <iframe src=\"https://evil.example\"></iframe>\n\n\
            <svg onload=alert(5)><script>alert(6)</script></svg>\n\n\
            <form action=\"/-/sign-out\" method=post><button>go</button></form>\n\n\
            <div style=\"background:url(javascript:alert(7))\" onclick=alert(8)>d</div>\n\n\
            <object data=x></object><embed src=x><meta http-equiv=refresh content=\"0;url=/x\">\n\n\
            <math><mi xlink:href=\"javascript:alert(9)\">m</mi></math>";
        let html = render(hostile, &base()).0.to_ascii_lowercase();
        for banned in [
            "<script",
            "onerror",
            "javascript:",
            "<iframe",
            "<svg",
            "onload",
            "<form",
            "style=",
            "onclick",
            "<object",
            "<embed",
            "<meta",
            "xlink",
            "<button",
        ] {
            assert!(!html.contains(banned), "{banned} in {html}");
        }
        assert!(
            html.contains("<img src=\"/o/m/resolve/main/docs/x\""),
            "{html}"
        );
    }

    #[test]
    fn relative_links_reach_the_repository() {
        let b = base();
        let blob = |url| relative(&b, url, urls::blob);
        assert_eq!(blob("#usage"), "#usage");
        assert_eq!(blob("/o/m/tree/main"), "/o/m/tree/main");
        assert_eq!(blob("a%20b.md#x y"), "/o/m/blob/main/docs/a%20b.md#x%20y");
        assert_eq!(blob("../LICENSE"), "/o/m/blob/main/LICENSE");
        assert_eq!(blob("../../../etc"), "/o/m/blob/main/etc");
        assert_eq!(blob(".."), "/o/m/tree/main");
        assert_eq!(blob("https://x/y"), "https://x/y");
        assert_eq!(blob("a/b:c"), "/o/m/blob/main/docs/a/b%3Ac");
        let html = render("![w](img/w.png) [d](d.md)", &b);
        assert!(
            html.as_str()
                .contains("src=\"/o/m/resolve/main/docs/img/w.png\"")
                && html.as_str().contains("href=\"/o/m/blob/main/docs/d.md\""),
            "{}",
            html.as_str()
        );
        let html = render("[x](https://example.com/a)", &b);
        assert!(
            html.as_str().contains("href=\"https://example.com/a\"")
                && html
                    .as_str()
                    .contains("rel=\"noopener noreferrer nofollow\""),
            "{}",
            html.as_str()
        );
    }
}
