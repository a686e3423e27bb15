//! Whether the bytes after a shard's last complete record are damage, or a record its writer is
//! still writing.
//!
//! A recorder holds an exclusive advisory lock (`flock`) on the shard it writes for as long as it
//! writes it (`writer::files::shard`); the kernel drops it when the process ends, however it ends. So a
//! record cut short by the end of the file is:
//! - with the lock held, the record being written: not read yet, not damage (a later refresh
//!   reads it once it is complete);
//! - without it, what a stopped writer left: damage, as a fresh open or `verify` reports it.
//!
//! The reader reads the bytes first and asks for the lock after, so a writer may finish the record,
//! end the shard and let go of the lock in between (a rollover every few hundred steps makes this
//! common under a reader that refreshes often). A writer that let go of the lock writes nothing
//! more, so the file's length read after the lock probe is final: a file longer than the bytes
//! read means the record was being written when read (the next scan reads on), not that its
//! writer stopped. A stopped writer's file does not grow, so its cut-short record stays damage.
//!
//! Zeros or a damaged header at the end are damage either way: a live writer writes neither.
//! Nothing here does I/O: a table test covers the cases.

/// What the bytes after the last complete record look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// A record header, or a record, cut short by the end of the file.
    CutShort,
    /// Nothing but zeros (space the file system extended that the data never reached).
    Zeros,
    /// A header that does not decode, or bytes that cannot be read.
    Damaged,
}

/// Whether the tail is damage, given whether a writer holds the shard's lock now, and whether
/// the file, its length read after that, is longer than the bytes the tail was read from.
pub(crate) fn is_damage(tail: Tail, writer_holds_lock: bool, grew_since_read: bool) -> bool {
    match tail {
        Tail::CutShort => !writer_holds_lock && !grew_since_read,
        Tail::Zeros | Tail::Damaged => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_record_its_writer_is_writing_is_not_damage() {
        let cases = [
            (Tail::CutShort, true, false, false),
            (Tail::CutShort, true, true, false),
            (Tail::CutShort, false, false, true),
            // The writer finished the record (and let go of the lock) after it was read.
            (Tail::CutShort, false, true, false),
            (Tail::Zeros, true, false, true),
            (Tail::Zeros, false, false, true),
            (Tail::Zeros, false, true, true),
            (Tail::Damaged, true, false, true),
            (Tail::Damaged, false, false, true),
            (Tail::Damaged, false, true, true),
        ];
        for (tail, locked, grew, damage) in cases {
            assert_eq!(is_damage(tail, locked, grew), damage, "{tail:?}, lock held: {locked}, grew: {grew}");
        }
    }
}
