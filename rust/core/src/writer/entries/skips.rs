//! Values that are not recorded, and what the user is told about them: a value of a dynamic
//! column (info, custom data, frame) that does not fit is left out of its row, which then reads
//! as missing; one warning per key at the first, a count per key at close. Steps of envs with no
//! running episode are not recorded either: one warning the first time, the totals at close.

use std::collections::BTreeMap;

use crate::writer::autoreset::Splitter;

/// The values of one key that were not recorded.
#[derive(Debug)]
struct Skipped {
    count: u64,
    first_why: String,
}

/// The values left out of the columns under one prefix (`info`, `data`, `render`).
#[derive(Debug)]
pub struct Skips {
    prefix: &'static str,
    skipped: BTreeMap<String, Skipped>,
}

impl Skips {
    pub fn new(prefix: &'static str) -> Self {
        Skips { prefix, skipped: BTreeMap::new() }
    }

    /// One value of `path` (below the prefix) is not recorded, for reason `why`: the warning to
    /// give when it is the first of its key.
    pub fn skip(&mut self, path: &str, why: String) -> Option<String> {
        if let Some(s) = self.skipped.get_mut(path) {
            s.count += 1;
            return None;
        }
        let warning = format!(
            "trajcore: {} entry '{path}': a value is not recorded (its row reads as missing): {why}. \
             The entry goes on recording the values that fit; close() reports how many were left out.",
            self.prefix
        );
        self.skipped.insert(path.to_owned(), Skipped { count: 1, first_why: why });
        Some(warning)
    }

    /// The warnings at close, one per key with the number of values left out; forgets them.
    pub fn close_warnings(&mut self) -> Vec<String> {
        let prefix = self.prefix;
        let skipped = std::mem::take(&mut self.skipped);
        let warning = |(path, s): (String, Skipped)| {
            format!(
                "trajcore: {prefix} entry '{path}': {} value(s) were not recorded (first: {})",
                s.count, s.first_why
            )
        };
        skipped.into_iter().map(warning).collect()
    }

    /// Values left out so far, by column name (for `stats()`).
    pub fn counts(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.skipped.iter().map(|(path, s)| (format!("{}/{path}", self.prefix), s.count))
    }
}

/// The warning about steps of envs with no running episode, if any were stepped: "so far" the
/// first time (`warned` false), "in all" after.
pub fn unrecorded_warning(splitter: &Splitter, warned: bool) -> Option<String> {
    if splitter.unrecorded_total() == 0 {
        return None;
    }
    let counts = (0..splitter.num_envs()).map(|l| (l, splitter.unrecorded_steps(l))).filter(|&(_, n)| n > 0);
    let listed: Vec<String> = counts.map(|(l, n)| format!("env {l}: {n}")).collect();
    let when = if warned { "in all" } else { "so far" };
    Some(format!(
        "trajcore: steps of envs with no running episode are not recorded (stepped after the episode ended \
         without a reset, or before the first reset); {when}: {}",
        listed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::AutoresetMode;

    #[test]
    fn steps_of_envs_without_an_episode_are_reported() {
        let mut s = Splitter::new(3, AutoresetMode::Disabled);
        assert_eq!(unrecorded_warning(&s, false), None);
        s.plan_reset(Some(&[1, 0, 0]));
        s.commit();
        for _ in 0..2 {
            s.plan_step(|_| Some((false, false)));
            s.commit();
        }
        let listed = "env 1: 2, env 2: 2";
        assert!(unrecorded_warning(&s, false).unwrap().ends_with(&format!("; so far: {listed}")));
        assert!(unrecorded_warning(&s, true).unwrap().ends_with(&format!("; in all: {listed}")));
    }

    #[test]
    fn warns_at_the_first_value_of_a_key_and_counts_at_close() {
        let mut s = Skips::new("info");
        let first = s.skip("a%2Fb", "why one".into()).unwrap();
        assert!(first.starts_with("trajcore: info entry 'a%2Fb': a value is not recorded"), "{first}");
        assert!(first.contains(": why one. The entry goes on"));
        assert_eq!(s.skip("a%2Fb", "why two".into()), None);
        assert!(s.skip("c", "other".into()).is_some());
        assert_eq!(s.counts().collect::<Vec<_>>(), [("info/a%2Fb".to_string(), 2), ("info/c".to_string(), 1)]);
        assert_eq!(
            s.close_warnings(),
            [
                "trajcore: info entry 'a%2Fb': 2 value(s) were not recorded (first: why one)",
                "trajcore: info entry 'c': 1 value(s) were not recorded (first: other)",
            ]
        );
        assert_eq!(s.counts().count(), 0);
    }
}
