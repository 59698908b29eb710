//! The structured allocator: picks devices from ResourceSlices for a pod's ResourceClaims on
//! one node, or says why it cannot.
//!
//! Upstream: staging/src/k8s.io/dynamic-resource-allocation/structured (the stable allocator,
//! internal/stable/allocator_stable.go and pools_stable.go).
//!
//! The input is what DynamicResources' Filter has for one node: the claims still to allocate,
//! the DeviceClasses, the ResourceSlices, the devices already in use (allocated claims and
//! in-flight allocations of other pods, one set), and the Node. The search is exhaustive with
//! backtracking, as upstream's: claims in order, requests in order, devices of the reachable
//! pools in order (pools sorted by driver and pool name); every chosen device is checked
//! against the request's and class's CEL selectors, "in use" (admin access may share), device
//! taints against the request's tolerations, and the claim's `matchAttribute` constraints.
//! When a later request or constraint cannot be met, earlier choices are undone and the next
//! candidate is tried. The first complete solution wins.
//!
//! A request with `firstAvailable` tries its sub-requests in order and takes the first one
//! that leads to a complete solution; its results are named `request/subrequest`.
//!
//! CEL is reached through [`Selectors`], so that the evaluator (the `kubesched-cel` crate's
//! `SelectorCache`) stays outside this module.
//!
//! When no solution exists, [`Outcome::Unschedulable`] carries an [`Explanation`]: per claim
//! and request, how many devices it wants, how many would do, and why the others were
//! rejected (which class or request selector, in use, tainted), for Filter's status and for
//! `simulate`.

mod explain;
mod pools;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceAttribute, DeviceClass, DeviceRequest, DeviceRequestAllocationResult, DeviceSelector,
    DeviceTaint, DeviceToleration, ResourceClaim, ResourceSlice,
};
use thiserror::Error;

pub use explain::{ClaimExplanation, Explanation, Rejection, RequestExplanation, Wanted};
use pools::Pool;

/// Filter's message when the claims cannot all be allocated on a node.
pub const CANNOT_ALLOCATE_ALL_CLAIMS: &str = "cannot allocate all claims";

/// The most devices one claim's allocation may hold (`resource.AllocationResultsMaxSize`).
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// `allocationMode` values.
pub const ALLOCATION_MODE_EXACT_COUNT: &str = "ExactCount";
pub const ALLOCATION_MODE_ALL: &str = "All";

/// Where a configuration in the allocation result came from.
pub const CONFIG_SOURCE_CLASS: &str = "FromClass";
pub const CONFIG_SOURCE_CLAIM: &str = "FromClaim";

/// One device: `driver/pool/device`, as upstream's DeviceID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl DeviceId {
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        DeviceId {
            driver: driver.to_string(),
            pool: pool.to_string(),
            device: device.to_string(),
        }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Why a CEL device selector could not be applied. The strings are the evaluator's messages.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SelectorError {
    /// The expression does not compile (e.g. "undeclared reference to 'x'").
    #[error("{0}")]
    Compile(String),
    /// Evaluating the expression on this device failed (e.g. "no such key: model").
    #[error("{0}")]
    Runtime(String),
}

/// Evaluates one CEL device selector on one device. [`kubesched_cel::SelectorCache`] is the
/// evaluator the scheduler uses (each expression compiled once, evaluated many times).
pub trait Selectors: Send + Sync {
    fn matches(
        &self,
        expression: &str,
        driver: &str,
        device: &Device,
    ) -> Result<bool, SelectorError>;
}

impl Selectors for kubesched_cel::SelectorCache {
    fn matches(
        &self,
        expression: &str,
        driver: &str,
        device: &Device,
    ) -> Result<bool, SelectorError> {
        let selector = self
            .get(expression)
            .map_err(|e| SelectorError::Compile(e.to_string()))?;
        selector
            .matches(driver, device)
            .map_err(|e| SelectorError::Runtime(e.to_string()))
    }
}

/// The DeviceClasses by name.
pub trait DeviceClassLister: Send + Sync {
    fn get(&self, name: &str) -> Option<&DeviceClass>;
}

impl DeviceClassLister for Vec<DeviceClass> {
    fn get(&self, name: &str) -> Option<&DeviceClass> {
        self.iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }
}

impl<T: std::borrow::Borrow<DeviceClass> + Send + Sync> DeviceClassLister
    for std::collections::BTreeMap<String, T>
{
    fn get(&self, name: &str) -> Option<&DeviceClass> {
        std::collections::BTreeMap::get(self, name).map(|c| c.borrow())
    }
}

/// The optional parts of DRA the allocator may use, as the scheduler's feature gates say.
/// A claim that uses a disabled part is an error, as upstream, rather than silently
/// allocated without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `adminAccess` on requests (DRAAdminAccess).
    pub admin_access: bool,
    /// `firstAvailable` sub-requests (DRAPrioritizedList).
    pub prioritized_list: bool,
    /// Device taints keep devices from being allocated unless tolerated (DRADeviceTaints).
    pub device_taints: bool,
}

impl Features {
    /// Every part enabled.
    pub const ALL: Features = Features {
        admin_access: true,
        prioritized_list: true,
        device_taints: true,
    };
}

/// What allocation decided for the node.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// One result per claim, in the order the claims were given.
    Allocated(Vec<AllocationResult>),
    /// No combination of devices satisfies all claims on this node.
    Unschedulable(Explanation),
}

/// Claims or objects the allocator cannot work with. Messages are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocateError {
    /// A request with `firstAvailable` while DRAPrioritizedList is off.
    #[error("claim {claim}, request {request}: has subrequests, but the DRAPrioritizedList feature is disabled")]
    PrioritizedListDisabled { claim: String, request: String },
    /// A request with neither `exactly` nor `firstAvailable`.
    #[error(
        "claim {claim}, request {request}: missing device class name (unsupported request type?)"
    )]
    MissingDeviceClassName { claim: String, request: String },
    /// A selector without `cel`: something newer than this code.
    #[error("claim {claim}, request {request}, selector #{index}: CEL expression empty (unsupported selector type?)")]
    EmptySelector {
        claim: String,
        request: String,
        index: usize,
    },
    /// `adminAccess` while DRAAdminAccess is off.
    #[error(
        "claim {claim}, request {request}: admin access is requested, but the feature is disabled"
    )]
    AdminAccessDisabled { claim: String, request: String },
    /// The request names a class that does not exist.
    #[error("claim {claim}, request {request}: could not retrieve device class {class}: deviceclass.resource.k8s.io \"{class}\" not found")]
    ClassNotFound {
        claim: String,
        request: String,
        class: String,
    },
    /// An `allocationMode` this code does not know.
    #[error("claim {claim}, request {request}: unsupported count mode {mode}")]
    UnsupportedAllocationMode {
        claim: String,
        request: String,
        mode: String,
    },
    /// A negative `count`.
    #[error("claim {claim}, request {request}: exact count {count} is too large")]
    InvalidCount {
        claim: String,
        request: String,
        count: i64,
    },
    /// `All` while a pool the node reaches is still being published.
    #[error("claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently being updated")]
    AllDevicesPoolIncomplete {
        claim: String,
        request: String,
        pool: String,
    },
    /// `All` while a pool the node reaches is invalid.
    #[error("claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently invalid")]
    AllDevicesPoolInvalid {
        claim: String,
        request: String,
        pool: String,
    },
    /// The claim asks for more devices than one allocation may hold.
    #[error(
        "claim {claim}: number of requested devices {requested} exceeds the claim limit of {limit}"
    )]
    TooManyDevices {
        claim: String,
        requested: usize,
        limit: usize,
    },
    /// A constraint with no known field set.
    #[error("claim {claim}, constraint #{index}: empty constraint (unsupported constraint type?)")]
    EmptyConstraint { claim: String, index: usize },
    /// `All` picks a device that the claim's constraints reject: the claim contradicts itself.
    #[error("claim {claim}, request {request}: cannot add device {device} because a claim constraint would not be satisfied")]
    AllDevicesViolateConstraint {
        claim: String,
        request: String,
        /// `driver/pool/device`.
        device: String,
    },
    /// A class selector does not compile.
    #[error("class {class}: selector #{index}: CEL compile error: {message}")]
    ClassSelectorCompile {
        class: String,
        index: usize,
        message: String,
    },
    /// A request selector does not compile.
    #[error("claim {claim}: selector #{index}: CEL compile error: {message}")]
    ClaimSelectorCompile {
        claim: String,
        index: usize,
        message: String,
    },
    /// A class selector failed on a device.
    #[error("class {class}: selector #{index} on device {device}: CEL runtime error: {message}")]
    ClassSelectorRuntime {
        class: String,
        index: usize,
        /// `driver/pool/device`.
        device: String,
        message: String,
    },
    /// A request selector failed on a device.
    #[error("claim {claim}: selector #{index} on device {device}: CEL runtime error: {message}")]
    ClaimSelectorRuntime {
        claim: String,
        index: usize,
        /// `driver/pool/device`.
        device: String,
        message: String,
    },
    /// A slice's node selector does not compile.
    #[error("failed to perform node selection for slice {slice}: {message}")]
    NodeSelection { slice: String, message: String },
    /// Nothing could be allocated and some reachable pool is invalid. Upstream reports this
    /// for the node only (allocation may succeed on other nodes).
    #[error("invalid resource pools were encountered")]
    InvalidPools,
    /// A slice's node selector with more than one term (validation forbids it).
    #[error("create NodeSelector for claim {claim}: unsupported ResourceSlice.NodeSelector with {terms} terms")]
    UnsupportedNodeSelector { claim: String, terms: usize },
    /// The search was given up because its deadline passed (Filter's `filterTimeout`).
    #[error("context deadline exceeded")]
    DeadlineExceeded,
}

/// The allocator for one set of cluster objects; [`Allocator::allocate`] may be called for
/// many nodes.
pub struct Allocator<'a> {
    features: Features,
    in_use: &'a HashSet<DeviceId>,
    classes: &'a dyn DeviceClassLister,
    slices: Vec<&'a ResourceSlice>,
    selectors: &'a dyn Selectors,
    /// Asked before each device the search tries: `true` gives the search up with
    /// [`AllocateError::DeadlineExceeded`].
    deadline_passed: Option<&'a (dyn Fn() -> bool + Sync)>,
}

impl fmt::Debug for Allocator<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocator")
            .field("features", &self.features)
            .field("in_use", &self.in_use.len())
            .field("slices", &self.slices.len())
            .finish()
    }
}

impl<'a> Allocator<'a> {
    /// `in_use` holds the devices of allocated claims and of other pods' in-flight
    /// allocations: none of them is given to a request without admin access.
    pub fn new(
        features: Features,
        in_use: &'a HashSet<DeviceId>,
        classes: &'a dyn DeviceClassLister,
        slices: impl IntoIterator<Item = &'a ResourceSlice>,
        selectors: &'a dyn Selectors,
    ) -> Self {
        Allocator {
            features,
            in_use,
            classes,
            slices: slices.into_iter().collect(),
            selectors,
            deadline_passed: None,
        }
    }

    /// Gives the search up once `passed` says so: a pathological combination of claims and
    /// devices must not hold up the scheduling cycle (upstream cancels the allocation's
    /// context after `filterTimeout`).
    pub fn with_deadline(mut self, passed: &'a (dyn Fn() -> bool + Sync)) -> Self {
        self.deadline_passed = Some(passed);
        self
    }

    /// Allocates devices for all `claims` on `node`, or explains why that is impossible.
    pub fn allocate(
        &self,
        node: &Node,
        claims: &[&ResourceClaim],
    ) -> Result<Outcome, AllocateError> {
        let pools = pools::gather_pools(&self.slices, node)?;
        let candidates = candidates(&pools, self.in_use);
        let mut claim_data = Vec::with_capacity(claims.len());
        for claim in claims {
            claim_data.push(self.prepare_claim(claim, &pools, &candidates, node)?);
        }
        let mut search = Search {
            allocator: self,
            node,
            candidates: &candidates,
            claims: &claim_data,
            allocating: vec![Vec::new(); candidates.len()],
            results: vec![Vec::new(); claim_data.len()],
            constraints: claim_data
                .iter()
                .map(|c| c.constraints.iter().map(Constraint::new).collect())
                .collect(),
            selected_subrequest: claim_data
                .iter()
                .map(|c| vec![0; c.requests.len()])
                .collect(),
            matches: claim_data
                .iter()
                .map(|c| {
                    c.requests
                        .iter()
                        .map(|r| vec![vec![None; candidates.len()]; r.alternatives.len()])
                        .collect()
                })
                .collect(),
        };
        if !search.allocate_one(Position::default(), false)? {
            if pools.iter().any(|p| p.invalid.is_some()) {
                return Err(AllocateError::InvalidPools);
            }
            let explanation = explain::explain(&mut search, &pools)?;
            return Ok(Outcome::Unschedulable(explanation));
        }
        let mut out = Vec::with_capacity(claims.len());
        for (index, claim) in claim_data.iter().enumerate() {
            out.push(search.result(index, claim)?);
        }
        Ok(Outcome::Allocated(out))
    }

    /// Checks a claim's requests and constraints and works out how many devices each needs.
    fn prepare_claim<'c>(
        &self,
        claim: &'c ResourceClaim,
        pools: &[Pool<'c>],
        candidates: &[Candidate<'c>],
        node: &Node,
    ) -> Result<ClaimData<'c>, AllocateError>
    where
        'a: 'c,
    {
        let claim_name = object_name(claim);
        let devices = claim.spec.devices.as_ref();
        let mut requests = Vec::new();
        let mut min_devices = 0usize;
        for request in devices.and_then(|d| d.requests.as_deref()).unwrap_or(&[]) {
            let subrequests = request.first_available.as_deref().unwrap_or(&[]);
            if !subrequests.is_empty() {
                if !self.features.prioritized_list {
                    return Err(AllocateError::PrioritizedListDisabled {
                        claim: claim_name,
                        request: request.name.clone(),
                    });
                }
                let mut alternatives = Vec::with_capacity(subrequests.len());
                for sub in subrequests {
                    let spec = RequestSpec {
                        name: format!("{}/{}", request.name, sub.name),
                        base: &request.name,
                        sub: Some(&sub.name),
                        class_name: &sub.device_class_name,
                        selectors: sub.selectors.as_deref().unwrap_or(&[]),
                        tolerations: sub.tolerations.as_deref().unwrap_or(&[]),
                        admin_access: None,
                        mode: sub.allocation_mode.as_deref(),
                        count: sub.count,
                    };
                    alternatives.push(self.prepare_request(
                        &claim_name,
                        spec,
                        &sub.name,
                        pools,
                        candidates,
                        node,
                    )?);
                }
                min_devices += alternatives
                    .iter()
                    .map(|r| r.num_devices)
                    .min()
                    .unwrap_or(0);
                requests.push(RequestSlot {
                    prioritized: true,
                    alternatives,
                });
            } else {
                let Some(exactly) = request.exactly.as_ref() else {
                    return Err(AllocateError::MissingDeviceClassName {
                        claim: claim_name,
                        request: request.name.clone(),
                    });
                };
                let spec = RequestSpec {
                    name: request.name.clone(),
                    base: &request.name,
                    sub: None,
                    class_name: &exactly.device_class_name,
                    selectors: exactly.selectors.as_deref().unwrap_or(&[]),
                    tolerations: exactly.tolerations.as_deref().unwrap_or(&[]),
                    admin_access: exactly.admin_access,
                    mode: exactly.allocation_mode.as_deref(),
                    count: exactly.count,
                };
                let data = self.prepare_request(
                    &claim_name,
                    spec,
                    &request.name,
                    pools,
                    candidates,
                    node,
                )?;
                min_devices += data.num_devices;
                requests.push(RequestSlot {
                    prioritized: false,
                    alternatives: vec![data],
                });
            }
        }
        if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(AllocateError::TooManyDevices {
                claim: claim_name,
                requested: min_devices,
                limit: ALLOCATION_RESULTS_MAX_SIZE,
            });
        }
        let mut constraints = Vec::new();
        for (index, constraint) in devices
            .and_then(|d| d.constraints.as_deref())
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            let Some(attribute) = constraint.match_attribute.as_deref() else {
                return Err(AllocateError::EmptyConstraint {
                    claim: claim_name,
                    index,
                });
            };
            constraints.push(MatchAttribute {
                requests: constraint.requests.clone().unwrap_or_default(),
                attribute: attribute.to_string(),
            });
        }
        Ok(ClaimData {
            claim,
            name: claim_name,
            requests,
            constraints,
        })
    }

    /// Validates one request or sub-request; for `All`, finds the devices it will get.
    fn prepare_request<'c>(
        &self,
        claim_name: &str,
        spec: RequestSpec<'c>,
        message_name: &str,
        pools: &[Pool<'c>],
        candidates: &[Candidate<'c>],
        node: &Node,
    ) -> Result<RequestData<'c>, AllocateError>
    where
        'a: 'c,
    {
        let err_names = || (claim_name.to_string(), message_name.to_string());
        for (index, selector) in spec.selectors.iter().enumerate() {
            if selector.cel.is_none() {
                let (claim, request) = err_names();
                return Err(AllocateError::EmptySelector {
                    claim,
                    request,
                    index,
                });
            }
        }
        if !self.features.admin_access && spec.admin_access.is_some() {
            let (claim, request) = err_names();
            return Err(AllocateError::AdminAccessDisabled { claim, request });
        }
        if spec.class_name.is_empty() {
            let (claim, request) = err_names();
            return Err(AllocateError::MissingDeviceClassName { claim, request });
        }
        let Some(class) = self.classes.get(spec.class_name) else {
            let (claim, request) = err_names();
            return Err(AllocateError::ClassNotFound {
                claim,
                request,
                class: spec.class_name.to_string(),
            });
        };
        let mode = spec.mode.unwrap_or(ALLOCATION_MODE_EXACT_COUNT);
        let mut data = RequestData {
            spec,
            class,
            all: false,
            num_devices: 0,
            all_devices: Vec::new(),
        };
        match mode {
            ALLOCATION_MODE_EXACT_COUNT | "" => {
                // The API defaults a missing count to one.
                let count = data.spec.count.unwrap_or(1);
                data.num_devices = usize::try_from(count).map_err(|_| {
                    let (claim, request) = err_names();
                    AllocateError::InvalidCount {
                        claim,
                        request,
                        count,
                    }
                })?;
            }
            ALLOCATION_MODE_ALL => {
                data.all = true;
                for pool in pools {
                    if pool.incomplete {
                        let (claim, request) = err_names();
                        return Err(AllocateError::AllDevicesPoolIncomplete {
                            claim,
                            request,
                            pool: pool.id(),
                        });
                    }
                    if pool.invalid.is_some() {
                        let (claim, request) = err_names();
                        return Err(AllocateError::AllDevicesPoolInvalid {
                            claim,
                            request,
                            pool: pool.id(),
                        });
                    }
                }
                for (index, candidate) in candidates.iter().enumerate() {
                    if selectable(self.selectors, claim_name, &data, candidate, node)?
                        == Selectable::Yes
                    {
                        data.all_devices.push(index);
                    }
                }
                data.num_devices = data.all_devices.len();
            }
            other => {
                let (claim, request) = err_names();
                return Err(AllocateError::UnsupportedAllocationMode {
                    claim,
                    request,
                    mode: other.to_string(),
                });
            }
        }
        Ok(data)
    }
}

/// `namespace/name` (or `name` without a namespace), as klog.KObj prints an object.
pub(super) fn object_name(claim: &ResourceClaim) -> String {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    match claim.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// A device the node can reach in a usable pool.
#[derive(Debug)]
struct Candidate<'a> {
    id: DeviceId,
    device: &'a Device,
    slice: &'a ResourceSlice,
    /// In the allocator's `in_use` set, looked up once per call rather than on every try.
    allocated: bool,
}

/// The devices of complete, valid pools, pool by pool, slice by slice.
fn candidates<'a>(pools: &[Pool<'a>], in_use: &HashSet<DeviceId>) -> Vec<Candidate<'a>> {
    let mut out = Vec::new();
    for pool in pools {
        if pool.incomplete || pool.invalid.is_some() {
            continue;
        }
        for slice in &pool.slices {
            for device in slice.spec.devices.iter().flatten() {
                let id = DeviceId::new(pool.driver, pool.name, &device.name);
                out.push(Candidate {
                    allocated: in_use.contains(&id),
                    id,
                    device,
                    slice,
                });
            }
        }
    }
    out
}

/// The fields of an `exactly` request or a sub-request the allocator reads.
#[derive(Debug)]
struct RequestSpec<'a> {
    /// The name results carry: `request` or `request/subrequest`.
    name: String,
    /// The request's name (the parent's for a sub-request).
    base: &'a str,
    sub: Option<&'a str>,
    class_name: &'a str,
    selectors: &'a [DeviceSelector],
    tolerations: &'a [DeviceToleration],
    admin_access: Option<bool>,
    mode: Option<&'a str>,
    count: Option<i64>,
}

#[derive(Debug)]
struct RequestData<'a> {
    spec: RequestSpec<'a>,
    class: &'a DeviceClass,
    all: bool,
    num_devices: usize,
    /// For `All`: the candidates (indices) it gets.
    all_devices: Vec<usize>,
}

impl RequestData<'_> {
    fn admin_access(&self) -> bool {
        self.spec.admin_access == Some(true)
    }
}

/// A request: one alternative for `exactly`, one per sub-request for `firstAvailable`.
#[derive(Debug)]
struct RequestSlot<'a> {
    prioritized: bool,
    alternatives: Vec<RequestData<'a>>,
}

#[derive(Debug)]
struct ClaimData<'a> {
    claim: &'a ResourceClaim,
    name: String,
    requests: Vec<RequestSlot<'a>>,
    constraints: Vec<MatchAttribute>,
}

#[derive(Debug)]
struct MatchAttribute {
    /// Empty: all requests.
    requests: Vec<String>,
    attribute: String,
}

impl MatchAttribute {
    fn applies_to(&self, base: &str, sub: Option<&str>) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        // A name is the request's (covering whichever sub-request is chosen) or one
        // sub-request's, `request/subrequest`.
        self.requests.iter().any(|r| {
            r == base
                || (sub.is_some()
                    && r.strip_prefix(base).and_then(|rest| rest.strip_prefix('/')) == sub)
        })
    }
}

/// A `matchAttribute` constraint while searching: the value the first device set and how
/// many devices share it.
#[derive(Debug)]
struct Constraint<'a> {
    spec: &'a MatchAttribute,
    value: Option<&'a DeviceAttribute>,
    devices: usize,
}

impl<'a> Constraint<'a> {
    fn new(spec: &'a MatchAttribute) -> Self {
        Constraint {
            spec,
            value: None,
            devices: 0,
        }
    }

    fn add(&mut self, request: &RequestSpec<'_>, candidate: &Candidate<'a>) -> bool {
        if !self.spec.applies_to(request.base, request.sub) {
            return true;
        }
        let Some(attribute) = lookup_attribute(candidate, &self.spec.attribute) else {
            return false;
        };
        if self.devices == 0 {
            self.value = Some(attribute);
            self.devices = 1;
            return true;
        }
        let Some(first) = self.value else {
            return false;
        };
        // Versions are compared as strings: semver's canonical form has no leading zeros.
        let same = match attribute {
            DeviceAttribute {
                string: Some(v), ..
            } => first.string.as_ref() == Some(v),
            DeviceAttribute { int: Some(v), .. } => first.int == Some(*v),
            DeviceAttribute { bool: Some(v), .. } => first.bool == Some(*v),
            DeviceAttribute {
                version: Some(v), ..
            } => first.version.as_ref() == Some(v),
            _ => false,
        };
        if same {
            self.devices += 1;
        }
        same
    }

    fn remove(&mut self, request: &RequestSpec<'_>) {
        if !self.spec.applies_to(request.base, request.sub) {
            return;
        }
        self.devices = self.devices.saturating_sub(1);
        if self.devices == 0 {
            self.value = None;
        }
    }
}

/// A device's attribute by fully qualified name; the driver's own domain may be left out in
/// the slice.
fn lookup_attribute<'a>(candidate: &Candidate<'a>, name: &str) -> Option<&'a DeviceAttribute> {
    let attributes = candidate.device.attributes.as_ref()?;
    if let Some(a) = attributes.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != candidate.id.driver {
        return None;
    }
    attributes.get(id)
}

/// Whether a device passes a request's class and request selectors (and, with per-device
/// node selection, reaches the node); when not, which selector rejected it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selectable {
    Yes,
    ClassSelector(usize),
    RequestSelector(usize),
    OtherNode,
    /// It needs something this allocator does not do (see [`Unsupported`]).
    Unsupported(Unsupported),
}

/// Device features this allocator does not allocate, as upstream's allocator with the
/// feature gates DRADeviceBindingConditions and DRAPartitionableDevices' shared counters
/// off: such devices are skipped, never handed out half-supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// `bindingConditions`: the device is only ready once the driver says so.
    BindingConditions,
    /// `consumesCounters`: the device shares counters with other devices of its pool.
    SharedCounters,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unsupported::BindingConditions => "binding conditions",
            Unsupported::SharedCounters => "shared counters",
        })
    }
}

fn selectable(
    selectors: &dyn Selectors,
    claim_name: &str,
    request: &RequestData<'_>,
    candidate: &Candidate<'_>,
    node: &Node,
) -> Result<Selectable, AllocateError> {
    let device = candidate.device;
    if device
        .binding_conditions
        .as_ref()
        .is_some_and(|c| !c.is_empty())
    {
        return Ok(Selectable::Unsupported(Unsupported::BindingConditions));
    }
    if device
        .consumes_counters
        .as_ref()
        .is_some_and(|c| !c.is_empty())
    {
        return Ok(Selectable::Unsupported(Unsupported::SharedCounters));
    }
    let class_name = request.class.metadata.name.as_deref().unwrap_or_default();
    let class_selectors = request.class.spec.selectors.as_deref().unwrap_or(&[]);
    for (index, selector) in class_selectors.iter().enumerate() {
        let Some(cel) = selector.cel.as_ref() else {
            continue;
        };
        match selectors.matches(&cel.expression, &candidate.id.driver, candidate.device) {
            Ok(true) => {}
            Ok(false) => return Ok(Selectable::ClassSelector(index)),
            Err(SelectorError::Compile(message)) => {
                return Err(AllocateError::ClassSelectorCompile {
                    class: class_name.to_string(),
                    index,
                    message,
                })
            }
            Err(SelectorError::Runtime(message)) => {
                return Err(AllocateError::ClassSelectorRuntime {
                    class: class_name.to_string(),
                    index,
                    device: candidate.id.to_string(),
                    message,
                })
            }
        }
    }
    for (index, selector) in request.spec.selectors.iter().enumerate() {
        let Some(cel) = selector.cel.as_ref() else {
            continue;
        };
        match selectors.matches(&cel.expression, &candidate.id.driver, candidate.device) {
            Ok(true) => {}
            Ok(false) => return Ok(Selectable::RequestSelector(index)),
            Err(SelectorError::Compile(message)) => {
                return Err(AllocateError::ClaimSelectorCompile {
                    claim: claim_name.to_string(),
                    index,
                    message,
                })
            }
            Err(SelectorError::Runtime(message)) => {
                return Err(AllocateError::ClaimSelectorRuntime {
                    claim: claim_name.to_string(),
                    index,
                    device: candidate.id.to_string(),
                    message,
                })
            }
        }
    }
    if candidate.slice.spec.per_device_node_selection == Some(true) {
        let reaches = pools::device_reaches_node(node, candidate.device).map_err(|message| {
            AllocateError::NodeSelection {
                slice: candidate.slice.metadata.name.clone().unwrap_or_default(),
                message,
            }
        })?;
        if !reaches {
            return Ok(Selectable::OtherNode);
        }
    }
    Ok(Selectable::Yes)
}

/// Whether an untolerated NoSchedule or NoExecute taint keeps the device from the request.
/// Other effects (None, unknown ones) never do.
fn untolerated_taint<'a>(
    device: &'a Device,
    tolerations: &[DeviceToleration],
) -> Option<&'a DeviceTaint> {
    device.taints.iter().flatten().find(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// Upstream: k8s.io/dynamic-resource-allocation/resourceclaim.ToleratesTaint.
fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    if let Some(key) = toleration.key.as_deref().filter(|k| !k.is_empty()) {
        if key != taint.key {
            return false;
        }
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Where the search is: claim, request, sub-request, and which device of the request.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    claim: usize,
    request: usize,
    sub: usize,
    device: usize,
}

/// One device chosen for a claim while searching.
#[derive(Debug, Clone, Copy)]
struct Chosen {
    request: usize,
    sub: usize,
    candidate: usize,
}

/// Why a branch of the search stopped early.
#[derive(Debug)]
enum Stop {
    /// The claim would hold more than [`ALLOCATION_RESULTS_MAX_SIZE`] devices: only another
    /// sub-request (one with fewer devices) can help, not another device for an earlier
    /// request, so the search backs out to the nearest `firstAvailable` request.
    MaxSizeExceeded,
    /// Ends the whole allocation.
    Error(AllocateError),
}

impl From<AllocateError> for Stop {
    fn from(e: AllocateError) -> Self {
        Stop::Error(e)
    }
}

struct Search<'s, 'a> {
    allocator: &'s Allocator<'a>,
    node: &'s Node,
    candidates: &'s [Candidate<'a>],
    claims: &'s [ClaimData<'a>],
    /// Per candidate: the claims (indices) that are being given it.
    allocating: Vec<Vec<usize>>,
    /// Per claim: the devices chosen so far.
    results: Vec<Vec<Chosen>>,
    constraints: Vec<Vec<Constraint<'s>>>,
    /// Per claim and request: the sub-request that led to the solution.
    selected_subrequest: Vec<Vec<usize>>,
    /// Per claim, request, alternative and candidate: the selectors' verdict, once known.
    /// Whether a device passes a request's selectors does not depend on other choices.
    matches: Vec<Vec<Vec<Vec<Option<Selectable>>>>>,
}

impl<'s, 'a> Search<'s, 'a> {
    fn request(&self, p: Position) -> &'s RequestData<'a> {
        let claims: &'s [ClaimData<'a>] = self.claims;
        &claims[p.claim].requests[p.request].alternatives[p.sub]
    }

    fn in_use(&self, candidate: usize) -> bool {
        self.candidates[candidate].allocated || !self.allocating[candidate].is_empty()
    }

    fn selectable(&mut self, p: Position, candidate: usize) -> Result<Selectable, AllocateError> {
        if let Some(known) = self.matches[p.claim][p.request][p.sub][candidate] {
            return Ok(known);
        }
        let verdict = selectable(
            self.allocator.selectors,
            &self.claims[p.claim].name,
            self.request(p),
            &self.candidates[candidate],
            self.node,
        )?;
        self.matches[p.claim][p.request][p.sub][candidate] = Some(verdict);
        Ok(verdict)
    }

    /// Returns `Ok(true)` once everything from `p` on is allocated.
    fn allocate_one(&mut self, p: Position, in_subrequest: bool) -> Result<bool, AllocateError> {
        match self.step(p, in_subrequest) {
            Ok(done) => Ok(done),
            Err(Stop::MaxSizeExceeded) => Ok(false),
            Err(Stop::Error(e)) => Err(e),
        }
    }

    fn step(&mut self, p: Position, in_subrequest: bool) -> Result<bool, Stop> {
        if self
            .allocator
            .deadline_passed
            .is_some_and(|passed| passed())
        {
            return Err(Stop::Error(AllocateError::DeadlineExceeded));
        }
        let claims: &'s [ClaimData<'a>] = self.claims;
        let Some(claim) = claims.get(p.claim) else {
            return Ok(true);
        };
        if p.request >= claim.requests.len() {
            let next = Position {
                claim: p.claim + 1,
                ..Position::default()
            };
            // Running out of room in a later claim says nothing about this one's choices.
            return match self.step(next, false) {
                Err(Stop::MaxSizeExceeded) => Ok(false),
                other => other,
            };
        }
        let slot = &claim.requests[p.request];
        if slot.prioritized && !in_subrequest {
            let mut all_exceeded = true;
            for sub in 0..slot.alternatives.len() {
                match self.step(Position { sub, ..p }, true) {
                    Err(Stop::MaxSizeExceeded) => continue,
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.selected_subrequest[p.claim][p.request] = sub;
                        return Ok(true);
                    }
                    Ok(false) => all_exceeded = false,
                }
            }
            return if all_exceeded && !slot.alternatives.is_empty() {
                Err(Stop::MaxSizeExceeded)
            } else {
                Ok(false)
            };
        }
        let request = self.request(p);
        if request.all && request.all_devices.is_empty() {
            return Ok(false);
        }
        if p.device >= request.num_devices {
            let next = Position {
                claim: p.claim,
                request: p.request + 1,
                sub: 0,
                device: 0,
            };
            return self.step(next, false);
        }
        if self.results[p.claim].len() + request.num_devices - p.device
            > ALLOCATION_RESULTS_MAX_SIZE
        {
            return Err(Stop::MaxSizeExceeded);
        }
        let next = Position {
            device: p.device + 1,
            ..p
        };
        if request.all {
            let candidate = request.all_devices[p.device];
            if !self.try_device(p, candidate, true)? {
                return Ok(false);
            }
            let done = self.step(next, in_subrequest);
            if !matches!(done, Ok(true)) {
                self.undo_device(p, candidate);
            }
            return done;
        }
        for candidate in 0..self.candidates.len() {
            if self.unavailable(p, candidate) {
                continue;
            }
            if self.selectable(p, candidate)? != Selectable::Yes {
                continue;
            }
            if !self.try_device(p, candidate, false)? {
                continue;
            }
            match self.step(next, in_subrequest) {
                Ok(true) => return Ok(true),
                Ok(false) => self.undo_device(p, candidate),
                Err(e) => {
                    self.undo_device(p, candidate);
                    return Err(e);
                }
            }
        }
        Ok(false)
    }

    /// In use: by anyone for a normal request; by this claim for one with admin access
    /// (which may share devices with other claims, but not pick one twice).
    fn unavailable(&self, p: Position, candidate: usize) -> bool {
        if self.request(p).admin_access() {
            self.allocating[candidate].contains(&p.claim)
        } else {
            self.in_use(candidate)
        }
    }

    /// Checks availability, taints and constraints for a selectable device and, when it may
    /// be taken, records it. `must` is set for `All`, where a constraint that rejects one of
    /// the devices makes the claim impossible.
    fn try_device(
        &mut self,
        p: Position,
        candidate: usize,
        must: bool,
    ) -> Result<bool, AllocateError> {
        if self.unavailable(p, candidate) {
            return Ok(false);
        }
        let request = self.request(p);
        let device = &self.candidates[candidate];
        if self.allocator.features.device_taints
            && untolerated_taint(device.device, request.spec.tolerations).is_some()
        {
            return Ok(false);
        }
        let constraints = &mut self.constraints[p.claim];
        for i in 0..constraints.len() {
            if !constraints[i].add(&request.spec, device) {
                if must {
                    return Err(AllocateError::AllDevicesViolateConstraint {
                        claim: self.claims[p.claim].name.clone(),
                        request: request.spec.sub.unwrap_or(request.spec.base).to_string(),
                        device: device.id.to_string(),
                    });
                }
                for earlier in constraints.iter_mut().take(i) {
                    earlier.remove(&request.spec);
                }
                return Ok(false);
            }
        }
        self.allocating[candidate].push(p.claim);
        self.results[p.claim].push(Chosen {
            request: p.request,
            sub: p.sub,
            candidate,
        });
        Ok(true)
    }

    fn undo_device(&mut self, p: Position, candidate: usize) {
        let request = self.request(p);
        for constraint in &mut self.constraints[p.claim] {
            constraint.remove(&request.spec);
        }
        if let Some(at) = self.allocating[candidate]
            .iter()
            .position(|&c| c == p.claim)
        {
            self.allocating[candidate].swap_remove(at);
        }
        self.results[p.claim].pop();
    }

    /// The AllocationResult of a claim once the search succeeded.
    fn result(
        &self,
        index: usize,
        claim: &ClaimData<'a>,
    ) -> Result<AllocationResult, AllocateError> {
        let chosen = &self.results[index];
        let results = chosen
            .iter()
            .map(|c| {
                let request = &claim.requests[c.request].alternatives[c.sub];
                let candidate = &self.candidates[c.candidate];
                DeviceRequestAllocationResult {
                    request: request.spec.name.clone(),
                    driver: candidate.id.driver.clone(),
                    pool: candidate.id.pool.clone(),
                    device: candidate.id.device.clone(),
                    admin_access: request.admin_access().then_some(true),
                    tolerations: (!request.spec.tolerations.is_empty())
                        .then(|| request.spec.tolerations.to_vec()),
                    ..Default::default()
                }
            })
            .collect();
        let config = self.configs(index, claim);
        let node_selector = self.node_selector(claim, chosen)?;
        Ok(AllocationResult {
            allocation_timestamp: None,
            devices: Some(DeviceAllocationResult {
                config: (!config.is_empty()).then_some(config),
                results: Some(results),
            }),
            node_selector,
        })
    }

    /// The classes' configuration (once per class, naming the requests that use it), then
    /// the claim's that apply to all requests or to an allocated request or sub-request.
    fn configs(&self, index: usize, claim: &ClaimData<'a>) -> Vec<DeviceAllocationConfiguration> {
        let mut out: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_ranges: Vec<(&str, usize, usize)> = Vec::new();
        for (r, slot) in claim.requests.iter().enumerate() {
            let sub = if slot.prioritized {
                self.selected_subrequest[index][r]
            } else {
                0
            };
            let Some(request) = slot.alternatives.get(sub) else {
                continue;
            };
            let class_name = request.class.metadata.name.as_deref().unwrap_or_default();
            if let Some(&(_, start, end)) = class_ranges.iter().find(|(n, _, _)| *n == class_name) {
                for config in &mut out[start..end] {
                    config
                        .requests
                        .get_or_insert_with(Vec::new)
                        .push(request.spec.name.clone());
                }
                continue;
            }
            let start = out.len();
            for config in request.class.spec.config.iter().flatten() {
                out.push(DeviceAllocationConfiguration {
                    opaque: config.opaque.clone(),
                    requests: Some(vec![request.spec.name.clone()]),
                    source: CONFIG_SOURCE_CLASS.to_string(),
                });
            }
            class_ranges.push((class_name, start, out.len()));
        }
        let requests: &[DeviceRequest] = claim
            .claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.requests.as_deref())
            .unwrap_or(&[]);
        let claim_configs = claim
            .claim
            .spec
            .devices
            .as_ref()
            .and_then(|d| d.config.as_deref())
            .unwrap_or(&[]);
        for config in claim_configs {
            let names = config.requests.as_deref().unwrap_or(&[]);
            let applies = names.is_empty()
                || requests.iter().enumerate().any(|(r, request)| {
                    if names.contains(&request.name) {
                        return true;
                    }
                    let slot = &claim.requests[r];
                    slot.prioritized
                        && slot
                            .alternatives
                            .get(self.selected_subrequest[index][r])
                            .is_some_and(|s| names.contains(&s.spec.name))
                });
            if applies {
                out.push(DeviceAllocationConfiguration {
                    opaque: config.opaque.clone(),
                    requests: config.requests.clone().filter(|r| !r.is_empty()),
                    source: CONFIG_SOURCE_CLAIM.to_string(),
                });
            }
        }
        out
    }

    /// Where the allocation can be used: the node of a node-local device, else the union
    /// of the network-attached devices' selectors, else anywhere (`None`).
    fn node_selector(
        &self,
        claim: &ClaimData<'a>,
        chosen: &[Chosen],
    ) -> Result<Option<NodeSelector>, AllocateError> {
        let mut term = NodeSelectorTerm::default();
        for c in chosen {
            let candidate = &self.candidates[c.candidate];
            let (node_name, selector) =
                if candidate.slice.spec.per_device_node_selection == Some(true) {
                    (
                        candidate.device.node_name.as_deref(),
                        candidate.device.node_selector.as_ref(),
                    )
                } else {
                    (
                        candidate.slice.spec.node_name.as_deref(),
                        candidate.slice.spec.node_selector.as_ref(),
                    )
                };
            if let Some(name) = node_name {
                return Ok(Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".to_string(),
                            operator: "In".to_string(),
                            values: Some(vec![name.to_string()]),
                        }]),
                        match_expressions: None,
                    }],
                }));
            }
            let Some(selector) = selector else {
                continue;
            };
            match selector.node_selector_terms.as_slice() {
                [] => {}
                [only] => {
                    add_requirements(only.match_fields.as_deref(), &mut term.match_fields);
                    add_requirements(
                        only.match_expressions.as_deref(),
                        &mut term.match_expressions,
                    );
                }
                terms => {
                    return Err(AllocateError::UnsupportedNodeSelector {
                        claim: claim.claim.metadata.name.clone().unwrap_or_default(),
                        terms: terms.len(),
                    })
                }
            }
        }
        if term.match_fields.is_none() && term.match_expressions.is_none() {
            return Ok(None);
        }
        Ok(Some(NodeSelector {
            node_selector_terms: vec![term],
        }))
    }
}

/// Adds the requirements not yet present (same key, operator and set of values).
fn add_requirements(
    from: Option<&[NodeSelectorRequirement]>,
    to: &mut Option<Vec<NodeSelectorRequirement>>,
) {
    for requirement in from.unwrap_or(&[]) {
        let values: HashSet<&String> = requirement.values.iter().flatten().collect();
        let present = to.iter().flatten().any(|existing| {
            existing.key == requirement.key
                && existing.operator == requirement.operator
                && existing.values.iter().flatten().collect::<HashSet<_>>() == values
        });
        if !present {
            to.get_or_insert_with(Vec::new).push(requirement.clone());
        }
    }
}
