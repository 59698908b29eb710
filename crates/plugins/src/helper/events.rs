//! Reading the objects of cluster events in queueing hints.
//!
//! Upstream: pkg/scheduler/util (As), shared by the plugins' hint functions.

use std::sync::Arc;

use framework::{EventKind, EventObject};
use k8s_openapi::api::core::v1::{Node, Pod};

/// The new object of an event as a `T`; another kind or none is an error (upstream
/// `util.As`: "expected Pod, but got Node").
pub fn new_object<T: EventKind>(new: Option<&EventObject>) -> Result<&Arc<T>, String> {
    match new {
        Some(o) => T::of(o).ok_or_else(|| format!("expected {}, but got {}", T::KIND, o.kind())),
        None => Err(format!("expected {}, but got nothing", T::KIND)),
    }
}

/// The old object of an event as a `T`, if the event has one; another kind is an error.
pub fn old_object<T: EventKind>(old: Option<&EventObject>) -> Result<Option<&Arc<T>>, String> {
    old.map(|o| new_object(Some(o))).transpose()
}

/// The old and new nodes of a node event; a missing or non-node new object is an error
/// (upstream `util.As`).
pub fn node_change<'a>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a Node>, &'a Node), String> {
    let modified = new_object::<Node>(new)?;
    let original = old_object::<Node>(old)?;
    Ok((original.map(AsRef::as_ref), modified.as_ref()))
}

/// The new pod of a pod event; a missing or non-pod new object is an error.
pub fn modified_pod(new: Option<&EventObject>) -> Result<&Pod, String> {
    new_object::<Pod>(new).map(AsRef::as_ref)
}

/// Whether two pod objects are the same pod (equal UIDs; an absent UID counts as empty).
pub fn same_uid(a: &Pod, b: &Pod) -> bool {
    a.metadata.uid.as_deref().unwrap_or("") == b.metadata.uid.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;

    #[test]
    fn an_event_object_of_another_kind_or_none_is_an_error() {
        let mut c = PersistentVolumeClaim::default();
        c.metadata.name = Some("data".into());
        let claim = EventObject::PersistentVolumeClaim(Arc::new(c));
        let node = EventObject::Node(Arc::new(Node::default()));
        let name = |c: &Arc<PersistentVolumeClaim>| c.metadata.name.clone().unwrap_or_default();
        let got = (
            new_object::<PersistentVolumeClaim>(Some(&claim)).map(name),
            new_object::<PersistentVolumeClaim>(Some(&node)).map(name),
            new_object::<PersistentVolumeClaim>(None).map(name),
            old_object::<PersistentVolumeClaim>(Some(&claim)).map(|c| c.map(name)),
            old_object::<PersistentVolumeClaim>(Some(&node)).map(|c| c.map(name)),
            old_object::<PersistentVolumeClaim>(None).map(|c| c.map(name)),
        );
        assert_eq!(
            got,
            (
                Ok("data".to_string()),
                Err("expected PersistentVolumeClaim, but got Node".to_string()),
                Err("expected PersistentVolumeClaim, but got nothing".to_string()),
                Ok(Some("data".to_string())),
                Err("expected PersistentVolumeClaim, but got Node".to_string()),
                Ok(None),
            )
        );
    }
}
