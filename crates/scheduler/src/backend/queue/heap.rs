//! A binary heap keyed by pod key, so that a pod can be found, replaced or removed in
//! O(log n). Upstream: pkg/scheduler/backend/heap.
//!
//! The order is not stored in the heap: every operation that moves items takes the `less`
//! function, so that the queue can order by a QueueSort plugin (activeQ) or by backoff expiry
//! (backoffQ) without the heap owning either.

use std::collections::HashMap;

use framework::PodKey;

/// An item the heap can hold: it names its own key.
pub(crate) trait Keyed {
    fn key(&self) -> &PodKey;
}

pub(crate) struct Heap<T> {
    items: Vec<T>,
    index: HashMap<PodKey, usize>,
}

impl<T> Default for Heap<T> {
    fn default() -> Self {
        Heap {
            items: Vec::new(),
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

    pub(crate) fn get(&self, key: &str) -> Option<&T> {
        self.index.get(key).and_then(|&i| self.items.get(i))
    }

    pub(crate) fn peek(&self) -> Option<&T> {
        self.items.first()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Adds `item`, replacing an item with the same key.
    pub(crate) fn push(&mut self, item: T, less: &dyn Fn(&T, &T) -> bool) {
        if let Some(&i) = self.index.get(item.key()) {
            if let Some(slot) = self.items.get_mut(i) {
                *slot = item;
                self.fix(i, less);
                return;
            }
        }
        let i = self.items.len();
        self.index.insert(item.key().clone(), i);
        self.items.push(item);
        self.up(i, less);
    }

    pub(crate) fn pop(&mut self, less: &dyn Fn(&T, &T) -> bool) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        self.remove_at(0, less)
    }

    pub(crate) fn remove(&mut self, key: &str, less: &dyn Fn(&T, &T) -> bool) -> Option<T> {
        let i = *self.index.get(key)?;
        self.remove_at(i, less)
    }

    fn remove_at(&mut self, i: usize, less: &dyn Fn(&T, &T) -> bool) -> Option<T> {
        let last = self.items.len().checked_sub(1)?;
        self.swap(i, last);
        let item = self.items.pop()?;
        self.index.remove(item.key());
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
            if let Some(item) = self.items.get(i) {
                if let Some(slot) = self.index.get_mut(item.key()) {
                    *slot = i;
                }
            }
        }
    }

    /// Moves item `i` up while it is less than its parent; whether it moved.
    fn up(&mut self, mut i: usize, less: &dyn Fn(&T, &T) -> bool) -> bool {
        let start = i;
        while i > 0 {
            let parent = (i - 1) / 2;
            if !less(&self.items[i], &self.items[parent]) {
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
            if l < n && less(&self.items[l], &self.items[smallest]) {
                smallest = l;
            }
            if r < n && less(&self.items[r], &self.items[smallest]) {
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
}
