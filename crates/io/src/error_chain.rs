//! The one walk down an error's causes, for every layer that reports or classifies errors.
//!
//! `std::io::Error::source()` skips the error an `io::Error` wraps (it returns that error's
//! own source), which hides a TLS failure or a server's answer wrapped in one: the walk
//! goes into the wrapped error instead.

use std::error::Error;

/// `e`, then each of its causes, outermost first.
pub fn causes<'a>(
    e: &'a (dyn Error + 'static),
) -> impl Iterator<Item = &'a (dyn Error + 'static)> + 'a {
    std::iter::successors(Some(e), |&e| match e.downcast_ref::<std::io::Error>() {
        Some(io) => match io.get_ref() {
            Some(inner) => Some(inner as &(dyn Error + 'static)),
            None => io.source(),
        },
        None => e.source(),
    })
}

/// `e` and its causes on one line, `outer: cause: cause`; a cause whose text the line
/// already holds (errors that print their source and also return it) is left out.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut line = String::new();
    for cause in causes(e) {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// The deepest cause's text, without the layers above it (whose messages may repeat it or
/// name a URL with its query); `None` when `e` has no cause.
pub fn innermost(e: &(dyn Error + 'static)) -> Option<String> {
    causes(e).skip(1).last().map(|c| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Layer {
        #[error("outer")]
        Outer(#[source] Box<Layer>),
        /// Prints its cause and returns it too.
        #[error("middle: {0}")]
        Repeating(#[source] std::io::Error),
        #[error("root")]
        Root,
    }

    #[test]
    fn chains_skip_repeated_causes_and_look_inside_io_errors() {
        let io = std::io::Error::other(Layer::Root);
        let e = Layer::Outer(Box::new(Layer::Repeating(io)));
        // io::Error's own source() would skip `root`; the walk finds it.
        let texts: Vec<String> = causes(&e).map(|c| c.to_string()).collect();
        assert_eq!(texts, ["outer", "middle: root", "root", "root"]);
        assert_eq!(chain(&e), "outer: middle: root");
        assert_eq!(innermost(&e).as_deref(), Some("root"));
        assert_eq!(innermost(&Layer::Root), None);
        assert_eq!(chain(&Layer::Root), "root");
    }
}
