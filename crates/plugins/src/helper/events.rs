//! Reading the objects of cluster events in queueing hints.
//!
//! Upstream: pkg/scheduler/util (As), shared by the plugins' hint functions.

use framework::EventObject;
use k8s_openapi::api::core::v1::{Node, Pod};

/// The old and new nodes of a node event; a missing or non-node new object is an error
/// (upstream `util.As`).
pub fn node_change<'a>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a Node>, &'a Node), String> {
    let modified = match new {
        Some(EventObject::Node(n)) => n.as_ref(),
        Some(o) => return Err(format!("expected Node, but got {}", o.kind())),
        None => return Err("expected Node, but got nothing".to_string()),
    };
    let original = match old {
        Some(EventObject::Node(n)) => Some(n.as_ref()),
        Some(o) => return Err(format!("expected Node, but got {}", o.kind())),
        None => None,
    };
    Ok((original, modified))
}

/// The new pod of a pod event; a missing or non-pod new object is an error.
pub fn modified_pod(new: Option<&EventObject>) -> Result<&Pod, String> {
    match new {
        Some(EventObject::Pod(p)) => Ok(p.as_ref()),
        Some(o) => Err(format!("expected Pod, but got {}", o.kind())),
        None => Err("expected Pod, but got nothing".to_string()),
    }
}

/// Whether two pod objects are the same pod (equal UIDs; an absent UID counts as empty).
pub fn same_uid(a: &Pod, b: &Pod) -> bool {
    a.metadata.uid.as_deref().unwrap_or("") == b.metadata.uid.as_deref().unwrap_or("")
}
