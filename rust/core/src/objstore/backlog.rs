//! What the writer told the uploads and the upload thread has not taken yet. The writer never
//! waits on the network, so while the thread is in a slow request (a store that answers late,
//! each request up to its client's timeouts) what the writer says piles up here: kept
//! coalesced, so that it holds what the thread still needs to know and nothing twice.
//!
//! - An eviction log is one file the capacity rewrites whole at each eviction: only its newest
//!   state needs to go up, so the log waiting is replaced by each new one (one put however many
//!   evictions came meanwhile).
//! - A shard evicted before the thread took its `Opened` had nothing of it put up (the thread
//!   puts only what it was told of): everything about it is dropped, and it is not deleted.
//!   A shard the thread knows of is to be deleted; what the backlog held of it is dropped.
//! - Flushes with no shard event between them are one.
//!
//! Bound: an entry is the `Opened`, a flush or the `Sealed` of a shard not evicted, or an
//! evicted shard the thread knew of when it last took the backlog, or the one log. A bounded
//! recording has at most its capacity's shards (ten closed, `capacity::shard_steps_limit`)
//! alive at once, plus the one written, the one just sealed and not yet evicted and those
//! compacting, say k in all: its backlog holds at most 3k - 1 entries for those, fewer than k
//! names of shards the thread knew of (they were among the k alive when it took the backlog),
//! a flush of a shard the thread knew of, and the log: 4k, however long the run and however
//! slow the store. An unbounded recording's holds the shards it rolled over during one request
//! of the thread (each request ends within its timeouts).
//!
//! This is the decision alone, with plain values; `uploads` keeps one under a lock.

use std::path::{Path, PathBuf};

/// What the writer says of a shard, in the order it says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardEvent {
    /// A new shard, written from now on.
    Opened(PathBuf),
    /// The writer flushed records to the shard it writes (the last `Opened`).
    Flushed,
    /// A shard the writer finished (and compacted, if it does): it goes up whole.
    Sealed(PathBuf),
}

/// What the upload thread has not taken yet (`take`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Shard events, in the order the writer sent them (none about an evicted shard).
    pub shards: Vec<ShardEvent>,
    /// Evicted shards the thread knows of (it took their `Opened` before, or never was told:
    /// the shards of earlier recordings), oldest first, each once: to be deleted in the store.
    pub evicted: Vec<PathBuf>,
    /// The newest eviction log (the file the capacity writes): the one to put up.
    pub log: Option<PathBuf>,
    /// The recorder closed (or was dropped).
    pub close: bool,
}

impl Backlog {
    pub fn opened(&mut self, shard: PathBuf) {
        self.shards.push(ShardEvent::Opened(shard));
    }

    pub fn flushed(&mut self) {
        if self.shards.last() != Some(&ShardEvent::Flushed) {
            self.shards.push(ShardEvent::Flushed);
        }
    }

    pub fn sealed(&mut self, shard: PathBuf) {
        self.shards.push(ShardEvent::Sealed(shard));
    }

    /// The capacity evicted `shards`, which the eviction log `log` (newer than any before)
    /// names already.
    pub fn evicted(&mut self, shards: Vec<PathBuf>, log: PathBuf) {
        for shard in shards {
            let unseen = self.forget(&shard);
            if !unseen && !self.evicted.contains(&shard) {
                self.evicted.push(shard);
            }
        }
        self.log = Some(log);
    }

    /// Drops every event about `shard`: its `Opened`, the flushes after it (which were of it:
    /// an evicted shard is closed, so another was opened after it), its `Sealed`. Returns
    /// whether its `Opened` was here (the thread never heard of it).
    fn forget(&mut self, shard: &Path) -> bool {
        let mut unseen = false;
        let mut of_it = false;
        self.shards.retain(|event| match event {
            ShardEvent::Opened(p) => {
                of_it = p == shard;
                unseen |= of_it;
                !of_it
            }
            ShardEvent::Flushed => !of_it,
            ShardEvent::Sealed(p) => p != shard,
        });
        self.shards.dedup(); // flushes that were apart are one
        unseen
    }

    /// Entries held: what the bound above is about.
    pub fn len(&self) -> usize {
        self.shards.len() + self.evicted.len() + usize::from(self.log.is_some())
    }

    /// Everything held, for the thread, leaving the backlog empty (`close` stays said).
    pub fn take(&mut self) -> Backlog {
        let close = self.close;
        let taken = std::mem::take(self);
        self.close = close;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the writer says, written short: "o a" opened a, "f" flushed, "s a" sealed a,
    /// "e a b" evicted a and b (with log number k, the k-th eviction).
    fn apply(backlog: &mut Backlog, said: &str) {
        let mut logs = 0;
        for step in said.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let mut words = step.split_whitespace();
            let what = words.next().unwrap();
            let paths: Vec<PathBuf> = words.map(PathBuf::from).collect();
            match what {
                "o" => backlog.opened(paths[0].clone()),
                "f" => backlog.flushed(),
                "s" => backlog.sealed(paths[0].clone()),
                "e" => {
                    logs += 1;
                    backlog.evicted(paths, PathBuf::from(format!("log{logs}")));
                }
                _ => panic!("{what}"),
            }
        }
    }

    fn shown(backlog: &Backlog) -> String {
        let mut out: Vec<String> = backlog
            .shards
            .iter()
            .map(|e| match e {
                ShardEvent::Opened(p) => format!("o {}", p.display()),
                ShardEvent::Flushed => "f".into(),
                ShardEvent::Sealed(p) => format!("s {}", p.display()),
            })
            .collect();
        out.extend(backlog.evicted.iter().map(|p| format!("e {}", p.display())));
        if let Some(log) = &backlog.log {
            out.push(log.display().to_string());
        }
        out.join(", ")
    }

    #[test]
    fn the_backlog_keeps_what_the_thread_needs_once() {
        // (what happened, what the thread took before (it knows those shards), what the writer
        // said since, what the backlog holds)
        let cases: &[(&str, &str, &str, &str)] = &[
            ("nothing", "", "", ""),
            ("events in order", "", "o a, f, o b, s a, f", "o a, f, o b, s a, f"),
            ("flushes in a row are one", "", "o a, f, f, f, o b, f, f", "o a, f, o b, f"),
            ("a flush after a seal is kept", "", "o a, f, s a, f", "o a, f, s a, f"),
            ("flushes a forgotten seal kept apart are one", "o a", "o b, f, s a, f, e a", "o b, f, e a, log1"),
            ("only the newest log goes up", "o a, o b, o c", "e a, e b, e c", "e a, e b, e c, log3"),
            (
                "a shard the thread never heard of is forgotten, its flushes too",
                "o z",
                "o a, f, o b, f, s a, e a",
                "o b, f, log1",
            ),
            ("one it knows of is to be deleted, its seal dropped", "o a", "f, o b, s a, e a", "f, o b, e a, log1"),
            ("a shard evicted twice is deleted once", "o a", "e a, e a", "e a, log2"),
            (
                "many evictions through a slow store: only the live shards stay",
                "o a",
                "o b, f, s a, o c, f, s b, e a, o d, f, s c, e b, o e, f, s d, e c",
                "o d, f, o e, f, s d, e a, log3",
            ),
            ("a shard of an earlier recording (never opened) is deleted", "", "e old", "e old, log1"),
        ];
        for &(name, taken, said, want) in cases {
            let mut backlog = Backlog::default();
            apply(&mut backlog, taken);
            backlog.take();
            apply(&mut backlog, said);
            assert_eq!(shown(&backlog), want, "{name}");
            assert_eq!(backlog.len(), if want.is_empty() { 0 } else { want.split(", ").count() }, "{name}")
        }
    }

    /// However many shards a bounded recording rolls over and evicts while the thread is in one
    /// request, the backlog holds the shards it keeps, not those it went through.
    #[test]
    fn the_backlog_of_a_bounded_recording_does_not_grow_with_its_evictions() {
        let shard = |k: usize| PathBuf::from(format!("s{k}"));
        let kept = 10;
        let mut backlog = Backlog::default();
        let mut most = 0;
        for k in 0..10_000 {
            backlog.opened(shard(k));
            backlog.flushed();
            if k > 0 {
                backlog.sealed(shard(k - 1));
            }
            if k > kept {
                backlog.evicted(vec![shard(k - kept - 1)], PathBuf::from(format!("log{k}")));
            }
            most = most.max(backlog.len());
        }
        // Opened and a flush of each kept shard and the one written, their seals, one log.
        assert!(most <= 3 * (kept + 1) + 1, "{most}");
        assert!(backlog.evicted.is_empty(), "the thread never heard of them: nothing to delete");
        assert_eq!(backlog.log, Some(PathBuf::from("log9999")));
        backlog.take();
        assert_eq!(backlog, Backlog::default());
    }

    #[test]
    fn take_leaves_close_said() {
        let mut backlog = Backlog { close: true, ..Backlog::default() };
        backlog.opened(PathBuf::from("a"));
        let taken = backlog.take();
        assert!(taken.close && backlog.close && backlog.shards.is_empty());
    }
}
