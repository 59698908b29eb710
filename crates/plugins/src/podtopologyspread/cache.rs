//! Counts of matching pods per topology domain, kept across scheduling cycles: what a
//! node's counts depend on ([`CountKey`]); the cache itself is
//! [`helper::node_cache`](crate::helper::node_cache).
//!
//! A workload's pods count the same way, so the counts are kept per [`CountKey`] and only
//! the nodes changed since the last cycle are recounted; see the helper for why that is
//! exact.

use framework::NodeInfo;
use k8s_openapi::api::core::v1::Toleration;

use super::common::{count_matching, has_all_keys, Constraint, Inclusion, RequiredNodeAffinity};
use crate::helper::node_cache::{self, Contribution};

pub(super) use node_cache::{DomainTable, NodeDomains};

/// The counts of the last few workloads.
pub(super) type CountCache = node_cache::CountCache<CountKey>;

/// Everything a node's contribution to the counts depends on, besides the node.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CountKey {
    /// Only pods of this namespace count.
    pub namespace: String,
    pub constraints: Vec<Constraint>,
    /// The pod's required node affinity; the default when no constraint honors it.
    pub affinity: RequiredNodeAffinity,
    /// The pod's tolerations; empty when no constraint honors taints.
    pub tolerations: Vec<Toleration>,
    /// A node missing some constraint's key counts for none (else it counts under the
    /// empty value for the keys it lacks: system default spreading, when scoring).
    pub require_all_keys: bool,
}

impl CountKey {
    pub fn new(
        namespace: &str,
        constraints: &[Constraint],
        affinity: &RequiredNodeAffinity,
        tolerations: &[Toleration],
        require_all_keys: bool,
    ) -> Self {
        // What no constraint looks at is left out, so that more pods share a key.
        let honors_affinity = constraints.iter().any(|c| c.honor_node_affinity);
        let honors_taints = constraints.iter().any(|c| c.honor_node_taints);
        CountKey {
            namespace: namespace.to_string(),
            constraints: constraints.to_vec(),
            affinity: if honors_affinity {
                affinity.clone()
            } else {
                RequiredNodeAffinity::default()
            },
            tolerations: if honors_taints {
                tolerations.to_vec()
            } else {
                Vec::new()
            },
            require_all_keys,
        }
    }
}

impl node_cache::CountKey for CountKey {
    fn columns(&self) -> usize {
        self.constraints.len()
    }

    /// Calls `f` once per constraint with the node's domain and its matching pods, or
    /// nothing when the node counts for no domain of that constraint. A hostname domain is
    /// normally the node alone, so its count is the node's own, which is what Score reads
    /// for hostname constraints.
    fn contribute<'n>(&self, node: &'n NodeInfo, mut f: impl FnMut(Contribution<'n>)) {
        let labels = node.labels();
        let eligible = !self.require_all_keys || has_all_keys(labels, &self.constraints);
        let mut inclusion = Inclusion::new(&self.affinity, &self.tolerations, node);
        for c in &self.constraints {
            if !eligible || !inclusion.includes(c) {
                f(Contribution::None);
                continue;
            }
            let value = labels.get(&c.topology_key).map_or("", String::as_str);
            f(Contribution::Counts(
                value,
                count_matching(&node.pods, &c.selector, &self.namespace),
            ));
        }
    }
}
