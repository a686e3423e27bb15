//! The decoded-chunk cache's size, and one decoded copy of a dataset's chunks shared by every
//! process of a machine that reads it (data-loader workers, forked or spawned).
//!
//! - `cache_plan` decides the cache's bound from the dataset's decoded total (known from the
//!   index and the episodes' rows alone: opening reads no chunk data, see `shape_of`) and the
//!   memory available: the whole
//!   dataset when it takes at most `RAM_SHARE` of it, else that share; never below the
//!   `CACHE_FLOOR` a fixed default used to give.
//! - When the whole dataset fits that bound, its decoded chunks go to a `SharedChunks` store:
//!   an anonymous memory file (`memfd_create`: the kernel frees it when the last process that
//!   holds it exits or is killed, so nothing leaks in /dev/shm), mapped shared, one slot per
//!   chunk at offsets laid out from the index (`Layout`), each with a state word. A reader that
//!   misses claims the slot (compare-and-swap from empty to its pid), decodes into it and
//!   publishes it (a release store); the others use the bytes in place. A fork inherits the
//!   mapping; a spawned worker gets the descriptor (the Python side passes it when
//!   multiprocessing pickles the dataset) and `adopt`s it if its layout is the same.
//! - A claim never makes anyone wait forever (`next_step`): a claimant that died is seen by
//!   its pid and the slot is taken back; one that takes longer than `WAIT_BOUND` is left alone
//!   and the chunk decoded locally.
//!
//! Where the decoded total exceeds the bound, or off Linux, each process keeps its own LRU.

use std::collections::HashMap;
use std::fs::File;
use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use crate::format::chunks::ChunkRef;
use crate::format::codec::{self, CODEC_STACK, CODEC_ZSTD};
use crate::format::stack;
use crate::reader::catalog::chunk_list::Located;
use crate::reader::catalog::Catalog;
use crate::reader::int_map::{ChunkKey, IntHasher, IntMap};
use crate::reader::store::shard::Shard;

/// `OpenOptions::cache_bytes` meaning "sized by `cache_plan`".
pub const CACHE_AUTO: usize = usize::MAX;
/// The least a default cache takes (what a fixed default used to): a small machine still
/// keeps a working set, unless the dataset itself is smaller.
pub const CACHE_FLOOR: usize = 256 << 20;
/// The share of the memory available at open a default cache may take: 1 / RAM_SHARE.
pub const RAM_SHARE: u64 = 4;
/// How long a reader waits for a slot another live process is writing before it decodes the
/// chunk itself: far longer than a chunk's decode, so only a stalled claimant hits it.
pub const WAIT_BOUND: Duration = Duration::from_secs(1);

/// The cache a dataset gets: its bound, and whether its chunks go to a shared store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePlan {
    pub bytes: usize,
    pub shared: bool,
}

/// The cache for a dataset whose decoded chunks take `decoded_total` bytes: `explicit` bytes
/// when given (`cache_bytes=`), else the whole dataset when it is at most 1/`RAM_SHARE` of
/// `available` (unknown: the floor), else that share; never below `CACHE_FLOOR`. Shared when
/// the platform has the store and the whole dataset fits the bound.
pub fn cache_plan(decoded_total: u64, explicit: Option<usize>, available: Option<u64>, can_share: bool) -> CachePlan {
    let floor = CACHE_FLOOR as u64;
    let bytes = match (explicit, available) {
        (Some(b), _) => b as u64,
        (None, Some(avail)) if decoded_total <= avail / RAM_SHARE => decoded_total.max(floor),
        (None, Some(avail)) => (avail / RAM_SHARE).max(floor),
        (None, None) => floor,
    };
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    CachePlan { bytes, shared: can_share && decoded_total > 0 && decoded_total <= bytes as u64 }
}

/// What a chunk decodes to, as a slot holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// Contiguous rows (or a str chunk's offsets and text) of this many bytes.
    Rows(usize),
    /// A frame-stack chunk's frames: `rows` rows of `row` bytes from `filtered` bytes.
    Frames { row: usize, rows: usize, filtered: usize },
}

impl Shape {
    /// Bytes its slot takes: frames keep where each row ends (a word a row) before the bytes.
    fn slot_bytes(&self) -> usize {
        match *self {
            Shape::Rows(n) => n,
            Shape::Frames { rows, filtered, .. } => rows * std::mem::size_of::<usize>() + filtered,
        }
    }

    /// Whether parts of these lengths fill its slot: rows exactly; frames as their row ends
    /// (a word a row), then at most `filtered` bytes (what the index says they take, see `shape_of`).
    fn fits(&self, mut lens: impl Iterator<Item = usize>) -> bool {
        match *self {
            Shape::Rows(n) => lens.sum::<usize>() == n,
            Shape::Frames { rows, filtered, .. } => {
                lens.next() == Some(rows * std::mem::size_of::<usize>()) && lens.sum::<usize>() <= filtered
            }
        }
    }
}

/// A chunk's place in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub index: usize,
    pub offset: usize,
    pub shape: Shape,
}

const MAGIC: u64 = u64::from_le_bytes(*b"TRJSHRD1");
const HEADER: usize = 64;
const ALIGN: usize = 64;

/// Where each chunk lies in the store: a header (magic, fingerprint, slots, size), a state word
/// a slot, then the slots, each 64-byte aligned. Laid out in key order, so every process that
/// opened the same index computes the same layout (its fingerprint says so).
#[derive(Debug, Default)]
pub(crate) struct Layout {
    slots: IntMap<ChunkKey, Slot>,
    pub size: usize,
    pub fingerprint: u64,
}

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

impl Layout {
    pub fn new(mut chunks: Vec<(ChunkKey, Shape)>) -> Layout {
        chunks.sort_unstable_by_key(|&(key, _)| key);
        chunks.dedup_by_key(|&mut (key, _)| key);
        let mut offset = HEADER + align(chunks.len() * 4);
        let mut hash = IntHasher::default();
        let mut slots = IntMap::default();
        slots.reserve(chunks.len());
        for (index, &(key, shape)) in chunks.iter().enumerate() {
            hash.write_usize(key.0);
            hash.write_u64(key.1);
            std::hash::Hash::hash(&shape, &mut hash);
            slots.insert(key, Slot { index, offset, shape });
            offset += align(shape.slot_bytes());
        }
        Layout { slots, size: offset, fingerprint: hash.finish() }
    }

    pub fn slot(&self, key: ChunkKey) -> Option<&Slot> {
        self.slots.get(&key)
    }

    fn header(&self) -> [u64; 4] {
        [MAGIC, self.fingerprint, self.slots.len() as u64, self.size as u64]
    }
}

/// A slot's state word: empty, ready, or the pid of the process writing it.
pub(crate) const EMPTY: u32 = 0;
pub(crate) const READY: u32 = u32::MAX;

/// What a reader does on finding a slot in `state` (`alive`: whether the writing process
/// lives, asked only for a pid) after waiting `waited` for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Ready: read it in place.
    Use,
    /// Empty: claim it, decode into it, publish.
    Claim,
    /// Its writer died mid-write: set it empty again (if still so) and look again.
    Reclaim,
    /// Being written by a live process: look again shortly.
    Wait,
    /// Waited long enough: decode the chunk locally, leave the slot to its writer.
    Alone,
}

pub(crate) fn next_step(state: u32, alive: Option<bool>, waited: Duration) -> Step {
    match (state, alive) {
        (READY, _) => Step::Use,
        (EMPTY, _) => Step::Claim,
        (_, Some(false)) => Step::Reclaim,
        _ if waited >= WAIT_BOUND => Step::Alone,
        _ => Step::Wait,
    }
}

/// Whether process `pid` exists (a permission error still means it does).
fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The decoded chunks of a dataset in memory shared between processes (see the module).
pub(crate) struct SharedChunks {
    map: MmapRaw,
    file: File,
    layout: Layout,
    /// Shards this process reads from another file now (the compacted rewrite of the one the
    /// layout was made from, see `compacted`): their slots are not its chunks.
    retired: Box<[AtomicBool]>,
}

// SAFETY: the mapping is only written through slots a process claimed (state word CAS), and
// read only after the release store that publishes them; the state words are atomics.
unsafe impl Send for SharedChunks {}
unsafe impl Sync for SharedChunks {}

impl std::fmt::Debug for SharedChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedChunks").field("size", &self.layout.size).finish()
    }
}

/// Whether this platform has the shared store.
pub const CAN_SHARE: bool = cfg!(target_os = "linux");

impl SharedChunks {
    /// A new, empty store for `layout` (None where the platform or the kernel refuses).
    pub fn create(layout: Layout) -> Option<SharedChunks> {
        let file = memfd()?;
        file.set_len(layout.size as u64).ok()?;
        let store = SharedChunks::map(file, layout)?;
        let head = layout_header_ptr(&store);
        for (i, word) in store.layout.header().into_iter().enumerate() {
            // SAFETY: the header is the first 64 bytes of the fresh mapping, which no other
            // process sees yet; u64 writes at 8-byte aligned offsets of a page-aligned map.
            unsafe { head.add(i).write(word) };
        }
        Some(store)
    }

    /// The store another process made, from its descriptor, if it is laid out as `layout`.
    pub fn adopt(file: File, layout: Layout) -> Option<SharedChunks> {
        if file.metadata().ok()?.len() != layout.size as u64 {
            return None;
        }
        let store = SharedChunks::map(file, layout)?;
        let head = layout_header_ptr(&store);
        // SAFETY: the map holds at least the header (its size was checked); written once by
        // the creator before the descriptor was handed out.
        let words: Vec<u64> = (0..4).map(|i| unsafe { head.add(i).read() }).collect();
        (words == store.layout.header()).then_some(store)
    }

    fn map(file: File, layout: Layout) -> Option<SharedChunks> {
        if layout.size < HEADER {
            return None;
        }
        let map = MmapOptions::new().len(layout.size).map_raw(&file).ok()?;
        let shards = layout.slots.keys().map(|&(shard, _)| shard + 1).max().unwrap_or(0);
        let retired = (0..shards).map(|_| AtomicBool::new(false)).collect();
        Some(SharedChunks { map, file, layout, retired })
    }

    /// Its size in bytes (the memory it holds once every slot is filled).
    pub fn size(&self) -> usize {
        self.layout.size
    }

    /// Stops using the slots of `shard` in this process: it reads another file now, whose
    /// chunks may lie at the offsets the slots are keyed by (see `compacted`).
    pub fn retire_shard(&self, shard: usize) {
        if let Some(r) = self.retired.get(shard) {
            r.store(true, Ordering::Relaxed);
        }
    }

    /// The descriptor (for a spawned worker to adopt).
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    pub fn slot(&self, key: ChunkKey) -> Option<Slot> {
        if self.retired.get(key.0).is_some_and(|r| r.load(Ordering::Relaxed)) {
            return None;
        }
        self.layout.slot(key).copied()
    }

    fn state(&self, slot: &Slot) -> &AtomicU32 {
        // SAFETY: the state words lie after the header, 4-byte aligned, one per slot, inside
        // the map, which lives as long as `self`; AtomicU32 has u32's layout.
        unsafe { &*(self.map.as_ptr().add(HEADER + slot.index * 4) as *const AtomicU32) }
    }

    /// The slot's bytes, once it is ready (published with a release store: this acquires it).
    pub fn ready(&self, slot: &Slot) -> bool {
        self.state(slot).load(Ordering::Acquire) == READY
    }

    /// A ready slot's bytes: they never change again.
    pub fn bytes(&self, slot: &Slot) -> &[u8] {
        // SAFETY: in bounds by the layout; published (callers checked `ready`), so no process
        // writes them any more.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(slot.offset), slot.shape.slot_bytes()) }
    }

    /// Takes `slot` for writing, waiting (boundedly) on another writer: `Ok(true)` claimed,
    /// `Ok(false)` ready, `Err(())` decode it locally.
    pub fn claim(&self, slot: &Slot) -> Result<bool, ()> {
        let state = self.state(slot);
        let me = std::process::id();
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let now = state.load(Ordering::Acquire);
            let alive = (now != EMPTY && now != READY).then(|| pid_alive(now));
            match next_step(now, alive, start.elapsed()) {
                Step::Use => return Ok(false),
                Step::Claim => {
                    if state.compare_exchange(EMPTY, me, Ordering::Acquire, Ordering::Acquire).is_ok() {
                        return Ok(true);
                    }
                }
                Step::Reclaim => {
                    let _ = state.compare_exchange(now, EMPTY, Ordering::AcqRel, Ordering::Acquire);
                }
                Step::Alone => return Err(()),
                Step::Wait => {
                    spins += 1;
                    if spins < 64 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            }
        }
    }

    /// Fills a claimed slot with `parts` (their lengths adding up to its size, or for frames
    /// the row ends then at most the frame bytes it holds) and publishes it; with other
    /// lengths, gives the slot back empty. Returns whether it was published.
    pub fn publish(&self, slot: &Slot, parts: &[&[u8]]) -> bool {
        let state = self.state(slot);
        if !slot.shape.fits(parts.iter().map(|p| p.len())) {
            state.store(EMPTY, Ordering::Release);
            return false;
        }
        let mut at = slot.offset;
        for part in parts {
            // SAFETY: in bounds (the lengths add up to the slot's size); this process holds the
            // claim, so no one else writes or reads these bytes until the release store below.
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), self.map.as_mut_ptr().add(at), part.len()) };
            at += part.len();
        }
        state.store(READY, Ordering::Release);
        true
    }

    /// Gives a claimed slot back empty (the decode failed).
    pub fn release(&self, slot: &Slot) {
        self.state(slot).store(EMPTY, Ordering::Release);
    }
}

fn layout_header_ptr(store: &SharedChunks) -> *mut u64 {
    store.map.as_mut_ptr() as *mut u64
}

#[cfg(target_os = "linux")]
fn memfd() -> Option<File> {
    use std::os::fd::FromRawFd;
    // SAFETY: a NUL-terminated name and flags; the result is a new descriptor we own, or -1.
    let fd = unsafe { libc::memfd_create(c"trajcore-chunks".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: a fresh descriptor, owned by nothing else.
    (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn memfd() -> Option<File> {
    None
}

/// The memory available for new allocations (Linux: MemAvailable), if known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// What a chunk decodes to, from its index entry alone (opening reads no chunk data, from a
/// disk or a store): `None` for chunks never cached (empty ones, raw ones read in place). A
/// frame-stack chunk's slot holds what its frames take when each row shifts the one before but
/// for its first and those starting an episode (`starts`, after its first row; see
/// `frames_estimate`), as the frame-stack filter writes a recorded stack; a chunk whose frames
/// turn out larger (rows that are no shifts) is kept in the reader's own cache instead.
fn shape_of(mapped: bool, loc: &Located, row_bytes: Option<usize>, stack: usize, starts: usize) -> Option<Shape> {
    let c = &loc.chunk;
    if c.stored_len == 0 || (c.codec == 0 && mapped) {
        return None;
    }
    let raw_len = usize::try_from(c.raw_len).ok()?;
    let Some(row) = row_bytes.filter(|&r| r > 0 && raw_len.is_multiple_of(r)) else {
        return Some(Shape::Rows(raw_len));
    };
    if !frame_stacked(c) {
        return Some(Shape::Rows(raw_len));
    }
    let rows = raw_len / row;
    let (limit, _) = codec::zstd_output_limit(c.codec, row_bytes, c.raw_len);
    let filtered = frames_estimate(rows, row, stack, starts).min(usize::try_from(limit).ok()?);
    Some(Shape::Frames { row, rows, filtered })
}

/// Whether a chunk's codec is the frame-stack filter under zstd (its size depends on where
/// episodes start).
fn frame_stacked(c: &ChunkRef) -> bool {
    c.codec == codec::pipeline(&[CODEC_STACK, CODEC_ZSTD])
}

/// The bytes the frame-stack filter writes for `rows` rows of `row` bytes (`stack` frames each)
/// when all but the first and `starts` more (episodes starting after the first row) shift the
/// row before by one frame: a header, a kind a row, whole rows, and a frame for each shift.
fn frames_estimate(rows: usize, row: usize, stack: usize, starts: usize) -> usize {
    let frame = row / stack.max(1);
    let whole = rows.min(1 + starts);
    stack::HEADER_LEN + rows + whole * row + (rows - whole) * frame
}

/// The layout of the chunks the catalog lists now (the same in every process that opened the
/// same index).
pub(in crate::reader) fn layout_of(catalog: &Catalog, shards: &[Shard]) -> Layout {
    // Where episodes start on each lane's observation rows, for frame-stack chunks: a pass over
    // every episode, made only where there are such chunks (opening lists each episode once).
    let mut starts: HashMap<(usize, u32), Vec<u64>> = HashMap::new();
    if catalog.chunk_lists.values().any(|list| list.chunks.iter().any(|loc| frame_stacked(&loc.chunk))) {
        for l in &catalog.locs {
            starts.entry((l.recording as usize, l.lane)).or_default().push(l.obs_first_row);
        }
    }
    starts.values_mut().for_each(|v| v.sort_unstable());
    let mut chunks = Vec::new();
    for (&(recording, lane, column), list) in &catalog.chunk_lists {
        let spec = catalog.recordings.get(recording).and_then(|r| r.columns.get(column as usize));
        let row_bytes = spec.and_then(|s| s.row_bytes());
        let stack = spec.and_then(|s| s.row_layout().stack).unwrap_or(1);
        let lane_starts = starts.get(&(recording, lane)).map_or(&[][..], Vec::as_slice);
        for loc in &list.chunks {
            let (first, end) = (loc.first_row(), loc.end_row());
            let inside = lane_starts.partition_point(|&r| r < end) - lane_starts.partition_point(|&r| r <= first);
            if let Some(shape) = shape_of(shards[loc.shard].source.is_mapped(), loc, row_bytes, stack, inside) {
                chunks.push(((loc.shard, loc.chunk.data_offset), shape));
            }
        }
    }
    Layout::new(chunks)
}

/// The cache for a dataset just opened: the bound of its LRU, and its shared store where the
/// plan says so. The LRU keeps the chunks a `refresh` adds: a dataset still being recorded (a
/// replay buffer opened empty) grows past what it held at open, so a default cache leaves them
/// room up to the share of the memory available (what a dataset that size at open would get);
/// an explicit bound is the bound of both together.
pub(in crate::reader) fn plan_for(
    catalog: &Catalog,
    shards: &[Shard],
    cache_bytes: usize,
) -> (usize, Option<SharedChunks>) {
    let layout = layout_of(catalog, shards);
    let total = layout.size - HEADER;
    let explicit = (cache_bytes != CACHE_AUTO).then_some(cache_bytes);
    let available = available_memory();
    let plan = cache_plan(total as u64, explicit, available, CAN_SHARE);
    let bound = match explicit {
        Some(_) => plan.bytes,
        None => plan.bytes.max(cache_plan(u64::MAX, None, available, false).bytes),
    };
    match plan.shared.then(|| SharedChunks::create(layout)).flatten() {
        Some(store) => (bound.saturating_sub(total), Some(store)),
        None => (bound, None),
    }
}

/// How a dataset's decoded chunks are kept, for tests and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// The bound of this process's LRU.
    pub lru_bytes: usize,
    /// The shared store's size (0: none).
    pub shared_bytes: usize,
    /// Chunks this process decoded.
    pub decodes: u64,
}

/// A chunk's decoded bytes in a ready slot, kept alive by the store.
#[derive(Clone)]
pub(crate) struct SharedChunk {
    pub store: Arc<SharedChunks>,
    pub slot: Slot,
}

impl std::fmt::Debug for SharedChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedChunk").field("slot", &self.slot).finish()
    }
}

impl SharedChunk {
    /// Contiguous rows (`Shape::Rows`).
    pub fn rows(&self) -> Option<&[u8]> {
        matches!(self.slot.shape, Shape::Rows(_)).then(|| self.store.bytes(&self.slot))
    }

    /// Frames: (filtered bytes, where each row ends in them, row bytes).
    pub fn frames(&self) -> Option<(&[u8], &[usize], usize)> {
        let Shape::Frames { row, rows, .. } = self.slot.shape else { return None };
        let bytes = self.store.bytes(&self.slot);
        let (ends, data) = bytes.split_at(rows * std::mem::size_of::<usize>());
        // SAFETY: `ends` starts at the slot's 64-byte aligned offset and holds `rows` words
        // written from a `&[usize]` (see `publish`); any bit pattern is a valid usize.
        let ends = unsafe { std::slice::from_raw_parts(ends.as_ptr() as *const usize, rows) };
        // The frames may take less than their slot; they end where the last row does.
        let end = ends.last().map_or(0, |&e| e.min(data.len()));
        Some((&data[..end], ends, row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn cache_plan_table() {
        let floor = CACHE_FLOOR;
        // (decoded total, explicit bound, memory available, platform shares) -> plan
        type Case = (u64, Option<usize>, Option<u64>, bool, CachePlan);
        let cases: &[Case] = &[
            // A dataset within a quarter of the memory available: all of it, shared.
            (GIB, None, Some(16 * GIB), true, CachePlan { bytes: GIB as usize, shared: true }),
            // A small one: the floor (room for what a refresh adds), shared.
            (10 * MIB, None, Some(16 * GIB), true, CachePlan { bytes: floor, shared: true }),
            // Larger than the share: the share, each process its own LRU.
            (8 * GIB, None, Some(16 * GIB), true, CachePlan { bytes: 4 * GIB as usize, shared: false }),
            // A small machine: never below the floor.
            (GIB, None, Some(512 * MIB), true, CachePlan { bytes: floor, shared: false }),
            // Memory unknown: the floor.
            (GIB, None, None, true, CachePlan { bytes: floor, shared: false }),
            (MIB, None, None, true, CachePlan { bytes: floor, shared: true }),
            // An explicit bound wins, either way.
            (GIB, Some(4 << 30), Some(2 * GIB), true, CachePlan { bytes: 4 << 30, shared: true }),
            (GIB, Some(1 << 20), Some(16 * GIB), true, CachePlan { bytes: 1 << 20, shared: false }),
            (GIB, Some(0), Some(16 * GIB), true, CachePlan { bytes: 0, shared: false }),
            // No store on this platform; nothing to share.
            (GIB, None, Some(16 * GIB), false, CachePlan { bytes: GIB as usize, shared: false }),
            (0, None, Some(16 * GIB), true, CachePlan { bytes: floor, shared: false }),
        ];
        for &(total, explicit, avail, can, want) in cases {
            assert_eq!(cache_plan(total, explicit, avail, can), want, "{total} {explicit:?} {avail:?} {can}");
        }
    }

    #[test]
    fn frame_stack_chunks_take_a_frame_a_shift_and_whole_rows_where_episodes_start() {
        // (rows, row bytes, stack, episode starts after the first row) -> bytes
        let cases = [
            (1, 40, 4, 0, 4 + 1 + 40),
            (5, 40, 4, 0, 4 + 5 + 40 + 4 * 10),
            (5, 40, 4, 2, 4 + 5 + 3 * 40 + 2 * 10),
            (5, 40, 4, 9, 4 + 5 + 5 * 40), // never more whole rows than rows
            (3, 40, 1, 0, 4 + 3 + 40 + 2 * 40),
        ];
        for (rows, row, stack, starts, want) in cases {
            assert_eq!(frames_estimate(rows, row, stack, starts), want, "{rows} {row} {stack} {starts}");
        }
    }

    #[test]
    fn parts_fill_a_slot_of_rows_exactly_and_of_frames_up_to_their_bound() {
        let w = std::mem::size_of::<usize>();
        let frames = Shape::Frames { row: 12, rows: 3, filtered: 30 };
        // (shape, part lengths, fits)
        let cases: &[(Shape, &[usize], bool)] = &[
            (Shape::Rows(100), &[100], true),
            (Shape::Rows(100), &[60, 40], true),
            (Shape::Rows(100), &[99], false),
            (frames, &[3 * w, 30], true),
            (frames, &[3 * w, 20], true), // frames take less than the most they may
            (frames, &[3 * w, 31], false),
            (frames, &[2 * w, 20], false), // a prefix of the rows is no whole chunk
            (frames, &[], false),
        ];
        for &(shape, lens, fits) in cases {
            assert_eq!(shape.fits(lens.iter().copied()), fits, "{shape:?} {lens:?}");
        }
    }

    #[test]
    fn layout_is_aligned_ordered_and_the_same_for_the_same_chunks() {
        let frames = Shape::Frames { row: 12, rows: 3, filtered: 30 };
        let a = Layout::new(vec![((1, 0), Shape::Rows(100)), ((0, 64), frames), ((0, 0), Shape::Rows(1))]);
        let b = Layout::new(vec![((0, 0), Shape::Rows(1)), ((1, 0), Shape::Rows(100)), ((0, 64), frames)]);
        assert_eq!(a.fingerprint, b.fingerprint);
        let slots: Vec<_> = [(0, 0), (0, 64), (1, 0)].iter().map(|&k| *a.slot(k).unwrap()).collect();
        assert_eq!(slots.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1, 2]);
        // Header, 3 state words padded to 64, then slots of 1, 3*8+30 and 100 bytes, aligned.
        assert_eq!(slots.iter().map(|s| s.offset).collect::<Vec<_>>(), [128, 192, 256]);
        assert_eq!(a.size, 256 + 128);
        let c = Layout::new(vec![((0, 0), Shape::Rows(2)), ((1, 0), Shape::Rows(100)), ((0, 64), frames)]);
        assert_ne!(a.fingerprint, c.fingerprint, "a different shape is a different layout");
        assert!(a.slot((2, 0)).is_none());
    }

    #[test]
    fn next_step_table() {
        let (short, long) = (Duration::ZERO, WAIT_BOUND);
        let cases = [
            (READY, None, short, Step::Use),
            (EMPTY, None, long, Step::Claim),
            (1234, Some(true), short, Step::Wait),
            (1234, Some(true), long, Step::Alone),
            (1234, Some(false), short, Step::Reclaim),
            (1234, Some(false), long, Step::Reclaim),
        ];
        for (state, alive, waited, want) in cases {
            assert_eq!(next_step(state, alive, waited), want, "{state} {alive:?} {waited:?}");
        }
    }

    #[cfg(target_os = "linux")]
    fn store() -> SharedChunks {
        SharedChunks::create(Layout::new(vec![((0, 0), Shape::Rows(8)), ((0, 8), Shape::Rows(4))])).unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn claim_publish_and_adopt() {
        let s = store();
        let slot = s.slot((0, 0)).unwrap();
        assert_eq!(s.claim(&slot), Ok(true));
        assert!(!s.ready(&slot));
        assert!(!s.publish(&slot, &[&[1, 2]]), "wrong length: given back");
        assert_eq!(s.claim(&slot), Ok(true));
        assert!(s.publish(&slot, &[&[1, 2, 3], &[4, 5, 6, 7, 8]]));
        assert_eq!(s.claim(&slot), Ok(false));
        assert_eq!(s.bytes(&slot), [1, 2, 3, 4, 5, 6, 7, 8]);
        // Another process's view of the same memory, through a duplicate descriptor.
        let dup = s.file.try_clone().unwrap();
        let layout = Layout::new(vec![((0, 8), Shape::Rows(4)), ((0, 0), Shape::Rows(8))]);
        let other = SharedChunks::adopt(dup, layout).unwrap();
        assert!(other.ready(&slot));
        assert_eq!(other.bytes(&slot), [1, 2, 3, 4, 5, 6, 7, 8]);
        let wrong = Layout::new(vec![((0, 0), Shape::Rows(8)), ((0, 8), Shape::Rows(5))]);
        assert!(SharedChunks::adopt(s.file.try_clone().unwrap(), wrong).is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_slot_held_by_a_dead_writer_is_taken_back_and_a_live_one_times_out() {
        let s = store();
        let slot = s.slot((0, 8)).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        s.state(&slot).store(dead, Ordering::Release);
        assert_eq!(s.claim(&slot), Ok(true), "the dead writer's claim is taken back");
        s.release(&slot);
        // A live writer (the parent of this test) that never publishes: bounded wait.
        s.state(&slot).store(std::os::unix::process::parent_id(), Ordering::Release);
        let start = Instant::now();
        assert_eq!(s.claim(&slot), Err(()));
        assert!(start.elapsed() >= WAIT_BOUND && start.elapsed() < WAIT_BOUND * 5);
    }
}
