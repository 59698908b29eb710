//! Why claims could not be allocated on a node: per claim and request, the devices it wants,
//! how many of the node's devices would do on their own, and why the others would not.
//!
//! Upstream's allocator only says "cannot allocate all claims"; the per-request counts are
//! kubesched's, for Filter's status and for `simulate`. They are worked out after the search
//! failed, so a successful allocation pays nothing for them.

use std::fmt;

use super::pools::Pool;
use super::{untolerated_taint, AllocateError, Position, Search, Selectable, Unsupported};

/// Why claims could not be allocated on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    pub claims: Vec<ClaimExplanation>,
    /// Pools (`driver/pool`) the node reaches that are still being published; their devices
    /// are not considered.
    pub incomplete_pools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimExplanation {
    /// `namespace/name`.
    pub claim: String,
    /// One entry per request, or per sub-request of a `firstAvailable` request.
    pub requests: Vec<RequestExplanation>,
    /// Every request (one of the sub-requests of a `firstAvailable` request) has enough
    /// usable devices on its own: what failed is the combination, the claim's constraints
    /// or the devices other requests and claims took.
    pub enough_alone: bool,
    /// The claim's `matchAttribute` constraints, named in the note when every claim has
    /// `enough_alone`.
    pub match_attributes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestExplanation {
    /// `request` or `request/subrequest`.
    pub request: String,
    pub wanted: Wanted,
    /// Devices that pass the selectors and are free and tolerated, each on its own.
    pub usable: usize,
    /// The other devices, grouped by the first reason that rejects them, in order of first
    /// appearance.
    pub rejected: Vec<(Rejection, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// `ExactCount` with this count.
    Count(usize),
    /// `All`: every device that passes the selectors, this many.
    All(usize),
}

/// Why one device does not do for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// A selector of the request's DeviceClass is false for it.
    ClassSelector {
        class: String,
        index: usize,
        expression: String,
    },
    /// A selector of the request is false for it.
    RequestSelector { index: usize, expression: String },
    /// Its slice selects nodes per device, and not this node.
    OtherNode,
    /// It uses something the allocator does not allocate.
    Unsupported(Unsupported),
    /// Allocated to another claim, or being allocated to another pod.
    InUse,
    /// It has a NoSchedule or NoExecute taint the request does not tolerate, shown as
    /// `key=value:effect`.
    Tainted { taint: String },
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::ClassSelector {
                class,
                index,
                expression,
            } => write!(f, "class {class} selector #{index} ({expression}) is false"),
            Rejection::RequestSelector { index, expression } => {
                write!(f, "request selector #{index} ({expression}) is false")
            }
            Rejection::OtherNode => f.write_str("not available on this node"),
            Rejection::Unsupported(what) => write!(f, "uses {what}, which are not supported"),
            Rejection::InUse => f.write_str("already in use"),
            Rejection::Tainted { taint } => write!(f, "untolerated taint {taint}"),
        }
    }
}

impl fmt::Display for RequestExplanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        match self.wanted {
            Wanted::Count(n) => {
                write!(f, "request {}: wants {n} device{}", self.request, plural(n))?
            }
            Wanted::All(n) => write!(
                f,
                "request {}: wants all {n} matching device{}",
                self.request,
                plural(n)
            )?,
        }
        write!(f, ", {} usable", self.usable)?;
        for (reason, count) in &self.rejected {
            write!(f, "; {count} device{}: {reason}", plural(*count))?;
        }
        Ok(())
    }
}

impl fmt::Display for Explanation {
    /// One line per request, prefixed by its claim; a note when every request would fit on
    /// its own; then the incomplete pools.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut line = |f: &mut fmt::Formatter<'_>| {
            let newline = if first { "" } else { "\n" };
            first = false;
            f.write_str(newline)
        };
        for claim in &self.claims {
            for request in &claim.requests {
                line(f)?;
                write!(f, "claim {}, {request}", claim.claim)?;
            }
        }
        let any_request = self.claims.iter().any(|c| !c.requests.is_empty());
        if any_request && self.claims.iter().all(|c| c.enough_alone) {
            line(f)?;
            f.write_str(
                "every request has enough usable devices on its own, but not all together",
            )?;
            let mut attributes: Vec<&str> = Vec::new();
            for attribute in self.claims.iter().flat_map(|c| &c.match_attributes) {
                if !attributes.contains(&attribute.as_str()) {
                    attributes.push(attribute);
                }
            }
            if !attributes.is_empty() {
                write!(f, " (matchAttribute {})", attributes.join(", "))?;
            }
        }
        if !self.incomplete_pools.is_empty() {
            line(f)?;
            write!(
                f,
                "resource pools being updated: {}",
                self.incomplete_pools.join(", ")
            )?;
        }
        Ok(())
    }
}

pub(super) fn explain(
    search: &mut Search<'_, '_>,
    pools: &[Pool<'_>],
) -> Result<Explanation, AllocateError> {
    let claims = search.claims;
    let mut out = Vec::with_capacity(claims.len());
    for (c, claim) in claims.iter().enumerate() {
        let mut requests = Vec::new();
        let mut enough_alone = true;
        for (r, slot) in claim.requests.iter().enumerate() {
            let mut slot_fits = false;
            for (s, request) in slot.alternatives.iter().enumerate() {
                let p = Position {
                    claim: c,
                    request: r,
                    sub: s,
                    device: 0,
                };
                let mut usable = 0;
                let mut rejected: Vec<(Rejection, usize)> = Vec::new();
                for candidate in 0..search.candidates.len() {
                    let device = &search.candidates[candidate];
                    let reason = match search.selectable(p, candidate)? {
                        Selectable::ClassSelector(index) => Some(Rejection::ClassSelector {
                            class: request.class.metadata.name.clone().unwrap_or_default(),
                            index,
                            expression: class_expression(request, index),
                        }),
                        Selectable::RequestSelector(index) => Some(Rejection::RequestSelector {
                            index,
                            expression: request
                                .spec
                                .selectors
                                .get(index)
                                .and_then(|s| s.cel.as_ref())
                                .map(|c| c.expression.clone())
                                .unwrap_or_default(),
                        }),
                        Selectable::OtherNode => Some(Rejection::OtherNode),
                        Selectable::Unsupported(what) => Some(Rejection::Unsupported(what)),
                        Selectable::Yes => {
                            if !request.admin_access() && device.allocated {
                                Some(Rejection::InUse)
                            } else if search.allocator.features.device_taints {
                                untolerated_taint(device.device, request.spec.tolerations).map(
                                    |t| Rejection::Tainted {
                                        taint: match t.value.as_deref() {
                                            Some(v) if !v.is_empty() => {
                                                format!("{}={v}:{}", t.key, t.effect)
                                            }
                                            _ => format!("{}:{}", t.key, t.effect),
                                        },
                                    },
                                )
                            } else {
                                None
                            }
                        }
                    };
                    match reason {
                        None => usable += 1,
                        Some(reason) => match rejected.iter_mut().find(|(r, _)| *r == reason) {
                            Some((_, n)) => *n += 1,
                            None => rejected.push((reason, 1)),
                        },
                    }
                }
                slot_fits |= if request.all {
                    request.num_devices > 0 && usable == request.num_devices
                } else {
                    usable >= request.num_devices
                };
                requests.push(RequestExplanation {
                    request: request.spec.name.clone(),
                    wanted: if request.all {
                        Wanted::All(request.num_devices)
                    } else {
                        Wanted::Count(request.num_devices)
                    },
                    usable,
                    rejected,
                });
            }
            enough_alone &= slot_fits;
        }
        out.push(ClaimExplanation {
            claim: claim.name.clone(),
            requests,
            enough_alone,
            match_attributes: claim
                .constraints
                .iter()
                .map(|c| c.attribute.clone())
                .collect(),
        });
    }
    Ok(Explanation {
        claims: out,
        incomplete_pools: pools
            .iter()
            .filter(|p| p.incomplete)
            .map(|p| p.id())
            .collect(),
    })
}

fn class_expression(request: &super::RequestData<'_>, index: usize) -> String {
    request
        .class
        .spec
        .selectors
        .as_deref()
        .and_then(|s| s.get(index))
        .and_then(|s| s.cel.as_ref())
        .map(|c| c.expression.clone())
        .unwrap_or_default()
}
