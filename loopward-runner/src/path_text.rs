//! The text of a workspace path, for any bytes a Linux name can hold.
//!
//! Paths are bytes on Linux; the engine, the globs and the ledger speak text. A path that is
//! valid UTF-8 and holds no `U+FFFD` (the replacement character) is its own text, so every
//! ordinary path — and every ledger that names one — reads exactly as before. Any other path is
//! written with each byte that is not part of valid UTF-8 as `U+FFFD` followed by two lowercase
//! hex digits, and each `U+FFFD` that really is in the name as `U+FFFD U+FFFD`:
//! `free/\xff` is `free/�ff`. The form is lossless (no two paths share a text: [`decode`]
//! gives back the bytes), clearly marked (the replacement character says "bytes that are not
//! text were here"), and keeps every `/` where it was, so a name inside a territory folder is
//! still inside it as text. Only names with `U+FFFD` in them change: a name the file tools
//! refuse to write ([`is_plain`]), so no write can land on a name other than the one judged.
//!
//! ```text
//! b"src/lib.rs"        → "src/lib.rs"
//! b"free/\xff"         → "free/\u{fffd}ff"
//! "free/\u{fffd}.md"   → "free/\u{fffd}\u{fffd}.md"
//! ```

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

const MARK: char = '\u{FFFD}';

/// Whether `text` is a path's own bytes (valid UTF-8 with no `U+FFFD`), as file tools may name.
pub(crate) fn is_plain(text: &str) -> bool {
    !text.contains(MARK)
}

/// The text of the path `bytes` (see the module docs).
pub(crate) fn encode(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) if is_plain(s) => Cow::Borrowed(s),
        _ => {
            let mut out = String::with_capacity(bytes.len() + 8);
            for chunk in bytes.utf8_chunks() {
                for c in chunk.valid().chars() {
                    out.push(c);
                    if c == MARK {
                        out.push(MARK);
                    }
                }
                for b in chunk.invalid() {
                    out.push(MARK);
                    out.push_str(&format!("{b:02x}"));
                }
            }
            Cow::Owned(out)
        }
    }
}

/// The bytes of the path whose text is `text`: the inverse of [`encode`]. A `U+FFFD` that
/// [`encode`] would not have written (not followed by another or by two hex digits) is taken as
/// itself.
pub(crate) fn decode(text: &str) -> Cow<'_, [u8]> {
    if is_plain(text) {
        return Cow::Borrowed(text.as_bytes());
    }
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        let after = &rest[at + MARK.len_utf8()..];
        if let Some(next) = after.strip_prefix(MARK) {
            out.extend_from_slice(MARK.to_string().as_bytes());
            rest = next;
        } else if let Some(b) = after
            .get(..2)
            .filter(|h| {
                h.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
            })
            .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            rest = &after[2..];
        } else {
            out.extend_from_slice(MARK.to_string().as_bytes());
            rest = after;
        }
    }
    out.extend_from_slice(rest.as_bytes());
    Cow::Owned(out)
}

/// The path whose text is `text`, for the file system.
pub(crate) fn path(text: &str) -> Cow<'_, Path> {
    match decode(text) {
        Cow::Borrowed(b) => Cow::Borrowed(Path::new(OsStr::from_bytes(b))),
        Cow::Owned(b) => Cow::Owned(std::ffi::OsString::from_vec(b).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_paths_are_their_own_text_and_any_bytes_round_trip() {
        assert_eq!(encode(b"src/lib.rs"), "src/lib.rs");
        assert!(matches!(encode(b"src/lib.rs"), Cow::Borrowed(_)));
        assert_eq!(encode(b"free/\xff"), "free/\u{fffd}ff");
        let cases: [&[u8]; 7] = [
            b"free/\xff",
            b"a/\xfe\xff/b\xc3",
            "x/\u{fffd}ff".as_bytes(),
            "\u{fffd}".as_bytes(),
            b"\xef\xbf",
            "caf\u{e9}/\u{fffd}\u{fffd}".as_bytes(),
            b"",
        ];
        for bytes in cases {
            let text = encode(bytes);
            assert_eq!(&*decode(&text), bytes, "{text:?}");
        }
        // A real replacement character and the byte it could be mistaken for stay apart.
        assert_ne!(encode("x/\u{fffd}ff".as_bytes()), encode(b"x/\xff"));
        // The folder of an odd name is the folder it is in.
        assert!(encode(b"plans/\xff.md").starts_with("plans/"));
        assert!(!is_plain(&encode(b"plans/\xff.md")) && is_plain("plans/a.md"));
    }

    #[test]
    fn a_mark_encode_would_not_write_is_read_as_itself() {
        assert_eq!(&*decode("a\u{fffd}zz"), "a\u{fffd}zz".as_bytes());
        assert_eq!(&*decode("a\u{fffd}"), "a\u{fffd}".as_bytes());
        assert_eq!(&*decode("a\u{fffd}F0"), "a\u{fffd}F0".as_bytes());
    }
}
