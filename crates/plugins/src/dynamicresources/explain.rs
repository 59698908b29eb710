//! Why DynamicResources rejected a node, claim by claim, for `simulate`'s report.
//!
//! Filter's status says only "cannot allocate all claims" or "resourceclaim not available
//! on the node", as upstream's does. Filter keeps what it found on each node it rejected
//! (the allocator's [`Explanation`], computed only after a failed search, and the allocated
//! claims whose node selector excludes the node) in the cycle state; this module turns that
//! into one line per claim and request. Nothing reads it while scheduling.

use super::allocator::Explanation;

/// One reason a node cannot have the pod's claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceReason {
    /// `namespace/name` of the claim the reason is about; `None` for what concerns all of
    /// the pod's claims on the node (devices enough alone but not together, pools being
    /// updated).
    pub claim: Option<String>,
    pub reason: String,
}

/// What Filter found on one node it rejected.
#[derive(Debug, Clone, Default)]
pub(super) struct NodeRejection {
    /// Allocated claims (`namespace/name`) whose node selector excludes the node.
    pub unavailable: Vec<String>,
    /// Why the claims to allocate could not be allocated there.
    pub explanation: Option<Explanation>,
}

/// The reasons of one rejected node: the allocated claims not available there first, then
/// per claim and request what the allocator found, then its notes.
pub(super) fn device_reasons(rejection: &NodeRejection) -> Vec<DeviceReason> {
    let mut out: Vec<DeviceReason> = rejection
        .unavailable
        .iter()
        .map(|claim| DeviceReason {
            claim: Some(claim.clone()),
            reason: "its allocation is not available on this node".to_string(),
        })
        .collect();
    let Some(e) = &rejection.explanation else {
        return out;
    };
    for claim in &e.claims {
        for request in &claim.requests {
            out.push(DeviceReason {
                claim: Some(claim.claim.clone()),
                reason: request.to_string(),
            });
        }
    }
    // The allocator's notes are the lines of its text after the per-request ones.
    let per_request: usize = e.claims.iter().map(|c| c.requests.len()).sum();
    out.extend(
        e.to_string()
            .lines()
            .skip(per_request)
            .map(|l| DeviceReason {
                claim: None,
                reason: l.to_string(),
            }),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::allocator::{ClaimExplanation, Rejection, RequestExplanation, Wanted};
    use super::*;

    fn reason(claim: Option<&str>, reason: &str) -> DeviceReason {
        DeviceReason {
            claim: claim.map(str::to_string),
            reason: reason.to_string(),
        }
    }

    fn request(name: &str, usable: usize, rejected: Vec<(Rejection, usize)>) -> RequestExplanation {
        RequestExplanation {
            request: name.to_string(),
            wanted: Wanted::Count(1),
            usable,
            rejected,
        }
    }

    #[test]
    fn device_reasons_per_claim_and_request() {
        let selector = Rejection::RequestSelector {
            index: 0,
            expression: "device.attributes[\"gpu.example.com\"].model == \"a100\"".to_string(),
        };
        let cases: Vec<(&str, NodeRejection, Vec<DeviceReason>)> =
            vec![
                (
                    "allocated claim not available",
                    NodeRejection {
                        unavailable: vec!["default/gpu-a".to_string()],
                        explanation: None,
                    },
                    vec![reason(
                        Some("default/gpu-a"),
                        "its allocation is not available on this node",
                    )],
                ),
                (
                    "a request whose selector no device passes",
                    NodeRejection {
                        unavailable: Vec::new(),
                        explanation: Some(Explanation {
                            claims: vec![ClaimExplanation {
                                claim: "default/gpu-b".to_string(),
                                requests: vec![
                                    request("gpu", 0, vec![(selector.clone(), 2)]),
                                    request("nic", 1, Vec::new()),
                                ],
                                enough_alone: false,
                                match_attributes: Vec::new(),
                            }],
                            incomplete_pools: vec!["gpu.example.com/a1".to_string()],
                        }),
                    },
                    vec![
                    reason(
                        Some("default/gpu-b"),
                        "request gpu: wants 1 device, 0 usable; 2 devices: request selector #0 \
                         (device.attributes[\"gpu.example.com\"].model == \"a100\") is false",
                    ),
                    reason(Some("default/gpu-b"), "request nic: wants 1 device, 1 usable"),
                    reason(None, "resource pools being updated: gpu.example.com/a1"),
                ],
                ),
                (
                    "enough alone but not together",
                    NodeRejection {
                        unavailable: Vec::new(),
                        explanation: Some(Explanation {
                            claims: vec![ClaimExplanation {
                                claim: "default/pair".to_string(),
                                requests: vec![request("a", 1, Vec::new())],
                                enough_alone: true,
                                match_attributes: vec!["gpu.example.com/numa".to_string()],
                            }],
                            incomplete_pools: Vec::new(),
                        }),
                    },
                    vec![
                        reason(Some("default/pair"), "request a: wants 1 device, 1 usable"),
                        reason(
                            None,
                            "every request has enough usable devices on its own, but not all \
                         together (matchAttribute gpu.example.com/numa)",
                        ),
                    ],
                ),
            ];
        for (name, rejection, want) in cases {
            assert_eq!(device_reasons(&rejection), want, "{name}");
        }
    }
}
