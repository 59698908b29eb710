//! What the volume plugins (VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits)
//! all read from pods and claims, and how their queueing hints take a claim from an event.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};

/// The claim annotation that named the class before `spec.storageClassName` existed; it wins
/// over the field, as upstream's GetPersistentVolumeClaimClass has it.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The StorageClass binding mode that leaves binding to the scheduler.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// The class a claim asks for: the beta annotation if present, else `spec.storageClassName`
/// ("" for none).
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(c) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
    {
        return c;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The pod's volumes.
pub fn pod_volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[])
}

/// The claim names of the pod's `persistentVolumeClaim` volumes, in volume order.
pub fn claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod_volumes(pod)
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    fn claim(annotation: Option<&str>, class: Option<&str>) -> PersistentVolumeClaim {
        let mut c = PersistentVolumeClaim::default();
        c.metadata.annotations = annotation
            .map(|a| BTreeMap::from([(BETA_STORAGE_CLASS_ANNOTATION.to_string(), a.to_string())]));
        c.spec = Some(PersistentVolumeClaimSpec {
            storage_class_name: class.map(str::to_string),
            ..Default::default()
        });
        c
    }

    #[test]
    fn the_beta_annotation_wins_over_the_class_name() {
        let got = [
            claim(Some("beta"), Some("ga")),
            claim(None, Some("ga")),
            claim(None, None),
            claim(Some(""), Some("ga")),
        ]
        .iter()
        .map(|c| claim_class(c).to_string())
        .collect::<Vec<_>>();
        assert_eq!(got, vec!["beta", "ga", "", ""]);
    }
}
