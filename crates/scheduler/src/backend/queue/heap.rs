//! A binary heap keyed by pod key, so that a pod can be found, replaced or removed in
//! O(log n). Upstream: pkg/scheduler/backend/heap.
//!
//! The order is not stored in the heap: every operation that moves items takes the `less`
//! function, so that the queue can order by a QueueSort plugin (activeQ) or by backoff expiry
//! (backoffQ) without the heap owning either.
//!
//! Each item holds a slot number that stays with it while it moves; the item's position
//! is kept by slot in a plain vector, so that moving items up and down (about log n swaps
//! per push or pop) updates two vector entries per swap and hashes no key. The key map is
//! read once per push, pop or removal.

use std::collections::HashMap;

use framework::PodKey;

/// An item the heap can hold: it names its own key.
pub(crate) trait Keyed {
    fn key(&self) -> &PodKey;
}

pub(crate) struct Heap<T> {
    /// The heap, each item with its slot.
    items: Vec<(T, usize)>,
    /// `positions[slot]`: where the item of `slot` is in `items`.
    positions: Vec<usize>,
    /// Slots of removed items, to reuse.
    free: Vec<usize>,
    /// Key to slot.
    index: HashMap<PodKey, usize>,
}

impl<T> Default for Heap<T> {
    fn default() -> Self {
        Heap {
            items: Vec::new(),
            positions: Vec::new(),
            free: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<T: Keyed> Heap<T> {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn position(&self, key: &str) -> Option<usize> {
        let slot = *self.index.get(key)?;
        self.positions.get(slot).copied()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&T> {
        self.position(key)
            .and_then(|i| self.items.get(i))
            .map(|(t, _)| t)
    }

    pub(crate) fn peek(&self) -> Option<&T> {
        self.items.first().map(|(t, _)| t)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().map(|(t, _)| t)
    }

    /// Adds `item`, replacing an item with the same key.
    pub(crate) fn push(&mut self, item: T, less: &dyn Fn(&T, &T) -> bool) {
        if let Some(i) = self.position(item.key()) {
            if let Some(slot) = self.items.get_mut(i) {
                slot.0 = item;
                self.fix(i, less);
                return;
            }
        }
        let i = self.items.len();
        let slot = match self.free.pop() {
            Some(slot) => {
                self.positions[slot] = i;
                slot
            }
            None => {
                self.positions.push(i);
                self.positions.len() - 1
            }
        };
        self.index.insert(item.key().clone(), slot);
        self.items.push((item, slot));
        self.up(i, less);
    }

    pub(crate) fn pop(&mut self, less: &dyn Fn(&T, &T) -> bool) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        self.remove_at(0, less)
    }

    pub(crate) fn remove(&mut self, key: &str, less: &dyn Fn(&T, &T) -> bool) -> Option<T> {
        let i = self.position(key)?;
        self.remove_at(i, less)
    }

    fn remove_at(&mut self, i: usize, less: &dyn Fn(&T, &T) -> bool) -> Option<T> {
        let last = self.items.len().checked_sub(1)?;
        self.swap(i, last);
        let (item, slot) = self.items.pop()?;
        self.index.remove(item.key());
        self.free.push(slot);
        if i < self.items.len() {
            self.fix(i, less);
        }
        Some(item)
    }

    fn fix(&mut self, i: usize, less: &dyn Fn(&T, &T) -> bool) {
        if !self.up(i, less) {
            self.down(i, less);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        self.items.swap(a, b);
        for i in [a, b] {
            if let Some(&(_, slot)) = self.items.get(i) {
                if let Some(p) = self.positions.get_mut(slot) {
                    *p = i;
                }
            }
        }
    }

    fn less_at(&self, a: usize, b: usize, less: &dyn Fn(&T, &T) -> bool) -> bool {
        less(&self.items[a].0, &self.items[b].0)
    }

    /// Moves item `i` up while it is less than its parent; whether it moved.
    fn up(&mut self, mut i: usize, less: &dyn Fn(&T, &T) -> bool) -> bool {
        let start = i;
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less_at(i, parent, less) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
        i != start
    }

    fn down(&mut self, mut i: usize, less: &dyn Fn(&T, &T) -> bool) {
        let n = self.items.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut smallest = i;
            if l < n && self.less_at(l, smallest, less) {
                smallest = l;
            }
            if r < n && self.less_at(r, smallest, less) {
                smallest = r;
            }
            if smallest == i {
                return;
            }
            self.swap(i, smallest);
            i = smallest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item(PodKey, i32);
    impl Keyed for Item {
        fn key(&self) -> &PodKey {
            &self.0
        }
    }

    #[test]
    fn pops_in_order_after_replace_and_remove() {
        let less = |a: &Item, b: &Item| a.1 < b.1;
        let mut h = Heap::default();
        for (k, v) in [("a", 5), ("b", 3), ("c", 8), ("d", 1), ("e", 7)] {
            h.push(Item(k.into(), v), &less);
        }
        h.push(Item("c".into(), 0), &less);
        assert!(h.remove("d", &less).is_some());
        assert!(h.remove("zz", &less).is_none());
        let mut out = Vec::new();
        while let Some(Item(k, _)) = h.pop(&less) {
            out.push(k.to_string());
        }
        assert_eq!(out, ["c", "b", "a", "e"]);
        assert_eq!(h.len(), 0);
    }

    /// Pushes, replacements, removals and pops interleaved (slots are reused): every key
    /// still in the heap is found with its latest value, and pops come in order.
    #[test]
    fn keys_are_found_after_moves_and_slot_reuse() {
        let less = |a: &Item, b: &Item| a.1 < b.1;
        let mut h = Heap::default();
        let mut want: std::collections::BTreeMap<String, i32> = Default::default();
        // A fixed pseudo-random sequence: values and keys from a small LCG.
        let mut x: u32 = 12345;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) % 64
        };
        for step in 0..2000 {
            let key = format!("k{}", next() % 40);
            let value = next() as i32;
            match step % 5 {
                0..=2 => {
                    h.push(Item(key.as_str().into(), value), &less);
                    want.insert(key, value);
                }
                3 => {
                    let got = h.remove(&key, &less).map(|i| i.1);
                    assert_eq!(got, want.remove(&key), "remove {key} at step {step}");
                }
                _ => {
                    let min = want.values().min().copied();
                    let got = h.pop(&less).map(|Item(k, v)| {
                        want.remove(&k.to_string());
                        v
                    });
                    assert_eq!(got, min, "pop at step {step}");
                }
            }
            let found: std::collections::BTreeMap<String, i32> = want
                .keys()
                .filter_map(|k| h.get(k).map(|i| (k.clone(), i.1)))
                .collect();
            assert_eq!((found, h.len()), (want.clone(), want.len()), "step {step}");
        }
    }
}
