//! Which version of an annotation readers take: per (recording, name), the highest version.
//! A later annotation of the same name is a new sidecar with the next version, never an edit of
//! the earlier one, so readers of the earlier file keep reading bytes that do not change.

/// A sidecar found: whose and which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub recording: [u8; 16],
    pub name: String,
    pub version: u64,
}

/// The indexes of the candidates readers take, in the order given: per (recording, name) the
/// highest version; of two with the same version (copies), the first given.
pub fn latest(candidates: &[Candidate]) -> Vec<usize> {
    let mut taken: Vec<usize> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        match taken.iter().position(|&t| candidates[t].recording == c.recording && candidates[t].name == c.name) {
            Some(at) if candidates[taken[at]].version < c.version => taken[at] = i,
            Some(_) => {}
            None => taken.push(i),
        }
    }
    taken.sort_unstable();
    taken
}

/// The version the next annotation `name` of `recording` gets: one past every version found
/// (damaged sidecars included: a number is never used twice).
pub fn next_version(candidates: &[Candidate], recording: &[u8; 16], name: &str) -> u64 {
    let same = candidates.iter().filter(|c| &c.recording == recording && c.name == name);
    same.map(|c| c.version).max().map_or(1, |v| v + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(recording: u8, name: &str, version: u64) -> Candidate {
        Candidate { recording: [recording; 16], name: name.into(), version }
    }

    #[test]
    fn the_latest_version_of_each_name_and_recording() {
        let cases: &[(&[Candidate], &[usize])] = &[
            (&[], &[]),
            (&[c(1, "a", 1)], &[0]),
            (&[c(1, "a", 1), c(1, "a", 2)], &[1]),
            (&[c(1, "a", 3), c(1, "a", 2)], &[0]),
            (&[c(1, "a", 1), c(2, "a", 1), c(1, "b", 1), c(1, "a", 2)], &[1, 2, 3]),
            (&[c(1, "a", 2), c(1, "a", 2)], &[0]),
        ];
        for (candidates, want) in cases {
            assert_eq!(latest(candidates), *want, "{candidates:?}");
        }
    }

    #[test]
    fn next_versions_never_repeat() {
        let found = [c(1, "a", 1), c(1, "a", 4), c(2, "a", 7), c(1, "b", 2)];
        assert_eq!(next_version(&found, &[1; 16], "a"), 5);
        assert_eq!(next_version(&found, &[2; 16], "a"), 8);
        assert_eq!(next_version(&found, &[1; 16], "c"), 1);
    }
}
