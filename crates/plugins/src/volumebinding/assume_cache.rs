//! The volumes and claims the scheduler has decided on but the API server does not show yet.
//!
//! Upstream: pkg/scheduler/util/assumecache and volumebinding/assume_cache.go. Reserve
//! assumes a volume pre-bound to a claim, or a claim with its selected node, so that the
//! next pod's cycle sees the decision before PreBind's write comes back through the
//! informer. Here the cache is an overlay over the informer's objects, which the caller
//! passes in: an assumed object is what readers see until the informer's object has a newer
//! `resourceVersion` (the write landed, or someone else changed the object) or disappears.
//! Unreserve restores the informer's object.
//!
//! **Invariant:** an assumed object is never older than the object it overlays: assuming
//! an object older than what is seen is refused. An object without `resourceVersion` (one
//! that never came from an API server, as in `simulate`'s files) counts as version 0.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::Metadata;
use thiserror::Error;

/// Why an object could not be assumed; the cache is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AssumeError {
    /// Neither the informer nor the cache has the object.
    #[error("could not find {description} {name:?}")]
    NotFound {
        description: &'static str,
        name: String,
    },
    /// The object to assume is older than the one seen.
    #[error("{description} {name:?} is out of sync (stored: {stored}, assume: {assumed})")]
    OutOfSync {
        description: &'static str,
        name: String,
        stored: i64,
        assumed: i64,
    },
    /// A `resourceVersion` that is not an integer.
    #[error("error parsing ResourceVersion {version:?} for {description} {name:?}")]
    BadVersion {
        description: &'static str,
        name: String,
        version: String,
    },
}

/// Assumed objects of one kind, by key (`name`, or `namespace/name` for claims).
#[derive(Debug)]
pub struct AssumeCache<T> {
    /// Names the kind in errors: `v1.PersistentVolume`.
    description: &'static str,
    assumed: HashMap<String, Arc<T>>,
}

impl<T: Metadata<Ty = ObjectMeta>> AssumeCache<T> {
    pub fn new(description: &'static str) -> Self {
        AssumeCache {
            description,
            assumed: HashMap::new(),
        }
    }

    /// The object `key` as the scheduler sees it, given the informer's object: the assumed
    /// one unless the informer's is newer; nothing when the informer has none.
    pub fn get(&self, key: &str, informer: Option<&Arc<T>>) -> Option<Arc<T>> {
        let informer = informer?;
        match self.assumed.get(key) {
            Some(assumed) if !is_newer(informer.as_ref(), assumed.as_ref()) => {
                Some(assumed.clone())
            }
            _ => Some(informer.clone()),
        }
    }

    /// Makes `obj` what readers of `key` see until the informer shows a newer object.
    pub fn assume(
        &mut self,
        key: &str,
        obj: Arc<T>,
        informer: Option<&Arc<T>>,
    ) -> Result<(), AssumeError> {
        let Some(latest) = self.get(key, informer) else {
            return Err(AssumeError::NotFound {
                description: self.description,
                name: key.to_string(),
            });
        };
        let stored = self.version(key, &latest)?;
        let assumed = self.version(key, &obj)?;
        if assumed < stored {
            return Err(AssumeError::OutOfSync {
                description: self.description,
                name: key.to_string(),
                stored,
                assumed,
            });
        }
        self.assumed.insert(key.to_string(), obj);
        Ok(())
    }

    /// Drops the assumption on `key`, if any: readers see the informer's object again.
    pub fn restore(&mut self, key: &str) {
        self.assumed.remove(key);
    }

    /// Forgets assumptions the informer has overtaken (a newer object, or none).
    pub fn prune(&mut self, informer: impl Fn(&str) -> Option<Arc<T>>) {
        self.assumed.retain(|key, assumed| {
            informer(key).is_some_and(|i| !is_newer(i.as_ref(), assumed.as_ref()))
        });
    }

    /// How many objects are assumed.
    pub fn len(&self) -> usize {
        self.assumed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.assumed.is_empty()
    }

    fn version(&self, key: &str, obj: &T) -> Result<i64, AssumeError> {
        let version = obj.metadata().resource_version.as_deref().unwrap_or("");
        if version.is_empty() {
            // An object that never came from an API server (`simulate`'s input files).
            return Ok(0);
        }
        version.parse().map_err(|_| AssumeError::BadVersion {
            description: self.description,
            name: key.to_string(),
            version: version.to_string(),
        })
    }
}

/// The integer `resourceVersion` of `obj`, if it has one.
pub fn resource_version<T: Metadata<Ty = ObjectMeta>>(obj: &T) -> Option<i64> {
    obj.metadata().resource_version.as_deref()?.parse().ok()
}

/// Whether `a` has a newer `resourceVersion` than `b`; versions that do not parse are
/// never newer, so an object the informer cannot order does not end an assumption.
fn is_newer<T: Metadata<Ty = ObjectMeta>>(a: &T, b: &T) -> bool {
    match (resource_version(a), resource_version(b)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}
