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

/// Whether the tail is damage, given whether a writer holds the shard's lock now.
pub(crate) fn is_damage(tail: Tail, writer_holds_lock: bool) -> bool {
    match tail {
        Tail::CutShort => !writer_holds_lock,
        Tail::Zeros | Tail::Damaged => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_record_its_writer_is_writing_is_not_damage() {
        let cases = [
            (Tail::CutShort, true, false),
            (Tail::CutShort, false, true),
            (Tail::Zeros, true, true),
            (Tail::Zeros, false, true),
            (Tail::Damaged, true, true),
            (Tail::Damaged, false, true),
        ];
        for (tail, locked, damage) in cases {
            assert_eq!(is_damage(tail, locked), damage, "{tail:?}, writer holds the lock: {locked}");
        }
    }
}
