//! Per-node incremental counts, kept across scheduling cycles.
//!
//! Plugins that count matching pods per topology domain over the whole cluster
//! (PodTopologySpread, InterPodAffinity) would walk every node and its pods on every
//! cycle. At 5,000 nodes that costs most of a millisecond, nearly all of it waiting on
//! memory (label maps and pods are scattered on the heap). Yet consecutive pods usually
//! belong to one workload and count the same way, and between two cycles only a few nodes
//! change (the one the last pod landed on). So the counts are kept per [`CountKey`]
//! (everything a node's contribution depends on besides the node), with each node's
//! contribution, and refreshed only for the nodes whose `Arc<NodeInfo>` is not the one
//! counted.
//!
//! Why comparing pointers is enough: a snapshot never changes a `NodeInfo` it shares with
//! someone else; it copies it (`Arc::make_mut`). The cache holds a reference to every node
//! it counted, so a changed node always gets a new allocation, and the counted one cannot
//! be freed and its address reused while the cache holds it. The price: a snapshot that
//! would have updated a node in place copies it instead, as it does anyway when the
//! scheduler cache shares its nodes.
//!
//! Memory: a [`CountCache`] keeps at most [`CAPACITY`] keys (least recently used dropped
//! first). Per key: one `Arc` per node (8 bytes), 16 bytes per node and column for its
//! contribution, and per column its domain values (one `String` per distinct value, twice)
//! with three numbers each: at 5,000 nodes and one hostname column, about 0.6 MB per key.
//! Besides, a key keeps alive the versions of the nodes changed since it was last used
//! (the snapshot has replaced them) until its next use or eviction: at most one stale
//! `NodeInfo` per node and key.
//!
//! The result is exactly what counting afresh gives; the plugins' tests compare the two.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use framework::{NodeInfo, Parallelizer};

/// How many counting keys are kept: a few workloads scheduled interleaved all hit.
pub const CAPACITY: usize = 4;

/// A slot of a node that is no domain's member for that column.
const NO_DOMAIN: u32 = u32::MAX;

/// One node's part in one column: the id of its topology value (or [`NO_DOMAIN`]),
/// whether it counts for that domain, and its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    id: u32,
    counts: bool,
    count: i64,
}

impl Slot {
    const NONE: Slot = Slot {
        id: NO_DOMAIN,
        counts: false,
        count: 0,
    };
}

/// What a node gives one column, as [`CountKey::contribute`] says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contribution<'n> {
    /// The node is in no domain of the column and is not looked up by position.
    None,
    /// The node counts `count` for domain `value` (which exists from then on, whatever
    /// the count).
    Counts(&'n str, i64),
    /// The node has topology value `value` but counts for no domain: its value gets an id
    /// so that [`NodeDomains`] finds the domain's count by the node's position, and the
    /// domain does not exist for it.
    Lookup(&'n str),
}

/// rustc's FxHash: topology values are short strings from node labels, which cluster
/// administrators control, so a fast hash beats SipHash's flooding resistance here.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0_u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0_u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// Everything a node's contribution to the counts depends on, besides the node: two keys
/// that compare equal must count every node the same way.
pub trait CountKey: Clone + PartialEq + Send + Sync {
    /// How many columns (count tables) a node contributes to.
    fn columns(&self) -> usize;

    /// Calls `f` exactly [`columns`](Self::columns) times, in column order, with what the
    /// node gives that column.
    fn contribute<'n>(&self, node: &'n NodeInfo, f: impl FnMut(Contribution<'n>));
}

/// The domains of one column: topology value ↔ id, and per id the nodes counting for
/// it and their matching pods. A domain exists while some node counts for it. Cloning is
/// cheap: the value tables are shared, the per-id numbers are flat vectors.
#[derive(Debug, Clone, Default)]
pub struct DomainTable {
    index: Arc<HashMap<String, u32, FxBuildHasher>>,
    values: Arc<Vec<String>>,
    nodes: Vec<u32>,
    counts: Vec<i64>,
    /// Ids with at least one node.
    present: usize,
}

impl DomainTable {
    /// The id of `value`, if it was ever a domain.
    pub fn id(&self, value: &str) -> Option<u32> {
        self.index.get(value).copied()
    }

    /// The matching pods of domain `id` (0 for an unknown id).
    pub fn count(&self, id: u32) -> i64 {
        self.counts.get(id as usize).copied().unwrap_or(0)
    }

    /// How many domains exist.
    pub fn present(&self) -> usize {
        self.present
    }

    /// How many ids there are (present or not).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no ids at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The topology value of `id`.
    pub fn value(&self, id: u32) -> &str {
        self.values.get(id as usize).map_or("", String::as_str)
    }

    /// The present domains with their counts, by id.
    pub fn domains(&self) -> impl Iterator<Item = (u32, i64)> + '_ {
        self.nodes
            .iter()
            .zip(&self.counts)
            .enumerate()
            .filter(|(_, (&n, _))| n > 0)
            .map(|(id, (_, &c))| (id as u32, c))
    }

    /// Adds `delta` matching pods to domain `id`, without changing its nodes.
    pub fn add_count(&mut self, id: u32, delta: i64) {
        if let Some(c) = self.counts.get_mut(id as usize) {
            *c += delta;
        }
    }

    /// The domains with their counts, sorted by value.
    #[cfg(test)]
    pub fn sorted(&self) -> Vec<(String, i64)> {
        let mut all: Vec<(String, i64)> = self
            .domains()
            .map(|(id, n)| (self.value(id).to_string(), n))
            .collect();
        all.sort();
        all
    }

    /// A table with one node per domain and the given counts.
    #[cfg(test)]
    pub fn from_sums(sums: &[(&str, i64)]) -> Self {
        let mut table = DomainTable::default();
        for &(value, count) in sums {
            let id = table.intern(value);
            table.apply(id, count, 1);
        }
        table
    }

    /// Makes domain `id` exist even without nodes (what upstream's map does for a value it
    /// is given a count for).
    pub fn make_present(&mut self, id: u32) {
        if let Some(n) = self.nodes.get_mut(id as usize) {
            if *n == 0 {
                *n = 1;
                self.present += 1;
            }
        }
    }

    fn intern(&mut self, value: &str) -> u32 {
        if let Some(id) = self.id(value) {
            return id;
        }
        let id = u32::try_from(self.values.len()).unwrap_or(NO_DOMAIN - 1);
        Arc::make_mut(&mut self.index).insert(value.to_string(), id);
        Arc::make_mut(&mut self.values).push(value.to_string());
        self.nodes.push(0);
        self.counts.push(0);
        id
    }

    /// Adds (`sign` 1) or removes (−1) one node's contribution to domain `id`.
    fn apply(&mut self, id: u32, count: i64, sign: i64) {
        let i = id as usize;
        let (Some(nodes), Some(counts)) = (self.nodes.get_mut(i), self.counts.get_mut(i)) else {
            return;
        };
        let before = *nodes;
        *nodes = if sign > 0 {
            before + 1
        } else {
            before.saturating_sub(1)
        };
        *counts += sign * count;
        match (before, *nodes) {
            (0, n) if n > 0 => self.present += 1,
            (b, 0) if b > 0 => self.present -= 1,
            _ => {}
        }
    }
}

/// The counts for one key, with each node's contribution.
#[derive(Debug)]
struct Entry<K> {
    key: K,
    /// The nodes counted, in snapshot order; held so that their addresses stay theirs.
    nodes: Vec<Arc<NodeInfo>>,
    /// Per node, per column. Shared with the [`NodeDomains`] handed out, and copied on
    /// refresh only while one of those is still held.
    slots: Arc<Vec<Slot>>,
    tables: Vec<DomainTable>,
    /// Per column, how many nodes' slots name each id (counting or looked up), and how
    /// many ids some slot names: ids no slot names any more are what makes a table stale.
    refs: Vec<Refs>,
}

/// How many slots name each id of one column.
#[derive(Debug, Default)]
struct Refs {
    per_id: Vec<u32>,
    live: usize,
}

impl Refs {
    fn add(&mut self, id: u32, sign: i64) {
        let i = id as usize;
        if self.per_id.len() <= i {
            self.per_id.resize(i + 1, 0);
        }
        let Some(n) = self.per_id.get_mut(i) else {
            return;
        };
        let before = *n;
        *n = if sign > 0 {
            before + 1
        } else {
            before.saturating_sub(1)
        };
        match (before, *n) {
            (0, n) if n > 0 => self.live += 1,
            (b, 0) if b > 0 => self.live -= 1,
            _ => {}
        }
    }

    /// Whether so many of `table`'s ids lost all their nodes (renamed or removed nodes)
    /// that recounting from scratch is due.
    fn is_stale(&self, table: &DomainTable) -> bool {
        table.len() > 2 * self.live + 64
    }
}

/// Adds (`sign` 1) or removes (−1) one node's slot to `table` and `refs`.
fn apply_slot(table: &mut DomainTable, refs: &mut Refs, slot: Slot, sign: i64) {
    if slot.id == NO_DOMAIN {
        return;
    }
    refs.add(slot.id, sign);
    if slot.counts {
        table.apply(slot.id, slot.count, sign);
    }
}

/// The slot of `c`, interning its value in `table`.
fn intern_slot(table: &mut DomainTable, c: Contribution<'_>) -> Slot {
    match c {
        Contribution::None => Slot::NONE,
        Contribution::Counts(value, count) => Slot {
            id: table.intern(value),
            counts: true,
            count,
        },
        Contribution::Lookup(value) => Slot {
            id: table.intern(value),
            counts: false,
            count: 0,
        },
    }
}

/// The domain id each node of the snapshot counted for, per column, by the node's
/// position in the snapshot's node list: what lets a Filter find a node's count in a
/// [`DomainTable`] by number, without reading its labels or hashing its topology value.
#[derive(Debug, Clone, Default)]
pub struct NodeDomains {
    slots: Arc<Vec<Slot>>,
    columns: usize,
}

impl NodeDomains {
    fn slot(&self, position: usize, column: usize) -> Option<&Slot> {
        if column >= self.columns {
            return None;
        }
        let i = position.checked_mul(self.columns)?.checked_add(column)?;
        self.slots.get(i).filter(|s| s.id != NO_DOMAIN)
    }

    /// The id of the topology value of the node at `position` in `column` (the domain it
    /// counts for, or the value it was looked up by); `None` when it has none there (or
    /// there is no such node).
    pub fn domain(&self, position: usize, column: usize) -> Option<u32> {
        self.slot(position, column).map(|s| s.id)
    }

    /// The domain the node at `position` counts for in `column` and its own count; `None`
    /// when it counts for none.
    pub fn counted(&self, position: usize, column: usize) -> Option<(u32, i64)> {
        self.slot(position, column)
            .filter(|s| s.counts)
            .map(|s| (s.id, s.count))
    }
}

/// The values of one chunk of nodes, numbered locally so that counting allocates and
/// hashes nothing per node: a short list while the values are few (zones), a map beyond.
#[derive(Debug, Default)]
struct LocalIds<'a> {
    values: Vec<&'a str>,
    index: Option<HashMap<&'a str, u32, FxBuildHasher>>,
}

/// Values kept in a list before switching to a map.
const FEW_VALUES: usize = 16;

impl<'a> LocalIds<'a> {
    fn id(&mut self, value: &'a str) -> u32 {
        if let Some(index) = &mut self.index {
            let next = self.values.len() as u32;
            let id = *index.entry(value).or_insert(next);
            if id == next {
                self.values.push(value);
            }
            return id;
        }
        if let Some(i) = self.values.iter().position(|v| *v == value) {
            return i as u32;
        }
        self.values.push(value);
        if self.values.len() > FEW_VALUES {
            self.index = Some(
                self.values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (*v, i as u32))
                    .collect(),
            );
        }
        (self.values.len() - 1) as u32
    }
}

impl<K: CountKey> Entry<K> {
    /// Counts every node, in parallel chunks when there are many.
    fn count(
        key: K,
        nodes: &[Arc<NodeInfo>],
        parallelizer: &Parallelizer,
        min_parallel: usize,
    ) -> Self {
        let k = key.columns();
        let per_chunk: Vec<(Vec<LocalIds<'_>>, Vec<Slot>)> =
            parallelizer.map_chunks_from(nodes.len(), min_parallel, |range| {
                let mut locals: Vec<LocalIds<'_>> = (0..k).map(|_| LocalIds::default()).collect();
                let mut slots = Vec::with_capacity(range.len() * k);
                for node in &nodes[range] {
                    let mut i = 0;
                    key.contribute(node, |c| {
                        let local = locals.get_mut(i);
                        slots.push(match (c, local) {
                            (Contribution::Counts(value, count), Some(local)) => Slot {
                                id: local.id(value),
                                counts: true,
                                count,
                            },
                            (Contribution::Lookup(value), Some(local)) => Slot {
                                id: local.id(value),
                                counts: false,
                                count: 0,
                            },
                            _ => Slot::NONE,
                        });
                        i += 1;
                    });
                }
                (locals, slots)
            });
        let mut tables: Vec<DomainTable> = (0..k).map(|_| DomainTable::default()).collect();
        let mut refs: Vec<Refs> = (0..k).map(|_| Refs::default()).collect();
        let mut slots = Vec::with_capacity(nodes.len() * k);
        for (locals, chunk_slots) in per_chunk {
            let global: Vec<Vec<u32>> = locals
                .iter()
                .zip(tables.iter_mut())
                .map(|(local, table)| local.values.iter().map(|v| table.intern(v)).collect())
                .collect();
            for node_slots in chunk_slots.chunks(k.max(1)) {
                for (((local, table), refs), ids) in node_slots
                    .iter()
                    .zip(tables.iter_mut())
                    .zip(refs.iter_mut())
                    .zip(&global)
                {
                    let slot = match ids.get(local.id as usize) {
                        Some(&id) => Slot { id, ..*local },
                        None => Slot::NONE,
                    };
                    apply_slot(table, refs, slot, 1);
                    slots.push(slot);
                }
            }
        }
        Entry {
            key,
            nodes: nodes.to_vec(),
            slots: Arc::new(slots),
            tables,
            refs,
        }
    }

    /// Brings the counts up to date with `nodes`: recounts the nodes that are not the ones
    /// counted, or everything when the node list changed length or most of it changed.
    fn refresh(
        &mut self,
        nodes: &[Arc<NodeInfo>],
        parallelizer: &Parallelizer,
        min_parallel: usize,
    ) {
        let changed: Vec<usize> = if self.nodes.len() == nodes.len() {
            self.nodes
                .iter()
                .zip(nodes)
                .enumerate()
                .filter(|(_, (a, b))| !Arc::ptr_eq(a, b))
                .map(|(i, _)| i)
                .collect()
        } else {
            (0..nodes.len()).collect()
        };
        if changed.is_empty() {
            return;
        }
        if self.nodes.len() != nodes.len()
            || changed.len() * 4 > nodes.len()
            || self
                .refs
                .iter()
                .zip(&self.tables)
                .any(|(refs, table)| refs.is_stale(table))
        {
            *self = Entry::count(self.key.clone(), nodes, parallelizer, min_parallel);
            return;
        }
        let k = self.key.columns();
        let slots = Arc::make_mut(&mut self.slots);
        for i in changed {
            let (Some(node), Some(old)) = (nodes.get(i), slots.get_mut(i * k..(i + 1) * k)) else {
                continue;
            };
            for ((&slot, table), refs) in old
                .iter()
                .zip(self.tables.iter_mut())
                .zip(self.refs.iter_mut())
            {
                apply_slot(table, refs, slot, -1);
            }
            let mut j = 0;
            let (tables, refs) = (&mut self.tables, &mut self.refs);
            self.key.contribute(node, |c| {
                if let (Some(table), Some(refs), Some(slot)) =
                    (tables.get_mut(j), refs.get_mut(j), old.get_mut(j))
                {
                    let new = intern_slot(table, c);
                    apply_slot(table, refs, new, 1);
                    *slot = new;
                }
                j += 1;
            });
            if let Some(held) = self.nodes.get_mut(i) {
                *held = node.clone();
            }
        }
    }
}

/// The position in `all` (the snapshot's node list) of each of `nodes`, found by
/// identity (`Arc::ptr_eq`), so that per-position data can be read for them without
/// looking at the nodes themselves; `None` for a node not found.
///
/// A cycle's feasible nodes are the snapshot's own `Arc`s in snapshot order from some
/// start, wrapping around: one walk from the first node's position (`first`, looked up by
/// the caller; 0 when unknown) finds them all, reading only the pointers in `all`. The
/// walk stops after two laps of `all` (nodes in another order, or not the snapshot's):
/// the nodes left are `None`.
pub fn positions(
    all: &[Arc<NodeInfo>],
    nodes: &[Arc<NodeInfo>],
    first: Option<usize>,
) -> Vec<Option<usize>> {
    let n = all.len();
    let mut out = Vec::with_capacity(nodes.len());
    let mut cursor = if n == 0 { 0 } else { first.unwrap_or(0) % n };
    let mut budget = 2 * n;
    for node in nodes {
        let mut found = None;
        while budget > 0 && found.is_none() {
            budget -= 1;
            if all.get(cursor).is_some_and(|a| Arc::ptr_eq(a, node)) {
                found = Some(cursor);
            }
            cursor = (cursor + 1) % n;
        }
        out.push(found);
    }
    out
}

/// The counting keys of the last few workloads, most recently used last.
pub struct CountCache<K> {
    entries: Mutex<Vec<Entry<K>>>,
}

impl<K> Default for CountCache<K> {
    fn default() -> Self {
        CountCache {
            entries: Mutex::new(Vec::new()),
        }
    }
}

impl<K> std::fmt::Debug for CountCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.lock().map_or(0, |e| e.len());
        f.debug_struct("CountCache")
            .field("entries", &entries)
            .finish()
    }
}

impl<K: CountKey> CountCache<K> {
    /// Per column of `key`, its domains and counts over `nodes`; counted in parallel chunks
    /// from `min_parallel` nodes on.
    pub fn tables(
        &self,
        key: K,
        nodes: &[Arc<NodeInfo>],
        parallelizer: &Parallelizer,
        min_parallel: usize,
    ) -> Vec<DomainTable> {
        self.tables_and_domains(key, nodes, parallelizer, min_parallel)
            .0
    }

    /// [`tables`](Self::tables), with the domain each node counted for, by its position in
    /// `nodes`.
    pub fn tables_and_domains(
        &self,
        key: K,
        nodes: &[Arc<NodeInfo>],
        parallelizer: &Parallelizer,
        min_parallel: usize,
    ) -> (Vec<DomainTable>, NodeDomains) {
        // A panic while holding the lock leaves entries that are merely stale: refresh
        // checks every node anyway.
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match entries.iter().position(|e| e.key == key) {
            Some(i) => {
                let mut entry = entries.remove(i);
                entry.refresh(nodes, parallelizer, min_parallel);
                entry
            }
            None => {
                if entries.len() >= CAPACITY {
                    entries.remove(0);
                }
                Entry::count(key, nodes, parallelizer, min_parallel)
            }
        };
        let tables = entry.tables.clone();
        let domains = NodeDomains {
            slots: entry.slots.clone(),
            columns: entry.key.columns(),
        };
        entries.push(entry);
        (tables, domains)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::testing::make_node;
    use rstest::rstest;

    fn nodes(n: usize) -> Vec<Arc<NodeInfo>> {
        (0..n)
            .map(|i| Arc::new(make_node(&format!("n{i}")).info_with(&[])))
            .collect()
    }

    #[rstest]
    #[case::every_node_in_order(&[0, 1, 2, 3, 4], Some(0), vec![Some(0), Some(1), Some(2), Some(3), Some(4)])]
    #[case::from_a_rotating_start_wrapping(&[3, 4, 0, 1], Some(3), vec![Some(3), Some(4), Some(0), Some(1)])]
    #[case::some_left_out(&[4, 1, 2], Some(4), vec![Some(4), Some(1), Some(2)])]
    #[case::start_unknown(&[2, 3], None, vec![Some(2), Some(3)])]
    #[case::out_of_order_within_two_laps(&[3, 1, 4], Some(3), vec![Some(3), Some(1), Some(4)])]
    #[case::first_hint_wrong(&[1, 2], Some(4), vec![Some(1), Some(2)])]
    fn positions_are_found_by_identity(
        #[case] picked: &[usize],
        #[case] first: Option<usize>,
        #[case] want: Vec<Option<usize>>,
    ) {
        let all = nodes(5);
        let subset: Vec<Arc<NodeInfo>> = picked.iter().map(|&i| all[i].clone()).collect();
        assert_eq!(positions(&all, &subset, first), want);
    }

    /// A copy of a node is not the node: it has no position, and the walk gives up on the
    /// rest after two laps instead of scanning the list once per node.
    #[test]
    fn a_node_not_in_the_list_ends_the_walk() {
        let all = nodes(4);
        let copy = Arc::new((*all[1]).clone());
        let subset = vec![all[0].clone(), copy, all[2].clone()];
        assert_eq!(positions(&all, &subset, Some(0)), vec![Some(0), None, None]);
    }
}
