//! Escaping of text from servers and files for the markup formats perfgate writes: one table
//! ([`Markup::of`]), a row per kind of character and a column per format, so a character is
//! decided for every format in one place and a new format is a new column the compiler asks for.

/// A markup format perfgate writes text into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// A markdown table cell or paragraph (the PR comment, the step summary): HTML-significant
    /// characters become entities, markdown punctuation is backslash-escaped, `@` cannot start a
    /// mention, and line ends become spaces.
    Markdown,
    /// HTML element content and quoted attributes (`--html`).
    Html,
    /// XML 1.0 attributes and text (`--junit`); characters XML 1.0 cannot carry are dropped.
    Xml,
}

/// What one character becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// Written as it is.
    Keep,
    /// Left out.
    Drop,
    /// Written as this text.
    As(&'static str),
    /// Written after a backslash.
    Backslashed,
}

impl Markup {
    /// The table: what `ch` becomes in this format.
    fn of(self, ch: char) -> Out {
        use Markup::{Html, Markdown, Xml};
        use Out::{As, Backslashed, Drop, Keep};
        match (ch, self) {
            ('&', _) => As("&amp;"),
            ('<', _) => As("&lt;"),
            ('>', _) => As("&gt;"),
            ('"', _) => As("&quot;"),
            ('\'', Markdown) => Keep,
            ('\'', Html) => As("&#39;"),
            ('\'', Xml) => As("&apos;"),
            ('@', Markdown) => As("&#64;"),
            (
                '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '#' | '!' | '~' | '{' | '}',
                Markdown,
            ) => Backslashed,
            ('\n' | '\r', Markdown) => As(" "),
            ('\n' | '\t', Html) => Keep,
            ('\n', Xml) => As("&#10;"),
            ('\r' | '\t', Xml) => As(" "),
            (c, Markdown | Html) if c.is_control() => Drop,
            (c, Xml) if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => Drop,
            (_, Markdown | Html | Xml) => Keep,
        }
    }

    /// `s` made inert in this format.
    pub fn escape(self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for ch in s.chars() {
            match self.of(ch) {
                Out::Keep => out.push(ch),
                Out::Drop => {}
                Out::As(text) => out.push_str(text),
                Out::Backslashed => {
                    out.push('\\');
                    out.push(ch);
                }
            }
        }
        out
    }
}

/// [`Markup::Markdown`]'s escaping.
pub fn markdown(s: &str) -> String {
    Markup::Markdown.escape(s)
}

/// [`Markup::Html`]'s escaping.
pub fn html(s: &str) -> String {
    Markup::Html.escape(s)
}

/// [`Markup::Xml`]'s escaping.
pub fn xml(s: &str) -> String {
    Markup::Xml.escape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One hostile string through the three formats: each character as its column says.
    #[test]
    fn one_string_in_each_format() {
        let s = "a<b>&\"c'@x|y\n\r\t\u{1b}[1m\u{0}\u{7f}\u{fffe}";
        assert_eq!(
            markdown(s),
            "a&lt;b&gt;&amp;&quot;c'&#64;x\\|y  \\[1m\u{fffe}"
        );
        assert_eq!(html(s), "a&lt;b&gt;&amp;&quot;c&#39;@x|y\n\t[1m\u{fffe}");
        assert_eq!(xml(s), "a&lt;b&gt;&amp;&quot;c&apos;@x|y&#10;  [1m\u{7f}");
    }
}
