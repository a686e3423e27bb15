//! Messages from the caller to the writer thread, as bytes in the ring. They never reach a file,
//! so the layout is private to this process and free to change.
//!
//! A message: a 32-byte header (`len u32, kind u8, flags u8, reserved u16, n_entries u32,
//! env u32, time_ns u64, arg u64`), optional lane ops (`num_envs` u16, see `autoreset`), then
//! entries. An
//! entry: `column u32, kind u8, slot u8, reserved u16, env u32, data_len u64`, a mask of
//! `num_envs` bytes for masked entries, then `data_len` bytes of rows.

use super::autoreset::LaneOp;
use crate::format::{u32_at, u64_at};

pub const HEADER_LEN: usize = 32;
pub const ENTRY_HEADER_LEN: usize = 20;

numbered_enum! {
    pub enum MessageKind: u8 {
        /// Observation rows that start episodes (which lanes: the lane ops).
        Reset = 1,
        /// One (vector) step; the lane ops say what each lane's rows are.
        Step = 2,
        /// A new column; `arg` is unused, the JSON spec is the single entry's data.
        AddColumn = 3,
        /// Merge a JSON object (the single entry's data) into the metadata of an episode of `env`:
        /// the running one (`arg` 0) or the one held since it ended (`arg` 1).
        SetMetadata = 4,
        /// Apply the lane ops only (at `time_ns`).
        Ops = 5,
        /// The running episode of `env` is a part whose start is lost (a copy of a part listed on its
        /// own): when it ends it is written incomplete, keeping its terminated/truncated flags.
        StartLost = 6,
        /// Apply the lane ops, seal and write everything, then acknowledge ticket `arg`.
        Flush = 7,
        /// Apply the lane ops, write everything, the incomplete episodes, the index and the end
        /// record; stop.
        Close = 8,
        /// Merge a JSON object (the single entry's data) into the metadata every episode that
        /// begins after this message starts with (`env` and `arg` unused).
        SetDefaults = 9,
    }
}

const FLAG_HAS_OPS: u8 = 1;

numbered_enum! {
    /// How an entry's rows map to envs.
    pub enum EntryKind: u8 {
        /// One row per env (or the single row of an unbatched recorder).
        Dense = 0,
        /// One row per env, present only where the mask byte is non-zero.
        Masked = 1,
        /// One row for env `env` only.
        PerEnv = 2,
    }
}

numbered_enum! {
    /// Which observation row of a step the entry belongs to: the regular one, or (same-step
    /// autoreset) the final observation/info of an episode that ended at this step.
    pub enum Slot: u8 {
        Regular = 0,
        Final = 1,
    }
}

/// An entry as the caller hands it in: borrowed bytes, copied once into the ring.
#[derive(Debug, Clone, Copy)]
pub struct EntryRef<'a> {
    pub column: u32,
    pub kind: EntryKind,
    pub slot: Slot,
    pub env: u32,
    pub mask: Option<&'a [u8]>,
    /// Fixed-size columns: rows back to back. Str columns: per row `u32 len` then the bytes.
    pub data: &'a [u8],
}

pub struct MessageHead<'a> {
    pub kind: MessageKind,
    pub env: u32,
    pub time_ns: u64,
    pub arg: u64,
    /// One `LaneOp` per lane, little-endian u16 each.
    pub ops: Option<&'a [u8]>,
}

/// The one place that knows how long a message is: `encode` writes exactly this many bytes.
pub fn encoded_len(head: &MessageHead, entries: &[EntryRef]) -> usize {
    HEADER_LEN
        + head.ops.map_or(0, |m| m.len())
        + entries.iter().map(|e| ENTRY_HEADER_LEN + e.mask.map_or(0, |m| m.len()) + e.data.len()).sum::<usize>()
}

/// The op of `lane` in a message's ops bytes (0 without ops).
pub fn lane_op(ops: Option<&[u8]>, lane: usize) -> LaneOp {
    ops.and_then(|o| o.get(2 * lane..2 * lane + 2)).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
}

/// Lane ops as the bytes a message carries.
pub fn ops_bytes(ops: &[LaneOp], out: &mut Vec<u8>) {
    out.clear();
    out.extend(ops.iter().flat_map(|o| o.to_le_bytes()));
}

/// Writes a message through `put`, which receives consecutive pieces of bytes.
pub fn encode(head: &MessageHead, entries: &[EntryRef], len: usize, mut put: impl FnMut(&[u8])) {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4] = head.kind as u8;
    h[5] = if head.ops.is_some() { FLAG_HAS_OPS } else { 0 };
    h[8..12].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&head.env.to_le_bytes());
    h[16..24].copy_from_slice(&head.time_ns.to_le_bytes());
    h[24..32].copy_from_slice(&head.arg.to_le_bytes());
    put(&h);
    if let Some(ops) = head.ops {
        put(ops);
    }
    for e in entries {
        let mut eh = [0u8; ENTRY_HEADER_LEN];
        eh[0..4].copy_from_slice(&e.column.to_le_bytes());
        eh[4] = e.kind as u8;
        eh[5] = e.slot as u8;
        eh[8..12].copy_from_slice(&e.env.to_le_bytes());
        eh[12..20].copy_from_slice(&(e.data.len() as u64).to_le_bytes());
        put(&eh);
        if let Some(mask) = e.mask {
            put(mask);
        }
        put(e.data);
    }
}

/// A decoded message, borrowing the writer's copy of the bytes.
pub struct Message<'a> {
    pub kind: MessageKind,
    pub env: u32,
    pub time_ns: u64,
    pub arg: u64,
    pub ops: Option<&'a [u8]>,
    pub entries: Vec<EntryRef<'a>>,
}

/// Decodes a message written by `encode` for a recorder of `num_envs` envs. The bytes come from
/// this process, so a failure here is a bug, reported rather than trusted.
pub fn decode(bytes: &[u8], num_envs: usize) -> Result<Message<'_>, String> {
    let bad = || "malformed message in the recording ring".to_string();
    if bytes.len() < HEADER_LEN || u32_at(bytes, 0) as usize != bytes.len() {
        return Err(bad());
    }
    let kind = MessageKind::from_repr(bytes[4]).ok_or_else(bad)?;
    let n_entries = u32_at(bytes, 8) as usize;
    let mut at = HEADER_LEN;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let piece = bytes.get(at..at.checked_add(n).ok_or_else(bad)?).ok_or_else(bad)?;
        at += n;
        Ok(piece)
    };
    let ops = if bytes[5] & FLAG_HAS_OPS != 0 { Some(take(2 * num_envs)?) } else { None };
    let mut entries = Vec::with_capacity(n_entries);
    for _ in 0..n_entries {
        let eh = take(ENTRY_HEADER_LEN)?;
        let kind = EntryKind::from_repr(eh[4]).ok_or_else(bad)?;
        let slot = Slot::from_repr(eh[5]).ok_or_else(bad)?;
        let data_len = u64_at(eh, 12) as usize;
        let column = u32_at(eh, 0);
        let env = u32_at(eh, 8);
        let emask = if kind == EntryKind::Masked { Some(take(num_envs)?) } else { None };
        let data = take(data_len)?;
        entries.push(EntryRef { column, kind, slot, env, mask: emask, data });
    }
    if at != bytes.len() {
        return Err(bad());
    }
    Ok(Message { kind, env: u32_at(bytes, 12), time_ns: u64_at(bytes, 16), arg: u64_at(bytes, 24), ops, entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mask = [1u8, 0, 1];
        let data = [7u8; 12];
        let entries = [
            EntryRef {
                column: 3,
                kind: EntryKind::Masked,
                slot: Slot::Regular,
                env: 0,
                mask: Some(&mask),
                data: &data,
            },
            EntryRef { column: 9, kind: EntryKind::PerEnv, slot: Slot::Final, env: 2, mask: None, data: &data[..4] },
        ];
        let mut ops = Vec::new();
        ops_bytes(&[1, 0x100, 7], &mut ops);
        let head = MessageHead { kind: MessageKind::Step, env: 5, time_ns: 42, arg: 9, ops: Some(&ops) };
        let len = encoded_len(&head, &entries);
        let mut out = Vec::new();
        encode(&head, &entries, len, |b| out.extend_from_slice(b));
        assert_eq!(out.len(), len);
        let m = decode(&out, 3).unwrap();
        assert_eq!((m.kind, m.env, m.time_ns, m.arg), (MessageKind::Step, 5, 42, 9));
        assert_eq!((lane_op(m.ops, 0), lane_op(m.ops, 1), lane_op(m.ops, 2)), (1, 0x100, 7));
        assert_eq!(m.entries.len(), 2);
        assert_eq!(m.entries[0].mask, Some(&mask[..]));
        assert_eq!(m.entries[1].data, &data[..4]);
        assert_eq!(m.entries[1].slot, Slot::Final);
        assert!(decode(&out[..len - 1], 3).is_err());
    }
}
