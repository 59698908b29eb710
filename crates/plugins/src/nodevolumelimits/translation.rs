//! In-tree volumes as the CSI drivers they migrate to: which in-tree plugins have a CSI
//! driver, what that driver is called, the volume handle a migrated volume gets, and whether
//! migration counts as on for a node.
//!
//! Upstream: staging/src/k8s.io/csi-translation-lib (the plugins the scheduler's translator
//! knows) and pkg/scheduler/framework/plugins/nodevolumelimits/utils.go (isCSIMigrationOn).
//! Only what NodeVolumeLimits needs is here: driver names and volume handles, never whole
//! translated PersistentVolumes.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec, Volume};
use k8s_openapi::api::storage::v1::CSINode;

pub const AWS_EBS_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/aws-ebs";
pub const AWS_EBS_DRIVER_NAME: &str = "ebs.csi.aws.com";
pub const GCE_PD_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/gce-pd";
pub const GCE_PD_DRIVER_NAME: &str = "pd.csi.storage.gke.io";
pub const AZURE_DISK_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/azure-disk";
pub const AZURE_DISK_DRIVER_NAME: &str = "disk.csi.azure.com";
pub const AZURE_FILE_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/azure-file";
pub const AZURE_FILE_DRIVER_NAME: &str = "file.csi.azure.com";
pub const CINDER_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/cinder";
pub const CINDER_DRIVER_NAME: &str = "cinder.csi.openstack.org";
pub const VSPHERE_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/vsphere-volume";
pub const VSPHERE_DRIVER_NAME: &str = "csi.vsphere.vmware.com";
pub const PORTWORX_IN_TREE_PLUGIN_NAME: &str = "kubernetes.io/portworx-volume";
pub const PORTWORX_DRIVER_NAME: &str = "pxd.portworx.com";

/// The CSINode annotation listing, comma separated, the in-tree plugins the node's kubelet
/// has migrated to CSI.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// Every in-tree plugin with a CSI driver, and that driver.
const IN_TREE_TO_CSI: [(&str, &str); 7] = [
    (GCE_PD_IN_TREE_PLUGIN_NAME, GCE_PD_DRIVER_NAME),
    (AWS_EBS_IN_TREE_PLUGIN_NAME, AWS_EBS_DRIVER_NAME),
    (CINDER_IN_TREE_PLUGIN_NAME, CINDER_DRIVER_NAME),
    (AZURE_DISK_IN_TREE_PLUGIN_NAME, AZURE_DISK_DRIVER_NAME),
    (AZURE_FILE_IN_TREE_PLUGIN_NAME, AZURE_FILE_DRIVER_NAME),
    (VSPHERE_IN_TREE_PLUGIN_NAME, VSPHERE_DRIVER_NAME),
    (PORTWORX_IN_TREE_PLUGIN_NAME, PORTWORX_DRIVER_NAME),
];

/// A zone label value naming several zones separates them with this.
const MULTI_ZONE_DELIMITER: &str = "__";
/// What the translator writes for a project or zone it does not know.
const UNSPECIFIED: &str = "UNSPECIFIED";
const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
const LABEL_FAILURE_DOMAIN_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";

/// An in-tree volume source with a CSI driver, borrowed from a pod volume or a volume spec.
#[derive(Debug, Clone, Copy)]
pub enum InTreeSource<'a> {
    GcePd(&'a str),
    AwsEbs(&'a str),
    Cinder(&'a str),
    AzureDisk(&'a str),
    AzureFile,
    VSphere,
    Portworx(&'a str),
}

impl InTreeSource<'_> {
    /// The in-tree plugin's name (`kubernetes.io/...`).
    pub fn plugin_name(&self) -> &'static str {
        match self {
            InTreeSource::GcePd(_) => GCE_PD_IN_TREE_PLUGIN_NAME,
            InTreeSource::AwsEbs(_) => AWS_EBS_IN_TREE_PLUGIN_NAME,
            InTreeSource::Cinder(_) => CINDER_IN_TREE_PLUGIN_NAME,
            InTreeSource::AzureDisk(_) => AZURE_DISK_IN_TREE_PLUGIN_NAME,
            InTreeSource::AzureFile => AZURE_FILE_IN_TREE_PLUGIN_NAME,
            InTreeSource::VSphere => VSPHERE_IN_TREE_PLUGIN_NAME,
            InTreeSource::Portworx(_) => PORTWORX_IN_TREE_PLUGIN_NAME,
        }
    }

    /// The CSI driver the plugin migrates to.
    pub fn driver_name(&self) -> &'static str {
        csi_name_from_in_tree_name(self.plugin_name()).unwrap_or_default()
    }
}

/// The in-tree source of a pod's inline volume, when it is one the translator migrates
/// (upstream IsInlineMigratable).
pub fn inline_source(vol: &Volume) -> Option<InTreeSource<'_>> {
    if let Some(s) = &vol.gce_persistent_disk {
        return Some(InTreeSource::GcePd(&s.pd_name));
    }
    if let Some(s) = &vol.aws_elastic_block_store {
        return Some(InTreeSource::AwsEbs(&s.volume_id));
    }
    if let Some(s) = &vol.cinder {
        return Some(InTreeSource::Cinder(&s.volume_id));
    }
    if let Some(s) = &vol.azure_disk {
        return Some(InTreeSource::AzureDisk(&s.disk_uri));
    }
    if vol.azure_file.is_some() {
        return Some(InTreeSource::AzureFile);
    }
    if vol.vsphere_volume.is_some() {
        return Some(InTreeSource::VSphere);
    }
    if let Some(s) = &vol.portworx_volume {
        return Some(InTreeSource::Portworx(&s.volume_id));
    }
    None
}

/// The in-tree source of a PersistentVolume, when the translator migrates it (upstream
/// IsPVMigratable).
pub fn pv_source(spec: &PersistentVolumeSpec) -> Option<InTreeSource<'_>> {
    if let Some(s) = &spec.gce_persistent_disk {
        return Some(InTreeSource::GcePd(&s.pd_name));
    }
    if let Some(s) = &spec.aws_elastic_block_store {
        return Some(InTreeSource::AwsEbs(&s.volume_id));
    }
    if let Some(s) = &spec.cinder {
        return Some(InTreeSource::Cinder(&s.volume_id));
    }
    if let Some(s) = &spec.azure_disk {
        return Some(InTreeSource::AzureDisk(&s.disk_uri));
    }
    if spec.azure_file.is_some() {
        return Some(InTreeSource::AzureFile);
    }
    if spec.vsphere_volume.is_some() {
        return Some(InTreeSource::VSphere);
    }
    if let Some(s) = &spec.portworx_volume {
        return Some(InTreeSource::Portworx(&s.volume_id));
    }
    None
}

/// Whether `name` is an in-tree plugin the translator migrates (upstream
/// IsMigratableIntreePluginByName), e.g. a StorageClass provisioner.
pub fn is_migratable_in_tree_plugin(name: &str) -> bool {
    IN_TREE_TO_CSI.iter().any(|(p, _)| *p == name)
}

/// The CSI driver of in-tree plugin `name`.
pub fn csi_name_from_in_tree_name(name: &str) -> Option<&'static str> {
    IN_TREE_TO_CSI
        .iter()
        .find(|(p, _)| *p == name)
        .map(|(_, d)| *d)
}

/// Whether the scheduler counts plugin `plugin`'s volumes as its CSI driver's on the node
/// with `csi_node` (upstream isCSIMigrationOn): never without a CSINode; always for AWS EBS,
/// GCE PD, Azure Disk and Cinder, whose migration is complete; for Portworx only when the
/// CSINode's migrated-plugins annotation lists it; never for the others.
pub fn is_csi_migration_on(csi_node: Option<&CSINode>, plugin: &str) -> bool {
    let Some(csi_node) = csi_node else {
        return false;
    };
    match plugin {
        AWS_EBS_IN_TREE_PLUGIN_NAME
        | GCE_PD_IN_TREE_PLUGIN_NAME
        | AZURE_DISK_IN_TREE_PLUGIN_NAME
        | CINDER_IN_TREE_PLUGIN_NAME => true,
        PORTWORX_IN_TREE_PLUGIN_NAME => csi_node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MIGRATED_PLUGINS_ANNOTATION))
            .is_some_and(|list| list.split(',').any(|p| p == plugin)),
        _ => false,
    }
}

/// The volume handle the translator gives an inline volume (upstream
/// TranslateInTreeInlineVolumeToCSI), `Ok(None)` when the plugin has no inline translation
/// the scheduler counts.
pub fn inline_volume_handle(source: InTreeSource<'_>) -> Result<Option<String>, String> {
    match source {
        InTreeSource::GcePd(pd) => Ok(Some(gce_zonal_handle(UNSPECIFIED, pd))),
        other => common_handle(other),
    }
}

/// The volume handle the translator gives an in-tree PersistentVolume (upstream
/// TranslateInTreePVToCSI); GCE PD handles name the zone or region from the volume's
/// zone labels.
pub fn pv_volume_handle(
    pv: &PersistentVolume,
    source: InTreeSource<'_>,
) -> Result<Option<String>, String> {
    match source {
        InTreeSource::GcePd(pd) => gce_pv_handle(pv, pd).map(Some),
        other => common_handle(other),
    }
}

/// Handles that are the same for inline volumes and PersistentVolumes.
fn common_handle(source: InTreeSource<'_>) -> Result<Option<String>, String> {
    match source {
        InTreeSource::AwsEbs(id) => ebs_volume_id(id)
            .map(Some)
            .map_err(|e| format!("failed to translate Kubernetes ID to EBS Volume ID {e}")),
        InTreeSource::Cinder(id) | InTreeSource::Portworx(id) => Ok(Some(id.to_string())),
        InTreeSource::AzureDisk(uri) => Ok(Some(uri.to_string())),
        // Never counted: their migration is never on for the scheduler.
        InTreeSource::AzureFile | InTreeSource::VSphere => Ok(None),
        InTreeSource::GcePd(pd) => Ok(Some(gce_zonal_handle(UNSPECIFIED, pd))),
    }
}

/// An EBS volume ID from the in-tree form: a bare `vol-...` ID, or
/// `aws://<zone>/vol-...` (upstream KubernetesVolumeIDToEBSVolumeID).
fn ebs_volume_id(kubernetes_id: &str) -> Result<String, String> {
    let Some(rest) = kubernetes_id.strip_prefix("aws://") else {
        return Ok(kubernetes_id.to_string());
    };
    // The host is the zone; the path, slashes trimmed, is the volume.
    let path = rest.split_once('/').map_or("", |(_, p)| p);
    let id = path.trim_matches('/');
    if id.starts_with("vol-") && !id.contains('/') {
        Ok(id.to_string())
    } else {
        Err(format!("Invalid format for AWS volume ({kubernetes_id})"))
    }
}

fn gce_zonal_handle(zone: &str, pd: &str) -> String {
    format!("projects/{UNSPECIFIED}/zones/{zone}/disks/{pd}")
}

/// A GCE PD volume's handle: zonal for one zone label value, regional for several zones of
/// one region, zone unspecified without a label.
fn gce_pv_handle(pv: &PersistentVolume, pd: &str) -> Result<String, String> {
    let labels = pv.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map_or("", String::as_str);
    let beta = label(LABEL_FAILURE_DOMAIN_BETA_ZONE);
    let ga = label(LABEL_TOPOLOGY_ZONE);
    let zones_label = if beta.is_empty() {
        ga
    } else if !ga.is_empty() && ga != beta {
        return Err(format!(
            "labels {LABEL_FAILURE_DOMAIN_BETA_ZONE} and {LABEL_TOPOLOGY_ZONE} have different values"
        ));
    } else {
        beta
    };
    let zones: Vec<&str> = zones_label.split(MULTI_ZONE_DELIMITER).collect();
    match zones.as_slice() {
        [zone] if !zone.is_empty() => Ok(gce_zonal_handle(zone, pd)),
        [_, _, ..] => {
            let region = gce_region_from_zones(&zones)?;
            Ok(format!(
                "projects/{UNSPECIFIED}/regions/{region}/disks/{pd}"
            ))
        }
        _ => Ok(gce_zonal_handle(UNSPECIFIED, pd)),
    }
}

/// The one region of GCE zones named `{locale}-{region}-{zone}`.
fn gce_region_from_zones(zones: &[&str]) -> Result<String, String> {
    let mut region: Option<String> = None;
    for zone in zones {
        let parts: Vec<&str> = zone.split('-').collect();
        let [locale, r, _] = parts.as_slice() else {
            return Err(format!(
                "zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"
            ));
        };
        let this = format!("{locale}-{r}");
        match &region {
            Some(prev) if *prev != this => {
                return Err("multiple or no regions gotten from zones".to_string())
            }
            _ => region = Some(this),
        }
    }
    region.ok_or_else(|| "no zones specified".to_string())
}
