//! Fake plugins for runtime and cycle tests: each does exactly what its table says.

use std::collections::HashMap;
use std::sync::Arc;

use framework::{
    ArgsError, CycleState, FilterPlugin, Handle, NodeInfo, NodeScore, Plugin, PodInfo,
    PreFilterPlugin, PreFilterResult, QueueSortPlugin, QueuedPodInfo, ScoreExtensions, ScorePlugin,
    Snapshot, Status,
};

/// A plugin whose verdicts are given per node name; nodes not listed pass / score 0.
#[derive(Default, Clone)]
pub struct Fake {
    pub name: &'static str,
    pub filter: Option<HashMap<String, Status>>,
    pub pre_filter: Option<(Option<PreFilterResult>, Status)>,
    pub score: Option<HashMap<String, i64>>,
    /// Normalize by scaling the maximum to 100.
    pub normalize: bool,
    pub queue_sort: bool,
    pub bind: bool,
}

impl Fake {
    pub fn named(name: &'static str) -> Self {
        Fake {
            name,
            ..Default::default()
        }
    }

    pub fn rejecting(mut self, nodes: &[(&str, Status)]) -> Self {
        self.filter = Some(
            nodes
                .iter()
                .map(|(n, s)| (n.to_string(), s.clone()))
                .collect(),
        );
        self
    }

    pub fn scoring(mut self, nodes: &[(&str, i64)]) -> Self {
        self.score = Some(nodes.iter().map(|(n, s)| (n.to_string(), *s)).collect());
        self
    }

    pub fn pre_filtering(mut self, result: Option<PreFilterResult>, status: Status) -> Self {
        self.pre_filter = Some((result, status));
        self
    }
}

impl Plugin for Fake {
    fn name(&self) -> &'static str {
        self.name
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        self.filter.as_ref().map(|_| self as &dyn FilterPlugin)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        self.pre_filter
            .as_ref()
            .map(|_| self as &dyn PreFilterPlugin)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        self.score.as_ref().map(|_| self as &dyn ScorePlugin)
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        self.queue_sort.then_some(self as &dyn QueueSortPlugin)
    }
    fn as_bind(&self) -> Option<&dyn framework::BindPlugin> {
        self.bind.then_some(self as &dyn framework::BindPlugin)
    }
}

impl PreFilterPlugin for Fake {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        self.pre_filter.clone().unwrap_or_default()
    }
}

impl FilterPlugin for Fake {
    fn filter(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        self.filter
            .as_ref()
            .and_then(|m| m.get(node.name()).cloned())
            .unwrap_or_default()
    }
}

impl ScorePlugin for Fake {
    fn score(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(self
            .score
            .as_ref()
            .and_then(|m| m.get(node.name()).copied())
            .unwrap_or(0))
    }
    fn score_extensions(&self) -> Option<&dyn ScoreExtensions> {
        self.normalize.then_some(self as &dyn ScoreExtensions)
    }
}

impl ScoreExtensions for Fake {
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        if max > 0 {
            for s in scores.iter_mut() {
                s.score = s.score * 100 / max;
            }
        }
        Status::success()
    }
}

impl QueueSortPlugin for Fake {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        a.timestamp < b.timestamp
    }
}

impl framework::BindPlugin for Fake {
    fn bind<'a>(
        &'a self,
        _state: &'a CycleState,
        _pod: &'a PodInfo,
        _node_name: &'a str,
    ) -> framework::BoxFuture<'a, Status> {
        Box::pin(async { Status::success() })
    }
}

/// A registry whose factories return clones of `fakes`.
pub struct FakeRegistry;

thread_local! {
    static FAKES: std::cell::RefCell<Vec<Fake>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl FakeRegistry {
    /// A registry holding `fakes` (plus a queue-sort "Sort" and a binder "Bind").
    pub fn with(fakes: Vec<Fake>) -> plugins::Registry {
        let mut all = fakes;
        all.push(Fake {
            queue_sort: true,
            ..Fake::named("Sort")
        });
        all.push(Fake {
            bind: true,
            ..Fake::named("Bind")
        });
        let mut r: plugins::Registry = Default::default();
        for f in &all {
            r.insert(f.name, Arc::new(make));
        }
        FAKES.with(|cell| *cell.borrow_mut() = all);
        r
    }
}

fn make(args: Option<&serde_json::Value>, _h: &Handle) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
    // The fake's name travels in the args (the runtime passes the plugin's own args).
    let name = args
        .and_then(|a| a.get("fake"))
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string();
    if name == "broken" {
        return Err(vec![ArgsError::new("weight", "must be positive")]);
    }
    FAKES.with(|cell| {
        cell.borrow()
            .iter()
            .find(|f| f.name == name)
            .cloned()
            .map(|f| Arc::new(f) as Arc<dyn Plugin>)
            .ok_or_else(|| vec![ArgsError::new("", format!("no fake named {name:?}"))])
    })
}
