//! The pods of a node, in shared chunks.
//!
//! A `NodeInfo` is copied whenever it changes while a snapshot shares it (`Arc::make_mut`):
//! once per pod assumed on it. With a plain vector that copy is O(pods on the node), so a
//! node that receives thousands of pods (a DaemonSet-style workload pinned to one node)
//! makes scheduling quadratic. Here the pods sit in fixed-size chunks behind `Arc`s: a copy
//! clones one pointer per chunk, and a change copies only the chunk it touches.

use std::sync::Arc;

use super::PodInfo;

/// Pods per chunk: a copy of the list costs `len / CHUNK` pointer clones, a change at most
/// `CHUNK`.
const CHUNK: usize = 64;

/// A node's pods, in insertion order except that removal moves the last pod into the gap
/// (as upstream's NodeInfo does).
#[derive(Debug, Clone, Default)]
pub struct PodList {
    /// Every chunk is full except the last, which is never empty.
    chunks: Vec<Chunk>,
    len: usize,
}

impl PodList {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> Iter<'_> {
        self.chunks.iter().flat_map(chunk_iter)
    }

    pub fn get(&self, i: usize) -> Option<&Arc<PodInfo>> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }

    pub fn first(&self) -> Option<&Arc<PodInfo>> {
        self.get(0)
    }

    pub fn last(&self) -> Option<&Arc<PodInfo>> {
        self.chunks.last()?.last()
    }

    pub fn push(&mut self, pod: Arc<PodInfo>) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(pod),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(pod);
                self.chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    /// Removes the pod at `i`, moving the last pod into its place.
    pub fn swap_remove(&mut self, i: usize) -> Option<Arc<PodInfo>> {
        if i >= self.len {
            return None;
        }
        let last_chunk = self.chunks.last_mut()?;
        let last = Arc::make_mut(last_chunk).pop()?;
        if last_chunk.is_empty() {
            self.chunks.pop();
        }
        self.len -= 1;
        if i == self.len {
            return Some(last);
        }
        let chunk = self.chunks.get_mut(i / CHUNK)?;
        let slot = Arc::make_mut(chunk).get_mut(i % CHUNK)?;
        Some(std::mem::replace(slot, last))
    }

    /// Puts `pod` at `i`; the pod that was there, or `None` (and nothing changes) when `i`
    /// is out of range.
    pub fn set(&mut self, i: usize, pod: Arc<PodInfo>) -> Option<Arc<PodInfo>> {
        if i >= self.len {
            return None;
        }
        let slot = Arc::make_mut(self.chunks.get_mut(i / CHUNK)?).get_mut(i % CHUNK)?;
        Some(std::mem::replace(slot, pod))
    }

    /// The position of the last pod for which `f` holds (recently added pods are found
    /// first).
    pub fn rposition(&self, mut f: impl FnMut(&Arc<PodInfo>) -> bool) -> Option<usize> {
        let mut i = self.len;
        for chunk in self.chunks.iter().rev() {
            for pod in chunk.iter().rev() {
                i -= 1;
                if f(pod) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// The position of the first pod for which `f` holds.
    pub fn position(&self, f: impl FnMut(&Arc<PodInfo>) -> bool) -> Option<usize> {
        self.iter().position(f)
    }

    pub fn to_vec(&self) -> Vec<Arc<PodInfo>> {
        self.iter().cloned().collect()
    }
}

type Chunk = Arc<Vec<Arc<PodInfo>>>;

fn chunk_iter(chunk: &Chunk) -> std::slice::Iter<'_, Arc<PodInfo>> {
    chunk.iter()
}

/// The pods of a [`PodList`], in order.
pub type Iter<'a> = std::iter::FlatMap<
    std::slice::Iter<'a, Chunk>,
    std::slice::Iter<'a, Arc<PodInfo>>,
    fn(&'a Chunk) -> std::slice::Iter<'a, Arc<PodInfo>>,
>;

impl<'a> IntoIterator for &'a PodList {
    type Item = &'a Arc<PodInfo>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<Arc<PodInfo>> for PodList {
    fn from_iter<I: IntoIterator<Item = Arc<PodInfo>>>(iter: I) -> Self {
        let mut list = PodList::default();
        for pod in iter {
            list.push(pod);
        }
        list
    }
}

/// Two lists are equal when they hold the same pods (by address) in the same order.
impl PartialEq for PodList {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods(n: usize) -> Vec<Arc<PodInfo>> {
        (0..n)
            .map(|i| {
                Arc::new(PodInfo::new(Arc::new(
                    crate::testing::make_pod(&format!("p{i}")).obj(),
                )))
            })
            .collect()
    }

    fn names(list: &PodList) -> Vec<String> {
        list.iter().map(|p| p.key.clone()).collect()
    }

    /// The list against a plain vector doing the same pushes and swap-removes, across chunk
    /// boundaries, with copies taken in between that must not change.
    #[test]
    fn behaves_like_a_vector_and_copies_are_independent() {
        let all = pods(3 * CHUNK + 5);
        let mut list = PodList::default();
        let mut want: Vec<Arc<PodInfo>> = Vec::new();
        let mut copies: Vec<(PodList, Vec<String>)> = Vec::new();
        for (step, pod) in all.iter().enumerate() {
            list.push(pod.clone());
            want.push(pod.clone());
            if step % 7 == 3 {
                let i = (step * 31) % want.len();
                let (got, expected) = (list.swap_remove(i), want.swap_remove(i));
                assert_eq!(got.map(|p| p.key.clone()), Some(expected.key.clone()));
            }
            if step % 50 == 0 {
                copies.push((list.clone(), names(&list)));
            }
        }
        // Remove down to nothing, from the end and the front.
        while !want.is_empty() {
            let i = if want.len() % 2 == 0 {
                0
            } else {
                want.len() - 1
            };
            assert_eq!(
                list.swap_remove(i).map(|p| p.key.clone()),
                Some(want.swap_remove(i).key.clone())
            );
            assert_eq!(
                names(&list),
                want.iter().map(|p| p.key.clone()).collect::<Vec<_>>()
            );
            assert_eq!(list.len(), want.len());
        }
        assert!(list.is_empty());
        assert_eq!(list.swap_remove(0).map(|p| p.key.clone()), None);
        for (copy, names_then) in &copies {
            assert_eq!(&names(copy), names_then);
        }
    }

    #[test]
    fn set_replaces_only_in_this_copy() {
        let all = pods(CHUNK + 3);
        let mut list: PodList = all.iter().cloned().collect();
        let copy = list.clone();
        let new = pods(1).remove(0);
        let found = list.rposition(|p| Arc::ptr_eq(p, &all[CHUNK + 1]));
        let replaced = found.and_then(|i| list.set(i, new.clone()));
        assert_eq!(
            (
                found,
                replaced.map(|p| Arc::ptr_eq(&p, &all[CHUNK + 1])),
                list.get(CHUNK + 1).map(|p| Arc::ptr_eq(p, &new)),
                copy.get(CHUNK + 1).map(|p| Arc::ptr_eq(p, &all[CHUNK + 1])),
                list.set(CHUNK + 3, new.clone()).is_some(),
                list.rposition(|p| p.key == "nothing"),
                list.len(),
            ),
            (
                Some(CHUNK + 1),
                Some(true),
                Some(true),
                Some(true),
                false,
                None,
                CHUNK + 3
            )
        );
    }

    #[test]
    fn positions_and_ends() {
        let list: PodList = pods(CHUNK + 2).into_iter().collect();
        let key = |p: Option<&Arc<PodInfo>>| p.map(|p| p.key.clone());
        assert_eq!(
            (
                key(list.first()),
                key(list.last()),
                key(list.get(CHUNK)),
                key(list.get(CHUNK + 2)),
                list.position(|p| p.key == format!("default/p{}", CHUNK + 1)),
            ),
            (
                Some("default/p0".to_string()),
                Some(format!("default/p{}", CHUNK + 1)),
                Some(format!("default/p{CHUNK}")),
                None,
                Some(CHUNK + 1),
            )
        );
    }
}
