use rstest::rstest;
use serde_json::{json, Map, Value};

use super::util::*;
use super::*;

fn deployment(replicas: i64, surge: Value, unavailable: Value) -> Value {
    json!({"metadata": {"name": "web", "generation": 2},
           "spec": {"replicas": replicas,
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxSurge": surge,
                                                   "maxUnavailable": unavailable}},
                    "progressDeadlineSeconds": 600}})
}

#[rstest]
#[case::percentages_round_surge_up_and_unavailable_down(10, json!("25%"), json!("25%"), Ok((3, 2)))]
#[case::three_replicas_at_the_defaults(3, json!("25%"), json!("25%"), Ok((1, 0)))]
#[case::integers_are_taken_as_they_are(4, json!(2), json!(1), Ok((2, 1)))]
#[case::both_zero_lets_one_be_unavailable(4, json!(0), json!(0), Ok((0, 1)))]
#[case::percentages_rounding_to_zero_let_one_be_unavailable(1, json!("0%"), json!("25%"), Ok((0, 1)))]
#[case::unavailable_is_capped_at_replicas(2, json!(0), json!(5), Ok((0, 2)))]
#[case::a_percentage_without_a_number_is_refused(3, json!("x%"), json!(1),
    Err(DeploymentError::InvalidIntOrPercent("x%".to_string())))]
fn surge_and_unavailable_resolve_as_upstream(
    #[case] replicas: i64,
    #[case] surge: Value,
    #[case] unavailable: Value,
    #[case] want: Result<(i64, i64), DeploymentError>,
) {
    let d = deployment(replicas, surge, unavailable);
    let got = max_surge(&d).and_then(|s| Ok((s, max_unavailable(&d)?)));
    assert_eq!(got, want);
}

#[test]
fn recreate_has_no_surge_and_no_unavailability() {
    let d = json!({"spec": {"replicas": 3, "strategy": {"type": "Recreate"}}});
    assert_eq!((max_surge(&d), max_unavailable(&d)), (Ok(0), Ok(0)));
}

fn rs(name: &str, replicas: i64, available: i64) -> Value {
    json!({"metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"replicas": replicas},
           "status": {"replicas": replicas, "readyReplicas": available,
                      "availableReplicas": available}})
}

#[rstest]
#[case::first_step_makes_the_surge(10, 0, &[10], 3)]
#[case::no_room_above_the_surge(10, 3, &[10], 3)]
#[case::room_left_after_old_scaled_down(10, 3, &[7], 6)]
#[case::never_past_replicas(10, 9, &[0], 10)]
fn new_replica_set_grows_within_the_surge(
    #[case] replicas: i64,
    #[case] new_size: i64,
    #[case] old_sizes: &[i64],
    #[case] want: i64,
) {
    let d = deployment(replicas, json!("25%"), json!("25%"));
    let new = rs("new", new_size, 0);
    let old: Vec<Value> = old_sizes.iter().map(|n| rs("old", *n, *n)).collect();
    let all: Vec<&Value> = old.iter().chain([&new]).collect();
    assert_eq!(new_rs_new_replicas(&d, &all, new_size), Ok(want));
}

#[test]
fn hash_ignores_its_own_label_nulls_and_key_order_and_counts_collisions() {
    let a = json!({"metadata": {"labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
    let b = json!({"spec": {"containers": [{"image": "nginx:1", "name": "c"}]},
                   "metadata": {"creationTimestamp": null,
                                "labels": {"app": "web", "pod-template-hash": "x"}}});
    let other = json!({"metadata": {"labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
    let h = compute_hash(Some(&a), None);
    assert_eq!(h, compute_hash(Some(&b), None));
    assert_ne!(h, compute_hash(Some(&other), None));
    assert_ne!(h, compute_hash(Some(&a), Some(1)));
    assert!(equal_ignore_hash(Some(&a), Some(&b)));
    assert!(!equal_ignore_hash(Some(&a), Some(&other)));
    assert!(
        h.len() <= 10 && h.bytes().all(|c| SAFE_ALPHABET.contains(&c)),
        "{h}"
    );
}

#[test]
fn safe_encoding_maps_each_byte_into_the_alphabet() {
    // '0' is byte 48: 48 % 27 = 21 → '4'; '9' is 57: 57 % 27 = 3 → 'f'.
    assert_eq!(safe_encode("09"), "4f");
}

const NOW: &str = "2026-01-01T00:00:00Z";

fn status_with(conditions: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("conditions".into(), conditions);
    m
}

#[rstest]
#[case::new_condition_is_appended(
    json!([{"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated"}]),
    condition("Available", "False", "MinimumReplicasUnavailable", "m", NOW),
    json!([{"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated"},
           condition("Available", "False", "MinimumReplicasUnavailable", "m", NOW)]))]
#[case::same_status_and_reason_changes_nothing(
    json!([{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "lastUpdateTime": "then", "lastTransitionTime": "then", "message": "old"}]),
    condition("Available", "True", "MinimumReplicasAvailable", "new", NOW),
    json!([{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "lastUpdateTime": "then", "lastTransitionTime": "then", "message": "old"}]))]
#[case::same_status_keeps_the_transition_time_and_moves_last(
    json!([{"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated",
            "lastTransitionTime": "then"},
           {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]),
    condition("Progressing", "True", "NewReplicaSetAvailable", "m", NOW),
    json!([{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
           {"type": "Progressing", "status": "True", "lastUpdateTime": NOW,
            "lastTransitionTime": "then", "reason": "NewReplicaSetAvailable", "message": "m"}]))]
fn conditions_are_set_as_upstream(#[case] before: Value, #[case] cond: Value, #[case] want: Value) {
    let mut status = status_with(before);
    set_condition(&mut status, cond);
    assert_eq!(Value::Object(status), json!({"conditions": want}));
}

fn with_status(mut d: Value, status: Value) -> Value {
    d["status"] = status;
    d
}

fn progressing(reason: &str, updated: &str) -> Value {
    json!({"type": "Progressing", "status": "True", "lastUpdateTime": updated,
           "lastTransitionTime": updated, "reason": reason, "message": "m"})
}

#[rstest]
#[case::complete_rollout_is_new_replica_set_available(
    json!({"replicas": 3, "updatedReplicas": 2, "availableReplicas": 2,
           "conditions": [progressing("ReplicaSetUpdated", NOW)]}),
    &[("new", 3, 3)],
    ("Progressing", "True", "NewReplicaSetAvailable",
     "ReplicaSet \"new\" has successfully progressed."))]
#[case::more_updated_pods_is_progress(
    json!({"replicas": 3, "updatedReplicas": 0,
           "conditions": [progressing("NewReplicaSetCreated", NOW)]}),
    &[("old", 3, 3), ("new", 1, 0)],
    ("Progressing", "True", "ReplicaSetUpdated", "ReplicaSet \"new\" is progressing."))]
#[case::no_progress_past_the_deadline_times_out(
    json!({"replicas": 4, "updatedReplicas": 1, "availableReplicas": 3,
           "readyReplicas": 3, "unavailableReplicas": 1,
           "conditions": [progressing("ReplicaSetUpdated", "2000-01-01T00:00:00Z")]}),
    &[("old", 3, 3), ("new", 1, 0)],
    ("Progressing", "False", "ProgressDeadlineExceeded",
     "ReplicaSet \"new\" has timed out progressing."))]
#[case::minimum_availability_is_available_true(
    json!({"conditions": []}),
    &[("new", 3, 3)],
    ("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."))]
#[case::below_minimum_availability_is_available_false(
    json!({"conditions": []}),
    &[("new", 3, 1)],
    ("Available", "False", "MinimumReplicasUnavailable",
     "Deployment does not have minimum availability."))]
fn rollout_conditions_follow_the_replica_sets(
    #[case] before: Value,
    #[case] sets: &[(&str, i64, i64)],
    #[case] want: (&str, &str, &str, &str),
) {
    let d = with_status(deployment(3, json!("25%"), json!("25%")), before);
    let sets: Vec<Value> = sets.iter().map(|(n, r, a)| rs(n, *r, *a)).collect();
    let all: Vec<&Value> = sets.iter().collect();
    let new = sets.iter().find(|rs| str_at(rs, "/metadata/name") == "new");
    let status = rollout_status(&d, &all, new, NOW).expect("valid strategy");
    let cond = get_condition(&status, want.0).expect("condition set");
    assert_eq!(
        (
            str_at(cond, "/type"),
            str_at(cond, "/status"),
            str_at(cond, "/reason"),
            str_at(cond, "/message")
        ),
        want
    );
}

#[test]
fn status_sums_the_replica_sets_and_leaves_zero_counts_out() {
    let d = with_status(
        deployment(4, json!(1), json!(1)),
        json!({"collisionCount": 1}),
    );
    let (old, new) = (rs("old", 3, 3), rs("new", 2, 0));
    let status = calculate_status(&d, &[&old, &new], Some(&new), NOW).expect("valid");
    assert_eq!(
        Value::Object(status),
        json!({"observedGeneration": 2, "replicas": 5, "updatedReplicas": 2,
               "readyReplicas": 3, "availableReplicas": 3, "unavailableReplicas": 2,
               "collisionCount": 1,
               "conditions": [condition("Available", "True", "MinimumReplicasAvailable",
                                        "Deployment has minimum availability.", NOW)]})
    );
}

#[test]
fn new_replica_set_annotations_copy_the_deployment_and_keep_revision_history() {
    let d = json!({"metadata": {"annotations": {
                       "kubernetes.io/change-cause": "v2",
                       "deployment.kubernetes.io/revision": "2",
                       "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                   "spec": {"replicas": 3}});
    let mut made = json!({"metadata": {}});
    assert!(set_new_replica_set_annotations(
        &d, &mut made, "3", false, 1
    ));
    assert_eq!(
        made.pointer("/metadata/annotations"),
        Some(&json!({"kubernetes.io/change-cause": "v2",
                     "deployment.kubernetes.io/revision": "3",
                     "deployment.kubernetes.io/desired-replicas": "3",
                     "deployment.kubernetes.io/max-replicas": "4"}))
    );
    let mut rolled_back = json!({"metadata": {"annotations": {
        "deployment.kubernetes.io/revision": "1",
        "deployment.kubernetes.io/revision-history": "0"}}});
    assert!(set_new_replica_set_annotations(
        &d,
        &mut rolled_back,
        "3",
        true,
        1
    ));
    assert_eq!(
        rolled_back.pointer("/metadata/annotations"),
        Some(&json!({"kubernetes.io/change-cause": "v2",
                     "deployment.kubernetes.io/revision": "3",
                     "deployment.kubernetes.io/revision-history": "0,1"}))
    );
    assert!(!set_new_replica_set_annotations(
        &d,
        &mut rolled_back,
        "3",
        true,
        1
    ));
}

fn valid() -> Value {
    json!({"metadata": {"name": "web"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                    "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}}}}})
}

fn with(pointer: &str, value: Value) -> Value {
    let mut d = valid();
    if let Some(slot) = d.pointer_mut(pointer) {
        *slot = value;
    }
    d
}

fn messages(errs: &[crate::validation::FieldError]) -> Vec<String> {
    errs.iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

#[rstest]
#[case::valid_deployment_passes(valid(), vec![])]
#[case::missing_selector_is_required(with("/spec/selector", Value::Null),
    vec!["spec.selector: Required value"])]
#[case::empty_selector_is_invalid(with("/spec/selector", json!({})),
    vec!["spec.selector: Invalid value: {}: empty selector is invalid for deployment"])]
#[case::selector_must_select_the_template(
    with("/spec/selector", json!({"matchLabels": {"app": "api"}})),
    vec!["spec.template.metadata.labels: Invalid value: {\"app\":\"web\",\"tier\":\"fe\"}: `selector` does not match template `labels`"])]
#[case::negative_replicas_are_invalid(with("/spec/replicas", json!(-1)),
    vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"])]
#[case::surge_and_unavailable_both_zero_are_invalid(
    with("/spec/strategy/rollingUpdate", json!({"maxSurge": 0, "maxUnavailable": "0%"})),
    vec!["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"])]
#[case::a_percentage_must_be_a_number_and_a_percent_sign(
    with("/spec/strategy/rollingUpdate/maxSurge", json!("half")),
    vec!["spec.strategy.rollingUpdate.maxSurge: Invalid value: \"half\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"])]
#[case::unavailable_over_100_percent_is_invalid(
    with("/spec/strategy/rollingUpdate/maxUnavailable", json!("150%")),
    vec!["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%"])]
#[case::recreate_takes_no_rolling_update(
    with("/spec/strategy/type", json!("Recreate")),
    vec!["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"])]
fn deployments_are_validated_as_upstream(#[case] d: Value, #[case] want: Vec<&str>) {
    assert_eq!(messages(&crate::validation::validate_deployment(&d)), want);
}

#[test]
fn a_deployments_selector_is_immutable() {
    let changed = with(
        "/spec/selector",
        json!({"matchLabels": {"app": "web", "tier": "fe"}}),
    );
    assert_eq!(
        messages(&crate::validation::validate_deployment_update(&valid(), &changed)),
        vec!["spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"fe\"}}: field is immutable"]
    );
    assert_eq!(
        messages(&crate::validation::validate_deployment_update(
            &valid(),
            &with("/spec/replicas", json!(5))
        )),
        Vec::<String>::new()
    );
}
