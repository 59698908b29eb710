//! Node names grouped by zone, listed round-robin across zones.
//!
//! Upstream: pkg/scheduler/backend/cache/node_tree.go. Zones keep the order in which they
//! first appeared and nodes keep their insertion order within a zone, so the list changes
//! only where a node was added, removed or moved.

use std::collections::HashMap;

use framework::snapshot::zone_key;
use k8s_openapi::api::core::v1::Node;

/// Node names by zone, kept incrementally as nodes come and go.
#[derive(Debug, Clone, Default)]
pub struct NodeTree {
    /// Zone keys in first-seen order; a zone is dropped when its last node goes.
    zones: Vec<String>,
    /// The nodes of each zone, in insertion order.
    tree: HashMap<String, Vec<String>>,
    /// The zone each node was filed under (so a move needs no old object).
    zone_of: HashMap<String, String>,
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

impl NodeTree {
    /// Files `node` under its zone. A node already present is moved if its zone changed.
    /// Returns whether the listing changed.
    pub fn add_node(&mut self, node: &Node) -> bool {
        let name = node_name(node);
        let zone = zone_key(node);
        match self.zone_of.get(name) {
            Some(z) if *z == zone => return false,
            Some(_) => {
                self.remove_name(name);
            }
            None => {}
        }
        match self.tree.get_mut(&zone) {
            Some(list) => list.push(name.to_string()),
            None => {
                self.zones.push(zone.clone());
                self.tree.insert(zone.clone(), vec![name.to_string()]);
            }
        }
        self.zone_of.insert(name.to_string(), zone);
        true
    }

    /// Moves `node` if its zone changed (adds it when unknown). Returns whether the listing
    /// changed.
    pub fn update_node(&mut self, node: &Node) -> bool {
        self.add_node(node)
    }

    /// Removes `node`; returns false when it was not there.
    pub fn remove_node(&mut self, node: &Node) -> bool {
        self.remove_name(node_name(node))
    }

    fn remove_name(&mut self, name: &str) -> bool {
        let Some(zone) = self.zone_of.remove(name) else {
            return false;
        };
        if let Some(list) = self.tree.get_mut(&zone) {
            list.retain(|n| n != name);
            if list.is_empty() {
                self.tree.remove(&zone);
                self.zones.retain(|z| *z != zone);
            }
        }
        true
    }

    /// How many nodes the tree holds.
    pub fn num_nodes(&self) -> usize {
        self.zone_of.len()
    }

    /// Every node name: the first node of each zone, then the second of each, and so on.
    pub fn list(&self) -> Vec<&str> {
        let lists: Vec<&Vec<String>> = self.zones.iter().filter_map(|z| self.tree.get(z)).collect();
        let mut out = Vec::with_capacity(self.num_nodes());
        let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
        for i in 0..longest {
            out.extend(lists.iter().filter_map(|l| l.get(i)).map(String::as_str));
        }
        out
    }
}
