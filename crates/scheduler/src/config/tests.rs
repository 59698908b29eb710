use std::path::PathBuf;
use std::time::Duration;

use rstest::rstest;
use serde_json::json;

use super::*;

const HEADER: &str =
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata/config")
        .join(name)
}

fn load(body: &str) -> Result<KubeSchedulerConfiguration, ConfigError> {
    load_str(&format!("{HEADER}{body}"), "test.yaml")
}

/// The field errors of loading `body`; none when it loads.
fn errors_of(body: &str) -> Vec<FieldError> {
    load(body)
        .err()
        .map(|e| e.field_errors().to_vec())
        .unwrap_or_default()
}

fn err(path: &str, message: &str) -> FieldError {
    FieldError::new(path, message)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn set(enabled: Vec<Plugin>, disabled: &[&str]) -> PluginSet {
    PluginSet {
        enabled,
        disabled: disabled.iter().map(|n| Plugin::new(*n)).collect(),
    }
}

/// Upstream's default multiPoint list, edited by `edit`.
fn default_multi_point_with(edit: impl FnOnce(&mut Vec<Plugin>)) -> Vec<Plugin> {
    let mut list = default_plugins().multi_point.enabled;
    edit(&mut list);
    list
}

fn replace(list: &mut [Plugin], plugin: Plugin) {
    for p in list.iter_mut().filter(|p| p.name == plugin.name) {
        *p = plugin.clone();
    }
}

fn remove(list: &mut Vec<Plugin>, name: &str) {
    list.retain(|p| p.name != name);
}

// --- Loading upstream-shaped files ---------------------------------------------------------

fn expected_full() -> KubeSchedulerConfiguration {
    KubeSchedulerConfiguration {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        parallelism: Some(8),
        leader_election: LeaderElectionConfiguration {
            leader_elect: Some(true),
            lease_duration: secs(30),
            renew_deadline: secs(20),
            retry_period: secs(5),
            resource_lock: "leases".to_string(),
            resource_name: "my-scheduler".to_string(),
            resource_namespace: "scheduling".to_string(),
        },
        client_connection: ClientConnectionConfiguration {
            kubeconfig: "/etc/kubernetes/scheduler.conf".to_string(),
            accept_content_types: "application/json".to_string(),
            content_type: "application/json".to_string(),
            qps: 100.0,
            burst: 200,
        },
        enable_profiling: Some(false),
        enable_contention_profiling: Some(false),
        percentage_of_nodes_to_score: Some(50),
        pod_initial_backoff_seconds: Some(2),
        pod_max_backoff_seconds: Some(20),
        profiles: vec![
            KubeSchedulerProfile {
                scheduler_name: Some("default-scheduler".to_string()),
                percentage_of_nodes_to_score: None,
                plugins: Some(Plugins {
                    multi_point: set(
                        default_multi_point_with(|l| {
                            replace(l, Plugin::weighted("TaintToleration", 5));
                            remove(l, "ImageLocality");
                        }),
                        &["ImageLocality"],
                    ),
                    score: set(vec![Plugin::weighted("NodeResourcesFit", 4)], &[]),
                    ..Plugins::default()
                }),
                plugin_config: vec![
                    PluginConfig {
                        name: "NodeResourcesFit".to_string(),
                        args: Some(json!({
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [
                                    {"name": "cpu", "weight": 1},
                                    {"name": "memory", "weight": 1},
                                ],
                            },
                        })),
                    },
                    PluginConfig {
                        name: "PodTopologySpread".to_string(),
                        args: Some(json!({
                            "defaultingType": "List",
                            "defaultConstraints": [{
                                "maxSkew": 1,
                                "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "ScheduleAnyway",
                            }],
                        })),
                    },
                ],
            },
            KubeSchedulerProfile {
                scheduler_name: Some("no-scoring-scheduler".to_string()),
                percentage_of_nodes_to_score: Some(20),
                plugins: Some(Plugins {
                    multi_point: default_plugins().multi_point,
                    pre_score: set(vec![], &["*"]),
                    score: set(vec![], &["*"]),
                    ..Plugins::default()
                }),
                plugin_config: vec![],
            },
        ],
        extenders: vec![Extender {
            url_prefix: "https://127.0.0.1:8888/scheduler".to_string(),
            filter_verb: "filter".to_string(),
            preempt_verb: "preempt".to_string(),
            prioritize_verb: "prioritize".to_string(),
            weight: 2,
            bind_verb: "bind".to_string(),
            enable_https: true,
            tls_config: Some(ExtenderTlsConfig {
                insecure: false,
                server_name: "extender.example.com".to_string(),
                cert_file: "/etc/extender/tls.crt".to_string(),
                key_file: "/etc/extender/tls.key".to_string(),
                ca_file: "/etc/extender/ca.crt".to_string(),
                cert_data: k8s_openapi::ByteString(vec![]),
                key_data: k8s_openapi::ByteString(vec![]),
                ca_data: k8s_openapi::ByteString(b"ca-bytes".to_vec()),
            }),
            http_timeout: secs(90),
            node_cache_capable: true,
            managed_resources: vec![ExtenderManagedResource {
                name: "example.com/gpu".to_string(),
                ignored_by_scheduler: true,
            }],
            ignorable: true,
        }],
        delay_cache_until_active: true,
    }
}

#[rstest]
#[case::yaml("full.yaml")]
#[case::json("full.json")]
fn full_upstream_file_loads_with_every_value_kept(#[case] file: &str) {
    let cfg = load_file(&testdata(file)).map_err(|e| e.to_string());
    assert_eq!(cfg, Ok(expected_full()));
}

#[rstest]
#[case::client_connection_only(
    "clientConnection:\n  kubeconfig: /etc/srv/kubernetes/kube-scheduler/kubeconfig\n"
)]
#[case::bin_packing_profile(
    "profiles:\n- pluginConfig:\n  - args:\n      scoringStrategy:\n        resources:\n        - name: cpu\n          weight: 1\n        type: MostAllocated\n    name: NodeResourcesFit\n"
)]
#[case::second_profile_without_scoring(
    "profiles:\n- schedulerName: default-scheduler\n- schedulerName: no-scoring-scheduler\n  plugins:\n    preScore:\n      disabled:\n      - name: '*'\n    score:\n      disabled:\n      - name: '*'\n"
)]
#[case::args_with_api_version_and_kind(
    "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      kind: InterPodAffinityArgs\n      hardPodAffinityWeight: 5\n"
)]
#[case::empty_values_read_as_unset(
    "clientConnection:\n  kubeconfig:\nleaderElection:\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n  plugins:\n    score:\n"
)]
#[case::written_out_defaults(
    "parallelism: 16\npercentageOfNodesToScore: 0\nleaderElection:\n  leaderElect: true\n  leaseDuration: 15s\n  renewDeadline: 10s\n  retryPeriod: 2s\n  resourceLock: leases\n  resourceName: kube-scheduler\n  resourceNamespace: kube-system\n"
)]
fn upstream_examples_load(#[case] body: &str) {
    assert_eq!(load(body).map(|_| ()).map_err(|e| e.to_string()), Ok(()));
}

#[test]
fn defaulted_config_survives_a_round_trip_through_json() {
    let cfg = load_file(&testdata("full.yaml")).map_err(|e| e.to_string());
    let again = cfg.clone().and_then(|c| {
        let text = serde_json::to_string_pretty(&c).map_err(|e| e.to_string())?;
        load_str(&text, "round-trip.json").map_err(|e| e.to_string())
    });
    assert!(cfg.is_ok());
    assert_eq!(again, cfg);
}

#[test]
fn no_prefix_of_a_file_makes_the_loader_panic() {
    // Every cut of a real file, at every character: broken YAML, half-written values,
    // lists cut mid-entry. Each must come back as Ok or Err, never as a panic.
    let text = std::fs::read_to_string(testdata("full.yaml")).unwrap_or_default();
    let outcomes: Vec<bool> = text
        .char_indices()
        .map(|(i, _)| load_str(&text[..i], "cut.yaml").is_ok())
        .collect();
    assert_eq!(outcomes.len(), text.chars().count());
    assert!(outcomes.iter().any(|ok| !ok));
}

#[test]
fn missing_file_names_the_file() {
    let path = testdata("no-such-file.yaml");
    // The io error is the source, printed after this by the `{:#}` chain.
    let got = load_file(&path).map_err(|e| {
        (
            e.to_string(),
            std::error::Error::source(&e)
                .map(|s| s.to_string())
                .is_some(),
        )
    });
    assert_eq!(
        got.map(|_| ()),
        Err((
            format!("{}: cannot read configuration", path.display()),
            true
        ))
    );
}

// --- Defaults ------------------------------------------------------------------------------

#[test]
fn empty_config_gets_upstream_defaults() {
    let want = KubeSchedulerConfiguration {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        parallelism: Some(16),
        leader_election: LeaderElectionConfiguration {
            leader_elect: Some(true),
            lease_duration: secs(15),
            renew_deadline: secs(10),
            retry_period: secs(2),
            resource_lock: "leases".to_string(),
            resource_name: "kube-scheduler".to_string(),
            resource_namespace: "kube-system".to_string(),
        },
        client_connection: ClientConnectionConfiguration {
            kubeconfig: String::new(),
            accept_content_types: String::new(),
            content_type: "application/vnd.kubernetes.protobuf".to_string(),
            qps: 50.0,
            burst: 100,
        },
        enable_profiling: Some(true),
        enable_contention_profiling: Some(true),
        percentage_of_nodes_to_score: None,
        pod_initial_backoff_seconds: Some(1),
        pod_max_backoff_seconds: Some(10),
        profiles: vec![KubeSchedulerProfile {
            scheduler_name: Some("default-scheduler".to_string()),
            percentage_of_nodes_to_score: None,
            plugins: Some(Plugins {
                multi_point: set(
                    vec![
                        Plugin::new("SchedulingGates"),
                        Plugin::new("PrioritySort"),
                        Plugin::new("NodeUnschedulable"),
                        Plugin::new("NodeName"),
                        Plugin::weighted("TaintToleration", 3),
                        Plugin::weighted("NodeAffinity", 2),
                        Plugin::new("NodePorts"),
                        Plugin::weighted("NodeResourcesFit", 1),
                        Plugin::new("VolumeRestrictions"),
                        Plugin::new("NodeVolumeLimits"),
                        Plugin::new("VolumeBinding"),
                        Plugin::new("VolumeZone"),
                        Plugin::weighted("PodTopologySpread", 2),
                        Plugin::weighted("InterPodAffinity", 2),
                        Plugin::new("DynamicResources"),
                        Plugin::new("DefaultPreemption"),
                        Plugin::weighted("NodeResourcesBalancedAllocation", 1),
                        Plugin::weighted("ImageLocality", 1),
                        Plugin::new("DefaultBinder"),
                    ],
                    &[],
                ),
                ..Plugins::default()
            }),
            plugin_config: vec![],
        }],
        extenders: vec![],
        delay_cache_until_active: false,
    };
    assert_eq!(load("").map_err(|e| e.to_string()), Ok(want));
}

#[rstest]
#[case::profiling_off_leaves_contention_off("enableProfiling: false\n", Some(false), None)]
#[case::contention_set_explicitly_is_kept(
    "enableContentionProfiling: false\n",
    Some(true),
    Some(false)
)]
fn contention_profiling_follows_profiling_when_unset(
    #[case] body: &str,
    #[case] profiling: Option<bool>,
    #[case] contention: Option<bool>,
) {
    let got = load(body)
        .map(|c| (c.enable_profiling, c.enable_contention_profiling))
        .map_err(|e| e.to_string());
    assert_eq!(got, Ok((profiling, contention)));
}

#[rstest]
#[case::one_unnamed_profile_is_default_scheduler("profiles:\n- {}\n", vec![Some("default-scheduler")])]
#[case::explicit_empty_name_is_kept_and_refused_later(
    "profiles:\n- schedulerName: ''\n",
    vec![Some("")]
)]
fn scheduler_name_default(#[case] body: &str, #[case] want: Vec<Option<&str>>) {
    let got = decode(&format!("{HEADER}{body}")).map(|mut cfg| {
        set_defaults(&mut cfg);
        cfg.profiles
            .into_iter()
            .map(|p| p.scheduler_name)
            .collect::<Vec<_>>()
    });
    let want = want.into_iter().map(|n| n.map(str::to_string)).collect();
    assert_eq!(got, Ok(want));
}

// --- Merging a profile's plugins into the defaults ----------------------------------------

#[rstest]
#[case::no_plugins_means_the_defaults("{}", default_plugins())]
#[case::disabling_one_default_removes_it(
    "{multiPoint: {disabled: [{name: ImageLocality}]}}",
    Plugins {
        multi_point: set(default_multi_point_with(|l| remove(l, "ImageLocality")), &["ImageLocality"]),
        ..Plugins::default()
    }
)]
#[case::star_disables_every_default(
    "{multiPoint: {enabled: [{name: PrioritySort}, {name: NodeName}, {name: DefaultBinder}], disabled: [{name: '*'}]}}",
    Plugins {
        multi_point: set(
            vec![Plugin::new("PrioritySort"), Plugin::new("NodeName"), Plugin::new("DefaultBinder")],
            &["*"],
        ),
        ..Plugins::default()
    }
)]
#[case::re_enabling_a_default_with_a_weight_replaces_it_in_place(
    "{multiPoint: {enabled: [{name: TaintToleration, weight: 10}]}}",
    Plugins {
        multi_point: set(
            default_multi_point_with(|l| replace(l, Plugin::weighted("TaintToleration", 10))),
            &[],
        ),
        ..Plugins::default()
    }
)]
#[case::re_enabling_a_default_without_weight_drops_its_default_weight(
    "{multiPoint: {enabled: [{name: NodeAffinity}]}}",
    Plugins {
        multi_point: set(default_multi_point_with(|l| replace(l, Plugin::new("NodeAffinity"))), &[]),
        ..Plugins::default()
    }
)]
#[case::disabled_and_re_enabled_moves_to_the_end(
    "{multiPoint: {enabled: [{name: NodeName}], disabled: [{name: NodeName}]}}",
    Plugins {
        multi_point: set(
            default_multi_point_with(|l| {
                remove(l, "NodeName");
                l.push(Plugin::new("NodeName"));
            }),
            &["NodeName"],
        ),
        ..Plugins::default()
    }
)]
#[case::named_twice_the_last_replaces_and_the_first_is_appended(
    "{multiPoint: {enabled: [{name: ImageLocality, weight: 7}, {name: ImageLocality, weight: 9}]}}",
    Plugins {
        multi_point: set(
            default_multi_point_with(|l| {
                replace(l, Plugin::weighted("ImageLocality", 9));
                l.push(Plugin::weighted("ImageLocality", 7));
            }),
            &[],
        ),
        ..Plugins::default()
    }
)]
#[case::a_specific_extension_point_is_kept_beside_multi_point(
    "{score: {enabled: [{name: NodeResourcesFit, weight: 5}], disabled: [{name: ImageLocality}]}}",
    Plugins {
        multi_point: default_plugins().multi_point,
        score: set(vec![Plugin::weighted("NodeResourcesFit", 5)], &["ImageLocality"]),
        ..Plugins::default()
    }
)]
#[case::star_at_one_extension_point_leaves_multi_point_alone(
    "{filter: {disabled: [{name: '*'}]}, bind: {enabled: [{name: DefaultBinder}]}}",
    Plugins {
        multi_point: default_plugins().multi_point,
        filter: set(vec![], &["*"]),
        bind: set(vec![Plugin::new("DefaultBinder")], &[]),
        ..Plugins::default()
    }
)]
fn profile_plugins_merge_into_the_defaults(#[case] plugins: &str, #[case] want: Plugins) {
    let got = load(&format!("profiles:\n- plugins: {plugins}\n"))
        .map(|c| {
            c.profiles
                .into_iter()
                .map(|p| p.plugins)
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string());
    assert_eq!(got, Ok(vec![Some(want)]));
}

// --- Validation ----------------------------------------------------------------------------

#[rstest]
#[case::parallelism_zero(
    "parallelism: 0\n",
    vec![err("parallelism", "Invalid value: 0: should be an integer value greater than zero")]
)]
#[case::percentage_above_100(
    "percentageOfNodesToScore: 101\n",
    vec![err("percentageOfNodesToScore", "Invalid value: 101: not in valid range [0-100]")]
)]
#[case::profile_percentage_negative(
    "profiles:\n- percentageOfNodesToScore: -1\n",
    vec![err("profiles[0].percentageOfNodesToScore", "Invalid value: -1: not in valid range [0-100]")]
)]
#[case::initial_backoff_zero(
    "podInitialBackoffSeconds: 0\n",
    vec![err("podInitialBackoffSeconds", "Invalid value: 0: must be greater than 0")]
)]
#[case::max_backoff_below_initial(
    "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
    vec![err("podMaxBackoffSeconds", "Invalid value: 4: must be greater than or equal to PodInitialBackoffSeconds")]
)]
#[case::negative_burst(
    "clientConnection:\n  burst: -1\n",
    vec![err("clientConnection.burst", "Invalid value: -1: must be non-negative")]
)]
#[case::lease_not_longer_than_renew_deadline(
    "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n",
    vec![err("leaderElection.leaseDuration", "Invalid value: 10s: must be greater than `RenewDeadline`")]
)]
#[case::renew_deadline_inside_retry_jitter(
    "leaderElection:\n  leaseDuration: 60s\n  renewDeadline: 10s\n  retryPeriod: 9s\n",
    vec![err("leaderElection.renewDeadline", "Invalid value: 10s: must be greater than retryPeriod*JitterFactor (1.2)")]
)]
#[case::lock_other_than_leases(
    "leaderElection:\n  resourceLock: endpointsleases\n",
    vec![err("leaderElection.resourceLock", "Invalid value: \"endpointsleases\": resourceLock value must be \"leases\"")]
)]
#[case::second_profile_without_name(
    "profiles:\n- schedulerName: a\n- {}\n",
    vec![err("profiles[1].schedulerName", "Required value")]
)]
#[case::duplicate_scheduler_name(
    "profiles:\n- schedulerName: a\n- schedulerName: b\n- schedulerName: a\n",
    vec![err("profiles[2].schedulerName", "Duplicate value: profiles[0].schedulerName")]
)]
#[case::queue_sort_differs_between_profiles(
    "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n      enabled: [{name: PrioritySort}]\n      disabled: [{name: '*'}]\n",
    vec![err("profiles[1].plugins.queueSort", "Invalid value: {\"enabled\":[{\"name\":\"PrioritySort\"}],\"disabled\":[{\"name\":\"*\"}]}: must be the same for all profiles")]
)]
#[case::two_queue_sort_plugins(
    "profiles:\n- plugins:\n    queueSort:\n      enabled: [{name: PrioritySort}, {name: PrioritySort}]\n",
    vec![err("profiles[0].plugins.queueSort.enabled", "Invalid value: 2: only one queue sort plugin can be enabled")]
)]
#[case::queue_sort_args_differ_between_profiles(
    "profiles:\n- schedulerName: a\n  plugins: {queueSort: {enabled: [{name: PrioritySort}]}}\n- schedulerName: b\n  plugins: {queueSort: {enabled: [{name: PrioritySort}]}}\n  pluginConfig:\n  - name: PrioritySort\n    args: {x: 1}\n",
    vec![err("profiles[1].pluginConfig[0].args", "Invalid value: {\"x\":1}: queueSort must be the same for all profiles")]
)]
#[case::duplicate_plugin_config(
    "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n  - name: NodeResourcesFit\n",
    vec![err("profiles[0].pluginConfig[1]", "Duplicate value: \"NodeResourcesFit\"")]
)]
#[case::plugin_removed_from_v1(
    "profiles:\n- plugins:\n    filter:\n      enabled: [{name: EBSLimits}]\n",
    vec![err("profiles[0].plugins.filter.enabled[0]", "Invalid value: \"EBSLimits\": was invalid in version \"kubescheduler.config.k8s.io/v1\" (KubeSchedulerConfiguration is version \"kubescheduler.config.k8s.io/v1\")")]
)]
#[case::negative_score_weight(
    "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 1}, {name: NodeAffinity, weight: -2}]\n",
    vec![err("profiles[0].plugins.score.enabled[1].weight", "Invalid value: -2: must not be negative (unset or 0 means 1)")]
)]
#[case::extender_without_url_prefix(
    "extenders:\n- filterVerb: filter\n",
    vec![err("extenders[0].urlPrefix", "Required value")]
)]
#[case::prioritizing_extender_without_weight(
    "extenders:\n- urlPrefix: http://e\n  prioritizeVerb: prioritize\n",
    vec![err("extenders[0].weight", "Invalid value: 0: must have a positive weight applied to it")]
)]
#[case::two_binding_extenders(
    "extenders:\n- urlPrefix: http://a\n  bindVerb: bind\n- urlPrefix: http://b\n  bindVerb: bind\n",
    vec![err("extenders", "Invalid value: \"found 2 extenders implementing bind\": only one extender can implement bind")]
)]
#[case::native_resource_managed_by_extender(
    "extenders:\n- urlPrefix: http://a\n  managedResources: [{name: cpu}]\n",
    vec![err("extenders[0].managedResources[0].name", "Invalid value: \"cpu\": is an invalid extended resource name")]
)]
#[case::managed_resource_with_two_slashes(
    "extenders:\n- urlPrefix: http://a\n  managedResources: [{name: example.com/a/b}]\n",
    vec![err("extenders[0].managedResources[0].name", "Invalid value: \"example.com/a/b\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]
)]
#[case::managed_resource_with_bad_prefix_and_empty_name(
    "extenders:\n- urlPrefix: http://a\n  managedResources: [{name: Example.com/}]\n",
    vec![
        err("extenders[0].managedResources[0].name", "Invalid value: \"Example.com/\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        err("extenders[0].managedResources[0].name", "Invalid value: \"Example.com/\": name part must be non-empty"),
        err("extenders[0].managedResources[0].name", "Invalid value: \"Example.com/\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ]
)]
#[case::managed_resource_named_twice(
    "extenders:\n- urlPrefix: http://a\n  managedResources: [{name: example.com/gpu}]\n- urlPrefix: http://b\n  managedResources: [{name: example.com/gpu}]\n",
    vec![err("extenders[1].managedResources[0].name", "Invalid value: \"example.com/gpu\": duplicate extender managed resource name")]
)]
#[case::every_problem_is_reported_in_upstream_order(
    "parallelism: -1\npodInitialBackoffSeconds: 0\nprofiles:\n- schedulerName: a\n  percentageOfNodesToScore: 200\n- schedulerName: a\n",
    vec![
        err("parallelism", "Invalid value: -1: should be an integer value greater than zero"),
        err("profiles[0].percentageOfNodesToScore", "Invalid value: 200: not in valid range [0-100]"),
        err("profiles[1].schedulerName", "Duplicate value: profiles[0].schedulerName"),
        err("podInitialBackoffSeconds", "Invalid value: 0: must be greater than 0"),
    ]
)]
fn invalid_config_is_refused_with_upstream_path_and_message(
    #[case] body: &str,
    #[case] want: Vec<FieldError>,
) {
    assert_eq!(errors_of(body), want);
}

#[test]
fn unknown_plugin_is_refused_at_its_index_in_the_file() {
    let supported = known_plugins()
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let want = vec![
        err(
            "profiles[0].plugins.multiPoint.enabled[1]",
            &format!("Unsupported value: \"NodeResourceFit\": supported values: {supported}"),
        ),
        err(
            "profiles[0].pluginConfig[0]",
            &format!("Unsupported value: \"MyPlugin\": supported values: {supported}"),
        ),
    ];
    let got = errors_of(
        "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: ImageLocality}, {name: NodeResourceFit}]\n  pluginConfig:\n  - name: MyPlugin\n",
    );
    assert_eq!(got, want);
}

/// An out-of-tree plugin may be named wherever an in-tree one may, once it is in the
/// registry the configuration is loaded for; without it, the name is unknown.
#[rstest]
#[case::unknown_to_the_in_tree_registry(false, 2)]
#[case::known_to_a_registry_holding_it(true, 0)]
fn out_of_tree_plugin_is_known_through_the_registry(
    #[case] registered: bool,
    #[case] want_errors: usize,
) {
    let mut registry = plugins::in_tree_registry();
    if registered {
        registry.insert("NodeNumber", std::sync::Arc::new(plugins::queuesort::new));
    }
    let text = format!(
        "{HEADER}profiles:\n- plugins:\n    score:\n      enabled: [{{name: NodeNumber}}]\n  pluginConfig:\n  - name: NodeNumber\n"
    );
    let errors = load_str_with(&text, "test.yaml", &registry)
        .err()
        .map(|e| e.field_errors().to_vec())
        .unwrap_or_default();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    let want: Vec<&str> = [
        "profiles[0].plugins.score.enabled[0]",
        "profiles[0].pluginConfig[0]",
    ]
    .into_iter()
    .take(want_errors)
    .collect();
    assert_eq!(paths, want);
}

#[rstest]
#[case::leader_election_off_skips_its_checks(
    "leaderElection:\n  leaderElect: false\n  leaseDuration: 1s\n  renewDeadline: 10s\n  resourceLock: configmaps\n"
)]
#[case::unimplemented_upstream_plugins_are_accepted(
    "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: PodTopologySpread, weight: 4}]\n  pluginConfig:\n  - name: DefaultPreemption\n    args: {minCandidateNodesPercentage: 20}\n"
)]
#[case::zero_weight_is_accepted(
    "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 0}]\n"
)]
#[case::weight_above_100_is_accepted_as_upstream_does(
    "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 1000}]\n"
)]
#[case::unknown_disabled_plugin_is_ignored_as_upstream_does(
    "profiles:\n- plugins:\n    score:\n      disabled: [{name: SelectorSpread}]\n"
)]
#[case::percentage_zero_is_adaptive("percentageOfNodesToScore: 0\n")]
#[case::extended_resource_in_a_vendor_domain(
    "extenders:\n- urlPrefix: http://a\n  managedResources: [{name: vendor.example.com/fpga-1}]\n"
)]
fn valid_edge_cases_are_accepted(#[case] body: &str) {
    assert_eq!(load(body).map(|_| ()).map_err(|e| e.to_string()), Ok(()));
}

// --- Decoding errors -----------------------------------------------------------------------

#[rstest]
#[case::type_error_names_the_field(
    &format!("{HEADER}parallelism: \"x\"\n"),
    vec![err("parallelism", "invalid type: string \"x\", expected i32 at line 3 column 14")]
)]
#[case::nested_type_error_names_the_field(
    &format!("{HEADER}profiles:\n- plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: heavy\n"),
    vec![err("profiles[0].plugins.score.enabled[0].weight", "invalid type: string \"heavy\", expected i32 at line 8 column 17")]
)]
#[case::out_of_range_integer(
    &format!("{HEADER}parallelism: 99999999999\n"),
    vec![err("parallelism", "invalid value: integer `99999999999`, expected i32 at line 3 column 14")]
)]
#[case::unknown_field(
    &format!("{HEADER}healthzBindAddress: 0.0.0.0:10251\n"),
    vec![err("healthzBindAddress", "unknown field `healthzBindAddress`, expected one of `apiVersion`, `kind`, `parallelism`, `leaderElection`, `clientConnection`, `enableProfiling`, `enableContentionProfiling`, `percentageOfNodesToScore`, `podInitialBackoffSeconds`, `podMaxBackoffSeconds`, `profiles`, `extenders`, `delayCacheUntilActive` at line 3 column 1")]
)]
#[case::nested_unknown_field(
    &format!("{HEADER}profiles:\n- schedulerName: a\n  plugin: {{}}\n"),
    vec![err("profiles[0].plugin", "unknown field `plugin`, expected one of `schedulerName`, `percentageOfNodesToScore`, `plugins`, `pluginConfig` at line 5 column 3")]
)]
#[case::bad_duration(
    &format!("{HEADER}leaderElection:\n  leaseDuration: 15\n"),
    vec![err("leaderElection.leaseDuration", "missing unit in duration \"15\" at line 4 column 18")]
)]
#[case::wrong_api_version(
    "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\nhealthzBindAddress: 0.0.0.0:10251\n",
    vec![err("apiVersion", "Unsupported value: \"kubescheduler.config.k8s.io/v1beta3\": supported values: \"kubescheduler.config.k8s.io/v1\"")]
)]
#[case::wrong_kind(
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n",
    vec![err("kind", "Unsupported value: \"KubeProxyConfiguration\": supported values: \"KubeSchedulerConfiguration\"")]
)]
#[case::missing_kind(
    "apiVersion: kubescheduler.config.k8s.io/v1\nparallelism: 4\n",
    vec![err("kind", "Required value: must be \"KubeSchedulerConfiguration\"")]
)]
#[case::empty_file(
    "# nothing here\n",
    vec![
        err("apiVersion", "Required value: must be \"kubescheduler.config.k8s.io/v1\""),
        err("kind", "Required value: must be \"KubeSchedulerConfiguration\""),
    ]
)]
#[case::not_a_mapping("- a\n- b\n", vec![err("", "invalid type: sequence, expected struct KubeSchedulerConfiguration")])]
#[case::json_type_error(
    "{\"apiVersion\": \"kubescheduler.config.k8s.io/v1\", \"kind\": \"KubeSchedulerConfiguration\", \"profiles\": [{\"schedulerName\": 1}]}",
    vec![err("profiles[0].schedulerName", "invalid type: integer `1`, expected a string at line 1 column 119")]
)]
#[case::json_trailing_text(
    "{\"apiVersion\": \"kubescheduler.config.k8s.io/v1\", \"kind\": \"KubeSchedulerConfiguration\"} {}",
    vec![err("", "trailing characters at line 1 column 88")]
)]
fn undecodable_config_is_refused_with_the_field_path(
    #[case] text: &str,
    #[case] want: Vec<FieldError>,
) {
    let got = load_str(text, "test.yaml").map_err(|e| e.field_errors().to_vec());
    assert_eq!(got.map(|_| ()), Err(want));
}

#[test]
fn errors_display_one_per_line_with_the_file() {
    let got = load_str(
        &format!("{HEADER}parallelism: 0\npercentageOfNodesToScore: 101\n"),
        "/etc/kubesched/config.yaml",
    )
    .map_err(|e| e.to_string());
    assert_eq!(
        got.map(|_| ()),
        Err("/etc/kubesched/config.yaml: parallelism: Invalid value: 0: should be an integer value greater than zero\n\
             /etc/kubesched/config.yaml: percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"
            .to_string())
    );
}

#[rstest]
#[case::whole_args("", "profiles[1].pluginConfig[2].args")]
#[case::field(
    "scoringStrategy.type",
    "profiles[1].pluginConfig[2].args.scoringStrategy.type"
)]
#[case::index("[0].name", "profiles[1].pluginConfig[2].args[0].name")]
fn plugin_args_errors_are_placed_under_their_plugin_config(
    #[case] args_path: &str,
    #[case] want: &str,
) {
    let got = FieldError::plugin_args(1, 2, framework::ArgsError::new(args_path, "bad"));
    assert_eq!(got, err(want, "bad"));
}

// --- Plugin names --------------------------------------------------------------------------

#[test]
fn every_default_plugin_is_known() {
    let known = known_plugins();
    let unknown: Vec<String> = default_plugins()
        .multi_point
        .enabled
        .into_iter()
        .map(|p| p.name)
        .filter(|n| !known.contains(n.as_str()))
        .collect();
    assert_eq!(unknown, Vec::<String>::new());
}

#[test]
fn unimplemented_plugins_are_not_in_the_registry() {
    let registry = plugins::in_tree_registry();
    let both: Vec<&str> = unimplemented_upstream_plugins()
        .iter()
        .copied()
        .filter(|n| registry.contains_key(n))
        .collect();
    assert_eq!(both, Vec::<&str>::new());
}

// --- Go durations --------------------------------------------------------------------------

#[rstest]
#[case::seconds("15s", Ok(secs(15)))]
#[case::minutes_and_seconds("1m30s", Ok(secs(90)))]
#[case::fraction_of_an_hour("1.5h", Ok(secs(5400)))]
#[case::milliseconds("250ms", Ok(Duration::from_millis(250)))]
#[case::micro_sign("3µs", Ok(Duration::from_micros(3)))]
#[case::greek_mu("3μs", Ok(Duration::from_micros(3)))]
#[case::us("3us", Ok(Duration::from_micros(3)))]
#[case::nanoseconds("7ns", Ok(Duration::from_nanos(7)))]
#[case::leading_dot(".5s", Ok(Duration::from_millis(500)))]
#[case::trailing_dot("5.s", Ok(secs(5)))]
#[case::plus_sign("+2s", Ok(secs(2)))]
#[case::bare_zero("0", Ok(Duration::ZERO))]
#[case::negative_zero("-0s", Ok(Duration::ZERO))]
#[case::several_units("1h2m3s4ms", Ok(Duration::from_millis(3_723_004)))]
#[case::empty("", Err("invalid duration \"\"".to_string()))]
#[case::number_without_unit("15", Err("missing unit in duration \"15\"".to_string()))]
#[case::unknown_unit("15x", Err("unknown unit \"x\" in duration \"15x\"".to_string()))]
#[case::days_are_not_a_unit("1d", Err("unknown unit \"d\" in duration \"1d\"".to_string()))]
#[case::unit_without_number("s", Err("invalid duration \"s\"".to_string()))]
#[case::lone_dot(".s", Err("invalid duration \".s\"".to_string()))]
#[case::space_inside("1 s", Err("unknown unit \" s\" in duration \"1 s\"".to_string()))]
#[case::negative("-5s", Err("invalid duration \"-5s\": a duration here cannot be negative".to_string()))]
#[case::beyond_go_range("2562048h", Err("invalid duration \"2562048h\"".to_string()))]
#[case::huge_number("99999999999999999999999999999999999999999s", Err("invalid duration \"99999999999999999999999999999999999999999s\"".to_string()))]
fn go_durations_parse_as_go_parses_them(
    #[case] text: &str,
    #[case] want: Result<Duration, String>,
) {
    assert_eq!(parse_go_duration(text), want);
}

#[rstest]
#[case::zero(Duration::ZERO, "0s")]
#[case::nanoseconds(Duration::from_nanos(7), "7ns")]
#[case::microseconds(Duration::from_nanos(1_500), "1.5µs")]
#[case::milliseconds(Duration::from_millis(250), "250ms")]
#[case::seconds(secs(15), "15s")]
#[case::fractional_seconds(Duration::from_millis(2_500), "2.5s")]
#[case::minutes(secs(90), "1m30s")]
#[case::whole_minute(secs(60), "1m0s")]
#[case::hours(secs(3_600), "1h0m0s")]
#[case::everything(Duration::from_millis(3_723_004), "1h2m3.004s")]
fn go_durations_format_as_go_formats_them(#[case] d: Duration, #[case] want: &str) {
    assert_eq!(
        (format_go_duration(d), parse_go_duration(want)),
        (want.to_string(), Ok(d))
    );
}
