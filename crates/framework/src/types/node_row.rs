//! [`NodeRow`]: the few numbers and flags of a node that Filter and Score read on every node
//! of every cycle, copied out of its [`NodeInfo`] into one flat array of the snapshot.
//!
//! A cycle visits hundreds of NodeInfos scattered on the heap, each a few cache lines apart
//! from the fields it needs; the snapshot's rows are one contiguous array in node-list
//! order, which the filter pass walks in order, so the hot plugins read memory linearly and
//! touch a NodeInfo only when the row cannot answer (taints present, scalar resources,
//! images on the node).

use super::NodeInfo;

/// What the hot Filter and Score plugins read of one node. A snapshot's row `i` is always
/// `NodeRow::of(info).at(i)` for its NodeInfo `info` at position `i`: the snapshot
/// rewrites a row whenever it replaces or changes that NodeInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRow {
    /// `allocatable` cpu (millicores), memory, ephemeral-storage and pod count.
    pub allocatable_milli_cpu: i64,
    pub allocatable_memory: i64,
    pub allocatable_ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    /// `requested` cpu (millicores), memory and ephemeral-storage.
    pub requested_milli_cpu: i64,
    pub requested_memory: i64,
    pub requested_ephemeral_storage: i64,
    /// `non_zero_requested` cpu (millicores) and memory.
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    /// How many pods the node has (assumed pods included), saturated at `u32::MAX`.
    pub pods: u32,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// Whether `spec.taints` is non-empty.
    pub has_taints: bool,
    /// Whether the node reports any image (`image_states` is non-empty).
    pub has_images: bool,
    /// The node's position in the snapshot's node list, for plugins that keep per-node
    /// data by position; [`NodeRow::NO_POSITION`] for a row computed from a NodeInfo alone
    /// (a copy with pods added, a dry run), which such plugins read the NodeInfo for.
    pub position: u32,
}

impl Default for NodeRow {
    fn default() -> Self {
        NodeRow {
            allocatable_milli_cpu: 0,
            allocatable_memory: 0,
            allocatable_ephemeral_storage: 0,
            allowed_pod_number: 0,
            requested_milli_cpu: 0,
            requested_memory: 0,
            requested_ephemeral_storage: 0,
            non_zero_milli_cpu: 0,
            non_zero_memory: 0,
            pods: 0,
            unschedulable: false,
            has_taints: false,
            has_images: false,
            position: NodeRow::NO_POSITION,
        }
    }
}

impl NodeRow {
    /// The position of a row that belongs to no snapshot position.
    pub const NO_POSITION: u32 = u32::MAX;

    /// This row, at position `i` of a snapshot's node list.
    pub fn at(self, i: usize) -> NodeRow {
        NodeRow {
            position: u32::try_from(i).unwrap_or(NodeRow::NO_POSITION),
            ..self
        }
    }

    /// The position as an index, when the row has one.
    pub fn index(&self) -> Option<usize> {
        (self.position != NodeRow::NO_POSITION).then_some(self.position as usize)
    }

    /// The row of `node`, computed from it, at no position.
    pub fn of(node: &NodeInfo) -> NodeRow {
        NodeRow {
            allocatable_milli_cpu: node.allocatable.milli_cpu,
            allocatable_memory: node.allocatable.memory,
            allocatable_ephemeral_storage: node.allocatable.ephemeral_storage,
            allowed_pod_number: node.allocatable.allowed_pod_number,
            requested_milli_cpu: node.requested.milli_cpu,
            requested_memory: node.requested.memory,
            requested_ephemeral_storage: node.requested.ephemeral_storage,
            non_zero_milli_cpu: node.non_zero_requested.milli_cpu,
            non_zero_memory: node.non_zero_requested.memory,
            pods: u32::try_from(node.pods.len()).unwrap_or(u32::MAX),
            unschedulable: node.unschedulable(),
            has_taints: !node.taints().is_empty(),
            has_images: !node.image_states.is_empty(),
            position: NodeRow::NO_POSITION,
        }
    }
}
