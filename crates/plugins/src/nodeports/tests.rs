use super::*;

use framework::testing::{make_node, make_pod, PodBuilder};
use framework::{ClusterEvent, Code};
use k8s_openapi::api::core::v1::{Container, ContainerPort, PodStatus};
use rstest::rstest;

/// `(protocol, hostIP, hostPort)`, as upstream's tests spell ports.
type Port = (&'static str, &'static str, i32);

/// A pod with one container exposing each of `ports`.
fn pod_with_ports(name: &str, ports: &[Port]) -> PodBuilder {
    ports.iter().fold(make_pod(name), |p, &(proto, ip, port)| {
        p.host_port(proto, ip, port)
    })
}

/// Adds an init container exposing `port` on all IPs; a sidecar when `sidecar`.
fn init_port(p: PodBuilder, port: i32, sidecar: bool) -> PodBuilder {
    p.with(|pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.init_containers
                .get_or_insert_with(Vec::new)
                .push(Container {
                    name: format!("init-{port}"),
                    restart_policy: sidecar.then(|| "Always".to_string()),
                    ports: Some(vec![ContainerPort {
                        container_port: port,
                        host_port: Some(port),
                        protocol: Some("TCP".to_string()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                });
        }
    })
}

fn plugin() -> Arc<dyn Plugin> {
    new(None, &Handle::offline()).unwrap_or_else(|e| unreachable!("{e:?}"))
}

/// Runs PreFilter then, unless it skipped, Filter on a node holding `existing`.
fn run_cycle(pod: Arc<PodInfo>, existing: &[Arc<PodInfo>]) -> (Status, Option<Status>) {
    let p = plugin();
    let node = make_node("n1").info_with(existing);
    let mut state = CycleState::new();
    let snapshot = Snapshot::default();
    let Some(pf) = p.as_pre_filter() else {
        unreachable!("NodePorts is a PreFilter plugin")
    };
    let (result, status) = pf.pre_filter(&mut state, &pod, &snapshot);
    assert_eq!(result, None, "NodePorts never restricts the node set");
    if status.is_skip() {
        return (status, None);
    }
    let Some(f) = p.as_filter() else {
        unreachable!("NodePorts is a Filter plugin")
    };
    (status, Some(f.filter(&state, &pod, &node)))
}

fn rejected() -> Option<Status> {
    Some(Status::unschedulable(ERR_REASON))
}

fn fits() -> Option<Status> {
    Some(Status::success())
}

#[rstest]
#[case::other_port_fits(&[("UDP", "127.0.0.1", 8080)], &[("UDP", "127.0.0.1", 9090)], fits())]
#[case::same_udp_port_conflicts(&[("UDP", "127.0.0.1", 8080)], &[("UDP", "127.0.0.1", 8080)], rejected())]
#[case::same_tcp_port_conflicts(&[("TCP", "127.0.0.1", 8080)], &[("TCP", "127.0.0.1", 8080)], rejected())]
#[case::same_sctp_port_conflicts(&[("SCTP", "127.0.0.1", 8080)], &[("SCTP", "127.0.0.1", 8080)], rejected())]
#[case::different_host_ip_fits(&[("TCP", "127.0.0.1", 8080)], &[("TCP", "127.0.0.2", 8080)], fits())]
#[case::different_protocol_fits(&[("UDP", "127.0.0.1", 8080)], &[("TCP", "127.0.0.1", 8080)], fits())]
#[case::second_wanted_port_conflicts(&[("UDP", "127.0.0.1", 8000), ("UDP", "127.0.0.1", 8080)], &[("UDP", "127.0.0.1", 8080)], rejected())]
#[case::first_wanted_port_conflicts(&[("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8080)], &[("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8081)], rejected())]
#[case::wanted_wildcard_conflicts_with_used_specific_ip(&[("TCP", "0.0.0.0", 8001)], &[("TCP", "127.0.0.1", 8001)], rejected())]
#[case::wanted_empty_ip_is_the_wildcard(&[("TCP", "", 8001)], &[("TCP", "127.0.0.1", 8001)], rejected())]
#[case::wanted_wildcard_beside_specific_ip_conflicts(&[("TCP", "10.0.10.10", 8001), ("TCP", "0.0.0.0", 8001)], &[("TCP", "127.0.0.1", 8001)], rejected())]
#[case::used_wildcard_conflicts_with_wanted_specific_ip(&[("TCP", "127.0.0.1", 8001)], &[("TCP", "0.0.0.0", 8001)], rejected())]
#[case::used_wildcard_of_other_protocol_fits(&[("UDP", "127.0.0.1", 8001)], &[("TCP", "0.0.0.0", 8001)], fits())]
#[case::used_wildcard_of_same_protocol_conflicts(&[("UDP", "127.0.0.1", 8001)], &[("TCP", "0.0.0.0", 8001), ("UDP", "0.0.0.0", 8001)], rejected())]
#[case::ipv6_any_address_is_not_a_wildcard(&[("TCP", "::", 8001)], &[("TCP", "fd00::1", 8001)], fits())]
#[case::same_ipv6_address_conflicts(&[("TCP", "fd00::1", 8001)], &[("TCP", "fd00::1", 8001)], rejected())]
#[case::empty_node_fits(&[("TCP", "", 80)], &[], fits())]
fn filter(#[case] wanted: &[Port], #[case] used: &[Port], #[case] want: Option<Status>) {
    let pod = pod_with_ports("p", wanted).info();
    let existing = pod_with_ports("existing", used).node("n1").info();
    assert_eq!(run_cycle(pod, &[existing]), (Status::success(), want));
}

#[rstest]
#[case::no_ports_skips(make_pod("p").image("nginx"), Status::skip(), None)]
#[case::container_port_without_host_port_skips(
    make_pod("p").with(|pod| {
        if let Some(spec) = pod.spec.as_mut() {
            spec.containers.push(Container {
                name: "web".to_string(),
                ports: Some(vec![ContainerPort { container_port: 80, ..Default::default() }]),
                ..Default::default()
            });
        }
    }),
    Status::skip(),
    None
)]
#[case::plain_init_container_port_is_not_held(
    init_port(make_pod("p"), 8080, false),
    Status::skip(),
    None
)]
#[case::sidecar_port_is_held(init_port(make_pod("p"), 8080, true), Status::success(), rejected())]
#[case::container_port_is_held(pod_with_ports("p", &[("TCP", "", 8080)]), Status::success(), rejected())]
fn which_containers_hold_ports(
    #[case] pod: PodBuilder,
    #[case] want_pre_filter: Status,
    #[case] want_filter: Option<Status>,
) {
    let existing = pod_with_ports("existing", &[("TCP", "", 8080)])
        .node("n1")
        .info();
    assert_eq!(
        run_cycle(pod.info(), &[existing]),
        (want_pre_filter, want_filter)
    );
}

#[test]
fn existing_sidecar_port_is_used_on_the_node() {
    let existing = init_port(make_pod("existing").node("n1"), 9000, true).info();
    let pod = pod_with_ports("p", &[("TCP", "10.0.0.1", 9000)]).info();
    assert_eq!(run_cycle(pod, &[existing]), (Status::success(), rejected()));
}

#[test]
fn filter_without_pre_filter_is_an_error() {
    let p = plugin();
    let pod = pod_with_ports("p", &[("TCP", "", 80)]).info();
    let node = make_node("n1").info_with(&[]);
    let status = p
        .as_filter()
        .map(|f| f.filter(&CycleState::new(), &pod, &node));
    assert_eq!(
        status,
        Some(Status::new(
            Code::Error,
            "reading \"PreFilterNodePorts\" from cycleState: not found"
        ))
    );
}

#[test]
fn registers_assigned_pod_delete_with_hint_and_node_add() {
    let p = plugin();
    let events: Vec<(ClusterEvent, bool)> = p
        .as_enqueue_extensions()
        .map(|e| e.events_to_register())
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.event, e.hint.is_some()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                true
            ),
            (
                ClusterEvent::new(EventResource::Node, ActionType::ADD),
                false
            ),
        ]
    );
}

fn nominated(p: PodBuilder, node: &str) -> PodBuilder {
    p.with(|pod| {
        pod.status = Some(PodStatus {
            nominated_node_name: Some(node.to_string()),
            ..Default::default()
        })
    })
}

fn pod_object(p: PodBuilder) -> Option<EventObject> {
    Some(EventObject::Pod(Arc::new(p.obj())))
}

#[rstest]
#[case::unscheduled_deleted_pod_is_skipped(pod_object(pod_with_ports("d", &[("TCP", "", 8080)])), Ok(QueueingHint::QueueSkip))]
#[case::deleted_pod_without_host_ports_is_skipped(pod_object(make_pod("d").node("n1")), Ok(QueueingHint::QueueSkip))]
#[case::unrelated_host_port_is_skipped(pod_object(pod_with_ports("d", &[("TCP", "", 8081)]).node("n1")), Ok(QueueingHint::QueueSkip))]
#[case::other_protocol_is_skipped(pod_object(pod_with_ports("d", &[("UDP", "", 8080)]).node("n1")), Ok(QueueingHint::QueueSkip))]
#[case::released_host_port_queues(pod_object(pod_with_ports("d", &[("TCP", "", 8080)]).node("n1")), Ok(QueueingHint::Queue))]
#[case::released_specific_ip_port_queues_wildcard_pod(pod_object(pod_with_ports("d", &[("TCP", "10.0.0.1", 8080)]).node("n1")), Ok(QueueingHint::Queue))]
#[case::released_sidecar_port_queues(pod_object(init_port(make_pod("d").node("n1"), 8080, true)), Ok(QueueingHint::Queue))]
#[case::nominated_deleted_pod_counts(pod_object(nominated(pod_with_ports("d", &[("TCP", "", 8080)]), "n1")), Ok(QueueingHint::Queue))]
#[case::non_pod_object_is_an_error(
    Some(EventObject::Node(Arc::new(make_node("n1").obj()))),
    Err("expected the deleted Pod, got a Node".to_string())
)]
#[case::missing_object_is_an_error(None, Err("expected the deleted Pod, got nothing".to_string()))]
fn hint_after_pod_deleted(
    #[case] deleted: Option<EventObject>,
    #[case] want: Result<QueueingHint, String>,
) {
    let pending = pod_with_ports("p", &[("TCP", "", 8080)]).obj();
    assert_eq!(
        is_schedulable_after_pod_deleted(&pending, deleted.as_ref(), None),
        want
    );
}

#[rstest]
#[case::same_everything(("TCP", "1.1.1.1", 80), ("TCP", "1.1.1.1", 80), true)]
#[case::empty_protocol_is_tcp(("", "1.1.1.1", 80), ("TCP", "1.1.1.1", 80), true)]
#[case::empty_ip_is_wildcard(("TCP", "", 80), ("TCP", "1.1.1.1", 80), true)]
#[case::other_port(("TCP", "1.1.1.1", 80), ("TCP", "1.1.1.1", 81), false)]
#[case::zero_port_never_conflicts(("TCP", "1.1.1.1", 0), ("TCP", "1.1.1.1", 0), false)]
fn conflict_rule(#[case] a: Port, #[case] b: Port, #[case] want: bool) {
    let hp = |(protocol, ip, port): Port| HostPort {
        ip: ip.to_string(),
        protocol: protocol.to_string(),
        port,
    };
    assert_eq!(
        (
            ports_conflict(&hp(a), &hp(b)),
            ports_conflict(&hp(b), &hp(a))
        ),
        (want, want)
    );
}
