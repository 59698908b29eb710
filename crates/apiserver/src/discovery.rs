//! `/version` and API discovery (legacy and aggregated v2); OpenAPI is in [`crate::openapi`].

use serde_json::{json, Value};

use crate::resources::{self, ResourceInfo, RESOURCES};

/// The Kubernetes version this server speaks.
pub const KUBE_MINOR: &str = "37";

/// `/version`.
pub fn version() -> Value {
    json!({"major": "1", "minor": KUBE_MINOR, "gitVersion": format!("v1.{KUBE_MINOR}.0"),
           "gitCommit": "kubesched", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
           "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64"})
}

fn in_gv<'a>(group: &'a str, version: &'a str) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

fn group_name_of(gv: &str) -> String {
    gv.to_string()
}

/// `/api` (legacy).
pub fn core_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

/// `/apis` (legacy), without the groups in `disabled`.
pub fn group_list(disabled: &[String]) -> Value {
    let groups: Vec<Value> = resources::group_versions()
        .into_iter()
        .filter(|(g, _)| !g.is_empty() && !is_disabled(disabled, g))
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": group_name_of(g), "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut entries = Vec::new();
    for r in in_gv(group, version) {
        let mut e = json!({"name": r.resource, "singularName": r.singular, "namespaced": r.namespaced,
                           "kind": r.kind, "verbs": resources::verbs()});
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            e["categories"] = json!(r.categories);
        }
        entries.push(e);
        for sub in r.subresources {
            let (kind, verbs): (&str, &[&str]) = match *sub {
                "binding" => ("Binding", &["create"]),
                "eviction" => ("Eviction", &["create"]),
                "scale" => ("Scale", &["get", "patch", "update"]),
                _ => (r.kind, &["get", "patch", "update"]),
            };
            let mut e = json!({"name": format!("{}/{sub}", r.resource), "singularName": "",
                               "namespaced": r.namespaced, "kind": kind, "verbs": verbs});
            // kubectl drain uses eviction only when group and version are set.
            if *sub == "eviction" {
                e["group"] = json!("policy");
                e["version"] = json!("v1");
            }
            if *sub == "scale" {
                e["group"] = json!("autoscaling");
                e["version"] = json!("v1");
            }
            entries.push(e);
        }
    }
    if group.is_empty() && !entries.is_empty() {
        // The legacy bindings collection (POST only), as old schedulers and Python use it.
        entries.push(
            json!({"name": "bindings", "singularName": "binding", "namespaced": true,
                            "kind": "Binding", "verbs": ["create"]}),
        );
    }
    if entries.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}),
    )
}

/// The aggregated discovery Content-Type kubectl asks for.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an Accept header asks for aggregated discovery v2.
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        first.contains("as=APIGroupDiscoveryList")
            && first.contains("g=apidiscovery.k8s.io")
            && first.contains("v=v2")
    })
}

fn is_disabled(disabled: &[String], group: &str) -> bool {
    disabled.iter().any(|d| d == group)
}

/// `/api` (core only) or `/apis` (all groups but those in `disabled`) as an
/// `APIGroupDiscoveryList`.
pub fn aggregated(core: bool, disabled: &[String]) -> Value {
    let items: Vec<Value> = resources::group_versions()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core && !is_disabled(disabled, g))
        .map(|(g, v)| {
            let mut res: Vec<Value> = in_gv(g, v)
                .map(|r| {
                    let subs: Vec<Value> = r
                        .subresources
                        .iter()
                        .map(|sub| {
                            let (group, kind, verbs): (&str, &str, &[&str]) = match *sub {
                                "binding" => (r.group, "Binding", &["create"]),
                                "eviction" => ("policy", "Eviction", &["create"]),
                                "scale" => ("autoscaling", "Scale", &["get", "patch", "update"]),
                                _ => (r.group, r.kind, &["get", "patch", "update"]),
                            };
                            json!({"subresource": sub,
                                   "responseKind": {"group": group, "version": r.version, "kind": kind},
                                   "verbs": verbs})
                        })
                        .collect();
                    let mut e = json!({"resource": r.resource,
                        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": r.singular, "verbs": resources::verbs()});
                    if !r.short_names.is_empty() {
                        e["shortNames"] = json!(r.short_names);
                    }
                    if !r.categories.is_empty() {
                        e["categories"] = json!(r.categories);
                    }
                    if !subs.is_empty() {
                        e["subresources"] = json!(subs);
                    }
                    e
                })
                .collect();
            if g.is_empty() {
                res.push(json!({"resource": "bindings",
                    "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                    "scope": "Namespaced", "singularResource": "binding", "verbs": ["create"]}));
            }
            json!({"metadata": {"name": g},
                   "versions": [{"version": v, "freshness": "Current", "resources": res}]})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
           "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_list_binding_and_status_subresources() {
        let l = resource_list("", "v1").expect("core");
        let names: Vec<&str> = l["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"pods/binding") && names.contains(&"pods/status"));
        assert!(resource_list("nope", "v1").is_none());
    }

    /// kubectl scale finds the subresource, and the kind it sends, in discovery.
    #[test]
    fn replicasets_scale_is_an_autoscaling_v1_scale() {
        let l = resource_list("apps", "v1").expect("apps");
        let scale = l["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "replicasets/scale")
            .cloned();
        assert_eq!(
            scale,
            Some(
                json!({"name": "replicasets/scale", "singularName": "", "namespaced": true,
                "kind": "Scale", "group": "autoscaling", "version": "v1",
                "verbs": ["get", "patch", "update"]})
            )
        );
        let apis = aggregated(false, &[]);
        let sub = apis["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| g["metadata"]["name"] == "apps")
            .flat_map(|g| g["versions"].as_array().into_iter().flatten())
            .flat_map(|v| v["resources"].as_array().into_iter().flatten())
            .find(|r| r["resource"] == "replicasets")
            .map(|r| r["subresources"].clone());
        assert_eq!(
            sub,
            Some(json!([
                {"subresource": "status", "verbs": ["get", "patch", "update"],
                 "responseKind": {"group": "apps", "version": "v1", "kind": "ReplicaSet"}},
                {"subresource": "scale", "verbs": ["get", "patch", "update"],
                 "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}}
            ]))
        );
    }

    #[test]
    fn aggregated_accept_is_recognised_in_any_parameter_order() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(wants_aggregated(
            "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io"
        ));
        assert!(!wants_aggregated("application/json, */*"));
    }

    #[test]
    fn a_disabled_group_is_left_out_of_both_group_lists_and_no_other() {
        let names = |v: &Value, list: &str, name: &str| -> Vec<String> {
            v[list]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.pointer(name)?.as_str().map(str::to_string))
                .collect()
        };
        let disabled = ["resource.k8s.io".to_string()];
        for (label, all, without) in [
            (
                "legacy",
                names(&group_list(&[]), "groups", "/name"),
                names(&group_list(&disabled), "groups", "/name"),
            ),
            (
                "aggregated",
                names(&aggregated(false, &[]), "items", "/metadata/name"),
                names(&aggregated(false, &disabled), "items", "/metadata/name"),
            ),
        ] {
            let want: Vec<String> = all
                .iter()
                .filter(|g| *g != "resource.k8s.io")
                .cloned()
                .collect();
            assert!(
                all.contains(&"resource.k8s.io".to_string()),
                "{label}: {all:?}"
            );
            assert_eq!(without, want, "{label}");
        }
    }
}
