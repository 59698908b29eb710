//! The allocator's cases, ported from upstream's shared allocator test table
//! (structured/internal/allocatortesting), one named case each, plus the explanations.
//!
//! Selectors are evaluated by the scheduler's CEL evaluator, `kubesched_cel::SelectorCache`.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CELDeviceSelector, Device, DeviceAllocationConfiguration,
    DeviceAllocationResult, DeviceAttribute, DeviceCapacity, DeviceClaim, DeviceClaimConfiguration,
    DeviceClass, DeviceClassConfiguration, DeviceClassSpec, DeviceConstraint,
    DeviceCounterConsumption, DeviceRequest, DeviceRequestAllocationResult, DeviceSelector,
    DeviceSubRequest, DeviceTaint, DeviceToleration, ExactDeviceRequest, OpaqueDeviceConfiguration,
    ResourceClaim, ResourceClaimSpec, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use rstest::rstest;

use super::*;

const REGION1: &str = "region-1";
const REGION2: &str = "region-2";
const NODE1: &str = "node-1";
const NODE2: &str = "node-2";
const CLASS_A: &str = "class-a";
const CLASS_B: &str = "class-b";
const DRIVER_A: &str = "driver-a";
const DRIVER_B: &str = "driver-b";
const POOL1: &str = "pool-1";
const POOL2: &str = "pool-2";
const POOL3: &str = "pool-3";
const POOL4: &str = "pool-4";
const REQ0: &str = "req-0";
const REQ1: &str = "req-1";
const REQ2: &str = "req-2";
const SUB_REQ0: &str = "subReq-0";
const SUB_REQ1: &str = "subReq-1";
const REQ0_SUB_REQ1: &str = "req-0/subReq-1";
const REQ1_SUB_REQ0: &str = "req-1/subReq-0";
const REQ1_SUB_REQ1: &str = "req-1/subReq-1";
const CLAIM0: &str = "claim-0";
const CLAIM1: &str = "claim-1";
const SLICE1: &str = "slice-1";
const SLICE2: &str = "slice-2";
const DEVICE0: &str = "device-0";
const DEVICE1: &str = "device-1";
const DEVICE2: &str = "device-2";
const DEVICE3: &str = "device-3";
const REGION_KEY: &str = "region";
const PLANET_KEY: &str = "planet";
const EARTH: &str = "earth";

/// The evaluator the scheduler uses, shared by the cases.
fn evaluator() -> &'static kubesched_cel::SelectorCache {
    static CACHE: std::sync::OnceLock<kubesched_cel::SelectorCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| kubesched_cel::SelectorCache::new(64))
}

fn node(name: &str, region: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                (REGION_KEY.to_string(), region.to_string()),
                (PLANET_KEY.to_string(), EARTH.to_string()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn cel(expression: &str) -> DeviceSelector {
    DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: expression.to_string(),
        }),
    }
}

fn class(name: &str, driver: &str) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: DeviceClassSpec {
            selectors: Some(vec![cel(&format!("device.driver == \"{driver}\""))]),
            ..Default::default()
        },
    }
}

fn opaque(driver: &str, attribute: &str) -> OpaqueDeviceConfiguration {
    OpaqueDeviceConfiguration {
        driver: driver.to_string(),
        parameters: RawExtension(serde_json::json!({ attribute: format!("{attribute}Value") })),
    }
}

fn class_with_config(name: &str, driver: &str, attribute: &str) -> DeviceClass {
    let mut class = class(name, driver);
    class.spec.config = Some(vec![DeviceClassConfiguration {
        opaque: Some(opaque(driver, attribute)),
    }]);
    class
}

fn claim(
    name: &str,
    constraints: Vec<DeviceConstraint>,
    requests: Vec<DeviceRequest>,
) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config: None,
            }),
        },
        status: None,
    }
}

/// A claim with one request for one device of the class.
fn claim_with_request(name: &str, request_name: &str, class: &str) -> ResourceClaim {
    claim(name, vec![], vec![request(request_name, class, 1, vec![])])
}

fn request(name: &str, class: &str, count: i64, selectors: Vec<DeviceSelector>) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        exactly: Some(ExactDeviceRequest {
            count: Some(count),
            allocation_mode: Some(ALLOCATION_MODE_EXACT_COUNT.to_string()),
            device_class_name: class.to_string(),
            selectors: (!selectors.is_empty()).then_some(selectors),
            ..Default::default()
        }),
        first_available: None,
    }
}

fn all_request(name: &str, class: &str) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        exactly: Some(ExactDeviceRequest {
            allocation_mode: Some(ALLOCATION_MODE_ALL.to_string()),
            device_class_name: class.to_string(),
            ..Default::default()
        }),
        first_available: None,
    }
}

fn admin(mut request: DeviceRequest) -> DeviceRequest {
    if let Some(exactly) = request.exactly.as_mut() {
        exactly.admin_access = Some(true);
    }
    request
}

fn tolerating(mut request: DeviceRequest, tolerations: Vec<DeviceToleration>) -> DeviceRequest {
    if let Some(exactly) = request.exactly.as_mut() {
        exactly.tolerations = Some(tolerations);
    }
    request
}

fn sub_request(
    name: &str,
    class: &str,
    count: i64,
    selectors: Vec<DeviceSelector>,
) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.to_string(),
        count: Some(count),
        allocation_mode: Some(ALLOCATION_MODE_EXACT_COUNT.to_string()),
        device_class_name: class.to_string(),
        selectors: (!selectors.is_empty()).then_some(selectors),
        ..Default::default()
    }
}

fn all_sub_request(name: &str, class: &str) -> DeviceSubRequest {
    DeviceSubRequest {
        allocation_mode: Some(ALLOCATION_MODE_ALL.to_string()),
        count: None,
        ..sub_request(name, class, 0, vec![])
    }
}

fn prioritized(name: &str, subrequests: Vec<DeviceSubRequest>) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        exactly: None,
        first_available: Some(subrequests),
    }
}

fn match_attribute(attribute: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        match_attribute: Some(attribute.to_string()),
        requests: (!requests.is_empty()).then(|| requests.iter().map(|r| r.to_string()).collect()),
        distinct_attribute: None,
    }
}

fn device(name: &str) -> Device {
    Device {
        name: name.to_string(),
        ..Default::default()
    }
}

fn with_memory(mut device: Device, memory: &str) -> Device {
    device.capacity = Some(BTreeMap::from([(
        "memory".to_string(),
        DeviceCapacity {
            value: Quantity(memory.to_string()),
            request_policy: None,
        },
    )]));
    device
}

fn with_attributes(mut device: Device, attributes: Vec<(&str, DeviceAttribute)>) -> Device {
    device.attributes = Some(
        attributes
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    );
    device
}

fn with_taints(mut device: Device, taints: Vec<DeviceTaint>) -> Device {
    device.taints = Some(taints);
    device
}

fn int(v: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(v),
        ..Default::default()
    }
}

fn string(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(v.to_string()),
        ..Default::default()
    }
}

fn boolean(v: bool) -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(v),
        ..Default::default()
    }
}

fn version(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        version: Some(v.to_string()),
        ..Default::default()
    }
}

/// Which nodes a slice reaches.
enum Reach {
    Node(&'static str),
    All,
    Selector(NodeSelector),
}

/// A slice whose devices each say which nodes they reach.
fn per_device_slice(devices: Vec<Device>) -> ResourceSlice {
    let mut slice = slice(SLICE1, Reach::All, pool(POOL1), DRIVER_A, devices);
    slice.spec.all_nodes = None;
    slice.spec.per_device_node_selection = Some(true);
    slice
}

/// A pool with one slice of generation 1.
fn pool(name: &str) -> ResourcePool {
    resource_pool(name, 1)
}

fn resource_pool(name: &str, slice_count: i64) -> ResourcePool {
    ResourcePool {
        name: name.to_string(),
        generation: 1,
        resource_slice_count: slice_count,
    }
}

fn slice(
    name: &str,
    reach: Reach,
    pool: ResourcePool,
    driver: &str,
    devices: Vec<Device>,
) -> ResourceSlice {
    let mut spec = ResourceSliceSpec {
        driver: driver.to_string(),
        pool,
        devices: Some(devices),
        ..Default::default()
    };
    match reach {
        Reach::Node(n) => spec.node_name = Some(n.to_string()),
        Reach::All => spec.all_nodes = Some(true),
        Reach::Selector(s) => spec.node_selector = Some(s),
    }
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec,
    }
}

/// A slice on the node with one device, `device-1`.
fn slice_with_one_device(name: &str, reach: Reach, pool_name: &str, driver: &str) -> ResourceSlice {
    slice(name, reach, pool(pool_name), driver, vec![device(DEVICE1)])
}

fn node_label_selector(key: &str, values: &[&str]) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.to_string(),
                operator: "In".to_string(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            match_fields: None,
        }],
    }
}

fn local_node_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_string(),
                operator: "In".to_string(),
                values: Some(vec![node.to_string()]),
            }]),
        }],
    }
}

fn result(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    admin_access: bool,
) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: request.to_string(),
        driver: driver.to_string(),
        pool: pool.to_string(),
        device: device.to_string(),
        admin_access: admin_access.then_some(true),
        ..Default::default()
    }
}

fn allocation(
    selector: Option<NodeSelector>,
    results: Vec<DeviceRequestAllocationResult>,
) -> AllocationResult {
    allocation_with_configs(selector, results, vec![])
}

fn allocation_with_configs(
    selector: Option<NodeSelector>,
    results: Vec<DeviceRequestAllocationResult>,
    configs: Vec<DeviceAllocationConfiguration>,
) -> AllocationResult {
    AllocationResult {
        allocation_timestamp: None,
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: (!configs.is_empty()).then_some(configs),
        }),
        node_selector: selector,
    }
}

fn config(
    source: &str,
    requests: &[&str],
    driver: &str,
    attribute: &str,
) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration {
        source: source.to_string(),
        requests: (!requests.is_empty()).then(|| requests.iter().map(|r| r.to_string()).collect()),
        opaque: Some(opaque(driver, attribute)),
    }
}

fn id(driver: &str, pool: &str, device: &str) -> DeviceId {
    DeviceId::new(driver, pool, device)
}

fn on_node1(results: Vec<DeviceRequestAllocationResult>) -> AllocationResult {
    allocation(Some(local_node_selector(NODE1)), results)
}

const INT_ATTRIBUTE: &str = "driver-a/numa";
const VERSION_ATTRIBUTE: &str = "driver-a/driverVersion";
const STRING_ATTRIBUTE: &str = "driver-a/stringAttribute";
const BOOL_ATTRIBUTE: &str = "driver-a/boolAttribute";

fn memory_at_least(quantity: &str) -> DeviceSelector {
    cel(&format!(
        "device.capacity[\"{DRIVER_A}\"].memory.compareTo(quantity(\"{quantity}\")) >= 0"
    ))
}

fn taint(effect: &str, value: &str) -> DeviceTaint {
    DeviceTaint {
        key: "taint-key".to_string(),
        value: Some(value.to_string()),
        effect: effect.to_string(),
        time_added: None,
    }
}

fn taint_no_schedule() -> DeviceTaint {
    taint("NoSchedule", "taint-value")
}

fn taint_no_execute() -> DeviceTaint {
    taint("NoExecute", "taint-value-2")
}

fn toleration_no_schedule() -> DeviceToleration {
    DeviceToleration {
        operator: Some("Exists".to_string()),
        key: Some("taint-key".to_string()),
        effect: Some("NoSchedule".to_string()),
        ..Default::default()
    }
}

fn toleration_no_execute() -> DeviceToleration {
    DeviceToleration {
        operator: Some("Equal".to_string()),
        key: Some("taint-key".to_string()),
        value: Some("taint-value-2".to_string()),
        effect: Some("NoExecute".to_string()),
        ..Default::default()
    }
}

#[derive(Debug)]
enum Expect {
    Allocated(Vec<AllocationResult>),
    /// The explanation, as [`Explanation`]'s Display prints it.
    Unschedulable(&'static str),
    Error(&'static str),
}

struct Case {
    features: Features,
    claims: Vec<ResourceClaim>,
    allocated: Vec<DeviceId>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    node: Node,
    expect: Expect,
}

fn case(
    claims: Vec<ResourceClaim>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
    expect: Expect,
) -> Case {
    Case {
        features: Features::ALL,
        claims,
        allocated: vec![],
        classes,
        slices,
        node: node(NODE1, REGION1),
        expect,
    }
}

impl Case {
    fn allocated(mut self, allocated: Vec<DeviceId>) -> Self {
        self.allocated = allocated;
        self
    }

    fn features(mut self, features: Features) -> Self {
        self.features = features;
        self
    }

    fn node(mut self, node: Node) -> Self {
        self.node = node;
        self
    }
}

fn two_memory_requests() -> Vec<DeviceRequest> {
    vec![
        request(REQ0, CLASS_A, 1, vec![memory_at_least("1Gi")]),
        request(REQ1, CLASS_A, 1, vec![memory_at_least("2Gi")]),
    ]
}

fn one_device_slice() -> Vec<ResourceSlice> {
    vec![slice_with_one_device(
        SLICE1,
        Reach::Node(NODE1),
        POOL1,
        DRIVER_A,
    )]
}

fn two_device_slice() -> Vec<ResourceSlice> {
    vec![slice(
        SLICE1,
        Reach::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        vec![device(DEVICE1), device(DEVICE2)],
    )]
}

fn attribute_pair(
    name: &str,
    first: DeviceAttribute,
    second: DeviceAttribute,
) -> Vec<ResourceSlice> {
    vec![slice(
        SLICE1,
        Reach::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        vec![
            with_attributes(device(DEVICE1), vec![(name, first)]),
            with_attributes(device(DEVICE2), vec![(name, second)]),
        ],
    )]
}

/// Two devices whose attribute differs, a claim for two devices sharing it.
fn not_matching(
    attribute: &str,
    name: &str,
    first: DeviceAttribute,
    second: DeviceAttribute,
    expect: &'static str,
) -> Case {
    case(
        vec![claim(
            CLAIM0,
            vec![match_attribute(attribute, &[])],
            vec![request(REQ0, CLASS_A, 2, vec![])],
        )],
        vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        attribute_pair(name, first, second),
        Expect::Unschedulable(expect),
    )
}

fn memory_device(name: &str, memory: &str, driver_version: Option<&str>) -> Device {
    let d = with_memory(device(name), memory);
    match driver_version {
        Some(v) => with_attributes(d, vec![("driverVersion", version(v))]),
        None => d,
    }
}

#[rstest]
#[case::empty(case(vec![], vec![], vec![], Expect::Allocated(vec![])))]
#[case::simple(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)])]),
))]
#[case::other_node(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_B),
        slice_with_one_device(SLICE2, Reach::Node(NODE2), POOL2, DRIVER_A),
    ],
    Expect::Allocated(vec![allocation(
        Some(local_node_selector(NODE2)),
        vec![result(REQ0, DRIVER_A, POOL2, DEVICE1, false)],
    )]),
).node(node(NODE2, REGION2)))]
#[case::small_and_large(case(
    vec![claim(CLAIM0, vec![], two_memory_requests())],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        memory_device(DEVICE1, "1Gi", None),
        memory_device(DEVICE2, "2Gi", None),
    ])],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
    ])]),
))]
// The large device comes first, so the small request takes it at first and the large
// request is left without; the search must undo that choice.
#[case::small_and_large_backtrack_requests(case(
    vec![claim(CLAIM0, vec![], two_memory_requests())],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        memory_device(DEVICE2, "2Gi", None),
        memory_device(DEVICE1, "1Gi", None),
    ])],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
    ])]),
))]
#[case::small_and_large_backtrack_claims(case(
    vec![
        claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1, vec![memory_at_least("1Gi")])]),
        claim(CLAIM1, vec![], vec![request(REQ1, CLASS_A, 1, vec![memory_at_least("2Gi")])]),
    ],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        memory_device(DEVICE2, "2Gi", None),
        memory_device(DEVICE1, "1Gi", None),
    ])],
    Expect::Allocated(vec![
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
        on_node1(vec![result(REQ1, DRIVER_A, POOL1, DEVICE2, false)]),
    ]),
))]
#[case::devices_split_across_different_slices(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_A),
        slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL2, DRIVER_A),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
    ])]),
))]
// The newer generation replaces the older slice but is itself one slice of two: the pool
// is incomplete and nothing in it is used.
#[case::obsolete_slice(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice("slice-1-obsolete", Reach::Node(NODE1), resource_pool(POOL1, 2), DRIVER_A, vec![device(DEVICE1)]),
        slice("slice-1-obsolete", Reach::Node(NODE1), ResourcePool { generation: 2, ..resource_pool(POOL1, 2) }, DRIVER_A, vec![device(DEVICE2)]),
    ],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable\nresource pools being updated: driver-a/pool-1"),
))]
#[case::duplicate_slice(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), resource_pool(POOL1, 2), DRIVER_A, vec![device(DEVICE1)]),
        slice("slice-1-2", Reach::Node(NODE1), resource_pool(POOL1, 2), DRIVER_A, vec![device(DEVICE1)]),
    ],
    Expect::Error("invalid resource pools were encountered"),
))]
#[case::no_slices(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable"),
))]
#[case::not_enough_suitable_devices(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A), claim_with_request(CLAIM0, REQ1, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 1 usable\nclaim claim-0, request req-1: wants 1 device, 1 usable\nevery request has enough usable devices on its own, but not all together"),
))]
#[case::no_classes(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0: could not retrieve device class class-a: deviceclass.resource.k8s.io \"class-a\" not found"),
))]
#[case::unknown_class(case(
    vec![claim_with_request(CLAIM0, REQ0, "unknown-class")],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0: could not retrieve device class unknown-class: deviceclass.resource.k8s.io \"unknown-class\" not found"),
))]
#[case::empty_class(case(
    vec![claim_with_request(CLAIM0, REQ0, "")],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0: missing device class name (unsupported request type?)"),
))]
#[case::no_claims_to_allocate(case(
    vec![],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Allocated(vec![]),
))]
#[case::all_devices_single(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)])]),
))]
#[case::all_devices_many(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL2, DRIVER_A),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
    ])]),
))]
#[case::all_devices_of_the_incomplete_pool(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), resource_pool(POOL1, 2), DRIVER_A, vec![device(DEVICE1)])],
    Expect::Error("claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated"),
))]
#[case::all_devices_plus_another(case(
    vec![
        claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
        claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1, vec![])]),
    ],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_B),
    ],
    Expect::Allocated(vec![
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
        on_node1(vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)]),
    ]),
))]
#[case::all_devices_plus_another_reversed(case(
    vec![
        claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1, vec![])]),
        claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
    ],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_B),
    ],
    Expect::Allocated(vec![
        on_node1(vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)]),
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
    ]),
))]
#[case::all_devices_many_plus_another(case(
    vec![
        claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
        claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1, vec![])]),
    ],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![device(DEVICE1), device(DEVICE2)]),
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_B),
    ],
    Expect::Allocated(vec![
        on_node1(vec![
            result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
        ]),
        on_node1(vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)]),
    ]),
))]
#[case::all_devices_no_solution(case(
    vec![
        claim(CLAIM1, vec![], vec![request(REQ0, CLASS_A, 1, vec![])]),
        claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
    ],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Unschedulable("claim claim-1, request req-0: wants 1 device, 1 usable\nclaim claim-0, request req-0: wants all 1 matching device, 1 usable\nevery request has enough usable devices on its own, but not all together"),
))]
#[case::all_devices_no_solution_reversed(case(
    vec![
        claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
        claim(CLAIM1, vec![], vec![request(REQ0, CLASS_A, 1, vec![])]),
    ],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0: wants all 1 matching device, 1 usable\nclaim claim-1, request req-0: wants 1 device, 1 usable\nevery request has enough usable devices on its own, but not all together"),
))]
#[case::all_devices_slice_without_devices(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![])],
    Expect::Unschedulable("claim claim-0, request req-0: wants all 0 matching devices, 0 usable"),
))]
#[case::all_devices_no_slices(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![],
    Expect::Unschedulable("claim claim-0, request req-0: wants all 0 matching devices, 0 usable"),
))]
#[case::all_devices_some_allocated(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0: wants all 2 matching devices, 1 usable; 1 device: already in use"),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1)]))]
#[case::all_devices_some_allocated_admin_access(case(
    vec![claim(CLAIM0, vec![], vec![admin(all_request(REQ0, CLASS_A))])],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
        result(REQ0, DRIVER_A, POOL1, DEVICE2, true),
    ])]),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1)]))]
// The first request takes a device with admin access; the second wants all of them, also
// with admin access, and one claim cannot hold a device twice.
#[case::all_devices_some_allocating_admin_access(case(
    vec![claim(CLAIM0, vec![], vec![
        admin(request(REQ0, CLASS_A, 1, vec![])),
        admin(all_request(REQ1, CLASS_A)),
    ])],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 2 usable\nclaim claim-0, request req-1: wants all 2 matching devices, 2 usable\nevery request has enough usable devices on its own, but not all together"),
))]
#[case::count_devices_some_allocated_admin_access(case(
    vec![claim(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 2, vec![]))])],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, true),
        result(REQ0, DRIVER_A, POOL1, DEVICE2, true),
    ])]),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1)]))]
#[case::separate_claims_share_device_admin_access(case(
    vec![
        claim(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))]),
        claim(CLAIM1, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))]),
    ],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)]),
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)]),
    ]),
))]
#[case::admin_access_claims_device_allocating_for_non_admin_access(case(
    vec![
        claim_with_request(CLAIM0, REQ0, CLASS_A),
        claim(CLAIM1, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))]),
    ],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)]),
    ]),
))]
#[case::all_devices_slice_without_devices_prioritized_list(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        all_sub_request(SUB_REQ0, CLASS_A),
        sub_request(SUB_REQ1, CLASS_B, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![]),
        slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL2, DRIVER_B),
    ],
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)])]),
))]
#[case::all_devices_no_slices_prioritized_list(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        all_sub_request(SUB_REQ0, CLASS_A),
        sub_request(SUB_REQ1, CLASS_B, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL2, DRIVER_B)],
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)])]),
))]
#[case::all_devices_some_allocated_prioritized_list(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        all_sub_request(SUB_REQ0, CLASS_A),
        sub_request(SUB_REQ1, CLASS_B, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![device(DEVICE1), device(DEVICE2)]),
        slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL2, DRIVER_B),
    ],
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)])]),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1)]))]
#[case::network_attached_device(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice_with_one_device(SLICE1, Reach::Selector(node_label_selector(REGION_KEY, &[REGION1])), POOL1, DRIVER_A)],
    Expect::Allocated(vec![allocation(
        Some(node_label_selector(REGION_KEY, &[REGION1])),
        vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
    )]),
))]
#[case::unsuccessful_allocation_network_attached_device(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice_with_one_device(SLICE1, Reach::Selector(node_label_selector(REGION_KEY, &[REGION1])), POOL1, DRIVER_A)],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable"),
).node(node(NODE2, REGION2)))]
// The allocation's selector is the union of the devices' selectors.
#[case::many_network_attached_devices(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 4, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice_with_one_device(SLICE1, Reach::Selector(node_label_selector(REGION_KEY, &[REGION1])), POOL1, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::All, POOL2, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::Selector(node_label_selector(PLANET_KEY, &[EARTH])), POOL3, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::Selector(local_node_selector(NODE1)), POOL4, DRIVER_A),
    ],
    Expect::Allocated(vec![allocation(
        Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![
                    NodeSelectorRequirement { key: REGION_KEY.to_string(), operator: "In".to_string(), values: Some(vec![REGION1.to_string()]) },
                    NodeSelectorRequirement { key: PLANET_KEY.to_string(), operator: "In".to_string(), values: Some(vec![EARTH.to_string()]) },
                ]),
                match_fields: Some(vec![
                    NodeSelectorRequirement { key: "metadata.name".to_string(), operator: "In".to_string(), values: Some(vec![NODE1.to_string()]) },
                ]),
            }],
        }),
        vec![
            result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
            result(REQ0, DRIVER_A, POOL3, DEVICE1, false),
            result(REQ0, DRIVER_A, POOL4, DEVICE1, false),
        ],
    )]),
))]
// Once any device is node-local, the allocation is for that node.
#[case::local_and_network_attached_devices(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice_with_one_device(SLICE1, Reach::Selector(node_label_selector(REGION_KEY, &[REGION1])), POOL1, DRIVER_A),
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL2, DRIVER_A),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ0, DRIVER_A, POOL2, DEVICE1, false),
    ])]),
))]
#[case::several_different_drivers(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A), claim_with_request(CLAIM0, REQ0, CLASS_B)],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![device(DEVICE1), device(DEVICE2)]),
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_B),
    ],
    Expect::Allocated(vec![
        on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)]),
        on_node1(vec![result(REQ0, DRIVER_B, POOL1, DEVICE1, false)]),
    ]),
))]
#[case::already_allocated_devices(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable; 1 device: already in use"),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)]))]
#[case::admin_access_disabled(case(
    vec![claim(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0: admin access is requested, but the feature is disabled"),
).features(Features { admin_access: false, ..Features::ALL }))]
#[case::admin_access_enabled(case(
    vec![claim(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)])]),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)]))]
#[case::with_constraint(case(
    vec![claim(
        CLAIM0,
        vec![
            match_attribute(INT_ATTRIBUTE, &[]),
            match_attribute(VERSION_ATTRIBUTE, &[]),
            match_attribute(STRING_ATTRIBUTE, &[]),
            match_attribute(BOOL_ATTRIBUTE, &[]),
        ],
        vec![request(REQ0, CLASS_A, 1, vec![]), request(REQ1, CLASS_A, 1, vec![])],
    )],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_attributes(device(DEVICE1), vec![
            ("driverVersion", version("1.0.0")),
            ("numa", int(1)),
            ("stringAttribute", string("stringAttributeValue")),
            ("boolAttribute", boolean(true)),
        ]),
        with_attributes(device(DEVICE2), vec![
            ("driverVersion", version("1.0.0")),
            ("numa", int(1)),
            ("stringAttribute", string("stringAttributeValue")),
            ("boolAttribute", boolean(true)),
        ]),
    ])],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
    ])]),
))]
#[case::with_constraint_non_existent_attribute(case(
    vec![claim(
        CLAIM0,
        vec![match_attribute("driver-a/NonExistentAttribute", &[])],
        vec![request(REQ0, CLASS_A, 1, vec![])],
    )],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 1 usable\nevery request has enough usable devices on its own, but not all together (matchAttribute driver-a/NonExistentAttribute)"),
))]
#[case::with_constraint_not_matching_int_attribute(not_matching(
    INT_ATTRIBUTE,
    "numa",
    int(1),
    int(2),
    "claim claim-0, request req-0: wants 2 devices, 2 usable\nevery request has enough usable devices on its own, but not all together (matchAttribute driver-a/numa)",
))]
#[case::with_constraint_not_matching_string_attribute(not_matching(
    STRING_ATTRIBUTE,
    "stringAttribute",
    string("stringAttributeValue"),
    string("stringAttributeValue2"),
    "claim claim-0, request req-0: wants 2 devices, 2 usable\nevery request has enough usable devices on its own, but not all together (matchAttribute driver-a/stringAttribute)",
))]
#[case::with_constraint_not_matching_bool_attribute(not_matching(
    BOOL_ATTRIBUTE,
    "boolAttribute",
    boolean(true),
    boolean(false),
    "claim claim-0, request req-0: wants 2 devices, 2 usable\nevery request has enough usable devices on its own, but not all together (matchAttribute driver-a/boolAttribute)",
))]
#[case::with_constraint_not_matching_version_attribute(not_matching(
    VERSION_ATTRIBUTE,
    "driverVersion",
    version("1.0.0"),
    version("2.0.0"),
    "claim claim-0, request req-0: wants 2 devices, 2 usable\nevery request has enough usable devices on its own, but not all together (matchAttribute driver-a/driverVersion)",
))]
#[case::with_constraint_not_matching_int_attribute_all_devices(case(
    vec![claim(CLAIM0, vec![match_attribute(INT_ATTRIBUTE, &[])], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    attribute_pair("numa", int(1), int(2)),
    Expect::Error("claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied"),
))]
#[case::with_constraint_for_request(case(
    vec![claim(
        CLAIM0,
        vec![match_attribute(VERSION_ATTRIBUTE, &[REQ0])],
        vec![request(REQ0, CLASS_A, 1, vec![]), request(REQ1, CLASS_A, 1, vec![])],
    )],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    attribute_pair("driverVersion", version("1.0.0"), version("2.0.0")),
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1, DRIVER_A, POOL1, DEVICE2, false),
    ])]),
))]
// device-1 does not share the string attribute with any other device, so the first
// choice for req-0 must be undone.
#[case::with_constraint_for_request_retry(case(
    vec![claim(
        CLAIM0,
        vec![match_attribute(VERSION_ATTRIBUTE, &[REQ0]), match_attribute(STRING_ATTRIBUTE, &[])],
        vec![request(REQ0, CLASS_A, 1, vec![]), request(REQ1, CLASS_A, 1, vec![])],
    )],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_attributes(device(DEVICE1), vec![("driverVersion", version("1.0.0")), ("stringAttribute", string("a"))]),
        with_attributes(device(DEVICE2), vec![("driverVersion", version("2.0.0")), ("stringAttribute", string("b"))]),
        with_attributes(device(DEVICE3), vec![("driverVersion", version("3.0.0")), ("stringAttribute", string("b"))]),
    ])],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE2, false),
        result(REQ1, DRIVER_A, POOL1, DEVICE3, false),
    ])]),
))]
#[case::with_class_device_config(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
    one_device_slice(),
    Expect::Allocated(vec![allocation_with_configs(
        Some(local_node_selector(NODE1)),
        vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        vec![config(CONFIG_SOURCE_CLASS, &[REQ0], DRIVER_A, "classAttribute")],
    )]),
))]
#[case::with_class_device_config_with_multiple_request_and_configs(case(
    vec![claim(CLAIM0, vec![], vec![
        request(REQ0, CLASS_A, 1, vec![]),
        request(REQ1, CLASS_A, 1, vec![]),
        request(REQ2, CLASS_B, 1, vec![]),
    ])],
    vec![
        class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
        class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
    ],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![device(DEVICE0), device(DEVICE1)]),
        slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL1, DRIVER_B),
    ],
    Expect::Allocated(vec![allocation_with_configs(
        Some(local_node_selector(NODE1)),
        vec![
            result(REQ0, DRIVER_A, POOL1, DEVICE0, false),
            result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            result(REQ2, DRIVER_B, POOL1, DEVICE1, false),
        ],
        vec![
            config(CONFIG_SOURCE_CLASS, &[REQ0, REQ1], DRIVER_A, "classAttribute-A"),
            config(CONFIG_SOURCE_CLASS, &[REQ2], DRIVER_B, "classAttribute-B"),
        ],
    )]),
))]
#[case::claim_with_device_config(case(
    vec![{
        let mut c = claim_with_request(CLAIM0, REQ0, CLASS_A);
        if let Some(devices) = c.spec.devices.as_mut() {
            devices.config = Some(vec![DeviceClaimConfiguration {
                opaque: Some(opaque(DRIVER_A, "deviceAttribute")),
                requests: None,
            }]);
        }
        c
    }],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Allocated(vec![allocation_with_configs(
        Some(local_node_selector(NODE1)),
        vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        vec![config(CONFIG_SOURCE_CLAIM, &[], DRIVER_A, "deviceAttribute")],
    )]),
))]
#[case::unknown_selector(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1, vec![DeviceSelector { cel: None }])])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0, selector #0: CEL expression empty (unsupported selector type?)"),
))]
#[case::unknown_allocation_mode(case(
    vec![{
        let mut r = request(REQ0, CLASS_A, 1, vec![]);
        if let Some(exactly) = r.exactly.as_mut() {
            exactly.allocation_mode = Some("future-mode".to_string());
        }
        claim(CLAIM0, vec![], vec![r])
    }],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0: unsupported count mode future-mode"),
))]
#[case::unknown_constraint(case(
    vec![claim(
        CLAIM0,
        vec![DeviceConstraint::default()],
        vec![request(REQ0, CLASS_A, 1, vec![])],
    )],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, constraint #0: empty constraint (unsupported constraint type?)"),
))]
#[case::invalid_cel_one_device(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1, vec![cel("noSuchVar")])])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^"),
))]
#[case::invalid_cel_one_device_class(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![{
        let mut c = class(CLASS_A, DRIVER_A);
        c.spec.selectors = Some(vec![cel("noSuchVar")]);
        c
    }],
    one_device_slice(),
    Expect::Error("class class-a: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^"),
))]
#[case::invalid_cel_all_devices(case(
    vec![{
        let mut r = all_request(REQ0, CLASS_A);
        if let Some(exactly) = r.exactly.as_mut() {
            exactly.selectors = Some(vec![cel("noSuchVar")]);
        }
        claim(CLAIM0, vec![], vec![r])
    }],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^"),
))]
#[case::too_many_devices_single_request(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 500, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![],
    Expect::Error("claim claim-0: number of requested devices 500 exceeds the claim limit of 32"),
))]
#[case::many_devices_okay(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 32, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![],
    Expect::Unschedulable("claim claim-0, request req-0: wants 32 devices, 0 usable"),
))]
#[case::too_many_devices_total(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 32, vec![]), request(REQ1, CLASS_A, 1, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(
        SLICE1,
        Reach::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        (0..33).map(|i| device(&format!("device-{i}"))).collect(),
    )],
    Expect::Error("claim claim-0: number of requested devices 33 exceeds the claim limit of 32"),
))]
#[case::prioritized_list_first_unavailable(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_B, 1, vec![]),
        sub_request(SUB_REQ1, CLASS_A, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    one_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)])]),
))]
#[case::prioritized_list_non_available(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_B, 2, vec![]),
        sub_request(SUB_REQ1, CLASS_A, 2, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_A),
        slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL2, DRIVER_B),
    ],
    Expect::Unschedulable("claim claim-0, request req-0/subReq-0: wants 2 devices, 1 usable; 1 device: class class-b selector #0 (device.driver == \"driver-b\") is false\nclaim claim-0, request req-0/subReq-1: wants 2 devices, 1 usable; 1 device: class class-a selector #0 (device.driver == \"driver-a\") is false"),
))]
// A claim configuration naming a sub-request applies only when that sub-request is chosen.
#[case::prioritized_list_device_config(case(
    vec![{
        let mut c = claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
            sub_request(SUB_REQ0, CLASS_A, 1, vec![]),
            sub_request(SUB_REQ1, CLASS_B, 2, vec![]),
        ])]);
        if let Some(devices) = c.spec.devices.as_mut() {
            devices.config = Some(vec![
                DeviceClaimConfiguration {
                    opaque: Some(opaque(DRIVER_A, "foo")),
                    requests: Some(vec!["req-0/subReq-0".to_string()]),
                },
                DeviceClaimConfiguration {
                    opaque: Some(opaque(DRIVER_B, "bar")),
                    requests: Some(vec![REQ0_SUB_REQ1.to_string()]),
                },
            ]);
        }
        c
    }],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_B, vec![device(DEVICE1), device(DEVICE2)])],
    Expect::Allocated(vec![allocation_with_configs(
        Some(local_node_selector(NODE1)),
        vec![
            result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, false),
            result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, false),
        ],
        vec![config(CONFIG_SOURCE_CLAIM, &[REQ0_SUB_REQ1], DRIVER_B, "bar")],
    )]),
))]
// With per-device node selection only the devices for this node count, and the
// allocation is for the node the chosen device names.
#[case::per_device_node_selection_uses_devices_of_this_node(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![per_device_slice(vec![
        Device { node_name: Some(NODE2.to_string()), ..device(DEVICE1) },
        Device { node_name: Some(NODE1.to_string()), ..device(DEVICE2) },
    ])],
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE2, false)])]),
))]
#[case::per_device_node_selection_explains_devices_of_other_nodes(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2, vec![])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![per_device_slice(vec![
        Device { node_name: Some(NODE2.to_string()), ..device(DEVICE1) },
        Device { node_name: Some(NODE1.to_string()), ..device(DEVICE2) },
    ])],
    Expect::Unschedulable("claim claim-0, request req-0: wants 2 devices, 1 usable; 1 device: not available on this node"),
))]
#[case::prioritized_list_class_config(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_A, 2, vec![]),
        sub_request(SUB_REQ1, CLASS_B, 2, vec![]),
    ])])],
    vec![class_with_config(CLASS_A, DRIVER_A, "foo"), class_with_config(CLASS_B, DRIVER_B, "bar")],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_B, vec![device(DEVICE1), device(DEVICE2)]),
        slice(SLICE2, Reach::Node(NODE1), pool(POOL2), DRIVER_A, vec![device(DEVICE3)]),
    ],
    Expect::Allocated(vec![allocation_with_configs(
        Some(local_node_selector(NODE1)),
        vec![
            result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, false),
            result(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, false),
        ],
        vec![config(CONFIG_SOURCE_CLASS, &[REQ0_SUB_REQ1], DRIVER_B, "bar")],
    )]),
))]
#[case::prioritized_list_subrequests_with_expressions(case(
    vec![claim(CLAIM0, vec![], vec![
        request(REQ0, CLASS_A, 1, vec![memory_at_least("1Gi")]),
        prioritized(REQ1, vec![
            sub_request(SUB_REQ0, CLASS_A, 1, vec![memory_at_least("4Gi")]),
            sub_request(SUB_REQ1, CLASS_A, 2, vec![memory_at_least("2Gi")]),
        ]),
    ])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        memory_device(DEVICE1, "2Gi", None),
        memory_device(DEVICE2, "2Gi", None),
        memory_device(DEVICE3, "1Gi", None),
    ])],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE3, false),
        result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
    ])]),
))]
#[case::prioritized_list_subrequests_with_constraints_ref_parent_request(case(
    vec![claim(
        CLAIM0,
        vec![match_attribute(VERSION_ATTRIBUTE, &[REQ0, REQ1])],
        vec![
            request(REQ0, CLASS_A, 1, vec![memory_at_least("8Gi")]),
            prioritized(REQ1, vec![
                sub_request(SUB_REQ0, CLASS_A, 1, vec![memory_at_least("2Gi")]),
                sub_request(SUB_REQ1, CLASS_A, 1, vec![memory_at_least("1Gi")]),
            ]),
        ],
    )],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![memory_device(DEVICE1, "8Gi", Some("1.0.0"))]),
        slice(SLICE2, Reach::Node(NODE1), pool(POOL2), DRIVER_A, vec![
            memory_device(DEVICE2, "2Gi", Some("2.0.0")),
            memory_device(DEVICE3, "1Gi", Some("1.0.0")),
        ]),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE3, false),
    ])]),
))]
#[case::prioritized_list_subrequests_with_constraints_ref_sub_request(case(
    vec![claim(
        CLAIM0,
        vec![match_attribute(VERSION_ATTRIBUTE, &[REQ0, REQ1_SUB_REQ0])],
        vec![
            request(REQ0, CLASS_A, 1, vec![memory_at_least("8Gi")]),
            prioritized(REQ1, vec![
                sub_request(SUB_REQ0, CLASS_A, 1, vec![memory_at_least("2Gi")]),
                sub_request(SUB_REQ1, CLASS_A, 1, vec![memory_at_least("1Gi")]),
            ]),
        ],
    )],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![memory_device(DEVICE1, "8Gi", Some("1.0.0"))]),
        slice(SLICE2, Reach::Node(NODE1), pool(POOL2), DRIVER_A, vec![memory_device(DEVICE2, "2Gi", Some("2.0.0"))]),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
    ])]),
))]
#[case::prioritized_list_subrequests_with_allocation_mode_all(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        all_sub_request(SUB_REQ0, CLASS_A),
        sub_request(SUB_REQ1, CLASS_A, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false)])]),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1)]))]
#[case::prioritized_list_allocation_mode_all_multiple_requests(case(
    vec![claim(CLAIM0, vec![], vec![
        request(REQ0, CLASS_A, 1, vec![]),
        prioritized(REQ1, vec![
            all_sub_request(SUB_REQ0, CLASS_A),
            sub_request(SUB_REQ1, CLASS_A, 1, vec![]),
        ]),
    ])],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
    ])]),
))]
#[case::prioritized_list_disabled(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![sub_request(SUB_REQ0, CLASS_A, 1, vec![])])])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled"),
).features(Features { prioritized_list: false, ..Features::ALL }))]
#[case::prioritized_list_multi_request(case(
    vec![claim(CLAIM0, vec![], vec![
        request(REQ1, CLASS_A, 1, vec![memory_at_least("8Gi")]),
        prioritized(REQ0, vec![
            sub_request(SUB_REQ0, CLASS_A, 1, vec![memory_at_least("8Gi")]),
            sub_request(SUB_REQ1, CLASS_A, 1, vec![memory_at_least("4Gi")]),
        ]),
    ])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![memory_device(DEVICE1, "8Gi", None)]),
        slice(SLICE2, Reach::Node(NODE1), pool(POOL2), DRIVER_A, vec![memory_device(DEVICE2, "4Gi", None)]),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
        result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
    ])]),
))]
// The first sub-request takes the only large device, which the later request needs: the
// search goes back and picks the second sub-request.
#[case::prioritized_list_with_backtracking(case(
    vec![claim(CLAIM0, vec![], vec![
        prioritized(REQ0, vec![
            sub_request(SUB_REQ0, CLASS_A, 1, vec![memory_at_least("8Gi")]),
            sub_request(SUB_REQ1, CLASS_A, 1, vec![memory_at_least("4Gi")]),
        ]),
        request(REQ1, CLASS_A, 1, vec![memory_at_least("8Gi")]),
    ])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![memory_device(DEVICE1, "8Gi", None)]),
        slice(SLICE2, Reach::Node(NODE1), pool(POOL2), DRIVER_A, vec![memory_device(DEVICE2, "4Gi", None)]),
    ],
    Expect::Allocated(vec![on_node1(vec![
        result(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
        result(REQ1, DRIVER_A, POOL1, DEVICE1, false),
    ])]),
))]
#[case::prioritized_list_too_many_in_first_subrequest(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_B, 500, vec![]),
        sub_request(SUB_REQ1, CLASS_A, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    one_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)])]),
))]
#[case::tainted_two_devices(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
        with_taints(device(DEVICE2), vec![taint_no_execute()]),
    ])],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable; 1 device: untolerated taint taint-key=taint-value:NoSchedule; 1 device: untolerated taint taint-key=taint-value-2:NoExecute"),
))]
#[case::tainted_one_device_two_taints(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule(), taint_no_execute()]),
    ])],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable; 1 device: untolerated taint taint-key=taint-value:NoSchedule"),
))]
// Only the second device's taint is tolerated; the result names the request's tolerations.
#[case::tainted_two_devices_tolerated(case(
    vec![claim(CLAIM0, vec![], vec![tolerating(request(REQ0, CLASS_A, 1, vec![]), vec![toleration_no_execute()])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
        with_taints(device(DEVICE2), vec![taint_no_execute()]),
    ])],
    Expect::Allocated(vec![on_node1(vec![DeviceRequestAllocationResult {
        tolerations: Some(vec![toleration_no_execute()]),
        ..result(REQ0, DRIVER_A, POOL1, DEVICE2, false)
    }])]),
))]
#[case::tainted_one_device_two_taints_both_tolerated(case(
    vec![claim(CLAIM0, vec![], vec![tolerating(
        request(REQ0, CLASS_A, 1, vec![]),
        vec![toleration_no_schedule(), toleration_no_execute()],
    )])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule(), taint_no_execute()]),
    ])],
    Expect::Allocated(vec![on_node1(vec![DeviceRequestAllocationResult {
        tolerations: Some(vec![toleration_no_schedule(), toleration_no_execute()]),
        ..result(REQ0, DRIVER_A, POOL1, DEVICE1, false)
    }])]),
))]
#[case::tainted_disabled(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule(), taint_no_execute()]),
    ])],
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)])]),
).features(Features { device_taints: false, ..Features::ALL }))]
#[case::tainted_prioritized_list(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_B, 1, vec![]),
        sub_request(SUB_REQ1, CLASS_A, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
    ])],
    Expect::Unschedulable("claim claim-0, request req-0/subReq-0: wants 1 device, 0 usable; 1 device: class class-b selector #0 (device.driver == \"driver-b\") is false\nclaim claim-0, request req-0/subReq-1: wants 1 device, 0 usable; 1 device: untolerated taint taint-key=taint-value:NoSchedule"),
))]
#[case::tainted_prioritized_list_disabled(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_B, 1, vec![]),
        sub_request(SUB_REQ1, CLASS_A, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
    ])],
    Expect::Allocated(vec![on_node1(vec![result(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)])]),
).features(Features { device_taints: false, ..Features::ALL }))]
// Admin access may share a device in use, but not ignore its taints.
#[case::tainted_admin_access(case(
    vec![claim(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
    ])],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable; 1 device: untolerated taint taint-key=taint-value:NoSchedule"),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)]))]
#[case::tainted_admin_access_disabled(case(
    vec![claim(CLAIM0, vec![], vec![admin(request(REQ0, CLASS_A, 1, vec![]))])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
    ])],
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, true)])]),
)
.allocated(vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)])
.features(Features { device_taints: false, ..Features::ALL }))]
#[case::tainted_all_devices_single(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
    ])],
    Expect::Unschedulable("claim claim-0, request req-0: wants all 1 matching device, 0 usable; 1 device: untolerated taint taint-key=taint-value:NoSchedule"),
))]
#[case::tainted_all_devices_single_disabled(case(
    vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint_no_schedule()]),
    ])],
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)])]),
).features(Features { device_taints: false, ..Features::ALL }))]
// A taint with effect None never keeps a device from being allocated.
#[case::taint_with_effect_none_is_ignored(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        with_taints(device(DEVICE1), vec![taint("None", "taint-value")]),
    ])],
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE1, false)])]),
))]
// Devices of other pods' in-flight allocations arrive in the same set as allocated ones.
#[case::in_flight_device_of_another_pod_is_skipped(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    two_device_slice(),
    Expect::Allocated(vec![on_node1(vec![result(REQ0, DRIVER_A, POOL1, DEVICE2, false)])]),
).allocated(vec![id(DRIVER_A, POOL1, DEVICE1)]))]
// The explanation names the class selector and the request selector that rejected devices.
#[case::explanation_names_failing_selectors(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1, vec![cel("device.attributes[\"driver-a\"].model == \"b\"")])])],
    vec![class(CLASS_A, DRIVER_A)],
    vec![
        slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![with_attributes(device(DEVICE1), vec![("model", string("a"))])]),
        slice_with_one_device(SLICE2, Reach::Node(NODE1), POOL2, DRIVER_B),
    ],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable; 1 device: request selector #0 (device.attributes[\"driver-a\"].model == \"b\") is false; 1 device: class class-a selector #0 (device.driver == \"driver-a\") is false"),
))]
// A sub-request that needs no more devices than others fails like any request: each
// sub-request is explained.
#[case::explanation_lists_every_subrequest(case(
    vec![claim(CLAIM0, vec![], vec![prioritized(REQ0, vec![
        sub_request(SUB_REQ0, CLASS_A, 2, vec![]),
        sub_request(SUB_REQ1, CLASS_B, 1, vec![]),
    ])])],
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
    one_device_slice(),
    Expect::Unschedulable("claim claim-0, request req-0/subReq-0: wants 2 devices, 1 usable\nclaim claim-0, request req-0/subReq-1: wants 1 device, 0 usable; 1 device: class class-b selector #0 (device.driver == \"driver-b\") is false"),
))]
// Devices with binding conditions or shared counters are skipped, as upstream's allocator
// does with those features off.
#[case::devices_with_binding_conditions_or_counters_are_skipped(case(
    vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
    vec![class(CLASS_A, DRIVER_A)],
    vec![slice(SLICE1, Reach::Node(NODE1), pool(POOL1), DRIVER_A, vec![
        Device { binding_conditions: Some(vec!["attached".to_string()]), ..device(DEVICE1) },
        Device {
            consumes_counters: Some(vec![DeviceCounterConsumption {
                counter_set: "counter-set-1".to_string(),
                counters: BTreeMap::new(),
            }]),
            ..device(DEVICE2)
        },
    ])],
    Expect::Unschedulable("claim claim-0, request req-0: wants 1 device, 0 usable; 1 device: uses binding conditions, which are not supported; 1 device: uses shared counters, which are not supported"),
))]
#[case::cel_runtime_error_names_device(case(
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1, vec![cel("device.attributes[\"driver-a\"].model == \"b\"")])])],
    vec![class(CLASS_A, DRIVER_A)],
    one_device_slice(),
    Expect::Error("claim claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: no such key: model"),
))]
fn allocate(#[case] case: Case) {
    let in_use: HashSet<DeviceId> = case.allocated.into_iter().collect();
    let allocator = Allocator::new(
        case.features,
        &in_use,
        &case.classes,
        &case.slices,
        evaluator(),
    );
    let claims: Vec<&ResourceClaim> = case.claims.iter().collect();
    let got = allocator.allocate(&case.node, &claims);
    match (got, case.expect) {
        (Ok(Outcome::Allocated(got)), Expect::Allocated(want)) => assert_eq!(got, want),
        (Ok(Outcome::Unschedulable(got)), Expect::Unschedulable(want)) => {
            assert_eq!(got.to_string(), want)
        }
        (Err(got), Expect::Error(want)) => assert_eq!(got.to_string(), want),
        (got, want) => panic!("got {got:?}, want {want:?}"),
    }
}

/// The explanation as a value: what `simulate` and Filter read.
#[test]
fn explanation_is_structured_per_claim_and_request() {
    let in_use = HashSet::from([id(DRIVER_A, POOL1, DEVICE1)]);
    let classes = vec![class(CLASS_A, DRIVER_A)];
    let slices = two_device_slice();
    let allocator = Allocator::new(Features::ALL, &in_use, &classes, &slices, evaluator());
    let claim = claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2, vec![])]);
    let got = allocator.allocate(&node(NODE1, REGION1), &[&claim]);
    assert_eq!(
        got,
        Ok(Outcome::Unschedulable(Explanation {
            claims: vec![ClaimExplanation {
                claim: CLAIM0.to_string(),
                requests: vec![RequestExplanation {
                    request: REQ0.to_string(),
                    wanted: Wanted::Count(2),
                    usable: 1,
                    rejected: vec![(Rejection::InUse, 1)],
                }],
                enough_alone: false,
                match_attributes: vec![],
            }],
            incomplete_pools: vec![],
        }))
    );
}

/// Namespaced claims are named `namespace/name` in messages, as klog.KObj prints them.
#[test]
fn messages_name_namespaced_claims_with_their_namespace() {
    let in_use = HashSet::new();
    let classes: Vec<DeviceClass> = vec![];
    let slices = one_device_slice();
    let allocator = Allocator::new(Features::ALL, &in_use, &classes, &slices, evaluator());
    let mut claim = claim_with_request(CLAIM0, REQ0, CLASS_A);
    claim.metadata.namespace = Some("default".to_string());
    let got = allocator.allocate(&node(NODE1, REGION1), &[&claim]);
    assert_eq!(
        got.map_err(|e| e.to_string()),
        Err("claim default/claim-0, request req-0: could not retrieve device class class-a: deviceclass.resource.k8s.io \"class-a\" not found".to_string())
    );
}

/// One allocator serves many nodes: the selector verdicts it caches are per call.
#[test]
fn one_allocator_serves_several_nodes() {
    let in_use = HashSet::new();
    let classes = vec![class(CLASS_A, DRIVER_A)];
    let slices = vec![
        slice_with_one_device(SLICE1, Reach::Node(NODE1), POOL1, DRIVER_A),
        slice_with_one_device(SLICE2, Reach::Node(NODE2), POOL2, DRIVER_A),
    ];
    let allocator = Allocator::new(Features::ALL, &in_use, &classes, &slices, evaluator());
    let claim = claim_with_request(CLAIM0, REQ0, CLASS_A);
    let got: Vec<_> = [node(NODE1, REGION1), node(NODE2, REGION2)]
        .iter()
        .map(|n| allocator.allocate(n, &[&claim]))
        .collect();
    assert_eq!(
        got,
        vec![
            Ok(Outcome::Allocated(vec![on_node1(vec![result(
                REQ0, DRIVER_A, POOL1, DEVICE1, false
            )])])),
            Ok(Outcome::Allocated(vec![allocation(
                Some(local_node_selector(NODE2)),
                vec![result(REQ0, DRIVER_A, POOL2, DEVICE1, false)],
            )])),
        ]
    );
}

/// Filter runs on many nodes at once, all with the same allocator.
#[test]
fn allocator_is_shared_between_threads() {
    fn assert_sync<T: Sync + Send>() {}
    assert_sync::<Allocator<'static>>();
}
