//! [`PodKey`]: who a pod is, as the queue, the cache and the scheduler's bookkeeping key it.

use std::borrow::Borrow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// A pod's identity: its UID, or `namespace/name` when it has none (pods built by hand, in
/// tests or in files given to `simulate`). The scheduling queue, the cache, the nominator,
/// pods waiting at Permit and running preemptions are all keyed by it, so that a pod
/// deleted and created again under the same name is a different pod, as upstream keys its
/// cache by UID.
///
/// Computed once per pod ([`crate::PodInfo::id`]); cloning copies a pointer. It borrows as
/// `str`, so maps keyed by it are looked up with a `&str`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey(Arc<str>);

impl PodKey {
    /// The key of `pod`. Prefer [`crate::PodInfo::id`], computed once, where a PodInfo is at
    /// hand.
    pub fn of(pod: &Pod) -> PodKey {
        match pod.metadata.uid.as_deref() {
            Some(uid) if !uid.is_empty() => PodKey(Arc::from(uid)),
            _ => PodKey(Arc::from(namespaced_name(pod))),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `namespace/name`, the way people and messages name a pod (`default` when the namespace
/// is unset, as the API server defaults it).
pub fn namespaced_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

impl Borrow<str> for PodKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for PodKey {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for PodKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for PodKey {
    fn from(s: &str) -> Self {
        PodKey(Arc::from(s))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rstest::rstest;

    use super::PodKey;
    use crate::testing::make_pod;

    #[rstest]
    #[case::uid_when_set(make_pod("web").namespace("prod").uid("u-1").obj(), "u-1")]
    #[case::namespaced_name_without_uid(make_pod("web").namespace("prod").uid("").obj(), "prod/web")]
    #[case::default_namespace_when_unset(make_pod("web").uid("").obj(), "default/web")]
    fn key_of_a_pod(#[case] pod: k8s_openapi::api::core::v1::Pod, #[case] want: &str) {
        assert_eq!(PodKey::of(&pod).as_str(), want);
    }

    #[test]
    fn maps_keyed_by_it_are_looked_up_with_a_str() {
        let mut m = HashMap::new();
        m.insert(PodKey::from("u-1"), 1);
        assert_eq!(m.get("u-1"), Some(&1));
    }
}
