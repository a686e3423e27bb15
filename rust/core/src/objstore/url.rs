//! Object storage URLs: which paths are URLs (`s3://bucket/key`, `http(s)://host/path`), and
//! their store and key. Pure parsing, in every build (without the `remote` feature a URL is
//! recognised and refused by name, never read as a local path).

use std::path::Path;

use crate::error::{Error, Result};

/// The URL schemes read as object storage (`file://` is a local path: see `local_path`).
const SCHEMES: &[&str] = &["s3", "s3a", "http", "https"];

/// Where an object lives: the store (`scheme://bucket-or-host`) and its key in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    pub store: String,
    pub key: String,
}

impl Location {
    pub fn url(&self) -> String {
        format!("{}/{}", self.store, self.key)
    }
}

/// The URL `path` holds, when it names object storage rather than a local path.
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    let text = path.to_str()?;
    let (scheme, _) = text.split_once("://")?;
    SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()).then_some(text)
}

/// A local path given as a `file://` URL, as a path (anything else as it is).
pub fn local_path(path: &Path) -> &Path {
    match path.to_str().and_then(|t| t.strip_prefix("file://")) {
        Some(rest) => Path::new(rest),
        None => path,
    }
}

/// Splits an object storage URL into its store and key (no leading or trailing `/`).
pub(crate) fn locate(url: &str) -> Result<Location> {
    let invalid = |why: &str| Error::Invalid(format!("{url}: {why}"));
    let parsed = url::Url::parse(url).map_err(|e| invalid(&format!("not a URL ({e})")))?;
    let scheme = parsed.scheme();
    if !SCHEMES.contains(&scheme) {
        return Err(invalid("the scheme is none of s3, http, https"));
    }
    let host = parsed.host_str().filter(|h| !h.is_empty()).ok_or_else(|| invalid("the URL names no bucket or host"))?;
    let authority = match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    let key = parsed.path().trim_matches('/').to_string();
    Ok(Location { store: format!("{scheme}://{authority}"), key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_store_and_key() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("s3://bucket/run/a.trj", Some(("s3://bucket", "run/a.trj"))),
            ("s3://bucket/run/", Some(("s3://bucket", "run"))),
            ("s3://bucket", Some(("s3://bucket", ""))),
            ("http://127.0.0.1:9000/b/x.trj", Some(("http://127.0.0.1:9000", "b/x.trj"))),
            ("https://host/x", Some(("https://host", "x"))),
            ("ftp://host/x", None),
            ("s3:///key", None),
        ];
        for &(url, want) in cases {
            let got = locate(url).ok().map(|l| (l.store, l.key));
            assert_eq!(got, want.map(|(s, k)| (s.to_string(), k.to_string())), "{url}");
        }
    }

    #[test]
    fn only_store_urls_are_remote() {
        let cases: &[(&str, bool)] = &[
            ("s3://b/k", true),
            ("HTTPS://h/k", true),
            ("/data/run", false),
            ("file:///data/run", false),
            ("run", false),
        ];
        for &(path, remote) in cases {
            assert_eq!(url_of(Path::new(path)).is_some(), remote, "{path}");
        }
        assert_eq!(local_path(Path::new("file:///data/run")), Path::new("/data/run"));
        assert_eq!(local_path(Path::new("/data/run")), Path::new("/data/run"));
    }
}
