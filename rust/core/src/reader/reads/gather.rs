//! Batched gathers for training: many (episode, step) windows at once, each column's rows copied
//! straight into one caller-owned output buffer.
//!
//! A gather runs in three passes:
//! 1. **Plan.** Windows are sorted by (recording, lane, row), so that for each requested column
//!    the rows are visited in chunk order: each needed chunk is found once (a cursor walks the
//!    lane's sorted chunk list; a binary search only when the rows jump) and becomes a *slot*;
//!    the rows to copy become *pieces* (slot, row in the chunk, rows, row in the output).
//! 2. **Fetch.** Raw chunks are slices of the memory map (no copy, no decode). Encoded chunks
//!    come from the byte-bounded cache; those not in it are decoded once each, on up to
//!    `max_threads()` scoped threads when there are several large ones, and put in the cache.
//! 3. **Copy.** Pieces are copied into the outputs (rows no chunk holds, and padding, are
//!    zeroed: every output byte is written, so outputs may start uninitialized), split across
//!    scoped threads by output rows when the batch is large (pixels), since copying is then what
//!    the gather costs. The source rows of all pieces are prefetched first: random rows of a
//!    large dataset are cache misses, and issuing them together overlaps their latencies.
//!
//! `gather_runs` (`bulk`) does the same for runs of consecutive steps (bulk reads, `scan`): an item
//! per run instead of per step, in blocks of bounded output, whole chunks, no prefetching.
//! Pieces that go on from each other merge, and step-timeline fields are planned over runs
//! joined where their rows meet: runs in the file's order (`lane_scan`) copy a chunk at a time.
//! Batches of windows (scattered rows) decode a zstd chunk only as far as their last row in it.
//!
//! Nothing here scans episodes or chunks: a batch costs O(B log C) for B windows and C chunks
//! per lane, whatever the number of episodes or shards; what still grows with a dataset is the
//! memory hierarchy (rows of a small dataset stay in the CPU caches, a large one's do not).
//!
//! Scoped threads (`std::thread::scope`) are started per gather and joined before it returns:
//! no pool outlives a call, so a process that forks (a data-loader worker) has nothing to
//! rebuild, and a thread's start (~20 µs) is only paid where the work is far larger.

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::pieces::{join_steps, push_piece, sort_items, Item, Piece, ZEROS};
use super::rows::chunk_strings;
use super::stream::{copy_streamed, fence, streams_rows};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::reader::catalog::chunk_list::{ListKey, Located};
use crate::reader::dataset_view::DatasetView;
use crate::reader::int_map::IntMap;
use crate::reader::prefetch;
use crate::reader::store::chunk_bytes::{ChunkBytes, Decoded};
use crate::reader::store::decoded::joined::{to_join, JoinedRun, JOIN_ROW_BYTES};
use crate::schema::{ColumnId, ColumnSpec, Timeline};

/// `length` consecutive steps of one episode from step `start` (one step for a transition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Index into `Dataset::episodes()`.
    pub episode: usize,
    /// Step within the episode (0-based).
    pub start: u64,
}

/// `steps` consecutive transitions of one episode from step `start`: the unit of a bulk read
/// (`gather_runs`), where a window per step would cost a piece per step and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Index into `Dataset::episodes()`.
    pub episode: usize,
    /// Step within the episode (0-based).
    pub start: u64,
    pub steps: u64,
}

/// A column to gather, resolved against every recording of the dataset.
#[derive(Debug, Clone)]
pub struct Field {
    pub column: String,
    /// Observation-timeline columns only: read the row after the step's own (for step t of an
    /// episode, observation row t + 1: the next observation; for its last step, the final one).
    pub next: bool,
    pub dtype: DType,
    /// Shape of one row.
    pub shape: Vec<usize>,
    pub timeline: Timeline,
    /// `None` for str columns.
    pub row_bytes: Option<usize>,
    /// The column's id in each recording (`None` where a recording does not have it).
    ids: Vec<Option<ColumnId>>,
    /// A masked column (or a mask): rows of a recording without it read as zeros / False.
    optional: bool,
}

/// Where a field's rows go: `windows * length` rows, row-major. A gather writes every row:
/// rows past an episode's end (padding) and rows no chunk holds become zeros (`""` for str).
pub enum Out<'a> {
    Fixed(&'a mut [u8]),
    /// Memory not initialized yet (a fresh numpy array): every byte gets written.
    Uninit(&'a mut [MaybeUninit<u8>]),
    Strings(&'a mut [String]),
}

impl Out<'_> {
    fn len(&self) -> usize {
        match self {
            Out::Fixed(b) => b.len(),
            Out::Uninit(b) => b.len(),
            Out::Strings(s) => s.len(),
        }
    }

    /// The same output, borrowed for a shorter time (to split it).
    pub(in crate::reader) fn reborrow(&mut self) -> Out<'_> {
        match self {
            Out::Fixed(b) => Out::Fixed(b),
            Out::Uninit(b) => Out::Uninit(b),
            Out::Strings(s) => Out::Strings(s),
        }
    }

    /// Splits off the first `n` bytes (fixed) or rows (str).
    pub(in crate::reader) fn split_first(self, n: usize) -> (Self, Self) {
        match self {
            Out::Fixed(b) => {
                let (a, b) = b.split_at_mut(n);
                (Out::Fixed(a), Out::Fixed(b))
            }
            Out::Uninit(b) => {
                let (a, b) = b.split_at_mut(n);
                (Out::Uninit(a), Out::Uninit(b))
            }
            Out::Strings(s) => {
                let (a, b) = s.split_at_mut(n);
                (Out::Strings(a), Out::Strings(b))
            }
        }
    }

    /// Writes `src` at byte `at` (fixed outputs).
    fn put(&mut self, at: usize, src: &[u8]) {
        match self {
            Out::Fixed(b) => b[at..at + src.len()].copy_from_slice(src),
            Out::Uninit(b) => {
                let dst = &mut b[at..at + src.len()];
                // SAFETY: `dst` and `src` have the same length (sliced just above) and do not
                // overlap (one is borrowed mutably, the other shared); `MaybeUninit<u8>` has the
                // layout of `u8`, and writing initializes the bytes.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len()) };
            }
            Out::Strings(_) => unreachable!("bytes into a str output"),
        }
    }

    /// `put`, with stores that go around the CPU caches (see `stream`).
    fn put_streamed(&mut self, at: usize, src: &[u8]) {
        match self {
            Out::Fixed(b) => {
                let dst = &mut b[at..at + src.len()];
                // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and the copy writes only
                // initialized bytes, so `dst` stays initialized.
                let dst = unsafe { &mut *(std::ptr::from_mut::<[u8]>(dst) as *mut [MaybeUninit<u8>]) };
                copy_streamed(dst, src);
            }
            Out::Uninit(b) => copy_streamed(&mut b[at..at + src.len()], src),
            Out::Strings(_) => unreachable!("bytes into a str output"),
        }
    }

    /// Zeros `len` bytes from byte `at` (fixed), or empties `len` rows from row `at` (str).
    fn clear(&mut self, at: usize, len: usize) {
        match self {
            Out::Fixed(b) => b[at..at + len].fill(0),
            Out::Uninit(b) => b[at..at + len].fill(MaybeUninit::new(0)),
            Out::Strings(s) => s[at..at + len].iter_mut().for_each(String::clear),
        }
    }
}

/// 0 = not set: the default.
static MAX_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Bounds the threads one gather may use (decoding and copying); 0 restores the default (the
/// machine's cores, at most 8). Data-loader workers set 1: parallelism comes from the workers.
pub fn set_max_threads(n: usize) {
    MAX_THREADS.store(n, Ordering::Relaxed);
}

pub fn max_threads() -> usize {
    // Asking the OS reads cgroup files (tens of µs): once per process is enough.
    static CORES: OnceLock<usize> = OnceLock::new();
    match MAX_THREADS.load(Ordering::Relaxed) {
        0 => *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)),
        n => n,
    }
}

/// Encoded bytes to decode before a thread per chunk pays for its start.
static PARALLEL_DECODE_BYTES: AtomicUsize = AtomicUsize::new(256 << 10);
/// Bytes copied per thread before another thread pays for its start.
static PARALLEL_COPY_BYTES: AtomicUsize = AtomicUsize::new(2 << 20);

/// Sets the work sizes above which a gather decodes and copies on several threads (tests use
/// 1 to take the parallel paths on small data). Results never depend on them.
#[doc(hidden)]
pub fn set_parallel_thresholds(decode_bytes: usize, copy_bytes: usize) {
    PARALLEL_DECODE_BYTES.store(decode_bytes.max(1), Ordering::Relaxed);
    PARALLEL_COPY_BYTES.store(copy_bytes.max(1), Ordering::Relaxed);
}

/// Bytes to copy (or write) before another thread pays for its start.
pub(in crate::reader) fn parallel_copy_bytes() -> usize {
    PARALLEL_COPY_BYTES.load(Ordering::Relaxed)
}

/// What a gather may spend: the threads it may use (decoding, copying), and whether its stores
/// go around the CPU caches (a bulk read of far more than they hold; see `stream`).
#[derive(Clone, Copy)]
pub(in crate::reader) struct Work {
    pub(in crate::reader) threads: usize,
    pub(in crate::reader) stream: bool,
}

/// What a gather copies from: per field its pieces, and the chunks (slots) they point into.
#[derive(Clone, Copy)]
struct Sources<'a> {
    fields: &'a [Field],
    pieces: &'a [&'a [Piece]],
    data: &'a [ChunkBytes<'a>],
    slots: &'a [(Located, Option<usize>)],
    /// Prefetch the pieces' first source rows before copying (scattered rows).
    prefetch: bool,
    /// Store around the CPU caches (a bulk read of far more than they hold; see `stream`).
    stream: bool,
}

impl DatasetView<'_> {
    /// Resolves a column by name across the dataset's recordings for `gather`.
    ///
    /// Errors: `Schema` (no recording has it; it has another dtype, shape or timeline in some
    /// recording), `Invalid` (`next` on a step-timeline column).
    pub fn field(&self, column: &str, next: bool) -> Result<Field> {
        self.field_among(column, next, None)
    }

    /// `field` over the recordings flagged in `among` only (None: every one); the others, and
    /// recordings past its end (opened by a later `refresh`), are left out of the resolution as
    /// if they had no such column (see `among.rs`).
    pub fn field_among(&self, column: &str, next: bool, among: Option<&[bool]>) -> Result<Field> {
        let mut first: Option<&ColumnSpec> = None;
        let mut ids = Vec::with_capacity(self.catalog.recordings.len());
        let mut optional = false;
        for (r, rec) in self.catalog.recordings.iter().enumerate() {
            let spec =
                rec.columns.iter().find(|c| c.name == column).filter(|_| among.is_none_or(|a| a.get(r) == Some(&true)));
            if let Some((_, p)) = spec.and_then(|s| rec.damaged_columns.iter().find(|(id, _)| *id == s.id)) {
                return Err(Error::corrupt(&p.file, p.offset, format!("column '{column}' is unreadable: {}", p.why)));
            }
            if let Some(spec) = spec {
                if let Some(f) = first {
                    if (&f.dtype, &f.shape, f.timeline) != (&spec.dtype, &spec.shape, spec.timeline) {
                        return Err(Error::schema(
                            column,
                            format!(
                                "recordings disagree: {} {:?} on the {:?} timeline in one, {} {:?} on the {:?} timeline in another",
                                f.dtype, f.shape, f.timeline, spec.dtype, spec.shape, spec.timeline
                            ),
                        ));
                    }
                }
                first = first.or(Some(spec));
                optional |= spec.mask.is_some() || spec.mask_of.is_some();
            }
            ids.push(spec.map(|s| s.id));
        }
        let spec = first.ok_or_else(|| self.no_such_column(column))?;
        if next && spec.timeline != Timeline::Obs {
            return Err(Error::Invalid(format!(
                "column '{column}' is on the step timeline: it has no next row (only observation-timeline columns do)"
            )));
        }
        let shape = spec
            .shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| Error::schema(column, "shape too large")))
            .collect::<Result<_>>()?;
        Ok(Field {
            column: column.to_string(),
            next,
            dtype: spec.dtype()?,
            shape,
            timeline: spec.timeline,
            row_bytes: spec.row_bytes(),
            ids,
            optional,
        })
    }

    /// Copies the rows of `windows` (each `length` steps, in the order given) of every field
    /// into `outs` (one per field: `windows.len() * length` rows), writing every row. With
    /// `pad`, a window may run past its episode's last step: those rows are zeros (`""` for
    /// str) and `mask` (if given, `windows.len() * length` entries) says which rows are real.
    /// Without `pad`, such a window is an error.
    ///
    /// Errors: `OutOfRange` (an episode or step), `Invalid` (a window past its episode's end
    /// without `pad`, an output of the wrong size), `Schema` (a recording without a required
    /// column), `Corrupt` (a chunk fails its checksum or does not decode).
    pub fn gather(
        &self,
        fields: &[Field],
        windows: &[Window],
        length: usize,
        pad: bool,
        outs: &mut [Out<'_>],
        mask: Option<&mut [bool]>,
    ) -> Result<()> {
        if length == 0 {
            return Err(Error::Invalid("a window must hold at least one step".into()));
        }
        let rows_out = windows
            .len()
            .checked_mul(length)
            .ok_or_else(|| Error::Invalid(format!("{} windows of {length} steps are too many", windows.len())))?;
        check_outputs(fields, outs, rows_out)?;
        let items = self.items(windows, length as u64, pad, mask)?;
        self.gather_items(fields, &items, rows_out, outs, true, Work { threads: max_threads(), stream: false })
    }

    /// The gather proper, over items sorted by (recording, lane, row) that fill `rows_out`
    /// output rows (checked against `outs`). `scattered`: rows here and there (a batch of
    /// windows): a chunk not in the cache is decoded only as far as its last row wanted (where
    /// its codec allows), and source rows are prefetched; runs read whole chunks in order.
    pub(in crate::reader) fn gather_items(
        &self,
        fields: &[Field],
        items: &[Item],
        rows_out: usize,
        outs: &mut [Out<'_>],
        scattered: bool,
        work: Work,
    ) -> Result<()> {
        // Plan: slots (distinct chunks, shared between fields) and pieces per field.
        // The map is sized for the most slots a batch can have (a chunk per piece), so it never
        // rehashes.
        let most = (items.len() * fields.len()).min(1 << 16);
        let mut slots = Slots { list: Vec::with_capacity(fields.len() + 8), of: IntMap::default(), most };
        let mut all: Vec<Piece> = Vec::with_capacity(items.len() * fields.len());
        let mut ends = Vec::with_capacity(fields.len());
        // Step-timeline rows of consecutive runs of a lane (file order) meet: one item each.
        let joined = (!scattered && fields.iter().any(|f| f.timeline == Timeline::Step)).then(|| join_steps(items));
        for (field, out) in fields.iter().zip(outs.iter_mut()) {
            let field_from = all.len();
            let items = match (&joined, field.timeline) {
                (Some(joined), Timeline::Step) => joined.as_slice(),
                _ => items,
            };
            let mut start = 0;
            while start < items.len() {
                let (recording, lane) = (items[start].recording, items[start].lane);
                let end = start + items[start..].partition_point(|i| (i.recording, i.lane) == (recording, lane));
                match self.field_column(field, recording)? {
                    Some(column) => {
                        let list = self.chunk_list_ends(recording, lane, column);
                        let group = &items[start..end];
                        // Scattered rows of small chunks: copied from the run they are joined
                        // into, here and now (no piece, no slot).
                        let run = match scattered {
                            true => self.joined_run(field, (recording, lane, column), list, group),
                            false => None,
                        };
                        let joined = run.as_deref().map(|run| (run, &mut *out));
                        plan_run(field, list, group, &mut slots, (&mut all, field_from), joined);
                    }
                    None => all.extend(items[start..end].iter().map(|item| Piece {
                        slot: ZEROS,
                        chunk_row: 0,
                        rows: item.rows as usize + item.pad,
                        out_row: item.out_row,
                    })),
                }
                start = end;
            }
            ends.push(all.len());
        }
        let slots = slots.list;
        let pieces: Vec<&[Piece]> = ends
            .iter()
            .scan(0, |start, &end| {
                let mine = &all[*start..end];
                *start = end;
                Some(mine)
            })
            .collect();

        let need = needed_bytes(fields, &pieces, &slots, scattered);
        // Raw chunks read from the map hold no memory of their own.
        let held: Vec<usize> =
            (slots.iter().zip(&need)).map(|((loc, _), &n)| if self.reads_in_place(loc) { 0 } else { n }).collect();
        let rounds = hold_rounds(&held, GATHER_HOLD_BYTES.load(Ordering::Relaxed));
        let Work { threads, stream } = work;
        if rounds.len() <= 1 {
            let data = self.fetch(&slots, &need, threads)?;
            let sources = Sources { fields, pieces: &pieces, data: &data, slots: &slots, prefetch: scattered, stream };
            return self.copy_pieces(&sources, outs, rows_out, threads);
        }
        // More decoded bytes than a gather may hold at once (a huge batch of pixel windows):
        // the slots in runs, each run's chunks decoded, copied from and let go before the next.
        for (round, slot_range) in rounds.iter().enumerate() {
            let fetched = self.fetch(&slots[slot_range.clone()], &need[slot_range.clone()], threads)?;
            let mut data: Vec<ChunkBytes<'_>> = (0..slots.len()).map(|_| ChunkBytes::Mapped(&[])).collect();
            for (at, bytes) in slot_range.clone().zip(fetched) {
                data[at] = bytes;
            }
            let mine = |p: &&Piece| match p.slot {
                ZEROS => round == 0,
                slot => slot_range.contains(&(slot as usize)),
            };
            let kept: Vec<Vec<Piece>> = pieces.iter().map(|ps| ps.iter().filter(mine).copied().collect()).collect();
            let kept: Vec<&[Piece]> = kept.iter().map(Vec::as_slice).collect();
            let sources = Sources { fields, pieces: &kept, data: &data, slots: &slots, prefetch: scattered, stream };
            self.copy_pieces(&sources, outs, rows_out, threads)?;
        }
        Ok(())
    }

    /// Checks the windows and lists them sorted by (recording, lane, row); fills the mask.
    fn items(&self, windows: &[Window], length: u64, pad: bool, mut mask: Option<&mut [bool]>) -> Result<Vec<Item>> {
        if let Some(m) = mask.as_deref() {
            if m.len() as u64 != windows.len() as u64 * length {
                return Err(Error::Invalid(format!("mask of {} entries for {} rows", m.len(), windows.len())));
            }
        }
        let mut items = Vec::with_capacity(windows.len());
        for w in windows {
            if let Some(e) = self.catalog.locs.get(w.episode) {
                prefetch((e as *const crate::reader::catalog::EpisodeLoc).cast());
            }
        }
        for (out, w) in windows.iter().enumerate() {
            let e = self.catalog.loc(w.episode)?;
            let t = e.length;
            if w.start >= t {
                return Err(Error::OutOfRange(format!(
                    "step {} is out of range: episode {} has {t} steps",
                    w.start, w.episode
                )));
            }
            let rows = length.min(t - w.start);
            if rows < length && !pad {
                return Err(Error::Invalid(format!(
                    "a window of {length} steps from step {} runs past the end of episode {} ({t} steps); pass pad=True to pad it",
                    w.start, w.episode
                )));
            }
            if let Some(m) = mask.as_deref_mut() {
                let at = out * length as usize;
                m[at..at + length as usize].iter_mut().enumerate().for_each(|(j, v)| *v = (j as u64) < rows);
            }
            // Row numbers were checked not to overflow when the episode was listed.
            items.push(Item {
                recording: e.recording as usize,
                lane: e.lane,
                obs_row: e.obs_first_row + w.start,
                step_row: e.step_first_row + w.start,
                rows,
                pad: (length - rows) as usize,
                out_row: out * length as usize,
            });
        }
        sort_items(&mut items);
        Ok(items)
    }

    /// The field's column in a recording; `None` where it reads as zeros.
    fn field_column(&self, field: &Field, recording: usize) -> Result<Option<ColumnId>> {
        if let Some(id) = field.ids.get(recording).copied().flatten() {
            return Ok(Some(id));
        }
        let rec = self.recording(recording)?;
        if let Some(p) = &rec.schema_damage {
            let why = format!("column '{}' is unreadable: {}", field.column, p.why);
            return Err(Error::corrupt(&p.file, p.offset, why));
        }
        if field.optional {
            return Ok(None);
        }
        Err(Error::schema(&field.column, format!("recording {recording} of this dataset has no such column")))
    }

    /// The joined run (see `store::decoded::joined`) of a field's column in one (recording, lane), grown
    /// first to the rows `items` need where the chunks after it can be joined; `None` for one
    /// item, columns of large or str rows, and lists whose first chunks are not joinable.
    fn joined_run(
        &self,
        field: &Field,
        key: ListKey,
        (list, ends): (&[Located], &[u64]),
        items: &[Item],
    ) -> Option<Arc<JoinedRun>> {
        // One row of a lane (a single step) costs less from its chunk than the run's lookup.
        if items.len() < 2 {
            return None;
        }
        let rb = field.row_bytes.filter(|&rb| rb <= JOIN_ROW_BYTES)?;
        let end = items.iter().map(|i| field_row(field, i) + i.rows).max()?;
        let cache = &self.store.cache;
        cache.joined.get(key, rb, end, cache.joined_bound(), |start, budget, run| {
            // Rows of evicted shards are sampled no more (and may be let go of).
            let live = |loc: &Located| !self.store.shards[loc.shard].evicted;
            let joined = &list[to_join(list, ends, start, rb, budget, live)];
            let mut row = start.or_else(|| joined.first().map(Located::first_row)).unwrap_or(0);
            for loc in joined {
                let n = loc.chunk.n_rows as usize * rb;
                if n == 0 {
                    continue;
                }
                // Checked and decoded as any read of it; a chunk that fails ends the run
                // (the read of its rows then fails as it would have).
                let Ok(data) = self.fetch(&[(*loc, Some(rb))], &[n], 1) else { break };
                let skip = (row - loc.first_row()) as usize * rb; // rows the run holds already
                let Some(rows) = data[0].contiguous().and_then(|b| b.get(skip..n)) else { break };
                run.push(loc.shard, row, rows);
                row = loc.end_row();
            }
        })
    }

    /// Whether a chunk is read where it lies in the memory map (raw, mapped): no decoding.
    fn reads_in_place(&self, loc: &Located) -> bool {
        loc.chunk.codec == 0 && self.store.shards[loc.shard].source.is_mapped()
    }

    /// Each slot's decoded bytes: mapped, cached, or decoded now (on up to `threads` threads
    /// when it pays).
    fn fetch<'d>(
        &'d self,
        slots: &[(Located, Option<usize>)],
        need: &[usize],
        threads: usize,
    ) -> Result<Vec<ChunkBytes<'d>>> {
        // Raw chunks in a map are done at once; the others come from the cache, or are listed
        // for decoding (without a map, raw chunks too: "decoding" them is reading them).
        let mapped = |loc: &Located| self.reads_in_place(loc);
        self.prefetch_remote(slots.iter().map(|(loc, _)| loc), true)?;
        let mut data: Vec<Option<ChunkBytes<'d>>> = Vec::with_capacity(slots.len());
        for (loc, _) in slots {
            self.ensure_verified(loc)?;
            data.push(match mapped(loc) {
                true => match self.stored_unchecked(loc)? {
                    Cow::Borrowed(stored) => Some(ChunkBytes::Mapped(stored)),
                    Cow::Owned(_) => None,
                },
                false => None,
            });
        }
        let mut wanted: Vec<usize> = Vec::new();
        for (i, (loc, row_bytes)) in slots.iter().enumerate() {
            if data[i].is_none() && loc.chunk.stored_len == 0 {
                // Empty chunks share their data offset with the next chunk: never cached.
                data[i] =
                    Some(ChunkBytes::Decoded(Arc::new(Decoded::Rows(self.decode_stored(loc, &[], *row_bytes)?))));
            }
        }
        if data.iter().any(Option::is_none) {
            self.store.cache.with_gets(|get| {
                for (i, (loc, _)) in slots.iter().enumerate() {
                    if data[i].is_some() {
                        continue;
                    }
                    // A cached prefix too short for these rows is decoded again, further.
                    match get((loc.shard, loc.chunk.data_offset)).filter(|d| d.rows_len(slots[i].1) >= need[i]) {
                        Some(d) => data[i] = Some(d),
                        None => wanted.push(i),
                    }
                }
            });
        }
        let mut missing: Vec<(usize, Cow<'d, [u8]>)> = Vec::with_capacity(wanted.len());
        for i in wanted {
            missing.push((i, self.stored_unchecked(&slots[i].0)?));
        }
        let decode = |(i, stored): &(usize, Cow<'d, [u8]>)| -> Fetched {
            let (loc, row_bytes) = &slots[*i];
            let key = (loc.shard, loc.chunk.data_offset);
            // A shared slot holds whole chunks, for every process's rows.
            let need = if self.store.cache.keeps_whole(key) { loc.chunk.raw_len as usize } else { need[*i] };
            self.store.cache.fill(key, || self.decode_chunk(loc, stored, *row_bytes, need))
        };
        let bytes: usize = missing.iter().map(|&(i, _)| need[i]).sum();
        let threads = threads.min(missing.len());
        let decoded: Vec<Fetched> = if threads > 1 && bytes >= PARALLEL_DECODE_BYTES.load(Ordering::Relaxed) {
            // Chunks dealt round-robin; each thread returns its own in order.
            let per_thread: Vec<Vec<Fetched>> = std::thread::scope(|s| {
                let handles: Vec<_> = (1..threads)
                    .map(|k| {
                        let missing = &missing;
                        s.spawn(move || missing.iter().skip(k).step_by(threads).map(decode).collect::<Vec<_>>())
                    })
                    .collect();
                let mut all = vec![missing.iter().step_by(threads).map(decode).collect::<Vec<_>>()];
                all.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))));
                all
            });
            let mut iters: Vec<_> = per_thread.into_iter().map(Vec::into_iter).collect();
            (0..missing.len()).map(|j| iters[j % threads].next().expect("one result per chunk")).collect()
        } else {
            missing.iter().map(decode).collect()
        };
        for ((i, _), result) in missing.iter().zip(decoded) {
            data[*i] = Some(ChunkBytes::Decoded(result?));
        }
        Ok(data.into_iter().map(|d| d.expect("every slot filled")).collect())
    }
}

/// The distinct chunks (slots) a gather reads, each with the row size it is read at, shared
/// between fields.
struct Slots {
    list: Vec<(Located, Option<usize>)>,
    /// Slot by (shard, data offset), filled once the list gets long.
    of: IntMap<(usize, u64), u32>,
    /// The most slots the gather can have (what `of` is sized for).
    most: usize,
}

impl Slots {
    /// The slot of a chunk, added if new. Few slots (one transition, a small batch): a scan, no
    /// hashing; many: a map, filled once the scan gets long.
    fn index(&mut self, loc: &Located, row_bytes: Option<usize>) -> u32 {
        const SCAN: usize = 16;
        let key = (loc.shard, loc.chunk.data_offset);
        if self.list.len() <= SCAN {
            if let Some(i) = self.list.iter().position(|(l, _)| (l.shard, l.chunk.data_offset) == key) {
                return i as u32;
            }
        } else {
            if self.of.is_empty() {
                self.of.reserve(self.most);
                let keys = self.list.iter().enumerate().map(|(i, (l, _))| ((l.shard, l.chunk.data_offset), i as u32));
                self.of.extend(keys);
            }
            if let Some(&i) = self.of.get(&key) {
                return i;
            }
            self.of.insert(key, self.list.len() as u32);
        }
        self.list.push((*loc, row_bytes));
        (self.list.len() - 1) as u32
    }
}

/// Pieces of one field over the items of one (recording, lane), sorted by row; an item's rows
/// that `joined`'s run holds are copied from it into its output instead.
fn plan_run(
    field: &Field,
    (list, ends): (&[Located], &[u64]),
    items: &[Item],
    slots: &mut Slots,
    (pieces, field_from): (&mut Vec<Piece>, usize),
    joined: Option<(&JoinedRun, &mut Out<'_>)>,
) {
    // The rows the run holds, found once (its end costs a division): none without a run.
    let (run_first, run_end) = joined.as_ref().map_or((1, 0), |(run, _)| (run.first_row, run.end_row()));
    let in_run = |first: u64, end: u64| run_first <= first && end <= run_end;
    if let Some((run, out)) = joined {
        // Every row copied and no padding (a batch of transitions, as a rule): no piece.
        if copy_joined(field, run, items, out) == items.len() && items.iter().all(|i| i.pad == 0) {
            return;
        }
    }
    let mut c = 0usize;
    let mut last: Option<(usize, u32)> = None;
    for item in items {
        let first = field_row(field, item);
        let end = first + item.rows;
        // Rows the run holds are copied already.
        let mut row = if in_run(first, end) { end } else { first };
        while row < end {
            // The chunk holding `row`: the cursor's, else the next one (rows close
            // together), else a search from the cursor (rows jumped ahead, or went back:
            // windows overlap).
            let holds = |c: usize| list.get(c).is_some_and(|l| l.first_row() <= row && row < l.end_row());
            if !holds(c) {
                c = if holds(c + 1) { c + 1 } else { seek(ends, c, row) };
            }
            let Some(loc) = list.get(c).filter(|l| l.first_row() <= row) else {
                // No chunk holds these rows (a column added later): zeros.
                let to = list.get(c).map_or(end, |l| l.first_row().min(end));
                let out_row = item.out_row + (row - first) as usize;
                push_piece(pieces, field_from, Piece { slot: ZEROS, chunk_row: 0, rows: (to - row) as usize, out_row });
                row = to;
                continue;
            };
            let to = loc.end_row().min(end);
            let slot = match last {
                Some((lc, slot)) if lc == c => slot,
                _ => {
                    let slot = slots.index(loc, field.row_bytes);
                    last = Some((c, slot));
                    slot
                }
            };
            push_piece(
                pieces,
                field_from,
                Piece {
                    slot,
                    chunk_row: (row - loc.first_row()) as usize,
                    rows: (to - row) as usize,
                    out_row: item.out_row + (row - first) as usize,
                },
            );
            row = to;
        }
        if item.pad > 0 {
            // Padding past the episode's end.
            let out_row = item.out_row + item.rows as usize;
            pieces.push(Piece { slot: ZEROS, chunk_row: 0, rows: item.pad, out_row });
        }
    }
}

/// Copies into `out` the rows of `items` that `run` holds, each from its offset in the run,
/// their loads issued together first so that the misses of random rows overlap. One match on
/// the row size for the lane's items, not one per item: a row is then one load and store.
/// Returns how many items it copied.
fn copy_joined(field: &Field, run: &JoinedRun, items: &[Item], out: &mut Out<'_>) -> usize {
    let (first_row, end_row, rb) = (run.first_row, run.end_row(), run.row_bytes);
    // The byte offset in the run of an item's rows, where it holds them.
    let offset = |item: &Item| {
        let first = field_row(field, item);
        (first_row <= first && first + item.rows <= end_row).then(|| (first - first_row) as usize * rb)
    };
    let mut held = 0;
    for item in items {
        if let Some(from) = offset(item) {
            prefetch(run.bytes[from..].as_ptr());
            held += 1;
        }
    }
    /// Rows of `N` bytes (items of one row: a transition).
    fn rows<const N: usize>(
        dst: &mut [MaybeUninit<u8>],
        src: &[u8],
        items: &[Item],
        offset: impl Fn(&Item) -> Option<usize>,
    ) {
        for item in items {
            let Some(from) = offset(item) else { continue };
            let (to, len) = (item.out_row * N, item.rows as usize * N);
            if len == N {
                let src: &[u8; N] = src[from..from + N].try_into().expect("N bytes");
                let dst: &mut [MaybeUninit<u8>; N] = (&mut dst[to..to + N]).try_into().expect("N bytes");
                *dst = src.map(MaybeUninit::new);
            } else {
                dst[to..to + len].iter_mut().zip(&src[from..from + len]).for_each(|(d, s)| _ = d.write(*s));
            }
        }
    }
    let bytes = &run.bytes[..];
    match (out, rb) {
        (Out::Uninit(dst), 1) => rows::<1>(dst, bytes, items, offset),
        (Out::Uninit(dst), 2) => rows::<2>(dst, bytes, items, offset),
        (Out::Uninit(dst), 4) => rows::<4>(dst, bytes, items, offset),
        (Out::Uninit(dst), 8) => rows::<8>(dst, bytes, items, offset),
        (Out::Uninit(dst), 16) => rows::<16>(dst, bytes, items, offset),
        (out, _) => {
            for item in items {
                if let Some(from) = offset(item) {
                    out.put(item.out_row * rb, &bytes[from..from + item.rows as usize * rb]);
                }
            }
        }
    }
    held
}

/// The first row of an item that a field reads.
fn field_row(field: &Field, item: &Item) -> u64 {
    match field.timeline {
        Timeline::Obs => item.obs_row + field.next as u64,
        Timeline::Step => item.step_row,
    }
}

/// The first of `ends` (ascending) past `row`, searched from `from`: a batch's rows, sorted,
/// mostly move a few chunks ahead at a time, so the search gallops forward from there (a
/// binary search over the whole list costs as many dependent steps as it has levels).
fn seek(ends: &[u64], from: usize, row: u64) -> usize {
    if from >= ends.len() || ends[from] > row {
        return ends[..from.min(ends.len())].partition_point(|&e| e <= row);
    }
    // ends[lo] <= row: the answer lies past lo.
    let (mut lo, mut step) = (from, 1);
    while lo + step < ends.len() && ends[lo + step] <= row {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(ends.len());
    lo + 1 + ends[lo + 1..hi].partition_point(|&e| e <= row)
}

/// The most decoded bytes one gather holds at once (beyond the cache's own bound): a batch
/// whose chunks need more is fetched and copied in runs of slots (see `hold_rounds`).
static GATHER_HOLD_BYTES: AtomicUsize = AtomicUsize::new(512 << 20);

/// Sets the decoded bytes one gather may hold at once (tests use small values to take the path
/// of several runs). Results never depend on it.
#[doc(hidden)]
pub fn set_gather_hold_bytes(bytes: usize) {
    GATHER_HOLD_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// Consecutive ranges of slots whose needed bytes add up to at most `bound` each (a slot that
/// alone needs more is a range of its own): one range when everything fits.
fn hold_rounds(need: &[usize], bound: usize) -> Vec<std::ops::Range<usize>> {
    let mut rounds = Vec::new();
    let (mut start, mut held) = (0, 0usize);
    for (i, &n) in need.iter().enumerate() {
        if i > start && n > 0 && held.saturating_add(n) > bound {
            rounds.push(start..i);
            (start, held) = (i, 0);
        }
        held = held.saturating_add(n);
    }
    if start < need.len() || rounds.is_empty() {
        rounds.push(start..need.len());
    }
    rounds
}

/// Per slot, the decoded bytes its pieces read: up to the end of the last row wanted, or (no
/// `scattered` rows, a str field, a prefix of most of the chunk) the whole chunk.
fn needed_bytes(
    fields: &[Field],
    pieces: &[&[Piece]],
    slots: &[(Located, Option<usize>)],
    scattered: bool,
) -> Vec<usize> {
    let whole = |slot: &(Located, Option<usize>)| slot.0.chunk.raw_len as usize;
    if !scattered {
        return slots.iter().map(whole).collect();
    }
    let mut need = vec![0usize; slots.len()];
    for (field, pieces) in fields.iter().zip(pieces) {
        for p in pieces.iter().filter(|p| p.slot != ZEROS) {
            let i = p.slot as usize;
            need[i] = need[i].max(match field.row_bytes {
                Some(rb) => (p.chunk_row + p.rows) * rb,
                None => whole(&slots[i]),
            });
        }
    }
    // Most of a chunk: decode it whole, once, rather than a prefix now and all of it later.
    need.iter_mut().zip(slots).for_each(|(n, slot)| {
        if *n > whole(slot) / 4 * 3 {
            *n = whole(slot);
        }
    });
    need
}

/// The parts of `pieces` that fall in output rows `from..to`.
fn clip(pieces: &[Piece], from: usize, to: usize) -> impl Iterator<Item = Piece> + '_ {
    pieces.iter().filter_map(move |p| {
        let (lo, hi) = (p.out_row.max(from), (p.out_row + p.rows).min(to));
        (lo < hi).then(|| Piece { chunk_row: p.chunk_row + (lo - p.out_row), rows: hi - lo, out_row: lo, ..*p })
    })
}

pub(in crate::reader) fn check_outputs(fields: &[Field], outs: &[Out<'_>], rows: usize) -> Result<()> {
    if fields.len() != outs.len() {
        return Err(Error::Invalid(format!("{} outputs for {} fields", outs.len(), fields.len())));
    }
    for (field, out) in fields.iter().zip(outs) {
        let ok = match (field.row_bytes, out) {
            (Some(rb), Out::Fixed(_) | Out::Uninit(_)) => rows.checked_mul(rb) == Some(out.len()),
            (None, Out::Strings(list)) => list.len() == rows,
            _ => false,
        };
        if !ok {
            return Err(Error::Invalid(format!("the output of column '{}' does not hold {rows} rows", field.column)));
        }
    }
    Ok(())
}

impl DatasetView<'_> {
    fn slot_corrupt(&self, slot: &(Located, Option<usize>), why: &str) -> Error {
        let c = &slot.0.chunk;
        let why = format!("chunk of column {} lane {} (rows from {}): {why}", c.column, c.lane, c.first_row);
        Error::corrupt(&self.store.shards[slot.0.shard].path, c.data_offset, why)
    }

    /// Copies every piece into its output, on up to `threads` threads when there is much to
    /// copy.
    fn copy_pieces(&self, src: &Sources<'_>, outs: &mut [Out<'_>], rows_out: usize, threads: usize) -> Result<()> {
        let Sources { fields, pieces, .. } = *src;
        let bytes: usize = fields
            .iter()
            .zip(pieces)
            .map(|(f, p)| f.row_bytes.unwrap_or(0) * p.iter().map(|p| p.rows).sum::<usize>())
            .sum();
        let threads = threads.min(bytes / parallel_copy_bytes() + 1).min(rows_out.max(1));
        if threads <= 1 {
            return self.copy_range(src, outs, 0, usize::MAX);
        }
        // Thread k fills output rows [k * n / threads, (k + 1) * n / threads): each gets its own
        // disjoint part of every output buffer, and copies the parts of pieces that fall in it.
        let bounds: Vec<usize> =
            (0..=threads).map(|k| if k == threads { rows_out } else { rows_out / threads * k }).collect();
        let mut parts: Vec<Vec<Out<'_>>> = (0..threads).map(|_| Vec::with_capacity(outs.len())).collect();
        for (field, out) in fields.iter().zip(outs.iter_mut()) {
            let rb = field.row_bytes.unwrap_or(1);
            let mut rest = out.reborrow();
            for (k, part) in parts.iter_mut().enumerate() {
                let (head, tail) = rest.split_first((bounds[k + 1] - bounds[k]) * rb);
                part.push(head);
                rest = tail;
            }
        }
        std::thread::scope(|s| {
            let mut parts = parts.into_iter().enumerate();
            let (_, mut mine) = parts.next().expect("at least one part");
            let handles: Vec<_> = parts
                .map(|(k, mut part)| {
                    let bounds = &bounds;
                    s.spawn(move || self.copy_range(src, &mut part, bounds[k], bounds[k + 1]))
                })
                .collect();
            let first = self.copy_range(src, &mut mine, bounds[0], bounds[1]);
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .fold(first, Result::and)
        })
    }

    /// Copies the parts of pieces whose output rows lie in `from..to`; `outs` start at output
    /// row `from`. Streamed stores are fenced before it returns, whatever happened.
    fn copy_range(&self, src: &Sources<'_>, outs: &mut [Out<'_>], from: usize, to: usize) -> Result<()> {
        let copied = self.copy_range_unfenced(src, outs, from, to);
        if src.stream {
            fence();
        }
        copied
    }

    fn copy_range_unfenced(&self, src: &Sources<'_>, outs: &mut [Out<'_>], from: usize, to: usize) -> Result<()> {
        let Sources { fields, pieces, data, slots, prefetch: scattered, stream } = *src;
        let clipped = |pieces| clip(pieces, from, to);
        for (field, pieces) in fields.iter().zip(pieces).filter(|_| scattered) {
            if let Some(rb) = field.row_bytes {
                for p in clipped(pieces).filter(|p| p.slot != ZEROS) {
                    if let Some(src) = data[p.slot as usize].row_start(rb, p.chunk_row) {
                        prefetch(src);
                    }
                }
            }
        }
        // The fields of one column one after the other (observations, then next observations):
        // the second reads the chunks the first just read, from the CPU caches.
        let mut order: Vec<usize> = (0..fields.len()).collect();
        order.sort_by(|&a, &b| fields[a].column.cmp(&fields[b].column));
        for i in order {
            let (field, pieces, out) = (&fields[i], pieces[i], &mut outs[i]);
            let mut rows = Vec::new();
            for p in clipped(pieces) {
                let at = p.out_row - from;
                match (field.row_bytes, p.slot) {
                    (Some(rb), ZEROS) => out.clear(at * rb, p.rows * rb),
                    (None, ZEROS) => out.clear(at, p.rows),
                    (Some(rb), slot) => {
                        let mut to = at * rb;
                        let whole = data[slot as usize].rows(rb, p.chunk_row, p.rows, |src| {
                            match stream && streams_rows(rb) {
                                true => out.put_streamed(to, src),
                                false => out.put(to, src),
                            }
                            to += src.len();
                        });
                        if !whole {
                            return Err(self.slot_corrupt(&slots[slot as usize], "shorter than its rows"));
                        }
                    }
                    (None, slot) => {
                        let slot_info = &slots[slot as usize];
                        rows.clear();
                        let (a, b) = (p.chunk_row, p.chunk_row + p.rows);
                        let text = data[slot as usize].contiguous().unwrap_or_default();
                        chunk_strings(text, slot_info.0.chunk.n_rows, a, b, &mut rows)
                            .map_err(|why| self.slot_corrupt(slot_info, &format!("str chunk: {why}")))?;
                        let Out::Strings(list) = out else { unreachable!("str rows into a byte output") };
                        for (j, s) in rows.drain(..).enumerate() {
                            list[at + j] = s;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// A chunk's decoded bytes as `fetch` gets them: from the cache, or decoded and kept there.
type Fetched = Result<Arc<Decoded>>;

#[cfg(test)]
mod tests {
    use super::{hold_rounds, seek};

    #[test]
    fn seek_finds_what_a_binary_search_finds_from_any_cursor() {
        for ends in [vec![], vec![5], vec![2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22], vec![1, 1, 3, 3, 3, 9]] {
            for from in 0..=ends.len() + 1 {
                for row in 0..25 {
                    let want = ends.partition_point(|&e| e <= row);
                    assert_eq!(seek(&ends, from, row), want, "ends {ends:?} from {from} row {row}");
                }
            }
        }
    }

    #[test]
    fn hold_rounds_stay_within_the_bound_and_cover_every_slot() {
        assert_eq!(hold_rounds(&[], 10), vec![0..0]);
        assert_eq!(hold_rounds(&[3, 3, 3], 10), vec![0..3]);
        assert_eq!(hold_rounds(&[4, 4, 4, 4], 8), vec![0..2, 2..4]);
        // A slot larger than the bound is a run of its own; zeros (mapped chunks) join any run.
        assert_eq!(hold_rounds(&[2, 20, 0, 2, 7], 8), vec![0..1, 1..3, 3..4, 4..5]);
        assert_eq!(hold_rounds(&[5, 5, 5], 1), vec![0..1, 1..2, 2..3]);
    }
}
