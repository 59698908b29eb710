use super::*;

use framework::testing::{make_node, make_pod};
use std::collections::BTreeMap;

use framework::{ClientError, Code, PodEvent, PodRef, PodStatusUpdate};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use rstest::rstest;
use serde::de::DeserializeOwned;
use serde_json::json;

const DRIVER: &str = "some-driver";
const CLASS: &str = "my-resource-class";
const POD: &str = "my-pod";
const POD_UID: &str = "1234";
const CLAIM: &str = "my-pod-my-resource";
const WORKER: &str = "worker";

fn obj<T: DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("test object")
}

fn class(name: &str) -> DeviceClass {
    obj(json!({"metadata": {"name": name}, "spec": {}}))
}

fn class_with_selector(name: &str, expression: &str) -> DeviceClass {
    obj(json!({"metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]}}))
}

/// A slice on `node` with devices `instance-1`, ... (pool named after the node).
fn slice(node: &str, devices: usize) -> ResourceSlice {
    let devices: Vec<_> = (1..=devices)
        .map(|i| json!({"name": format!("instance-{i}")}))
        .collect();
    obj(json!({"metadata": {"name": format!("{node}-{DRIVER}")},
        "spec": {"driver": DRIVER, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}}))
}

/// An unallocated claim with one request `req-1` for one device of [`CLASS`].
fn pending(name: &str) -> ResourceClaim {
    obj(
        json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "req-1",
            "exactly": {"deviceClassName": CLASS}}]}}}),
    )
}

/// `claim` allocated device `instance-1` on `node`, with a node selector for that node.
fn allocated(mut claim: ResourceClaim, node: &str) -> ResourceClaim {
    claim.status = Some(obj(json!({"allocation": {
        "devices": {"results": [{"request": "req-1", "driver": DRIVER, "pool": node,
            "device": "instance-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})));
    claim
}

fn reserved_for(mut claim: ResourceClaim, consumers: &[(&str, &str)]) -> ResourceClaim {
    let status = claim
        .status
        .get_or_insert_with(ResourceClaimStatus::default);
    for (name, uid) in consumers {
        status
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".into(),
                name: name.to_string(),
                uid: uid.to_string(),
            });
    }
    claim
}

fn deleting(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.deletion_timestamp = Some(obj(json!("2026-01-01T00:00:00Z")));
    claim
}

fn owned_by_pod(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.owner_references = Some(vec![obj(json!({"apiVersion": "v1",
        "kind": "Pod", "name": POD, "uid": POD_UID, "controller": true}))]);
    claim
}

fn with_request(mut claim: ResourceClaim, request: serde_json::Value) -> ResourceClaim {
    claim.spec.devices = Some(obj(json!({"requests": [request]})));
    claim
}

/// A pod `name` (uid `uid`) referencing the claim `claim` as `my-resource`.
fn pod_with(name: &str, uid: &str, claim: &str) -> Arc<PodInfo> {
    let claim = claim.to_string();
    make_pod(name)
        .uid(uid)
        .with(move |p| {
            p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![obj(
                json!({"name": "my-resource", "resourceClaimName": claim}),
            )]);
        })
        .info()
}

fn pod_with_claim() -> Arc<PodInfo> {
    pod_with(POD, POD_UID, CLAIM)
}

/// A pod whose claim comes from a template; `generated` is the status entry's claim name
/// (`None`: no status entry yet).
fn pod_with_template(generated: Option<&str>) -> Arc<PodInfo> {
    let generated = generated.map(str::to_string);
    make_pod(POD)
        .uid(POD_UID)
        .with(move |p| {
            p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![obj(
                json!({"name": "my-resource", "resourceClaimTemplateName": "my-template"}),
            )]);
            if let Some(g) = generated {
                p.status
                    .get_or_insert_with(Default::default)
                    .resource_claim_statuses = Some(vec![obj(
                    json!({"name": "my-resource", "resourceClaimName": g}),
                )]);
            }
        })
        .info()
}

fn listers(
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    claims: &[ResourceClaim],
) -> Arc<StorageListers> {
    let mut s = StorageListers::default();
    for c in classes {
        s.device_classes.insert(
            c.metadata.name.clone().unwrap_or_default(),
            Arc::new(c.clone()),
        );
    }
    for c in slices {
        s.resource_slices.insert(
            c.metadata.name.clone().unwrap_or_default(),
            Arc::new(c.clone()),
        );
    }
    for c in claims {
        s.resource_claims.insert(object_ref(c), Arc::new(c.clone()));
    }
    Arc::new(s)
}

fn snapshot(nodes: &[&str], storage: Arc<StorageListers>) -> Snapshot {
    let nodes: Vec<Arc<Node>> = nodes.iter().map(|n| Arc::new(make_node(n).obj())).collect();
    let mut snap = Snapshot::new(nodes, Vec::new());
    snap.set_storage(storage);
    snap
}

/// One claim write as the client received it: an update of the object (PUT) or of its
/// status (PUT on `status`).
#[derive(Debug, Clone, PartialEq)]
enum ClaimWrite {
    Object(ResourceClaim),
    Status(ResourceClaim),
}

/// A client that records every claim write and bumps its `resourceVersion`, or answers with
/// `fail` (every write, or only write number `fail_at`, counting from 0 over both kinds).
#[derive(Default)]
struct RecordingClient {
    writes: Mutex<Vec<ClaimWrite>>,
    fail: Option<ClientError>,
    fail_at: Option<usize>,
    calls: std::sync::atomic::AtomicUsize,
    /// Claims created, as sent.
    created: Mutex<Vec<ResourceClaim>>,
    /// Claims deleted, as `namespace/name`.
    deleted: Mutex<Vec<String>>,
    /// Pods' `status.extendedResourceClaimStatus` written.
    pod_statuses: Mutex<Vec<(PodRef, PodExtendedResourceClaimStatus)>>,
    /// Answer pod status writes with this error.
    fail_pod_status: Option<ClientError>,
}

impl RecordingClient {
    /// Every write, in order.
    fn writes(&self) -> Vec<ClaimWrite> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// The status writes, in order.
    fn written(&self) -> Vec<ResourceClaim> {
        self.writes()
            .into_iter()
            .filter_map(|w| match w {
                ClaimWrite::Status(c) => Some(c),
                ClaimWrite::Object(_) => None,
            })
            .collect()
    }

    fn record(&self, write: ClaimWrite) -> Result<ResourceClaim, ClientError> {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(e) = &self.fail {
            if self.fail_at.is_none_or(|n| n == call) {
                return Err(e.clone());
            }
        }
        let (ClaimWrite::Object(claim) | ClaimWrite::Status(claim)) = &write;
        let mut stored = claim.clone();
        let version: i64 = claim
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        stored.metadata.resource_version = Some((version + 1).to_string());
        if let Ok(mut w) = self.writes.lock() {
            w.push(write);
        }
        Ok(stored)
    }
}

impl ClusterClient for RecordingClient {
    fn bind<'a>(
        &'a self,
        binding: &'a framework::Binding,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.bind(binding)
    }

    fn update_pod_status<'a>(
        &'a self,
        update: &'a PodStatusUpdate,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.update_pod_status(update)
    }

    fn record_event<'a>(&'a self, event: &'a PodEvent) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.record_event(event)
    }

    fn delete_pod<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<(), ClientError>> {
        framework::handle::NoopClient.delete_pod(pod)
    }

    fn update_persistent_volume<'a>(
        &'a self,
        pv: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<PersistentVolume, ClientError>> {
        framework::handle::NoopClient.update_persistent_volume(pv)
    }

    fn update_persistent_volume_claim<'a>(
        &'a self,
        pvc: &'a PersistentVolumeClaim,
    ) -> BoxFuture<'a, Result<PersistentVolumeClaim, ClientError>> {
        framework::handle::NoopClient.update_persistent_volume_claim(pvc)
    }

    fn update_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move { self.record(ClaimWrite::Object(claim.clone())) })
    }

    fn update_resource_claim_status<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move { self.record(ClaimWrite::Status(claim.clone())) })
    }

    /// Names the claim `<generateName>xyz<n>` (n counting creations from 1).
    fn create_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<ResourceClaim, ClientError>> {
        Box::pin(async move {
            let mut created = self
                .created
                .lock()
                .map_err(|e| ClientError::Transport(e.to_string()))?;
            created.push(claim.clone());
            let mut stored = claim.clone();
            let base = claim.metadata.generate_name.clone().unwrap_or_default();
            stored.metadata.name = Some(format!("{base}xyz{}", created.len()));
            stored.metadata.uid = Some(format!("created-uid-{}", created.len()));
            stored.metadata.resource_version = Some("1".into());
            Ok(stored)
        })
    }

    fn delete_resource_claim<'a>(
        &'a self,
        claim: &'a ResourceClaim,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            if let Ok(mut d) = self.deleted.lock() {
                d.push(object_ref(claim));
            }
            Ok(())
        })
    }

    fn update_pod_extended_resource_claim_status<'a>(
        &'a self,
        pod: &'a PodRef,
        status: &'a PodExtendedResourceClaimStatus,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            if let Some(e) = &self.fail_pod_status {
                return Err(e.clone());
            }
            if let Ok(mut w) = self.pod_statuses.lock() {
                w.push((pod.clone(), status.clone()));
            }
            Ok(())
        })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A claim write as the tests compare it: the claim, its allocated devices, the pods it is
/// reserved for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    claim: String,
    devices: Vec<String>,
    reserved_for: Vec<String>,
}

fn written(claim: &ResourceClaim) -> Written {
    let status = claim.status.as_ref();
    Written {
        claim: object_ref(claim),
        devices: status
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .map(|r| {
                r.iter()
                    .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
                    .collect()
            })
            .unwrap_or_default(),
        reserved_for: status
            .and_then(|s| s.reserved_for.as_ref())
            .map(|r| r.iter().map(|r| r.name.clone()).collect())
            .unwrap_or_default(),
    }
}

/// What one scheduling attempt of a pod did at each extension point the plugin has.
#[derive(Debug, PartialEq)]
struct Attempt {
    pre_filter: Status,
    /// Per node, in order; empty when PreFilter did not succeed.
    filter: Vec<(String, Status)>,
    /// When no node passed Filter.
    post_filter: Option<Status>,
    /// On the first node that passed Filter.
    reserve: Option<Status>,
    pre_bind: Option<Status>,
    written: Vec<Written>,
}

/// Runs PreFilter, Filter on every node, then PostFilter (no node fits) or Reserve and
/// PreBind on the first node that fits (Unreserve when PreBind fails).
fn attempt(
    pl: &DynamicResources,
    client: &RecordingClient,
    pod: &PodInfo,
    snap: &Snapshot,
) -> Attempt {
    let rt = runtime();
    let mut state = CycleState::new();
    let (_, pre_filter) = pl.pre_filter(&mut state, pod, snap);
    let mut out = Attempt {
        pre_filter,
        filter: Vec::new(),
        post_filter: None,
        reserve: None,
        pre_bind: None,
        written: Vec::new(),
    };
    if !out.pre_filter.is_success() {
        return out;
    }
    for node in snap.node_infos() {
        out.filter
            .push((node.name().to_string(), pl.filter(&state, pod, node)));
    }
    let feasible = out
        .filter
        .iter()
        .find(|(_, s)| s.is_success())
        .map(|(n, _)| n.clone());
    match feasible {
        None => {
            let statuses = NodeToStatus::new(Status::unresolvable("absent"));
            let (_, status) = rt.block_on(async {
                let r = pl.post_filter(&mut state, pod, snap, &statuses, &NoRunner);
                // Let a background write run.
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                r
            });
            out.post_filter = Some(status);
        }
        Some(node) => {
            let reserve = pl.reserve(&mut state, pod, &node);
            out.reserve = Some(reserve.clone());
            if reserve.is_success() {
                let status = rt.block_on(pl.pre_bind(&state, pod, &node));
                if !status.is_success() {
                    rt.block_on(async {
                        pl.unreserve(&mut state, pod, &node);
                        // Let the background write run.
                        for _ in 0..10 {
                            tokio::task::yield_now().await;
                        }
                    });
                }
                out.pre_bind = Some(status);
            }
        }
    }
    out.written = client.written().iter().map(written).collect();
    out
}

/// PostFilter's runner; DynamicResources never calls it.
struct NoRunner;

impl PluginsRunner for NoRunner {
    fn run_filter_plugins_with_nominated_pods(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }

    fn run_pre_filter_extension_add_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }

    fn run_pre_filter_extension_remove_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }

    fn nominated_node_name(&self, _pod: &PodInfo) -> Option<String> {
        None
    }

    fn random_index(&self, _n: usize) -> usize {
        0
    }
}

fn plugin(client: Arc<RecordingClient>) -> DynamicResources {
    DynamicResources::new(
        Features::ALL,
        client,
        None,
        Arc::new(kubesched_cel::SelectorCache::new(16)),
    )
}

fn stopped_at_pre_filter(status: Status) -> Attempt {
    Attempt {
        pre_filter: status,
        filter: Vec::new(),
        post_filter: None,
        reserve: None,
        pre_bind: None,
        written: Vec::new(),
    }
}

fn worker_claim_written(devices: &[&str], reserved_for: &[&str]) -> Written {
    Written {
        claim: format!("default/{CLAIM}"),
        devices: devices.iter().map(|s| s.to_string()).collect(),
        reserved_for: reserved_for.iter().map(|s| s.to_string()).collect(),
    }
}

fn many_consumers(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("other-{i}"), format!("other-uid-{i}")))
        .collect()
}

#[rstest]
#[case::missing_claim(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)], vec![], None,
    stopped_at_pre_filter(Status::unresolvable(
        "resourceclaim.resource.k8s.io \"my-pod-my-resource\" not found")))]
#[case::deleted_claim(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![deleting(pending(CLAIM))], None,
    stopped_at_pre_filter(Status::unresolvable(
        "resourceclaim \"my-pod-my-resource\" is being deleted")))]
#[case::template_claim_not_created_yet(
    pod_with_template(None), vec![class(CLASS)], vec![slice(WORKER, 1)], vec![], None,
    stopped_at_pre_filter(Status::unresolvable(
        "pod \"default/my-pod\": ResourceClaim not created yet")))]
#[case::template_claim_not_owned_by_the_pod(
    pod_with_template(Some(CLAIM)), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![pending(CLAIM)], None,
    stopped_at_pre_filter(Status::unresolvable(
        "ResourceClaim default/my-pod-my-resource was not created for pod default/my-pod (pod is not owner)")))]
#[case::claim_reserved_for_the_most_consumers_is_in_use(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![reserved_for(allocated(pending(CLAIM), WORKER), &many_consumers(256)
        .iter().map(|(n, u)| (n.as_str(), u.as_str())).collect::<Vec<_>>())],
    None,
    stopped_at_pre_filter(Status::unresolvable("resourceclaim in use")))]
#[case::missing_class(
    pod_with_claim(), vec![], vec![slice(WORKER, 1)], vec![pending(CLAIM)], None,
    stopped_at_pre_filter(Status::unresolvable(
        "request req-1: device class my-resource-class does not exist")))]
#[case::missing_class_of_a_subrequest(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![with_request(pending(CLAIM), json!({"name": "req-1", "firstAvailable": [
        {"name": "sub-0", "deviceClassName": CLASS},
        {"name": "sub-1", "deviceClassName": "other-class"}]}))],
    None,
    stopped_at_pre_filter(Status::unresolvable(
        "request req-1/sub-1: device class other-class does not exist")))]
#[case::unsupported_request_type(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![with_request(pending(CLAIM), json!({"name": "req-1"}))],
    None,
    stopped_at_pre_filter(Status::unresolvable(
        "resource claim default/my-pod-my-resource, request req-1: unsupported request type")))]
#[case::structured_no_resources(
    pod_with_claim(), vec![class(CLASS)], vec![], vec![pending(CLAIM)], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::unresolvable("cannot allocate all claims"))],
        post_filter: Some(Status::unschedulable("still not schedulable")),
        reserve: None, pre_bind: None, written: vec![],
    })]
#[case::structured_with_resources_allocates_and_reserves(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)], vec![pending(CLAIM)], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::success()),
        written: vec![worker_claim_written(&["some-driver/worker/instance-1"], &[POD])],
    })]
#[case::template_claim_of_the_pod_is_allocated(
    pod_with_template(Some(CLAIM)), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![owned_by_pod(pending(CLAIM))], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::success()),
        written: vec![worker_claim_written(&["some-driver/worker/instance-1"], &[POD])],
    })]
#[case::allocated_claim_gets_only_the_reservation(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![allocated(pending(CLAIM), WORKER)], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::success()),
        written: vec![worker_claim_written(&["some-driver/worker/instance-1"], &[POD])],
    })]
#[case::claim_reserved_for_the_pod_is_not_written(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![reserved_for(allocated(pending(CLAIM), WORKER), &[(POD, POD_UID)])], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::success()),
        written: vec![],
    })]
#[case::wrong_topology_claim_reserved_for_no_pod_is_deallocated(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![allocated(pending(CLAIM), "other-node")], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::unresolvable("resourceclaim not available on the node"))],
        post_filter: Some(Status::unschedulable("deallocation of ResourceClaim completed")),
        reserve: None, pre_bind: None,
        written: vec![worker_claim_written(&[], &[])],
    })]
#[case::wrong_topology_claim_reserved_for_another_pod_stays(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)],
    vec![reserved_for(allocated(pending(CLAIM), "other-node"), &[("other", "other-uid")])], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::unresolvable("resourceclaim not available on the node"))],
        post_filter: Some(Status::unschedulable("still not schedulable")),
        reserve: None, pre_bind: None, written: vec![],
    })]
#[case::class_selector_matching_the_device_allocates_it(
    pod_with_claim(), vec![class_with_selector(CLASS, "device.driver == \"some-driver\"")],
    vec![slice(WORKER, 1)], vec![pending(CLAIM)], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::success()),
        written: vec![worker_claim_written(&["some-driver/worker/instance-1"], &[POD])],
    })]
#[case::class_selector_matching_no_device_cannot_allocate(
    pod_with_claim(), vec![class_with_selector(CLASS, "device.driver == \"other-driver\"")],
    vec![slice(WORKER, 1)], vec![pending(CLAIM)], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::unresolvable("cannot allocate all claims"))],
        post_filter: Some(Status::unschedulable("still not schedulable")),
        reserve: None, pre_bind: None, written: vec![],
    })]
#[case::class_selector_that_does_not_compile_is_an_error(
    pod_with_claim(), vec![class_with_selector(CLASS, "noSuchVar")],
    vec![slice(WORKER, 1)], vec![pending(CLAIM)], None,
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::error(
            "class my-resource-class: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^"))],
        post_filter: Some(Status::unschedulable("still not schedulable")),
        reserve: None, pre_bind: None, written: vec![],
    })]
#[case::bind_failure_is_an_error(
    pod_with_claim(), vec![class(CLASS)], vec![slice(WORKER, 1)], vec![pending(CLAIM)],
    Some(ClientError::Api { code: 409, message: "conflict".into() }),
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::error(
            "add finalizer to claim default/my-pod-my-resource: api error 409: conflict")),
        written: vec![],
    })]
fn scheduling_a_pod(
    #[case] pod: Arc<PodInfo>,
    #[case] classes: Vec<DeviceClass>,
    #[case] slices: Vec<ResourceSlice>,
    #[case] claims: Vec<ResourceClaim>,
    #[case] fail: Option<ClientError>,
    #[case] want: Attempt,
) {
    let client = Arc::new(RecordingClient {
        fail,
        ..RecordingClient::default()
    });
    let pl = plugin(client.clone());
    let snap = snapshot(&[WORKER], listers(&classes, &slices, &claims));
    assert_eq!(attempt(&pl, &client, &pod, &snap), want);
    assert!(
        pl.tracker().in_flight.is_empty(),
        "nothing stays in flight after PreBind or Unreserve"
    );
}

#[test]
fn pod_without_claims_is_skipped_and_costs_nothing() {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client);
    let pod = make_pod(POD).info();
    let snap = snapshot(&[WORKER], listers(&[class(CLASS)], &[], &[]));
    let mut state = CycleState::new();
    let (_, pre_filter) = pl.pre_filter(&mut state, &pod, &snap);
    let (_, post_filter) = pl.post_filter(
        &mut state,
        &pod,
        &snap,
        &NodeToStatus::new(Status::success()),
        &NoRunner,
    );
    assert_eq!(
        (
            pl.pre_enqueue(&pod),
            pre_filter,
            state.read::<StateData>(STATE_KEY).is_some(),
            post_filter
        ),
        (
            Status::success(),
            Status::skip(),
            false,
            Status::with_reasons(Code::Unschedulable, std::iter::empty::<&'static str>())
        )
    );
}

/// Two pods, each with its own claim for one device of the class, on a node with one
/// device.
fn two_pods_one_device() -> (
    Arc<RecordingClient>,
    DynamicResources,
    Arc<PodInfo>,
    Arc<PodInfo>,
    Snapshot,
) {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client.clone());
    let snap = snapshot(
        &[WORKER],
        listers(
            &[class(CLASS)],
            &[slice(WORKER, 1)],
            &[pending("claim-a"), pending("claim-b")],
        ),
    );
    (
        client,
        pl,
        pod_with("pod-a", "uid-a", "claim-a"),
        pod_with("pod-b", "uid-b", "claim-b"),
        snap,
    )
}

fn filter_once(pl: &DynamicResources, pod: &PodInfo, snap: &Snapshot) -> (CycleState, Status) {
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, pod, snap);
    if !status.is_success() {
        return (state, status);
    }
    let status = snap
        .node_infos()
        .first()
        .map_or_else(|| Status::error("no node"), |n| pl.filter(&state, pod, n));
    (state, status)
}

#[test]
fn device_in_flight_for_one_pod_is_not_given_to_another() {
    let (_client, pl, a, b, snap) = two_pods_one_device();
    let (mut state_a, status_a) = filter_once(&pl, &a, &snap);
    let reserve_a = pl.reserve(&mut state_a, &a, WORKER);
    let (_, status_b) = filter_once(&pl, &b, &snap);
    assert_eq!(
        (status_a, reserve_a, status_b),
        (
            Status::success(),
            Status::success(),
            Status::unresolvable("cannot allocate all claims")
        )
    );
}

#[test]
fn device_is_free_again_after_unreserve() {
    let (_client, pl, a, b, snap) = two_pods_one_device();
    let (mut state_a, _) = filter_once(&pl, &a, &snap);
    let _ = pl.reserve(&mut state_a, &a, WORKER);
    pl.unreserve(&mut state_a, &a, WORKER);
    let (_, status_b) = filter_once(&pl, &b, &snap);
    assert_eq!(status_b, Status::success());
}

#[test]
fn device_written_by_pre_bind_stays_taken_until_the_informer_shows_the_claim() {
    let (client, pl, a, b, snap) = two_pods_one_device();
    let (mut state_a, _) = filter_once(&pl, &a, &snap);
    let _ = pl.reserve(&mut state_a, &a, WORKER);
    let pre_bind = runtime().block_on(pl.pre_bind(&state_a, &a, WORKER));
    // The snapshot still has the unallocated claim-a: only the assume cache knows.
    let (_, status_b) = filter_once(&pl, &b, &snap);
    assert_eq!(
        (
            pre_bind,
            client.written().iter().map(written).collect::<Vec<_>>(),
            pl.tracker().in_flight.len(),
            status_b
        ),
        (
            Status::success(),
            vec![Written {
                claim: "default/claim-a".into(),
                devices: vec!["some-driver/worker/instance-1".into()],
                reserved_for: vec!["pod-a".into()],
            }],
            0,
            Status::unresolvable("cannot allocate all claims")
        )
    );
}

#[test]
fn shared_claim_in_flight_for_one_pod_makes_the_other_wait() {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client);
    let snap = snapshot(
        &[WORKER],
        listers(&[class(CLASS)], &[slice(WORKER, 1)], &[pending("shared")]),
    );
    let a = pod_with("pod-a", "uid-a", "shared");
    let b = pod_with("pod-b", "uid-b", "shared");
    let (mut state_a, _) = filter_once(&pl, &a, &snap);
    let _ = pl.reserve(&mut state_a, &a, WORKER);
    let (_, status_b) = filter_once(&pl, &b, &snap);
    assert_eq!(
        status_b,
        Status::unresolvable("resource claim default/shared is in the process of being allocated")
    );
}

#[rstest]
#[case::pod_without_claims(make_pod(POD).info(), vec![], Status::success())]
#[case::claim_exists(pod_with_claim(), vec![pending(CLAIM)], Status::success())]
#[case::claim_missing(pod_with_claim(), vec![],
    Status::unresolvable("resourceclaim.resource.k8s.io \"my-pod-my-resource\" not found"))]
#[case::template_claim_not_created_yet(pod_with_template(None), vec![],
    Status::unresolvable("pod \"default/my-pod\": ResourceClaim not created yet"))]
#[case::template_claim_without_generated_name_is_skipped(
    make_pod(POD).uid(POD_UID).with(|p| {
        p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![obj(
            json!({"name": "my-resource", "resourceClaimTemplateName": "my-template"}))]);
        p.status.get_or_insert_with(Default::default).resource_claim_statuses =
            Some(vec![obj(json!({"name": "my-resource"}))]);
    }).info(),
    vec![], Status::success())]
#[case::claim_of_neither_kind(
    make_pod(POD).with(|p| {
        p.spec.get_or_insert_with(Default::default).resource_claims =
            Some(vec![obj(json!({"name": "my-resource"}))]);
    }).info(),
    vec![],
    Status::unresolvable(
        "pod \"default/my-pod\", spec.resourceClaim \"my-resource\": none of the supported fields are set"))]
fn pre_enqueue(
    #[case] pod: Arc<PodInfo>,
    #[case] claims: Vec<ResourceClaim>,
    #[case] want: Status,
) {
    let (_tx, rx) = tokio::sync::watch::channel(listers(&[class(CLASS)], &[], &claims));
    let pl = DynamicResources::new(
        Features::ALL,
        Arc::new(RecordingClient::default()),
        Some(rx),
        Arc::new(kubesched_cel::SelectorCache::new(16)),
    );
    assert_eq!(pl.pre_enqueue(&pod), want);
}

fn claim_event(c: &ResourceClaim) -> EventObject {
    EventObject::ResourceClaim(Arc::new(c.clone()))
}

fn with_finalizer(mut c: ResourceClaim) -> ResourceClaim {
    c.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
    c
}

#[rstest]
#[case::claim_of_the_pod_created(vec![pending(CLAIM)], None, pending(CLAIM), QueueingHint::Queue)]
#[case::other_claim_created(vec![pending(CLAIM), pending("other")], None, pending("other"),
    QueueingHint::QueueSkip)]
#[case::claim_of_the_pod_still_missing(vec![pending("other")], None, pending("other"),
    QueueingHint::QueueSkip)]
#[case::other_claim_deallocated(
    vec![pending(CLAIM), pending("other")],
    Some(allocated(pending("other"), WORKER)), pending("other"), QueueingHint::Queue)]
#[case::claim_of_the_pod_status_changed(
    vec![pending(CLAIM)], Some(pending(CLAIM)),
    reserved_for(pending(CLAIM), &[("x", "y")]), QueueingHint::Queue)]
#[case::claim_of_the_pod_changed_elsewhere(
    vec![pending(CLAIM)], Some(pending(CLAIM)), with_finalizer(pending(CLAIM)),
    QueueingHint::QueueSkip)]
fn claim_change_hint(
    #[case] stored: Vec<ResourceClaim>,
    #[case] old: Option<ResourceClaim>,
    #[case] new: ResourceClaim,
    #[case] want: QueueingHint,
) {
    let (_tx, rx) = tokio::sync::watch::channel(listers(&[], &[], &stored));
    let got = is_schedulable_after_claim_change(
        Some(&rx),
        &pod_with_claim().pod,
        old.as_ref().map(claim_event).as_ref(),
        Some(&claim_event(&new)),
    );
    assert_eq!(got, Ok(want));
}

#[rstest]
#[case::other_pod(pod_with("other", "other-uid", CLAIM), vec![owned_by_pod(pending(CLAIM))],
    QueueingHint::QueueSkip)]
#[case::generated_claim_named_and_present(pod_with_template(Some(CLAIM)),
    vec![owned_by_pod(pending(CLAIM))], QueueingHint::Queue)]
#[case::generated_claim_named_but_missing(pod_with_template(Some(CLAIM)), vec![],
    QueueingHint::QueueSkip)]
fn pod_change_hint(
    #[case] modified: Arc<PodInfo>,
    #[case] stored: Vec<ResourceClaim>,
    #[case] want: QueueingHint,
) {
    let (_tx, rx) = tokio::sync::watch::channel(listers(&[], &[], &stored));
    let got = is_schedulable_after_pod_change(
        Some(&rx),
        &pod_with_template(None).pod,
        None,
        Some(&EventObject::Pod(modified.pod.clone())),
    );
    assert_eq!(got, Ok(want));
}

#[test]
fn events_follow_upstream() {
    let pl = plugin(Arc::new(RecordingClient::default()));
    let got: Vec<(EventResource, ActionType, bool)> = pl
        .events_to_register()
        .iter()
        .map(|e| (e.event.resource, e.event.action, e.hint.is_some()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                false
            ),
            (
                EventResource::ResourceClaim,
                ActionType::ADD | ActionType::UPDATE,
                true
            ),
            (
                EventResource::Pod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                true
            ),
            (
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
                false
            ),
            (
                EventResource::ResourceSlice,
                ActionType::ADD | ActionType::UPDATE,
                false
            ),
        ]
    );
}

/// A pod referencing the claims `claims` (as `r0`, `r1`, ...).
fn pod_with_claims(claims: &[&str]) -> Arc<PodInfo> {
    let refs: Vec<serde_json::Value> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"name": format!("r{i}"), "resourceClaimName": c}))
        .collect();
    make_pod(POD)
        .uid(POD_UID)
        .with(move |p| {
            p.spec.get_or_insert_with(Default::default).resource_claims = Some(obj(json!(refs)));
        })
        .info()
}

#[rstest]
#[case::two_claims_get_two_devices(
    2, vec![pending("claim-1"), pending("claim-2")],
    Status::success(),
    vec![
        Written { claim: "default/claim-1".into(), devices: vec!["some-driver/worker/instance-1".into()], reserved_for: vec![POD.into()] },
        Written { claim: "default/claim-2".into(), devices: vec!["some-driver/worker/instance-2".into()], reserved_for: vec![POD.into()] },
    ])]
#[case::two_claims_do_not_share_one_device(
    1, vec![pending("claim-1"), pending("claim-2")],
    Status::unresolvable("cannot allocate all claims"), vec![])]
#[case::allocated_claim_beside_a_pending_one_keeps_its_device(
    2, vec![allocated(pending("claim-1"), WORKER), pending("claim-2")],
    Status::success(),
    vec![
        Written { claim: "default/claim-1".into(), devices: vec!["some-driver/worker/instance-1".into()], reserved_for: vec![POD.into()] },
        Written { claim: "default/claim-2".into(), devices: vec!["some-driver/worker/instance-2".into()], reserved_for: vec![POD.into()] },
    ])]
#[case::allocated_claim_takes_the_only_device_from_the_pending_one(
    1, vec![allocated(pending("claim-1"), WORKER), pending("claim-2")],
    Status::unresolvable("cannot allocate all claims"), vec![])]
fn pod_with_two_claims(
    #[case] devices: usize,
    #[case] claims: Vec<ResourceClaim>,
    #[case] want_filter: Status,
    #[case] want_written: Vec<Written>,
) {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client.clone());
    let snap = snapshot(
        &[WORKER],
        listers(&[class(CLASS)], &[slice(WORKER, devices)], &claims),
    );
    let got = attempt(
        &pl,
        &client,
        &pod_with_claims(&["claim-1", "claim-2"]),
        &snap,
    );
    assert_eq!(
        (got.filter, got.written),
        (vec![(WORKER.to_string(), want_filter)], want_written)
    );
}

#[test]
fn network_attached_device_is_allocated_on_any_node() {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client.clone());
    let shared: ResourceSlice = obj(json!({"metadata": {"name": "network"},
        "spec": {"driver": DRIVER, "allNodes": true,
            "pool": {"name": "network", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "instance-1"}]}}));
    let snap = snapshot(
        &[WORKER, "worker-2"],
        listers(&[class(CLASS)], &[shared], &[pending(CLAIM)]),
    );
    let got = attempt(&pl, &client, &pod_with_claim(), &snap);
    assert_eq!(
        (got.filter, got.written),
        (
            vec![
                (WORKER.to_string(), Status::success()),
                ("worker-2".to_string(), Status::success())
            ],
            vec![worker_claim_written(
                &["some-driver/network/instance-1"],
                &[POD]
            )]
        )
    );
}

#[test]
fn unreserve_takes_the_pod_out_of_a_claim_pre_bind_already_reserved() {
    let client = Arc::new(RecordingClient {
        fail: Some(ClientError::Api {
            code: 500,
            message: "boom".into(),
        }),
        // Claim 1's finalizer (0) and status (1), claim 2's finalizer (2) and status (3).
        fail_at: Some(3),
        ..RecordingClient::default()
    });
    let pl = plugin(client.clone());
    let snap = snapshot(
        &[WORKER],
        listers(
            &[class(CLASS)],
            &[slice(WORKER, 2)],
            &[pending("claim-1"), pending("claim-2")],
        ),
    );
    let got = attempt(
        &pl,
        &client,
        &pod_with_claims(&["claim-1", "claim-2"]),
        &snap,
    );
    let claim_1 = |reserved_for: &[&str]| Written {
        claim: "default/claim-1".into(),
        devices: vec!["some-driver/worker/instance-1".into()],
        reserved_for: reserved_for.iter().map(|s| s.to_string()).collect(),
    };
    assert_eq!(
        (got.pre_bind, got.written, pl.tracker().in_flight.len()),
        (
            Some(Status::error(
                "add allocation and reservation to claim default/claim-2: api error 500: boom"
            )),
            vec![claim_1(&[POD]), claim_1(&[])],
            0
        )
    );
}

#[test]
fn invalid_pool_rejects_only_its_node() {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client.clone());
    // Two slices of worker's pool publish the same device: the pool is invalid.
    let mut second = slice(WORKER, 1);
    second.metadata.name = Some("worker-second".into());
    second.spec.pool.resource_slice_count = 2;
    let mut first = slice(WORKER, 1);
    first.spec.pool.resource_slice_count = 2;
    let snap = snapshot(
        &[WORKER, "worker-2"],
        listers(
            &[class(CLASS)],
            &[first, second, slice("worker-2", 1)],
            &[pending(CLAIM)],
        ),
    );
    let got = attempt(&pl, &client, &pod_with_claim(), &snap);
    assert_eq!(
        (got.filter, got.written),
        (
            vec![
                (
                    WORKER.to_string(),
                    Status::unresolvable("invalid resource pools were encountered")
                ),
                ("worker-2".to_string(), Status::success())
            ],
            vec![worker_claim_written(
                &["some-driver/worker-2/instance-1"],
                &[POD]
            )]
        )
    );
}

#[test]
fn assumed_claim_is_dropped_once_the_informer_shows_a_newer_version() {
    let (_client, pl, a, _b, snap) = two_pods_one_device();
    let (mut state_a, _) = filter_once(&pl, &a, &snap);
    let _ = pl.reserve(&mut state_a, &a, WORKER);
    let _ = runtime().block_on(pl.pre_bind(&state_a, &a, WORKER));
    let assumed_after_pre_bind = pl.tracker().assumed.len();
    // The informer shows claim-a at a version past the write (deallocated meanwhile).
    let mut newer = pending("claim-a");
    newer.metadata.resource_version = Some("5".into());
    let later = snapshot(
        &[WORKER],
        listers(
            &[class(CLASS)],
            &[slice(WORKER, 1)],
            &[newer, pending("claim-b")],
        ),
    );
    let b = pod_with("pod-b", "uid-b", "claim-b");
    let (_, status_b) = filter_once(&pl, &b, &later);
    assert_eq!(
        (assumed_after_pre_bind, pl.tracker().assumed.len(), status_b),
        (1, 0, Status::success())
    );
}

#[test]
fn post_filter_outside_the_runtime_deallocates_on_the_handle_runtime() {
    let client = Arc::new(RecordingClient::default());
    let rt = runtime();
    let mut pl = plugin(client.clone());
    pl.runtime = Some(rt.handle().clone());
    let snap = snapshot(
        &[WORKER],
        listers(
            &[class(CLASS)],
            &[slice(WORKER, 1)],
            &[allocated(pending(CLAIM), "other-node")],
        ),
    );
    let pod = pod_with_claim();
    let (mut state, _) = filter_once(&pl, &pod, &snap);
    // As the scheduling loop calls it: on a thread outside the runtime.
    let (_, status) = pl.post_filter(
        &mut state,
        &pod,
        &snap,
        &NodeToStatus::new(Status::unresolvable("absent")),
        &NoRunner,
    );
    let written = rt.block_on(async {
        for _ in 0..100 {
            let w = client.written();
            if !w.is_empty() {
                return w.iter().map(written).collect();
            }
            tokio::task::yield_now().await;
        }
        Vec::new()
    });
    assert_eq!(
        (status, written),
        (
            Status::unschedulable("deallocation of ResourceClaim completed"),
            vec![worker_claim_written(&[], &[])]
        )
    );
}

/// `claim` at `resourceVersion` `version`.
fn at_version(mut claim: ResourceClaim, version: &str) -> ResourceClaim {
    claim.metadata.resource_version = Some(version.into());
    claim
}

/// [`pending`] as the informer shows it after someone else's write: version 2, labelled.
fn changed_elsewhere() -> ResourceClaim {
    let mut c = at_version(pending(CLAIM), "2");
    c.metadata.labels = Some([("team".to_string(), "ml".to_string())].into());
    c
}

/// `claim` allocated on [`WORKER`] and reserved for the pod, as PreBind writes it.
fn bound_claim(claim: ResourceClaim) -> ResourceClaim {
    reserved_for(allocated(claim, WORKER), &[(POD, POD_UID)])
}

fn api_error(code: u16) -> Option<ClientError> {
    Some(ClientError::Api {
        code,
        message: "refused".into(),
    })
}

#[rstest]
#[case::allocating_adds_the_finalizer_then_writes_allocation_and_reservation(
    pending(CLAIM), None, None, None, Status::success(),
    vec![ClaimWrite::Object(with_finalizer(pending(CLAIM))),
         ClaimWrite::Status(at_version(bound_claim(with_finalizer(pending(CLAIM))), "2"))])]
#[case::finalizer_left_by_an_interrupted_attempt_is_not_written_again(
    with_finalizer(pending(CLAIM)), None, None, None, Status::success(),
    vec![ClaimWrite::Status(bound_claim(with_finalizer(pending(CLAIM))))])]
#[case::allocated_claim_gets_only_the_reservation(
    allocated(pending(CLAIM), WORKER), None, None, None, Status::success(),
    vec![ClaimWrite::Status(bound_claim(pending(CLAIM)))])]
#[case::refused_finalizer_is_an_error_and_nothing_more_is_written(
    pending(CLAIM), None, api_error(500), None,
    Status::error("add finalizer to claim default/my-pod-my-resource: api error 500: refused"),
    vec![])]
#[case::conflict_on_the_finalizer_is_written_again_on_the_informers_newer_claim(
    pending(CLAIM), Some(changed_elsewhere()), api_error(409), Some(0), Status::success(),
    vec![ClaimWrite::Object(with_finalizer(changed_elsewhere())),
         ClaimWrite::Status(at_version(bound_claim(with_finalizer(changed_elsewhere())), "3"))])]
#[case::conflict_on_the_status_is_written_again_without_adding_the_finalizer_twice(
    pending(CLAIM), Some(at_version(with_finalizer(pending(CLAIM)), "2")), api_error(409),
    Some(1), Status::success(),
    vec![ClaimWrite::Object(with_finalizer(pending(CLAIM))),
         ClaimWrite::Status(at_version(bound_claim(with_finalizer(pending(CLAIM))), "2"))])]
#[case::claim_deleted_in_the_meantime_is_not_written(
    pending(CLAIM), Some(deleting(changed_elsewhere())), api_error(409), Some(0),
    Status::error("claim default/my-pod-my-resource got deleted in the meantime"),
    vec![])]
#[case::claim_allocated_elsewhere_in_the_meantime_is_not_written(
    pending(CLAIM), Some(allocated(changed_elsewhere(), "other-node")), api_error(409), Some(0),
    Status::error("claim default/my-pod-my-resource got allocated elsewhere in the meantime"),
    vec![])]
fn pre_bind_writes(
    #[case] claim: ResourceClaim,
    #[case] informer_shows: Option<ResourceClaim>,
    #[case] fail: Option<ClientError>,
    #[case] fail_at: Option<usize>,
    #[case] want_status: Status,
    #[case] want_writes: Vec<ClaimWrite>,
) {
    let client = Arc::new(RecordingClient {
        fail,
        fail_at,
        ..RecordingClient::default()
    });
    // The live objects a conflict is retried on; without them there is no newer claim.
    let live = informer_shows
        .map(|c| tokio::sync::watch::channel(listers(&[class(CLASS)], &[slice(WORKER, 1)], &[c])));
    let pl = DynamicResources::new(
        Features::ALL,
        client.clone(),
        live.as_ref().map(|(_, rx)| rx.clone()),
        Arc::new(kubesched_cel::SelectorCache::new(16)),
    );
    let snap = snapshot(
        &[WORKER],
        listers(&[class(CLASS)], &[slice(WORKER, 1)], &[claim]),
    );
    let got = attempt(&pl, &client, &pod_with_claim(), &snap);
    assert_eq!(
        (got.pre_bind, client.writes()),
        (Some(want_status), want_writes)
    );
}

/// A claim for three devices that must agree on `some-driver/index`, and a slice on
/// [`WORKER`] whose sixteen devices all differ in it: the search starts from each device in
/// turn (more than ten steps) before it finds that none works.
fn no_three_devices_agree() -> (ResourceClaim, ResourceSlice) {
    let mut claim = with_request(
        pending(CLAIM),
        json!({"name": "req-1", "exactly": {"deviceClassName": CLASS, "count": 3}}),
    );
    if let Some(devices) = claim.spec.devices.as_mut() {
        devices.constraints = Some(vec![obj(json!({"matchAttribute": "some-driver/index"}))]);
    }
    let devices: Vec<_> = (0..16)
        .map(|i| json!({"name": format!("instance-{i}"), "attributes": {"index": {"int": i}}}))
        .collect();
    let slice = obj(json!({"metadata": {"name": format!("{WORKER}-{DRIVER}")},
        "spec": {"driver": DRIVER, "nodeName": WORKER,
            "pool": {"name": WORKER, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}}));
    (claim, slice)
}

/// A clock that moves `step` forward each time it is read.
fn ticking_clock(step: Duration) -> Clock {
    let start = Instant::now();
    let reads = Arc::new(std::sync::atomic::AtomicU32::new(0));
    Arc::new(move || start + step * reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
}

#[rstest]
#[case::search_is_given_up_once_the_timeout_passes(
    Some(Duration::from_secs(10)),
    Duration::from_secs(1),
    Status::unresolvable("timed out trying to allocate devices")
)]
#[case::no_timeout_searches_to_the_end(
    None,
    Duration::from_secs(1),
    Status::unresolvable("cannot allocate all claims")
)]
#[case::search_within_the_timeout_is_not_cut_short(
    Some(Duration::from_secs(10)),
    Duration::ZERO,
    Status::unresolvable("cannot allocate all claims")
)]
fn filter_timeout(#[case] timeout: Option<Duration>, #[case] tick: Duration, #[case] want: Status) {
    let (claim, slice) = no_three_devices_agree();
    let mut pl = plugin(Arc::new(RecordingClient::default()));
    pl.filter_timeout = timeout;
    pl.clock = ticking_clock(tick);
    let snap = snapshot(&[WORKER], listers(&[class(CLASS)], &[slice], &[claim]));
    let (_, status) = filter_once(&pl, &pod_with_claim(), &snap);
    assert_eq!(status, want);
}

#[rstest]
#[case::unset_is_upstreams_default(None, Ok(Some(Duration::from_secs(10))))]
#[case::zero_means_no_limit(Some("0s"), Ok(None))]
#[case::a_go_duration(Some("1m30s"), Ok(Some(Duration::from_secs(90))))]
#[case::negative_is_refused(
    Some("-1s"),
    Err(framework::ArgsError::new(
        "filterTimeout",
        "invalid duration \"-1s\": a duration here cannot be negative"
    ))
)]
#[case::not_a_duration_is_refused(
    Some("ten seconds"),
    Err(framework::ArgsError::new("filterTimeout", "invalid duration \"ten seconds\""))
)]
fn filter_timeout_from_args(
    #[case] text: Option<&str>,
    #[case] want: Result<Option<Duration>, framework::ArgsError>,
) {
    let args = super::DynamicResourcesArgs {
        filter_timeout: text.map(str::to_string),
        binding_timeout: None,
    };
    assert_eq!(args.filter_timeout(), want);
}

#[rstest]
#[case::none(None, Ok(()))]
#[case::upstreams_fields_are_accepted(
    Some(json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs",
                "filterTimeout": "10s", "bindingTimeout": "600s"})),
    Ok(())
)]
#[case::an_unknown_field_is_refused(
    Some(json!({"filterTimout": "10s"})),
    Err(framework::ArgsError::new(
        "filterTimout",
        "unknown field `filterTimout`, expected `filterTimeout` or `bindingTimeout`"
    ))
)]
fn args_decode_strictly(
    #[case] args: Option<serde_json::Value>,
    #[case] want: Result<(), framework::ArgsError>,
) {
    let got = framework::decode_args::<super::DynamicResourcesArgs>(args.as_ref()).map(|_| ());
    assert_eq!(got, want);
}

// ---- extended resources backed by DRA ----

const GPU: &str = "example.com/gpu";
const IMPLICIT: &str = "deviceclass.resource.kubernetes.io/my-resource-class";

/// [`CLASS`], serving [`GPU`] too.
fn gpu_class() -> DeviceClass {
    obj(json!({"metadata": {"name": CLASS}, "spec": {"extendedResourceName": GPU}}))
}

/// The pod with one container per entry, each requesting its resources.
fn pod_requesting(containers: &[&[(&str, &str)]]) -> Arc<PodInfo> {
    let mut pod = make_pod(POD).uid(POD_UID);
    for c in containers {
        pod = pod.req(c);
    }
    pod.info()
}

fn gpu_pod() -> Arc<PodInfo> {
    pod_requesting(&[&[(GPU, "1")]])
}

/// The special claim of an earlier attempt, named `name`, with one request.
fn earlier_special_claim(name: &str) -> ResourceClaim {
    let mut claim = owned_by_pod(with_request(
        pending(name),
        json!({"name": "container-0-request-0",
            "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}),
    ));
    claim.metadata.annotations = Some(BTreeMap::from([(
        "resource.kubernetes.io/extended-resource-claim".to_string(),
        "true".to_string(),
    )]));
    claim
}

/// A snapshot of [`WORKER`] advertising `allocatable`.
fn worker_with(allocatable: &[(&str, &str)], storage: Arc<StorageListers>) -> Snapshot {
    let node = make_node(WORKER).capacity(allocatable).obj();
    let mut snap = Snapshot::new(vec![Arc::new(node)], Vec::new());
    snap.set_storage(storage);
    snap
}

/// One attempt with extended resources: what the plugin decided, and the claims it created
/// (`generateName`, annotation, owner, requests as `name class count`), deleted, and the pod
/// status it wrote (claim name, then `container resource request` per mapping).
#[derive(Debug, PartialEq)]
struct ExtendedAttempt {
    attempt: Attempt,
    created: Vec<Vec<String>>,
    deleted: Vec<String>,
    pod_status: Vec<Vec<String>>,
}

fn created(claim: &ResourceClaim) -> Vec<String> {
    let meta = &claim.metadata;
    let mut out = vec![
        format!(
            "generateName={}",
            meta.generate_name.as_deref().unwrap_or("")
        ),
        format!("name={}", meta.name.as_deref().unwrap_or("")),
        format!(
            "annotations={:?}",
            meta.annotations.clone().unwrap_or_default()
        ),
    ];
    for o in meta.owner_references.as_deref().unwrap_or(&[]) {
        out.push(format!(
            "owner={}/{} {} {} controller={:?}",
            o.api_version, o.kind, o.name, o.uid, o.controller
        ));
    }
    for r in claim
        .spec
        .devices
        .as_ref()
        .and_then(|d| d.requests.as_deref())
        .unwrap_or(&[])
    {
        let e = r.exactly.as_ref();
        out.push(format!(
            "request={} {} {} {}",
            r.name,
            e.map(|e| e.device_class_name.as_str()).unwrap_or(""),
            e.and_then(|e| e.allocation_mode.as_deref()).unwrap_or(""),
            e.and_then(|e| e.count).unwrap_or(0)
        ));
    }
    out
}

fn attempt_extended(client: RecordingClient, pod: Arc<PodInfo>, snap: Snapshot) -> ExtendedAttempt {
    let client = Arc::new(client);
    let pl = plugin(client.clone());
    let attempt = attempt(&pl, &client, &pod, &snap);
    let lock = |m: &Mutex<Vec<ResourceClaim>>| m.lock().map(|v| v.clone()).unwrap_or_default();
    ExtendedAttempt {
        attempt,
        created: lock(&client.created).iter().map(created).collect(),
        deleted: client.deleted.lock().map(|v| v.clone()).unwrap_or_default(),
        pod_status: client
            .pod_statuses
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|(pod, status)| {
                let mut out = vec![format!(
                    "{}/{} claim={}",
                    pod.namespace, pod.name, status.resource_claim_name
                )];
                out.extend(status.request_mappings.iter().map(|m| {
                    format!(
                        "{} {} {}",
                        m.container_name, m.resource_name, m.request_name
                    )
                }));
                out
            })
            .collect(),
    }
}

/// What the special claim looks like when created for [`POD`], with these requests.
fn special_created(requests: &[&str]) -> Vec<String> {
    let mut out = vec![
        format!("generateName={POD}-extended-resources-"),
        "name=".to_string(),
        "annotations={\"resource.kubernetes.io/extended-resource-claim\": \"true\"}".to_string(),
        format!("owner=v1/Pod {POD} {POD_UID} controller=Some(true)"),
    ];
    out.extend(requests.iter().map(|r| format!("request={r}")));
    out
}

fn special_written(devices: &[&str]) -> Written {
    Written {
        claim: format!("default/{POD}-extended-resources-xyz1"),
        devices: devices.iter().map(|s| s.to_string()).collect(),
        reserved_for: vec![POD.to_string()],
    }
}

fn bound(written: Vec<Written>) -> Attempt {
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), Status::success())],
        post_filter: None,
        reserve: Some(Status::success()),
        pre_bind: Some(Status::success()),
        written,
    }
}

fn rejected(filter: Status, post_filter: Status) -> Attempt {
    Attempt {
        pre_filter: Status::success(),
        filter: vec![(WORKER.into(), filter)],
        post_filter: Some(post_filter),
        reserve: None,
        pre_bind: None,
        written: vec![],
    }
}

fn pod_status(mappings: &[&str]) -> Vec<Vec<String>> {
    let mut out = vec![format!("default/{POD} claim={POD}-extended-resources-xyz1")];
    out.extend(mappings.iter().map(|m| m.to_string()));
    vec![out]
}

/// Upstream's extended-resource cases of the DynamicResources tests, and the container
/// mappings of createRequestsAndMappings.
#[rstest]
#[case::extended_resource_name_with_node_resource(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[(GPU, "1")], listers(&[gpu_class()], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt { attempt: bound(vec![]), created: vec![], deleted: vec![], pod_status: vec![] })]
#[case::extended_resource_name_with_zero_allocatable(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[(GPU, "0")], listers(&[gpu_class()], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt {
        attempt: bound(vec![special_written(&["some-driver/worker/instance-1"])]),
        created: vec![special_created(&["container-0-request-0 my-resource-class ExactCount 1"])],
        deleted: vec![],
        pod_status: pod_status(&["c0 example.com/gpu container-0-request-0"]),
    })]
#[case::non_dra_extended_resource_name_with_zero_allocatable(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[(GPU, "0")], listers(&[class(CLASS)], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt { attempt: stopped_at_pre_filter(Status::skip()), created: vec![], deleted: vec![], pod_status: vec![] })]
#[case::extended_resource_name_no_resource(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[], listers(&[gpu_class()], &[], &[])),
    ExtendedAttempt {
        attempt: rejected(Status::unresolvable("cannot allocate all claims"), Status::unschedulable("still not schedulable")),
        created: vec![], deleted: vec![], pod_status: vec![],
    })]
#[case::extended_resource_name_with_resources(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt {
        attempt: bound(vec![special_written(&["some-driver/worker/instance-1"])]),
        created: vec![special_created(&["container-0-request-0 my-resource-class ExactCount 1"])],
        deleted: vec![],
        pod_status: pod_status(&["c0 example.com/gpu container-0-request-0"]),
    })]
#[case::implicit_extended_resource_name_with_resources(
    RecordingClient::default(), pod_requesting(&[&[(IMPLICIT, "2")]]),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 2)], &[])),
    ExtendedAttempt {
        attempt: bound(vec![special_written(&["some-driver/worker/instance-1", "some-driver/worker/instance-2"])]),
        created: vec![special_created(&["container-0-request-0 my-resource-class ExactCount 2"])],
        deleted: vec![],
        pod_status: pod_status(&["c0 deviceclass.resource.kubernetes.io/my-resource-class container-0-request-0"]),
    })]
#[case::implicit_extended_resource_name_two_containers_with_resources(
    RecordingClient::default(), pod_requesting(&[&[(IMPLICIT, "1")], &[("cpu", "1"), (IMPLICIT, "1")]]),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 2)], &[])),
    ExtendedAttempt {
        attempt: bound(vec![special_written(&["some-driver/worker/instance-1", "some-driver/worker/instance-2"])]),
        created: vec![special_created(&[
            "container-0-request-0 my-resource-class ExactCount 1",
            "container-1-request-1 my-resource-class ExactCount 1"])],
        deleted: vec![],
        pod_status: pod_status(&[
            "c0 deviceclass.resource.kubernetes.io/my-resource-class container-0-request-0",
            "c1 deviceclass.resource.kubernetes.io/my-resource-class container-1-request-1"]),
    })]
#[case::init_container_reuses_the_devices_of_later_containers(
    RecordingClient::default(),
    make_pod(POD).uid(POD_UID).init_req(&[(GPU, "2")]).req(&[(GPU, "1")]).info(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 2)], &[])),
    ExtendedAttempt {
        attempt: bound(vec![special_written(&["some-driver/worker/instance-1", "some-driver/worker/instance-2"])]),
        created: vec![special_created(&[
            "container-0-request-0 my-resource-class ExactCount 1",
            "container-1-request-0 my-resource-class ExactCount 1"])],
        deleted: vec![],
        pod_status: pod_status(&[
            "c0 example.com/gpu container-1-request-0",
            "init0 example.com/gpu container-1-request-0",
            "init0 example.com/gpu container-0-request-0"]),
    })]
#[case::extended_resource_name_with_resources_fail_patch(
    RecordingClient { fail_pod_status: Some(ClientError::Api { code: 500, message: "patch error".into() }), ..RecordingClient::default() },
    gpu_pod(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt {
        attempt: Attempt {
            pre_bind: Some(Status::error("update pod default/my-pod ExtendedResourceClaimStatus: api error 500: patch error")),
            ..bound(vec![special_written(&["some-driver/worker/instance-1"])])
        },
        created: vec![special_created(&["container-0-request-0 my-resource-class ExactCount 1"])],
        deleted: vec![format!("default/{POD}-extended-resources-xyz1")],
        pod_status: vec![],
    })]
#[case::extended_resource_name_with_resources_has_claim(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[earlier_special_claim("my-pod-extended-resources-old")])),
    ExtendedAttempt {
        attempt: rejected(Status::unresolvable("cannot schedule extended resource claim"), Status::unschedulable("deletion of ResourceClaim completed")),
        created: vec![], deleted: vec!["default/my-pod-extended-resources-old".into()], pod_status: vec![],
    })]
#[case::extended_resource_name_with_resources_delete_allocated_claim(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[allocated(earlier_special_claim("my-pod-extended-resources-old"), "other-node")])),
    ExtendedAttempt {
        attempt: rejected(Status::unresolvable("cannot schedule extended resource claim"), Status::unschedulable("deletion of ResourceClaim completed")),
        created: vec![], deleted: vec!["default/my-pod-extended-resources-old".into()], pod_status: vec![],
    })]
#[case::resource_neither_advertised_nor_backed_cannot_fit(
    RecordingClient::default(), pod_requesting(&[&[(GPU, "1"), ("example.com/other", "1")]]),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt {
        attempt: rejected(Status::unresolvable("cannot fit resource"), Status::unschedulable("still not schedulable")),
        created: vec![], deleted: vec![], pod_status: vec![],
    })]
#[case::one_device_plugin_one_dra(
    RecordingClient::default(), pod_requesting(&[&[(GPU, "1"), (IMPLICIT, "1")]]),
    worker_with(&[(GPU, "1")], listers(&[gpu_class()], &[slice(WORKER, 1)], &[])),
    ExtendedAttempt {
        attempt: bound(vec![special_written(&["some-driver/worker/instance-1"])]),
        created: vec![special_created(&["container-0-request-0 my-resource-class ExactCount 1"])],
        deleted: vec![],
        pod_status: pod_status(&["c0 deviceclass.resource.kubernetes.io/my-resource-class container-0-request-0"]),
    })]
#[case::claim_and_extended_resource_are_allocated_together(
    RecordingClient::default(),
    make_pod(POD).uid(POD_UID).req(&[(GPU, "1")]).with(|p| {
        p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![obj(
            json!({"name": "my-resource", "resourceClaimName": CLAIM}))]);
    }).info(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 2)], &[pending(CLAIM)])),
    ExtendedAttempt {
        attempt: bound(vec![
            worker_claim_written(&["some-driver/worker/instance-1"], &[POD]),
            special_written(&["some-driver/worker/instance-2"])]),
        created: vec![special_created(&["container-0-request-0 my-resource-class ExactCount 1"])],
        deleted: vec![],
        pod_status: pod_status(&["c0 example.com/gpu container-0-request-0"]),
    })]
#[case::claim_and_extended_resource_do_not_share_the_last_device(
    RecordingClient::default(),
    make_pod(POD).uid(POD_UID).req(&[(GPU, "1")]).with(|p| {
        p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![obj(
            json!({"name": "my-resource", "resourceClaimName": CLAIM}))]);
    }).info(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[pending(CLAIM)])),
    ExtendedAttempt {
        attempt: rejected(Status::unresolvable("cannot allocate all claims"), Status::unschedulable("still not schedulable")),
        created: vec![], deleted: vec![], pod_status: vec![],
    })]
#[case::device_allocated_to_another_claim_is_not_used(
    RecordingClient::default(), gpu_pod(),
    worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[allocated(pending("other-claim"), WORKER)])),
    ExtendedAttempt {
        attempt: rejected(Status::unresolvable("cannot allocate all claims"), Status::unschedulable("still not schedulable")),
        created: vec![], deleted: vec![], pod_status: vec![],
    })]
fn extended_resources(
    #[case] client: RecordingClient,
    #[case] pod: Arc<PodInfo>,
    #[case] snap: Snapshot,
    #[case] want: ExtendedAttempt,
) {
    assert_eq!(attempt_extended(client, pod, snap), want);
}

/// A second pod's cycle sees the devices of the first pod's special claim as taken while
/// its allocation is in flight (after Reserve, before PreBind).
#[test]
fn in_flight_extended_allocation_takes_the_device() -> Result<(), String> {
    let client = Arc::new(RecordingClient::default());
    let pl = plugin(client);
    let snap = worker_with(&[], listers(&[gpu_class()], &[slice(WORKER, 1)], &[]));
    let first = gpu_pod();
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, &first, &snap);
    assert_eq!(status, Status::success());
    let node = snap.node_infos().first().cloned().ok_or("no node")?;
    assert_eq!(pl.filter(&state, &first, &node), Status::success());
    assert_eq!(pl.reserve(&mut state, &first, WORKER), Status::success());

    let second = make_pod("other").uid("other-uid").req(&[(GPU, "1")]).info();
    let mut other_state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut other_state, &second, &snap);
    assert_eq!(status, Status::success());
    assert_eq!(
        pl.filter(&other_state, &second, &node),
        Status::unresolvable("cannot allocate all claims")
    );

    pl.unreserve(&mut state, &first, WORKER);
    let mut again = CycleState::new();
    let _ = pl.pre_filter(&mut again, &second, &snap);
    assert_eq!(pl.filter(&again, &second, &node), Status::success());
    Ok(())
}

fn class_created_at(name: &str, extended: &str, created: &str) -> Arc<DeviceClass> {
    Arc::new(obj(
        json!({"metadata": {"name": name, "creationTimestamp": created},
        "spec": {"extendedResourceName": extended}}),
    ))
}

/// Which DeviceClass serves an extended resource name.
#[rstest]
#[case::explicit_name(vec![class_created_at("a", GPU, "2026-01-01T00:00:00Z")], GPU, Some("a"))]
#[case::implicit_name_of_a_class_with_an_explicit_one(vec![class_created_at("a", GPU, "2026-01-01T00:00:00Z")], "deviceclass.resource.kubernetes.io/a", Some("a"))]
#[case::implicit_name_of_a_missing_class(vec![class_created_at("a", GPU, "2026-01-01T00:00:00Z")], "deviceclass.resource.kubernetes.io/b", None)]
#[case::name_no_class_serves(vec![class_created_at("a", GPU, "2026-01-01T00:00:00Z")], "example.com/other", None)]
#[case::newest_of_two_classes_with_the_name(vec![class_created_at("a", GPU, "2026-01-01T00:00:00Z"), class_created_at("b", GPU, "2026-02-01T00:00:00Z")], GPU, Some("b"))]
#[case::first_by_name_of_two_created_together(vec![class_created_at("b", GPU, "2026-01-01T00:00:00Z"), class_created_at("a", GPU, "2026-01-01T00:00:00Z")], GPU, Some("a"))]
fn device_class_for_an_extended_resource(
    #[case] classes: Vec<Arc<DeviceClass>>,
    #[case] name: &str,
    #[case] want: Option<&str>,
) {
    assert_eq!(
        extended::device_class_for(&classes, name).and_then(|c| c.metadata.name.as_deref()),
        want
    );
}
