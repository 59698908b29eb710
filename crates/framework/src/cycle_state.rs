//! Per-cycle, per-plugin state: what a plugin computed in PreFilter/PreScore for one pod and
//! reads back, per node, in Filter/Score.
//!
//! Upstream: pkg/scheduler/framework/cycle_state.go. Writers (PreFilter, PreScore, Reserve,
//! the AddPod/RemovePod extensions) get `&mut CycleState`; Filter and Score, which run
//! concurrently over nodes, get `&CycleState`. The borrow checker replaces upstream's locks.

use std::any::Any;

/// A value a plugin stores in the [`CycleState`]. Cloned when preemption simulates removing
/// pods on a copy of the state.
pub trait StateData: Any + Send + Sync {
    /// A deep copy of this value, boxed.
    fn clone_box(&self) -> Box<dyn StateData>;
    /// `self` as `Any`, to downcast.
    fn as_any(&self) -> &dyn Any;
    /// `self` as mutable `Any`, to downcast.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Typed storage keyed by a plugin-chosen `&'static str`, plus the flags the runtime sets.
///
/// A cycle holds a handful of entries that Filter and Score read once per node, so they
/// live in a small vector searched by key address first (the same `&'static str`
/// constant), then by content: cheaper than hashing the key on every read.
#[derive(Default)]
pub struct CycleState {
    data: Vec<(&'static str, Box<dyn StateData>)>,
    /// Plugins whose PreFilter returned Skip: their Filter is not run this cycle.
    skip_filter_plugins: Vec<&'static str>,
    /// Plugins whose PreScore returned Skip: their Score is not run this cycle.
    skip_score_plugins: Vec<&'static str>,
    /// Nodes in the cycle's snapshot, set by the runtime when the cycle starts.
    num_all_nodes: usize,
    /// Whether the runtime times each plugin call of this cycle (a sampled cycle).
    record_plugin_metrics: bool,
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field(
                "keys",
                &self.data.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            )
            .field("skip_filter_plugins", &self.skip_filter_plugins)
            .field("skip_score_plugins", &self.skip_score_plugins)
            .field("num_all_nodes", &self.num_all_nodes)
            .field("record_plugin_metrics", &self.record_plugin_metrics)
            .finish()
    }
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, v.as_ref().clone_box()))
                .collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
            num_all_nodes: self.num_all_nodes,
            record_plugin_metrics: self.record_plugin_metrics,
        }
    }
}

impl CycleState {
    pub fn new() -> Self {
        CycleState::default()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.data
            .iter()
            .position(|(k, _)| std::ptr::eq(k.as_ptr(), key.as_ptr()) && k.len() == key.len())
            .or_else(|| self.data.iter().position(|(k, _)| *k == key))
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        match self.position(key) {
            Some(i) => self.data[i].1 = Box::new(value),
            None => self.data.push((key, Box::new(value))),
        }
    }

    /// The value under `key`, if there is one of type `T`.
    pub fn read<T: StateData>(&self, key: &'static str) -> Option<&T> {
        let i = self.position(key)?;
        self.data[i].1.as_ref().as_any().downcast_ref::<T>()
    }

    /// The value under `key` for mutation, if there is one of type `T`.
    pub fn read_mut<T: StateData>(&mut self, key: &'static str) -> Option<&mut T> {
        let i = self.position(key)?;
        self.data[i].1.as_mut().as_any_mut().downcast_mut::<T>()
    }

    /// Removes the value under `key`.
    pub fn delete(&mut self, key: &'static str) {
        if let Some(i) = self.position(key) {
            self.data.swap_remove(i);
        }
    }

    /// The number of nodes in the cycle's snapshot (0 before the runtime sets it): what a
    /// Score plugin needs of the whole cluster when its PreScore did not run (upstream
    /// plugins read it from the snapshot lister).
    pub fn num_all_nodes(&self) -> usize {
        self.num_all_nodes
    }

    /// Set by the runtime when a cycle starts.
    pub fn set_num_all_nodes(&mut self, n: usize) {
        self.num_all_nodes = n;
    }

    /// Whether the runtime records each plugin's duration this cycle. Timing every plugin
    /// call on every node costs more than the calls themselves, so only a sample of cycles
    /// is timed (upstream: ShouldRecordPluginMetrics).
    pub fn should_record_plugin_metrics(&self) -> bool {
        self.record_plugin_metrics
    }

    /// Set by the scheduling loop when a cycle starts.
    pub fn set_record_plugin_metrics(&mut self, record: bool) {
        self.record_plugin_metrics = record;
    }

    pub fn skip_filter_plugins(&self) -> &[&'static str] {
        &self.skip_filter_plugins
    }

    pub fn set_skip_filter_plugins(&mut self, plugins: Vec<&'static str>) {
        self.skip_filter_plugins = plugins;
    }

    pub fn skip_score_plugins(&self) -> &[&'static str] {
        &self.skip_score_plugins
    }

    pub fn set_skip_score_plugins(&mut self, plugins: Vec<&'static str>) {
        self.skip_score_plugins = plugins;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Counter(u32);

    #[test]
    fn keys_match_by_content_too() {
        let mut state = CycleState::new();
        state.write("plugin/state", Counter(1));
        state.write("plugin/state", Counter(2));
        let key: &'static str = Box::leak(String::from("plugin/state").into_boxed_str());
        let before_delete = state.read::<Counter>(key).cloned();
        state.delete(key);
        assert_eq!(
            (before_delete, state.read::<Counter>("plugin/state")),
            (Some(Counter(2)), None)
        );
    }

    #[test]
    fn write_read_and_clone_are_independent() {
        let mut state = CycleState::new();
        state.write("k", Counter(1));
        let copy = state.clone();
        if let Some(c) = state.read_mut::<Counter>("k") {
            c.0 = 2;
        }
        assert_eq!(
            (
                state.read::<Counter>("k"),
                copy.read::<Counter>("k"),
                state.read::<u64>("k")
            ),
            (Some(&Counter(2)), Some(&Counter(1)), None)
        );
    }
}
