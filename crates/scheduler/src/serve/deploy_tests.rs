//! The shipped manifests (deploy/*.yaml) are valid: every document decodes into its
//! Kubernetes type with no field the type does not know (a misspelt field would be dropped
//! silently by the API server), the ConfigMap's KubeSchedulerConfiguration loads through
//! [`crate::config::load_str`], and the pieces refer to each other and to the endpoints
//! this module serves.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Every object of every deploy/*.yaml, as (file, JSON value), in file then document order.
fn documents() -> Vec<(String, serde_json::Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .expect("deploy/ exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("readable");
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = serde_json::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{name}: not YAML: {e}"));
            docs.push((name.clone(), value));
        }
    }
    docs
}

/// Decodes `value` as `T` and checks that encoding it again gives back the same value:
/// any field `T` does not know (or a value of the wrong shape) makes the two differ.
fn typed<T: DeserializeOwned + Serialize>(file: &str, value: &serde_json::Value) -> T {
    let object: T =
        serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{file}: {e}: {value:#}"));
    let again = serde_json::to_value(&object).expect("re-encodes");
    assert_eq!(&again, value, "{file}: fields the type does not know");
    object
}

/// The manifests, decoded and grouped by kind and name.
#[derive(Default)]
struct Manifests {
    service_accounts: BTreeMap<String, ServiceAccount>,
    cluster_roles: BTreeMap<String, ClusterRole>,
    cluster_role_bindings: BTreeMap<String, ClusterRoleBinding>,
    role_bindings: BTreeMap<String, RoleBinding>,
    config_maps: BTreeMap<String, ConfigMap>,
    deployments: BTreeMap<String, Deployment>,
}

fn manifests() -> Manifests {
    let mut m = Manifests::default();
    for (file, value) in documents() {
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "ServiceAccount" => {
                m.service_accounts.insert(name, typed(&file, &value));
            }
            "ClusterRole" => {
                m.cluster_roles.insert(name, typed(&file, &value));
            }
            "ClusterRoleBinding" => {
                m.cluster_role_bindings.insert(name, typed(&file, &value));
            }
            "RoleBinding" => {
                m.role_bindings.insert(name, typed(&file, &value));
            }
            "ConfigMap" => {
                m.config_maps.insert(name, typed(&file, &value));
            }
            "Deployment" => {
                m.deployments.insert(name, typed(&file, &value));
            }
            other => panic!("{file}: unexpected kind {other:?}"),
        }
    }
    m
}

#[test]
fn deploy_ships_these_objects() {
    let m = manifests();
    let names = |keys: Vec<&String>| keys.into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        (
            names(m.service_accounts.keys().collect()),
            names(m.cluster_roles.keys().collect()),
            names(m.cluster_role_bindings.keys().collect()),
            names(m.role_bindings.keys().collect()),
            names(m.config_maps.keys().collect()),
            names(m.deployments.keys().collect()),
        ),
        (
            vec!["kubesched".to_string()],
            vec!["kubesched".to_string()],
            vec![
                "kubesched".to_string(),
                "kubesched-as-kube-scheduler".to_string(),
                "kubesched-as-volume-scheduler".to_string(),
            ],
            vec!["kubesched-extension-apiserver-authentication-reader".to_string()],
            vec!["kubesched-config".to_string()],
            vec!["kubesched".to_string()],
        )
    );
}

#[test]
fn bindings_grant_the_service_account_kube_schedulers_roles_and_ours() {
    let m = manifests();
    let mut granted = Vec::new();
    for binding in m.cluster_role_bindings.values() {
        let subjects = binding.subjects.clone().unwrap_or_default();
        for s in subjects {
            granted.push((
                s.kind,
                s.namespace.unwrap_or_default(),
                s.name,
                binding.role_ref.kind.clone(),
                binding.role_ref.name.clone(),
            ));
        }
    }
    for binding in m.role_bindings.values() {
        for s in binding.subjects.clone().unwrap_or_default() {
            granted.push((
                s.kind,
                s.namespace.unwrap_or_default(),
                s.name,
                format!(
                    "{} in {}",
                    binding.role_ref.kind,
                    binding.metadata.namespace.clone().unwrap_or_default()
                ),
                binding.role_ref.name.clone(),
            ));
        }
    }
    granted.sort();
    let sa = |kind: &str, role: &str| {
        (
            "ServiceAccount".to_string(),
            "kube-system".to_string(),
            "kubesched".to_string(),
            kind.to_string(),
            role.to_string(),
        )
    };
    assert_eq!(
        granted,
        vec![
            sa("ClusterRole", "kubesched"),
            sa("ClusterRole", "system:kube-scheduler"),
            sa("ClusterRole", "system:volume-scheduler"),
            sa(
                "Role in kube-system",
                "extension-apiserver-authentication-reader"
            ),
        ]
    );
    let sa = &m.service_accounts["kubesched"];
    assert_eq!(sa.metadata.namespace.as_deref(), Some("kube-system"));
}

#[test]
fn our_cluster_role_covers_the_kubesched_lease_priority_classes_volume_attachments_and_dra() {
    let m = manifests();
    /// apiGroups, resources, resourceNames, verbs.
    type Rule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);
    let rules: Vec<Rule> = m.cluster_roles["kubesched"]
        .rules
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            (
                r.api_groups.unwrap_or_default(),
                r.resources.unwrap_or_default(),
                r.resource_names.unwrap_or_default(),
                r.verbs,
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        rules,
        vec![
            (
                s(&["coordination.k8s.io"]),
                s(&["leases"]),
                s(&["kubesched"]),
                s(&["get", "update"])
            ),
            (
                s(&["scheduling.k8s.io"]),
                s(&["priorityclasses"]),
                s(&[]),
                s(&["get", "list", "watch"])
            ),
            (
                s(&["storage.k8s.io"]),
                s(&["volumeattachments"]),
                s(&[]),
                s(&["get", "list", "watch"])
            ),
            (
                s(&["resource.k8s.io"]),
                s(&["deviceclasses", "resourceclaims", "resourceslices"]),
                s(&[]),
                s(&["get", "list", "watch"])
            ),
            (
                s(&["resource.k8s.io"]),
                s(&[
                    "resourceclaims",
                    "resourceclaims/status",
                    "resourceclaims/binding"
                ]),
                s(&[]),
                s(&["update"])
            ),
            (
                s(&["resource.k8s.io"]),
                s(&["resourceclaims"]),
                s(&[]),
                s(&["create", "delete"])
            ),
        ]
    );
}

#[test]
fn the_shipped_configuration_loads_with_one_kubesched_profile_and_its_own_lease() {
    let m = manifests();
    let data = m.config_maps["kubesched-config"]
        .data
        .clone()
        .unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        vec!["config.yaml"],
        "one file, the one --config names"
    );
    let cfg = crate::config::load_str(&data["config.yaml"], "deploy/configmap.yaml")
        .unwrap_or_else(|e| panic!("{e}"));
    let profiles: Vec<Option<String>> = cfg
        .profiles
        .iter()
        .map(|p| p.scheduler_name.clone())
        .collect();
    assert_eq!(profiles, vec![Some("kubesched".to_string())]);
    let le = &cfg.leader_election;
    assert_eq!(
        (
            le.leader_elect(),
            le.resource_lock.as_str(),
            le.resource_name.as_str(),
            le.resource_namespace.as_str()
        ),
        (true, "leases", "kubesched", "kube-system")
    );
}

#[test]
fn the_deployment_runs_two_replicas_probed_on_the_serving_port() {
    let m = manifests();
    let deployment = &m.deployments["kubesched"];
    let spec = deployment.spec.clone().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some("kubesched"));
    let pod_security = pod.security_context.clone().expect("pod securityContext");
    assert_eq!(pod_security.run_as_non_root, Some(true));

    let [container] = &pod.containers[..] else {
        panic!("one container, got {}", pod.containers.len());
    };
    let command: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    assert_eq!(
        command,
        vec![
            "/usr/local/bin/kubesched",
            "run",
            "--config=/etc/kubesched/config.yaml",
            "--bind-address=0.0.0.0",
            "--port=10259",
        ]
    );

    let probe = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = p.clone().and_then(|p| p.http_get).expect("httpGet probe");
        (get.path, get.port, get.scheme)
    };
    let http = |path: &str| {
        (
            Some(path.to_string()),
            IntOrString::Int(i32::from(super::DEFAULT_PORT)),
            Some("HTTP".to_string()),
        )
    };
    assert_eq!(probe(&container.liveness_probe), http("/livez"));
    assert_eq!(probe(&container.readiness_probe), http("/readyz"));

    let security = container.security_context.clone().expect("securityContext");
    assert_eq!(
        (
            security.read_only_root_filesystem,
            security.allow_privilege_escalation
        ),
        (Some(true), Some(false))
    );
    let requests = container
        .resources
        .clone()
        .and_then(|r| r.requests)
        .unwrap_or_default();
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        vec!["cpu", "memory"],
        "requests set"
    );

    // The ConfigMap is mounted where --config points.
    let mounts: Vec<(String, String)> = container
        .volume_mounts
        .iter()
        .flatten()
        .map(|v| (v.name.clone(), v.mount_path.clone()))
        .collect();
    assert_eq!(
        mounts,
        vec![("config".to_string(), "/etc/kubesched".to_string())]
    );
    let volumes: Vec<(String, Option<String>)> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| {
            (
                v.name.clone(),
                v.config_map.as_ref().map(|c| c.name.clone()),
            )
        })
        .collect();
    assert_eq!(
        volumes,
        vec![("config".to_string(), Some("kubesched-config".to_string()))]
    );
}
