//! One call's entries, gathered for one message without copying them: bytes the caller owns
//! are borrowed while an owner of theirs (`K`, a Python object in the bindings) is kept alive,
//! and small values are encoded into one reused buffer.

use crate::writer::message::{EntryKind, EntryRef, Slot};

/// Where a call's values go: how their rows map to envs, and which observation row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub kind: EntryKind,
    pub slot: Slot,
    pub env: u32,
    /// The env count for batched values, `None` for one row.
    pub rows: Option<usize>,
}

impl Place {
    /// The regular row of every env (or of the one env).
    pub fn regular(rows: Option<usize>) -> Self {
        Place { kind: EntryKind::Dense, slot: Slot::Regular, env: 0, rows }
    }

    /// A row of env `env` alone, in `slot`: a sub-env's frame, a final observation.
    pub fn env(env: usize, slot: Slot) -> Self {
        Place { kind: EntryKind::PerEnv, slot, env: env as u32, rows: None }
    }
}

/// Where an entry's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// Address and length of memory of a kept owner.
    External(usize, usize),
    /// Range of the collector's own buffer.
    Own(usize, usize),
}

/// An entry as collected.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub column: u32,
    pub kind: EntryKind,
    pub slot: Slot,
    pub env: u32,
    pub mask: Option<Src>,
    pub data: Src,
}

/// Reused between calls so the step path allocates nothing once warmed up.
#[derive(Debug)]
pub struct Collector<K> {
    pub bytes: Vec<u8>,
    keep: Vec<K>,
    pub entries: Vec<Pending>,
    /// A reset's mask of the envs it starts.
    pub head_mask: Option<Src>,
}

impl<K> Default for Collector<K> {
    fn default() -> Self {
        Collector { bytes: Vec::new(), keep: Vec::new(), entries: Vec::new(), head_mask: None }
    }
}

impl<K> Collector<K> {
    /// Empties it, releasing the kept owners.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.keep.clear();
        self.entries.clear();
        self.head_mask = None;
    }

    /// Borrows `len` bytes at `data`, memory of `owner`, which is kept until `clear`.
    ///
    /// # Safety
    /// The memory must stay valid for reads, and unchanged, while `owner` is alive and until
    /// `clear` (the bindings hold the GIL whenever a slice of it is alive).
    // Inlined into the bindings' step path (a call per array), as `Fit::check_bounds`.
    #[inline]
    pub unsafe fn borrow(&mut self, owner: K, data: usize, len: usize) -> Src {
        self.keep.push(owner);
        Src::External(data, len)
    }

    pub fn own(&mut self, bytes: &[u8]) -> Src {
        self.own_with(|out| out.extend_from_slice(bytes))
    }

    /// Appends bytes to the own buffer with a closure; returns their range.
    pub fn own_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) -> Src {
        let start = self.bytes.len();
        fill(&mut self.bytes);
        Src::Own(start, self.bytes.len() - start)
    }

    /// Appends what `fill` makes of the bytes of `src` to the own buffer; returns their range.
    pub fn own_from(&mut self, src: Src, fill: impl FnOnce(&[u8], &mut Vec<u8>)) -> Src {
        let mut bytes = std::mem::take(&mut self.bytes);
        let start = bytes.len();
        match src {
            Src::Own(at, len) => {
                // A copy: `fill` appends to the very buffer they are in.
                let own = bytes[at..at + len].to_vec();
                fill(&own, &mut bytes)
            }
            external => fill(self.slice(external), &mut bytes),
        }
        self.bytes = bytes;
        Src::Own(start, self.bytes.len() - start)
    }

    /// The entry of a value of `column` at `at`, masked where `mask` says which envs have it.
    pub fn push(&mut self, column: u32, at: Place, mask: Option<Src>, data: Src) {
        let kind = if mask.is_some() { EntryKind::Masked } else { at.kind };
        self.entries.push(Pending { column, kind, slot: at.slot, env: at.env, mask, data });
    }

    pub fn slice(&self, src: Src) -> &[u8] {
        match src {
            Src::Own(start, len) => &self.bytes[start..start + len],
            Src::External(_, 0) => &[],
            // SAFETY: external sources were handed to `borrow`, whose contract keeps them valid
            // until `clear`, which needs `&mut self`: the slice cannot outlive them.
            Src::External(addr, len) => unsafe { std::slice::from_raw_parts(addr as *const u8, len) },
        }
    }

    /// The envs where both masks are set (`None`: every env).
    pub fn and_masks(&mut self, a: Option<Src>, b: Option<Src>) -> Option<Src> {
        match (a, b) {
            (None, m) | (m, None) => m,
            (Some(a), Some(b)) => {
                let both: Vec<u8> =
                    self.slice(a).iter().zip(self.slice(b)).map(|(&x, &y)| (x != 0 && y != 0) as u8).collect();
                Some(self.own(&both))
            }
        }
    }

    /// Whether `mask` is given and has no env set.
    pub fn none_set(&self, mask: Option<Src>) -> bool {
        mask.is_some_and(|m| self.slice(m).iter().all(|&b| b == 0))
    }

    pub fn entries(&self) -> Vec<EntryRef<'_>> {
        let entry = |p: &Pending| EntryRef {
            column: p.column,
            kind: p.kind,
            slot: p.slot,
            env: p.env,
            mask: p.mask.map(|m| self.slice(m)),
            data: self.slice(p.data),
        };
        self.entries.iter().map(entry).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_own_and_borrowed_bytes() {
        let outside = vec![7u8, 8, 9];
        let mut c = Collector::<&Vec<u8>>::default();
        let own = c.own(&[1, 2]);
        // SAFETY: `outside` outlives the collector and is not written.
        let borrowed = unsafe { c.borrow(&outside, outside.as_ptr() as usize, 3) };
        let mask = c.own(&[1, 0, 1]);
        let doubled = c.own_from(borrowed, |bytes, out| out.extend(bytes.iter().map(|b| b * 2)));
        assert_eq!(c.slice(doubled), &[14, 16, 18]);
        let copied = c.own_from(own, |bytes, out| out.extend_from_slice(bytes));
        assert_eq!(c.slice(copied), &[1, 2]);
        c.push(4, Place::regular(None), None, own);
        c.push(5, Place { slot: Slot::Final, ..Place::regular(None) }, Some(mask), borrowed);
        let e = c.entries();
        assert_eq!((e[0].column, e[0].data, e[0].mask), (4, &[1u8, 2][..], None));
        assert_eq!((e[1].data, e[1].mask), (&[7u8, 8, 9][..], Some(&[1u8, 0, 1][..])));
        drop(e);
        c.clear();
        assert!(c.entries().is_empty() && c.bytes.is_empty());
    }

    #[test]
    fn masks_and() {
        let mut c = Collector::<()>::default();
        let (a, b) = (c.own(&[1, 1, 0, 0]), c.own(&[1, 0, 1, 0]));
        assert_eq!(c.and_masks(None, None), None);
        assert_eq!(c.and_masks(Some(a), None), Some(a));
        let both = c.and_masks(Some(a), Some(b)).unwrap();
        assert_eq!(c.slice(both), &[1, 0, 0, 0]);
        let none = c.own(&[0, 0]);
        // (mask, whether it is given and no env has the value)
        for (mask, want) in [(None, false), (Some(a), false), (Some(both), false), (Some(none), true)] {
            assert_eq!(c.none_set(mask), want, "{mask:?}");
        }
    }
}
