//! `kubesched`: a Kubernetes scheduler, kube-scheduler rebuilt in Rust, as a library.
//!
//! [`SchedulerCommand`] is the whole command line: it parses flags, loads files, sets up
//! logging and maps errors to exit codes (2 for invalid input or configuration, 1 for
//! anything else); the work is done by the `scheduler` crate. The `kubesched` binary is
//! `SchedulerCommand::new().run()`. A custom scheduler, as upstream's users build one with
//! `app.NewSchedulerCommand(app.WithPlugin(...))`, adds its plugins with
//! [`SchedulerCommand::with_plugin`] and gets every subcommand and flag, with configuration
//! files that may name those plugins (docs/plugins.md).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

mod load;
mod scenario;

/// mimalloc rather than glibc's malloc: the API server, the informers and the scheduler
/// allocate and free many small objects across threads, where glibc's arenas spent a fifth
/// of the benchmark's API-side time growing and consolidating the heap (docs/performance.md).
///
/// Built with mimalloc's `no_thp` (the workspace's Cargo.toml): it does not ask for
/// transparent huge pages. mimalloc returns memory freed for a second to the OS, and with
/// huge pages each later touch of such memory faults in and zeroes 2 MiB again; through the
/// API the benchmark spent about 6 % of its CPU there. Without them the process faults more,
/// but 4 KiB at a time, and its peak RSS is 40–50 MiB lower. On a host whose THP setting is
/// `always` (not `madvise`) the kernel may still use huge pages; `MIMALLOC_ALLOW_THP=0` in
/// the environment turns them off for the process there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use scheduler::app;
use scheduler::client::leader::LeaderElectionConfig;
use scheduler::config::{self, ConfigError, KubeSchedulerConfiguration};
use scheduler::simulate::capacity::{self, CapacityError, CapacityOptions};
use scheduler::simulate::{self, ClusterInput, InputError};
use scheduler::simulate::{SimulateError, Simulation};
use scheduler::SchedulerBuilder;

/// What a plugin author writes against: the plugin API, and the registry types.
pub use framework;
pub use plugins::{Factory, Registry, RegistryError};

#[derive(Parser, Debug)]
#[command(
    name = "kubesched",
    version,
    about = "A Kubernetes scheduler: upstream kube-scheduler rebuilt plugin for plugin, with an offline simulator",
    long_about = None,
)]
struct Cli {
    /// Log verbosity: 0 warnings, 1 info, 2 debug, 3+ trace (logs go to stderr).
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0)]
    verbosity: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Schedule the pending pods of a cluster snapshot offline and explain every decision.
    ///
    /// Reads Nodes, Pods and Namespaces from YAML or JSON files (a `v1 List` as printed by
    /// `kubectl get nodes,pods,namespaces -A -o yaml`, multi-document YAML, or single
    /// objects). Pods with spec.nodeName are running there; the others are scheduled one by
    /// one in queue order, each placement applied before the next. Nothing is written to
    /// any cluster by kubesched itself.
    ///
    /// The configuration's HTTP extenders are called live, as the scheduler calls them:
    /// filter and prioritize (their verdicts and scores are shown per node beside the
    /// plugins'), preempt, and bind (a binding extender really binds the pod wherever it
    /// binds pods; the report names it).
    ///
    /// With --capacity POD.yaml, answers "how many more of this pod fit?" (cluster-capacity's
    /// question): the snapshot's pending pods are scheduled first, then copies of the pod
    /// (named <name>-0, <name>-1, ...; its spec.nodeName is ignored) one at a time, each
    /// placed before the next, until one does not fit or --max-replicas are placed. The pod's
    /// schedulerName picks the profile. Copies never preempt: nothing is evicted, and the
    /// FailedScheduling message that stopped them is the one the scheduler prints without
    /// preemption. Prints how many fit, how many went to each node, and that message.
    ///
    /// Examples:
    ///   kubectl get nodes,pods,namespaces -A -o yaml > cluster.yaml
    ///   kubesched simulate -f cluster.yaml
    ///   kubesched simulate -f cluster.yaml -f new-pods.yaml --config binpack.yaml -o json
    ///   kubesched simulate -f examples/cluster.yaml --capacity examples/web-pod.yaml
    ///     5 more replicas fit; then: 0/4 nodes are available: 1 node(s) had untolerated
    ///     taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu.
    ///   kubesched simulate -f cluster.yaml --capacity pod.yaml --max-replicas 100 -o json
    ///
    /// Exit status: 0 when the simulation ran (even if pods stay pending), 2 when an input
    /// file or the configuration is invalid, or the --capacity pod could never be scheduled
    /// (no profile for its schedulerName, scheduling gates).
    #[command(verbatim_doc_comment)]
    Simulate(SimulateArgs),
    /// Run a local Kubernetes-compatible API server (in memory, or kept in --data-dir) that
    /// kubectl and other clients use unmodified.
    ///
    /// Prints the address it listens on. With --kubeconfig, writes a kubeconfig pointing at
    /// it, for `kubectl --kubeconfig PATH` or KUBECONFIG=PATH.
    ///
    /// Examples:
    ///   kubesched apiserver --listen 127.0.0.1:0 --kubeconfig /tmp/kubesched.kubeconfig
    ///   KUBECONFIG=/tmp/kubesched.kubeconfig kubectl get nodes,pods -o wide
    ///   kubesched apiserver --data-dir ./state --simulate-kubelets
    ///   kubesched apiserver --tls-cert-file tls.crt --tls-private-key-file tls.key \
    ///     --token-file tokens.csv --kubeconfig /tmp/kubesched.kubeconfig
    ///   kubesched apiserver --cert-dir ./certs --token-file tokens.csv \
    ///     --kubeconfig /tmp/kubesched.kubeconfig
    ///
    /// Exit status: 2 when a flag, the token file or the TLS files are invalid, when
    /// another server holds --data-dir, or when --data-dir is damaged or lacks a file it
    /// needs (--data-dir-repair then starts from what is left).
    #[command(verbatim_doc_comment)]
    Apiserver(ApiserverArgs),
    /// The local API server and the scheduler in one process: a working cluster API where
    /// pods get scheduled, for trying, learning and testing.
    ///
    /// Starts the API server (with the kubelet stand-in: nodes Ready, bound pods Running
    /// once their claims are Bound; the PersistentVolume controller and provisioner
    /// stand-ins: claims bind to volumes, and claims of a class whose provisioner is a
    /// --provisioner get a volume; a default StorageClass `standard`, WaitForFirstConsumer,
    /// provisioner rancher.io/local-path, unless a class is the default already; the
    /// ReplicaSet, Deployment, DaemonSet, StatefulSet and Job controllers and the garbage
    /// collector; a Job's pods complete after --job-pod-completion; for DRA, the
    /// resourceclaim controller and a device driver stand-in publishing ResourceSlices for
    /// nodes annotated kubesched.dev/devices, see examples/dra-gpu.yaml), loads the
    /// objects of -f files through the API, and runs the scheduler against it
    /// exactly as `kubesched run` would, with the web view on (every pod's last scheduling
    /// attempt, explained per node and plugin, at http://127.0.0.1:10259/; --web=false
    /// turns it off). Prints where both listen and how to point kubectl at them. Ctrl-C
    /// stops everything. The scheduler's client talks only to this process,
    /// so its clientConnection qps/burst are 5000/10000 unless --config sets them (`run`
    /// keeps upstream's 50/100, meant to protect a shared API server).
    ///
    /// Examples:
    ///   kubesched up -f examples/cluster.yaml --kubeconfig /tmp/kubesched.kubeconfig
    ///   export KUBECONFIG=/tmp/kubesched.kubeconfig; kubectl get pods -o wide
    ///   kubesched up --data-dir ./state --config examples/binpack.yaml
    ///   kubesched up --no-scheduler --kubeconfig /tmp/kubesched.kubeconfig   # bring your own
    #[command(verbatim_doc_comment)]
    Up(UpArgs),
    /// The scheduler alone, against any Kubernetes API server: a second scheduler on a real
    /// cluster, deployed like kube-scheduler (see deploy/ and docs/deploy.md).
    ///
    /// Watches pods, nodes and the objects scheduling reads, schedules the pending pods whose
    /// spec.schedulerName is one of the configuration's profiles, and binds them. Serves
    /// /healthz, /livez, /readyz and /metrics on --bind-address:--port, and with --web the
    /// web view of its decisions (off by default: it costs cycle time). With leader election
    /// (the configuration's default, as kube-scheduler), only the replica holding the Lease
    /// schedules. On a cluster without resource.k8s.io/v1 (before Kubernetes 1.34), its
    /// kinds are not watched and one warning says pods with resource claims stay
    /// unschedulable.
    ///
    /// Examples:
    ///   kubesched run --kubeconfig ~/.kube/config --config kubesched.yaml
    ///   kubesched run --kubeconfig /tmp/kubesched.kubeconfig --leader-elect=false --port 0
    ///   kubesched run --kubeconfig ~/.kube/config --web --simulator-annotations
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
    /// Run upstream scheduler_perf's workloads against kubesched and report throughput.
    ///
    /// Each workload creates upstream's nodes (4 CPU / 32Gi / 110 pods) and initial pods,
    /// waits until those are bound, then creates the measured pods and samples every second
    /// how many are bound: pods/s average and p50/p90/p99 (upstream's SchedulingThroughput),
    /// scheduling-attempt latency, peak RSS, and upstream's floor for the workload.
    ///
    /// Modes: `http` (the default) starts the local API server in this process, creates the
    /// objects through it with kube-rs, and schedules with `kubesched run`'s own code path
    /// (informers, the binding subresource; client QPS and burst raised to 5,000 as
    /// upstream's benchmark does, or set by --client-qps/--client-burst); `in-process`
    /// drives the scheduler directly (an in-memory cluster, the default profile, the real
    /// plugins). --config and --feature-gates set up kubesched's scheduler in both modes
    /// (your profile, your plugins when built as a library).
    ///
    /// --scheduler-command "CMD" is a third mode (`external` in the report; not a --mode
    /// value, since it takes the command): the local API server as in `http`, and the
    /// scheduler is CMD, run under `sh -c` once the nodes exist. In CMD, {kubeconfig} is the
    /// path of a kubeconfig for the server and {config} that of a KubeSchedulerConfiguration
    /// (that kubeconfig, leader election off, clientConnection qps/burst 5000 as upstream's
    /// scheduler_perf sets them or as --client-qps/--client-burst say, one profile for
    /// default-scheduler, the bench pods' scheduler); KUBECONFIG is set too. It is ready
    /// once it has bound a probe pod. Binds are counted by a watch on the API server; the
    /// report adds the CPU-seconds of its process tree over the measured pods and gives its
    /// peak RSS; no attempt latency. Its output goes to a temporary file, quoted if it exits
    /// during the run; it is stopped (SIGTERM, then SIGKILL after 10 s) at the end of each
    /// workload. --compare runs each workload in `http` mode first, then with the command:
    /// one table, one row each.
    ///
    /// Examples:
    ///   kubesched bench --workload SchedulingBasic
    ///   kubesched bench --mode in-process --workload all -o json > bench.json
    ///   kubesched bench --mode in-process --workload TopologySpreading --nodes 500 --pods 1000
    ///   kubesched bench --mode in-process --workload SchedulingBasic \
    ///     --config my-profile.yaml --feature-gates OpportunisticBatching=false
    ///   kubesched bench --workload SchedulingBasic/5000Nodes_50000Pods --client-qps 50000
    ///   kubesched bench --workload SchedulingBasic --compare \
    ///     --scheduler-command "kube-scheduler --config={config} --secure-port=0"
    ///   kubesched bench --workload SchedulingBasic \
    ///     --scheduler-command "kubesched run --config {config} --port 0"
    ///
    /// Exit status: 0 when every workload ran (skipped ones included), 1 when one timed
    /// out, 2 for invalid flags or a configuration that cannot run the workloads.
    #[command(verbatim_doc_comment)]
    Bench(BenchArgs),
    /// Scripted scenarios: apply objects, change them, wait for the scheduler and check
    /// where pods went, each step reported with its outcome (docs/scenarios.md).
    #[command(subcommand)]
    Scenario(ScenarioCommand),
}

#[derive(Subcommand, Debug)]
enum ScenarioCommand {
    /// Run scenario files (kind: Scenario), one after the other, and report each step.
    ///
    /// Each scenario runs on a fresh cluster in this process (the API server, controllers
    /// and kubelet stand-in of `up`, in memory on a free port, with this binary's scheduler
    /// and the scenario's schedulerConfig), or, with --kubeconfig, in a namespace of its own
    /// on that cluster (deleted at the end, with the cluster-scoped objects it applied),
    /// where the cluster's scheduler schedules. Steps: apply, patch, delete, scale, wait,
    /// expect, sleep. The report gives each step's outcome, then each pod of the scenario
    /// with the scheduler's explanation: on the embedded cluster its own last attempt for
    /// the pod; with --kubeconfig, as simulate explains it from the cluster at the end (a
    /// bound pod as if it were pending). The format: docs/scenarios.md.
    ///
    /// Examples:
    ///   kubesched scenario run examples/scenarios/*.yaml
    ///   kubesched scenario run examples/scenarios/gated-pod.yaml -o json
    ///   kubesched scenario run my-scenario.yaml --kubeconfig ~/.kube/config
    ///
    /// Exit status: 0 when every step of every scenario passed, 1 when a step failed (the
    /// error names the scenario, the step, what was expected and what happened), 2 when a
    /// file is invalid (its path, the field and what was expected; nothing is run).
    #[command(verbatim_doc_comment)]
    Run(ScenarioRunArgs),
}

#[derive(clap::Args, Debug)]
struct ScenarioRunArgs {
    /// Scenario files (YAML).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Run on this cluster instead of a fresh one in this process.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = scenario::Format::Text)]
    output: scenario::Format,
}

/// kube-scheduler's serving and leader election flags, shared by `run` and `up`.
#[derive(clap::Args, Debug)]
struct SchedulerFlags {
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file, as given to
    /// kube-scheduler's --config. Without it, upstream's default profile is used.
    #[arg(long, value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// Address to serve /healthz, /livez, /readyz, /metrics and the web view on (plain
    /// HTTP).
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    bind_address: std::net::IpAddr,
    /// Port for /healthz, /livez, /readyz, /metrics and the web view; 0 picks a free port.
    #[arg(long, value_name = "PORT", default_value_t = scheduler::serve::DEFAULT_PORT)]
    port: u16,
    /// Seed for breaking ties between equally scored nodes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Record each pod's last scheduling attempt (every plugin's verdict and score per
    /// node) and serve the web view at / and its JSON at /api/ on the serving port.
    /// Default: on under `up`, off under `run` (explaining each cycle costs time; see
    /// docs/performance.md).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    web: Option<bool>,
    /// Pods whose last attempt --web keeps; past it, the oldest attempt is dropped.
    #[arg(long, value_name = "N", default_value_t = scheduler::decisions::DEFAULT_MAX_PODS)]
    web_max_pods: usize,
    /// Write each attempt onto its pod as kube-scheduler-simulator's annotations
    /// (kube-scheduler-simulator.sigs.k8s.io/filter-result, score-result, finalscore-result,
    /// selected-node, ...), for tools built for the simulator. Costs an API write per
    /// attempt whose annotations changed. Implies --web.
    #[arg(long)]
    simulator_annotations: bool,
    /// Feature gates as kube-scheduler takes them: `Name=bool,...`. Known:
    /// OpportunisticBatching (default true: consecutive pods with the same scheduling
    /// signature reuse the previous cycle's filter and score work; cycles recorded for
    /// --web never batch).
    #[arg(long, value_name = "GATES", default_value = "", value_parser = feature_gates)]
    feature_gates: scheduler::features::FeatureGates,
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// The workload to run (upstream's test case name), or `all`.
    #[arg(long, value_name = "NAME", default_value = "all",
          value_parser = clap::builder::PossibleValuesParser::new(bench::workload::names_and_all()))]
    workload: String,
    /// How pods reach the scheduler: through the local API server (http), or directly.
    #[arg(long, value_enum, default_value_t = BenchMode::Http)]
    mode: BenchMode,
    /// Schedule with this command, another process, against the local API server
    /// ({kubeconfig} and {config} are replaced by the paths of generated files).
    #[arg(long, value_name = "CMD", conflicts_with = "mode")]
    scheduler_command: Option<String>,
    /// With --scheduler-command: run each workload with kubesched in `http` mode too, and
    /// report both.
    #[arg(long, requires = "scheduler_command")]
    compare: bool,
    /// Record every attempt, explained, as `up --web` does (to measure what it costs).
    #[arg(long)]
    record_decisions: bool,
    /// A KubeSchedulerConfiguration for kubesched's scheduler (in-process and http
    /// modes; with --scheduler-command, only with --compare). It needs a profile for
    /// default-scheduler, which the workloads' pods name. Without it, upstream's default
    /// profile. In http mode, clientConnection qps/burst are --client-qps and
    /// --client-burst whatever it says, and leader election is off.
    #[arg(long, value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// The scheduler's API client QPS limit in http mode and in the configuration written
    /// for --scheduler-command. Default 5000, upstream scheduler_perf's, under which its
    /// floors were measured; a higher limit shows what the API path does without it.
    #[arg(long, value_name = "QPS", value_parser = positive_qps)]
    client_qps: Option<f32>,
    /// The scheduler's API client burst, as --client-qps (default: the QPS).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    client_burst: Option<i32>,
    /// Feature gates of kubesched's scheduler, as for `run`: `Name=bool,...`, e.g.
    /// OpportunisticBatching=false.
    #[arg(long, value_name = "GATES", default_value = "", value_parser = feature_gates)]
    feature_gates: scheduler::features::FeatureGates,
    /// Nodes of the workload's main node group (default: upstream's size).
    #[arg(long, value_name = "N")]
    nodes: Option<usize>,
    /// Initial pods per initial pod group (default: upstream's size).
    #[arg(long, value_name = "N")]
    init_pods: Option<usize>,
    /// Measured pods (default: upstream's size).
    #[arg(long, value_name = "N")]
    pods: Option<usize>,
    /// Time budget of each workload, in seconds; a workload still running then is reported
    /// as timed out.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
    /// Output format. Default: table on a terminal, json otherwise.
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<OutputFormat>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BenchMode {
    Http,
    InProcess,
    /// `--scheduler-command`, not a `--mode` value.
    #[value(skip)]
    External,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    scheduler: SchedulerFlags,
    /// The kubeconfig of the cluster. Default: the configuration's
    /// clientConnection.kubeconfig, then $KUBECONFIG, ~/.kube/config, in-cluster.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Elect a leader among replicas on a Lease before scheduling (overrides the
    /// configuration's leaderElection.leaderElect, default true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    leader_elect: Option<bool>,
    /// How long other replicas wait before taking over a lease that is not renewed
    /// (default 15s).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    leader_elect_lease_duration: Option<std::time::Duration>,
    /// How long the leader keeps trying to renew before it stops scheduling (default 10s).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    leader_elect_renew_deadline: Option<std::time::Duration>,
    /// Pause between attempts to acquire or renew the lease (default 2s).
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    leader_elect_retry_period: Option<std::time::Duration>,
    /// The lock kind: only `leases` is supported.
    #[arg(long, value_name = "KIND")]
    leader_elect_resource_lock: Option<String>,
    /// Name of the Lease (default kube-scheduler).
    #[arg(long, value_name = "NAME")]
    leader_elect_resource_name: Option<String>,
    /// Namespace of the Lease (default kube-system).
    #[arg(long, value_name = "NAMESPACE")]
    leader_elect_resource_namespace: Option<String>,
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    #[command(flatten)]
    server: ApiserverFlags,
    /// A YAML or JSON file of objects to create once the API server is up (objects that
    /// already exist are left alone); repeat for several files.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Do not act as the nodes' kubelets (pods then stay Pending after binding). The
    /// PersistentVolume controller and provisioner stand-ins still run.
    #[arg(long)]
    no_kubelets: bool,
    /// Do not run kubesched's scheduler: the rest of the cluster runs, for another scheduler
    /// (upstream kube-scheduler, one built on it) pointed at the --kubeconfig file. The
    /// scheduler flags are then unused.
    #[arg(long)]
    no_scheduler: bool,
    #[command(flatten)]
    scheduler: SchedulerFlags,
}

fn go_duration(s: &str) -> Result<std::time::Duration, String> {
    config::parse_go_duration(s).map_err(|e| e.to_string())
}

#[derive(clap::Args, Debug)]
struct ApiserverFlags {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    listen: std::net::SocketAddr,
    /// Write a kubeconfig pointing at the server to this path.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Keep the state in this directory: every write is logged there and fsynced before it
    /// is acknowledged or shown to watchers, and the state is recovered from it on start.
    /// Start refuses (exit 2) a directory whose log is damaged before its end or that lacks
    /// a file its manifest names. One server per directory (a lock on DIR/lock; a second
    /// one exits 2). Without it, the state is in memory only.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Start from what is left of a damaged --data-dir instead of refusing it: the last log
    /// is copied to FILE.corrupt-<unix time> and cut at its first damaged record (the
    /// records from there on are lost), and missing files are skipped, each with a warning.
    #[arg(long, requires = "data_dir")]
    data_dir_repair: bool,
    /// Require `Authorization: Bearer <token>` on every request but /healthz, /livez,
    /// /readyz and /version, with the tokens in this file (upstream's --token-auth-file CSV,
    /// `token,user,uid,"groups"`, or one token per line). --kubeconfig then holds the first.
    /// kubectl sends tokens only over TLS: use it with --tls-cert-file.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Serve HTTPS with this PEM certificate (chain); needs --tls-private-key-file.
    /// --kubeconfig then writes an https:// server with the certificate as
    /// certificate-authority-data, so kubectl verifies it.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Serve HTTPS with a self-signed certificate kept in this directory (apiserver.crt,
    /// apiserver.key): made on the first start for 127.0.0.1, localhost and the --listen
    /// address, reused after. --kubeconfig then carries it as certificate-authority-data.
    #[arg(long, value_name = "DIR", conflicts_with = "tls_cert_file")]
    cert_dir: Option<PathBuf>,
    /// Browser origins allowed to call the API, as regular expressions matched anywhere in
    /// the Origin header (anchor them: '^https://dash\.example$'); comma-separated or
    /// repeated. A request with any other Origin, which browsers send from web pages, gets
    /// 403; kubectl and other clients send none.
    #[arg(long, value_name = "REGEXP", value_delimiter = ',')]
    cors_allowed_origins: Vec<String>,
    /// Host names clients may use in the Host header besides localhost and IP addresses
    /// (any other name gets 403, which stops DNS rebinding); comma-separated or repeated.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// API groups not to serve (e.g. resource.k8s.io), as on a cluster without them:
    /// discovery leaves them out and their paths answer 404. Comma-separated or repeated.
    #[arg(long, value_name = "GROUP", value_delimiter = ',')]
    disable_api_group: Vec<String>,
    /// Open connections at most; at the limit the connection idle longest is closed for
    /// each new one. Keep it below `ulimit -n`. A connection must finish a request head
    /// within 32s of its start (of its first byte after a response) and is closed after
    /// 90s with no request.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_connections: usize,
    /// A provisioner name (a StorageClass's `provisioner`) the provisioner stand-in serves:
    /// it creates a PersistentVolume for each claim the PersistentVolume controller hands
    /// to it (node affinity on the selected node's hostname for rancher.io/local-path, on
    /// its topology.kubernetes.io/zone otherwise). Repeat for several; giving any replaces
    /// the default.
    #[arg(long = "provisioner", value_name = "NAME", default_value = apiserver::provisioner::DEFAULT_PROVISIONER)]
    provisioners: Vec<String>,
    /// How long a Job's pod runs before the kubelet stand-in completes it (phase
    /// Succeeded, containers terminated with exit code 0), as KWOK's pod-complete stage
    /// does; a pod's annotation pod-complete.stage.kwok.x-k8s.io/delay overrides it.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = go_duration)]
    job_pod_completion: std::time::Duration,
}

#[derive(clap::Args, Debug)]
struct ApiserverArgs {
    #[command(flatten)]
    server: ApiserverFlags,
    /// Act as the nodes' kubelets and the volume controllers: nodes become Ready, and pods
    /// bound to a node become Running with Ready conditions once their claims are Bound
    /// (the status transitions KWOK performs); the PersistentVolume controller stand-in binds
    /// claims to volumes and the provisioner stand-in creates volumes for claims of the
    /// --provisioner names; a default StorageClass `standard` (WaitForFirstConsumer,
    /// rancher.io/local-path) is created unless a class is the default already. The
    /// ReplicaSet, Deployment, DaemonSet, StatefulSet and Job controllers and the garbage
    /// collector run too, as under `up`, and a Job's running pods complete after
    /// --job-pod-completion. For DRA, the resourceclaim controller makes claims from pods'
    /// ResourceClaimTemplates, a node annotated kubesched.dev/devices:
    /// "gpu.example.com=2,model=a100,memory=80Gi" gets a ResourceSlice with those devices, and
    /// a pod starts once its claims are reserved for it.
    #[arg(long)]
    simulate_kubelets: bool,
}

#[derive(clap::Args, Debug)]
struct SimulateArgs {
    /// A YAML or JSON file of objects; repeat for several files.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file, as given to
    /// kube-scheduler's --config. Without it, upstream's default profile is used.
    #[arg(long, value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// Output format. Default: table on a terminal, json otherwise.
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<OutputFormat>,
    /// Seed for breaking ties between equally scored nodes; the same input and seed give
    /// the same placements.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A file with one Pod: report how many more copies of it fit, after the snapshot's
    /// pending pods.
    #[arg(long, value_name = "POD")]
    capacity: Option<PathBuf>,
    /// With --capacity: stop once this many copies are placed.
    #[arg(long, value_name = "N", requires = "capacity",
          value_parser = clap::value_parser!(u64).range(1..))]
    max_replicas: Option<u64>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OutputFormat {
    Json,
    Table,
}

/// kubesched's command line, optionally with out-of-tree plugins: every subcommand and
/// flag of `kubesched`, with configuration files that may name the added plugins at any
/// extension point they implement.
///
/// Upstream: cmd/kube-scheduler/app (`NewSchedulerCommand` with `WithPlugin` options). The
/// added plugins are merged with the in-tree registry at start-up; a name that is already
/// registered is refused there (exit status 2).
///
/// ```no_run
/// use std::sync::Arc;
/// use kubesched::framework::{ArgsError, Handle, Plugin};
///
/// /// A plugin at no extension point yet: implement `as_score` and the like to give it one.
/// struct NodeNumber;
///
/// impl Plugin for NodeNumber {
///     fn name(&self) -> &'static str {
///         "NodeNumber"
///     }
/// }
///
/// fn new(_args: Option<&serde_json::Value>, _: &Handle) -> Result<Arc<dyn Plugin>, Vec<ArgsError>> {
///     Ok(Arc::new(NodeNumber))
/// }
///
/// fn main() -> std::process::ExitCode {
///     kubesched::SchedulerCommand::new()
///         .with_plugin("NodeNumber", new)
///         .run()
/// }
/// ```
#[derive(Default)]
pub struct SchedulerCommand {
    /// Out-of-tree plugins in the order they were added; duplicates are refused at start-up.
    plugins: Vec<(&'static str, Factory)>,
}

impl std::fmt::Debug for SchedulerCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.plugins.iter().map(|(n, _)| *n).collect();
        f.debug_struct("SchedulerCommand")
            .field("plugins", &names)
            .finish()
    }
}

impl SchedulerCommand {
    /// `kubesched` with the in-tree plugins only.
    pub fn new() -> Self {
        SchedulerCommand::default()
    }

    /// Adds an out-of-tree plugin: `factory` builds it from its `pluginConfig` args (absent
    /// when the configuration has none), once per profile that enables it. Errors the
    /// factory returns name fields below `args`; they are reported as configuration errors
    /// at `profiles[i].pluginConfig[j].args.<field>`. Upstream: WithPlugin.
    pub fn with_plugin<F>(mut self, name: &'static str, factory: F) -> Self
    where
        F: Fn(
                Option<&serde_json::Value>,
                &framework::Handle,
            )
                -> Result<std::sync::Arc<dyn framework::Plugin>, Vec<framework::ArgsError>>
            + Send
            + Sync
            + 'static,
    {
        self.plugins.push((name, std::sync::Arc::new(factory)));
        self
    }

    /// The registry the scheduler runs with: the in-tree plugins and the added ones. A name
    /// added twice, or the name of an in-tree plugin, is refused.
    pub fn registry(&self) -> Result<Registry, RegistryError> {
        let mut out_of_tree = Registry::new();
        for (name, factory) in &self.plugins {
            if out_of_tree.insert(name, factory.clone()).is_some() {
                return Err(RegistryError::AlreadyExists((*name).to_string()));
            }
        }
        let mut registry = plugins::in_tree_registry();
        plugins::registry::merge(&mut registry, out_of_tree)?;
        Ok(registry)
    }

    /// Parses the process's arguments and runs the subcommand; the exit status to return
    /// from `main`.
    pub fn run(self) -> ExitCode {
        self.run_from(std::env::args_os())
    }

    /// [`run`](Self::run) with the given arguments, the first being the program name.
    /// Invalid flags and `--help` print and exit the process, as for any clap command.
    pub fn run_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = Cli::parse_from(args);
        let registry = match self.registry() {
            Ok(r) => r,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(2);
            }
        };
        init_logging(cli.verbosity);
        let result = match cli.command {
            Command::Simulate(args) => run_simulate(args, &registry),
            Command::Apiserver(args) => run_apiserver(args),
            Command::Run(args) => run_scheduler(args, &registry),
            Command::Up(args) => run_up(args, &registry),
            Command::Bench(args) => run_bench(args, &registry),
            Command::Scenario(ScenarioCommand::Run(args)) => scenario::run_files(
                &args.files,
                args.kubeconfig.as_deref(),
                args.output,
                &registry,
            ),
        };
        exit_code(result)
    }
}

/// Prints the error chain of a failed subcommand and picks the exit status.
fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            if is_user_error(&err) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn is_user_error(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.is::<ConfigError>()
            || e.is::<InputError>()
            || e.is::<CapacityError>()
            || e.is::<load::LoadError>()
            || e.is::<UsageError>()
            || e.is::<scenario::format::InvalidScenario>()
            || matches!(
                e.downcast_ref::<SimulateError>(),
                Some(SimulateError::Config(_))
            )
            || matches!(
                e.downcast_ref::<app::RunError>(),
                Some(app::RunError::Config(_) | app::RunError::LeaderElection(_))
            )
            || e.downcast_ref::<apiserver::Error>()
                .is_some_and(apiserver::Error::is_user_error)
    })
}

/// A flag combination that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// A future that resolves on Ctrl-C (SIGINT) or SIGTERM (how Kubernetes stops a
/// container). The handlers are installed when this is called, not when the future is
/// first polled, so a signal that arrives while the server starts is not lost (and does
/// not kill the process with the default action). Must be called inside the runtime.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

/// Leader election settings: the configuration's, with the flags given on top.
fn leader_election(
    cfg: &KubeSchedulerConfiguration,
    args: &RunArgs,
) -> anyhow::Result<Option<LeaderElectionConfig>> {
    let le = &cfg.leader_election;
    if !args.leader_elect.unwrap_or_else(|| le.leader_elect()) {
        return Ok(None);
    }
    let lock = args
        .leader_elect_resource_lock
        .clone()
        .unwrap_or_else(|| le.resource_lock.clone());
    if !lock.is_empty() && lock != "leases" {
        return Err(UsageError(format!(
            "--leader-elect-resource-lock: {lock:?} is not supported: only \"leases\""
        ))
        .into());
    }
    let defaults = LeaderElectionConfig::default();
    let pick = |flag: Option<std::time::Duration>, cfg: std::time::Duration, d| {
        flag.or((!cfg.is_zero()).then_some(cfg)).unwrap_or(d)
    };
    let text = |flag: &Option<String>, cfg: &str, d: String| {
        flag.clone()
            .or_else(|| (!cfg.is_empty()).then(|| cfg.to_string()))
            .unwrap_or(d)
    };
    Ok(Some(LeaderElectionConfig {
        namespace: text(
            &args.leader_elect_resource_namespace,
            &le.resource_namespace,
            defaults.namespace,
        ),
        name: text(
            &args.leader_elect_resource_name,
            &le.resource_name,
            defaults.name,
        ),
        lease_duration: pick(
            args.leader_elect_lease_duration,
            le.lease_duration,
            defaults.lease_duration,
        ),
        renew_deadline: pick(
            args.leader_elect_renew_deadline,
            le.renew_deadline,
            defaults.renew_deadline,
        ),
        retry_period: pick(
            args.leader_elect_retry_period,
            le.retry_period,
            defaults.retry_period,
        ),
        ..defaults
    }))
}

/// Parses `--feature-gates`.
fn feature_gates(spec: &str) -> Result<scheduler::features::FeatureGates, String> {
    scheduler::features::FeatureGates::parse(spec).map_err(|e| e.to_string())
}

/// `web_default`: whether decisions are recorded (and the web view served) without --web.
fn run_options(
    cfg: KubeSchedulerConfiguration,
    source: String,
    flags: &SchedulerFlags,
    leader_election: Option<LeaderElectionConfig>,
    web_default: bool,
) -> app::RunOptions {
    let web = flags.simulator_annotations || flags.web.unwrap_or(web_default);
    app::RunOptions {
        config: cfg,
        config_source: source,
        bind_address: std::net::SocketAddr::new(flags.bind_address, flags.port),
        leader_election,
        seed: flags.seed,
        extra_metrics: None,
        decisions: web.then(|| {
            scheduler::decisions::Decisions::new(
                flags.web_max_pods,
                scheduler::decisions::DEFAULT_MAX_BYTES,
            )
        }),
        simulator_annotations: flags.simulator_annotations,
        feature_gates: flags.feature_gates,
    }
}

fn print_serving(started: &app::Started) {
    println!(
        "kubesched scheduler serving /healthz, /readyz, /metrics on http://{}",
        started.serving
    );
    if started.scheduler.decisions().is_some() {
        println!("kubesched web view on http://{}/", started.serving);
    }
}

fn run_scheduler(args: RunArgs, registry: &Registry) -> anyhow::Result<()> {
    let (cfg, source) = load_config(args.scheduler.config.as_ref(), registry)?;
    let le = leader_election(&cfg, &args)?;
    let kubeconfig = args.kubeconfig.clone().or_else(|| {
        let k = &cfg.client_connection.kubeconfig;
        (!k.is_empty()).then(|| PathBuf::from(k))
    });
    let options = run_options(cfg, source, &args.scheduler, le, false);
    runtime()?.block_on(async {
        let shutdown = shutdown_signal()?;
        let client = scheduler::client::connect(kubeconfig.as_deref())
            .await
            .context("connecting to the API server")?;
        app::run(client, options, registry, print_serving, shutdown).await?;
        Ok(())
    })
}

/// `up`'s client rate: its scheduler talks only to the API server in the same process, so
/// the limits that protect a shared kube-apiserver (50/100) would only slow it down.
const UP_CLIENT_QPS: f32 = 5000.0;
const UP_CLIENT_BURST: i32 = 10_000;

/// Raises `cfg`'s client limits to `up`'s unless the configuration file `written` (as
/// written, before defaulting) sets them.
fn up_client_limits(cfg: &mut KubeSchedulerConfiguration, written: Option<&str>) {
    let as_written = written.and_then(|text| config::decode(text).ok());
    let set = as_written.as_ref().map(|c| &c.client_connection);
    if set.is_none_or(|c| c.qps == 0.0) {
        cfg.client_connection.qps = UP_CLIENT_QPS;
    }
    if set.is_none_or(|c| c.burst == 0) {
        cfg.client_connection.burst = UP_CLIENT_BURST;
    }
}

fn run_up(args: UpArgs, registry: &Registry) -> anyhow::Result<()> {
    let (mut cfg, source) = load_config(args.scheduler.config.as_ref(), registry)?;
    let written = args
        .scheduler
        .config
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
        })
        .transpose()?;
    up_client_limits(&mut cfg, written.as_deref());
    let options = run_options(cfg, source, &args.scheduler, None, true);
    runtime()?.block_on(async {
        let shutdown = shutdown_signal()?;
        let (server, client) =
            start_local_cluster(server_config(&args.server, !args.no_kubelets, true)?).await?;
        println!("kubesched apiserver listening on {}", server.url());
        if let Some(path) = &args.server.kubeconfig {
            write_kubeconfig(path, &server)?;
        }
        if !args.files.is_empty() {
            let (created, existed) = load::load_files(&client, &args.files).await?;
            println!("loaded {created} objects ({existed} already there)");
        }
        let hint = match &args.server.kubeconfig {
            Some(p) => format!(
                "  export KUBECONFIG={}\n  kubectl get nodes,pods -o wide",
                p.display()
            ),
            None => format!("  kubectl --server {} get nodes,pods -o wide", server.url()),
        };
        if args.no_scheduler {
            println!("ready (no scheduler); try:\n{hint}\nCtrl-C stops the API server.");
            shutdown.await;
            server.shutdown().await;
            return Ok(());
        }
        let run = app::run(
            client,
            options,
            registry,
            |started| {
                print_serving(started);
                println!("ready; try:\n{hint}\nCtrl-C stops the API server and the scheduler.");
            },
            shutdown,
        )
        .await;
        server.shutdown().await;
        run?;
        Ok(())
    })
}

/// Starts the local API server and a client of it, as `up` and `scenario run` use them. The
/// client connects as any client would: through the server's own kubeconfig (its URL, and
/// its token and CA when it has them).
async fn start_local_cluster(
    config: apiserver::Config,
) -> anyhow::Result<(apiserver::Server, kube::Client)> {
    let server = apiserver::Server::start(config).await?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig())
        .context("the API server's own kubeconfig does not parse")?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("the API server's own kubeconfig is not usable")?;
    let client = kube::Client::try_from(config).context("building the API client")?;
    Ok((server, client))
}

fn init_logging(verbosity: u8) {
    let level = match verbosity {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // A program embedding the command may have set its own subscriber; that one stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The API server's configuration from its flags.
/// `local_cluster` runs the volume controller stand-ins and the workload controllers, and
/// creates the default StorageClass.
fn server_config(
    flags: &ApiserverFlags,
    simulate_kubelets: bool,
    local_cluster: bool,
) -> anyhow::Result<apiserver::Config> {
    Ok(apiserver::Config {
        listen: flags.listen,
        data_dir: flags.data_dir.clone(),
        data_dir_repair: flags.data_dir_repair,
        simulate_kubelets,
        job_pod_completion: flags.job_pod_completion,
        volume_controllers: local_cluster,
        workload_controllers: local_cluster,
        default_storage_class: local_cluster,
        provisioners: flags.provisioners.clone(),
        tokens: match &flags.token_file {
            Some(f) => apiserver::read_token_file(f).map_err(|e| apiserver::Error::TokenFile {
                path: f.clone(),
                source: e,
            })?,
            None => Vec::new(),
        },
        tls: match (
            &flags.tls_cert_file,
            &flags.tls_private_key_file,
            &flags.cert_dir,
        ) {
            (Some(cert), Some(key), _) => {
                Some(apiserver::TlsConfig::from_files(cert, key).map_err(apiserver::Error::from)?)
            }
            (None, None, Some(dir)) => {
                let mut hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
                let ip = flags.listen.ip();
                if !ip.is_loopback() && !ip.is_unspecified() {
                    hosts.push(ip.to_string());
                }
                Some(
                    apiserver::TlsConfig::self_signed_in(dir, &hosts)
                        .map_err(apiserver::Error::from)?,
                )
            }
            // clap requires both files or neither, and no --cert-dir with them.
            _ => None,
        },
        cors_allowed_origins: flags.cors_allowed_origins.clone(),
        allowed_hosts: flags.allowed_hosts.clone(),
        disabled_api_groups: flags.disable_api_group.clone(),
        max_connections: flags.max_connections,
        ..apiserver::Config::default()
    })
}

/// Writes the server's kubeconfig readable by its owner only (0600), as kubectl writes
/// its own: it may carry the bearer token. An existing file is narrowed to 0600 too.
fn write_kubeconfig(path: &std::path::Path, server: &apiserver::Server) -> anyhow::Result<()> {
    let context = || format!("writing kubeconfig {}", path.display());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(0o600);
        let file = options.open(path).with_context(context)?;
        // The mode above applies only to a file it creates.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(context)?;
        std::io::Write::write_all(&mut &file, server.kubeconfig().as_bytes()).with_context(context)
    }
    #[cfg(not(unix))]
    {
        let mut file = options.open(path).with_context(context)?;
        std::io::Write::write_all(&mut file, server.kubeconfig().as_bytes()).with_context(context)
    }
}

fn run_apiserver(args: ApiserverArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let shutdown = shutdown_signal()?;
        let config = server_config(&args.server, args.simulate_kubelets, args.simulate_kubelets)?;
        let server = apiserver::Server::start(config).await?;
        if let Some(path) = &args.server.kubeconfig {
            write_kubeconfig(path, &server)?;
        }
        println!("kubesched apiserver listening on {}", server.url());
        tokio::select! {
            r = server.wait() => r?,
            _ = shutdown => {}
        }
        Ok(())
    })
}

fn load_config(
    path: Option<&PathBuf>,
    registry: &Registry,
) -> anyhow::Result<(KubeSchedulerConfiguration, String)> {
    match path {
        Some(p) => Ok((
            config::load_file_with(p, registry)?,
            p.display().to_string(),
        )),
        None => Ok((
            config::load_str_with(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
                "default configuration",
                registry,
            )?,
            "default configuration".to_string(),
        )),
    }
}

fn run_simulate(args: SimulateArgs, registry: &Registry) -> anyhow::Result<()> {
    let (cfg, source) = load_config(args.config.as_ref(), registry)?;
    let simulation = Simulation::new(
        SchedulerBuilder::new(cfg, source)
            .registry(registry.clone())
            .seed(args.seed),
    )?;
    for w in simulation.warnings() {
        eprintln!("warning: {w}");
    }
    let input = ClusterInput::load(&args.files)?;
    if !input.ignored.is_empty() {
        let kinds: Vec<String> = input
            .ignored
            .iter()
            .map(|(k, n)| format!("{k} ({n})"))
            .collect();
        eprintln!(
            "warning: ignored objects of kinds simulate does not use: {}",
            kinds.join(", ")
        );
    }
    let format = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Table
    } else {
        OutputFormat::Json
    });
    let text = if let Some(file) = &args.capacity {
        let template = input.load_template(file)?;
        let options = CapacityOptions {
            max_replicas: args
                .max_replicas
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        };
        let report = simulation.capacity(&input, &template, options)?;
        match format {
            OutputFormat::Json => capacity::output::to_json(&report) + "\n",
            OutputFormat::Table => capacity::output::to_table(&report),
        }
    } else {
        let report = simulation.run(&input);
        match format {
            OutputFormat::Json => simulate::output::to_json(&report) + "\n",
            OutputFormat::Table => simulate::output::to_table(&report),
        }
    };
    use std::io::Write;
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")?;
    Ok(())
}

/// `--client-qps` and `--client-burst` over upstream scheduler_perf's limits; refused where
/// no scheduler of the run has an API client.
fn client_limits(args: &BenchArgs) -> Result<bench::http::ClientLimits, UsageError> {
    let given = args.client_qps.is_some() || args.client_burst.is_some();
    if given && matches!(args.mode, BenchMode::InProcess) && args.scheduler_command.is_none() {
        return Err(UsageError(
            "--client-qps and --client-burst limit the scheduler's API client; --mode \
             in-process has none"
                .into(),
        ));
    }
    let upstream = bench::http::ClientLimits::UPSTREAM;
    let qps = args.client_qps.unwrap_or(upstream.qps);
    // A burst follows a QPS given without one, as upstream's benchmark sets both alike.
    let burst = match (args.client_burst, args.client_qps) {
        (Some(b), _) => b,
        (None, Some(q)) => (q.ceil() as i32).max(1),
        (None, None) => upstream.burst,
    };
    Ok(bench::http::ClientLimits { qps, burst })
}

/// A QPS limit: a finite number above zero.
fn positive_qps(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(q) if q.is_finite() && q > 0.0 && q <= i32::MAX as f32 => Ok(q),
        Ok(_) => Err(format!("{s:?}: a QPS above 0 is expected")),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

fn run_bench(args: BenchArgs, registry: &Registry) -> anyhow::Result<()> {
    use std::io::Write;
    if args.scheduler_command.is_some()
        && !args.compare
        && (args.config.is_some() || args.feature_gates != Default::default())
    {
        return Err(UsageError(
            "--config and --feature-gates configure kubesched's own scheduler; with \
             --scheduler-command they need --compare (give the command its own flags)"
                .into(),
        )
        .into());
    }
    let client = client_limits(&args)?;
    let scheduler = match &args.config {
        None => bench::SchedulerSetup {
            feature_gates: args.feature_gates,
            client,
            ..Default::default()
        },
        Some(path) => {
            let (cfg, source) = load_config(Some(path), registry)?;
            let (setup, warnings) = bench::SchedulerSetup::with_config(
                cfg,
                source,
                registry.clone(),
                args.feature_gates,
                client,
            )
            .map_err(|e| UsageError(e.to_string()))?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            setup
        }
    };
    let workloads: Vec<&bench::Workload> = if args.workload == "all" {
        bench::WORKLOADS.iter().collect()
    } else {
        bench::workload::find(&args.workload).into_iter().collect()
    };
    let options = bench::RunOptions {
        timeout: std::time::Duration::from_secs(args.timeout),
        record_decisions: args.record_decisions,
        scheduler,
    };
    let show_progress = std::io::stderr().is_terminal();
    let mut reports = Vec::new();
    for w in workloads {
        let sizes = bench::Sizes {
            nodes: args.nodes.unwrap_or(w.sizes.nodes),
            init_pods: args.init_pods.unwrap_or(w.sizes.init_pods),
            measured_pods: args.pods.unwrap_or(w.sizes.measured_pods),
        };
        let mut last_shown = std::time::Instant::now();
        let mut progress = |p: &bench::Progress| {
            if !show_progress
                || (p.phase != bench::Phase::Done && last_shown.elapsed().as_millis() < 100)
            {
                return;
            }
            last_shown = std::time::Instant::now();
            let mut err = std::io::stderr().lock();
            let _ = if p.phase == bench::Phase::Done {
                write!(err, "\r\x1b[K")
            } else {
                write!(
                    err,
                    "\r\x1b[K{}: {} {}/{}",
                    p.workload,
                    p.phase.as_str(),
                    p.done,
                    p.total
                )
            };
            let _ = err.flush();
        };
        let modes: Vec<BenchMode> = match (&args.scheduler_command, args.compare) {
            (None, _) => vec![args.mode],
            (Some(_), false) => vec![BenchMode::External],
            (Some(_), true) => vec![BenchMode::Http, BenchMode::External],
        };
        for mode in modes {
            let report = match mode {
                BenchMode::InProcess => bench::in_process::run(w, sizes, &options, &mut progress),
                BenchMode::Http => bench::in_process::run_on(
                    w,
                    sizes,
                    &options,
                    &mut progress,
                    &|| {
                        Ok(std::sync::Arc::new(bench::http::Http::with_setup(
                            &options.scheduler,
                            args.record_decisions,
                        )?) as _)
                    },
                    "http",
                ),
                BenchMode::External => bench::in_process::run_on(
                    w,
                    sizes,
                    &options,
                    &mut progress,
                    &|| {
                        let command = args.scheduler_command.as_deref().unwrap_or_default();
                        Ok(
                            std::sync::Arc::new(bench::external::External::new(command, client)?)
                                as _,
                        )
                    },
                    "external",
                ),
            }
            .with_context(|| format!("running workload {}", w.name))?;
            reports.push(report);
        }
    }
    let format = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Table
    } else {
        OutputFormat::Json
    });
    let text = match format {
        OutputFormat::Json => {
            bench::report::to_json(&reports, args.workload == "all" || args.compare) + "\n"
        }
        OutputFormat::Table => bench::report::to_table(&reports),
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")?;
    let timed_out: Vec<&str> = reports
        .iter()
        .filter(|r| r.status == bench::RunStatus::TimedOut)
        .map(|r| r.workload.as_str())
        .collect();
    if !timed_out.is_empty() {
        anyhow::bail!(
            "timed out after {} s: {}",
            args.timeout,
            timed_out.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    fn registry_names(cmd: &SchedulerCommand) -> Result<Vec<&'static str>, plugins::RegistryError> {
        cmd.registry().map(|r| r.keys().copied().collect())
    }

    fn with_plugins(names: &[&'static str]) -> SchedulerCommand {
        names.iter().fold(SchedulerCommand::new(), |cmd, name| {
            cmd.with_plugin(name, plugins::queuesort::new)
        })
    }

    #[rstest::rstest]
    #[case::no_added_plugin_is_the_in_tree_registry(&[], Ok(vec![]))]
    #[case::an_added_plugin_joins_the_in_tree_ones(&["NodeNumber"], Ok(vec!["NodeNumber"]))]
    #[case::an_in_tree_name_is_refused(
        &["NodeNumber", "TaintToleration"],
        Err(RegistryError::AlreadyExists("TaintToleration".into()))
    )]
    #[case::a_name_added_twice_is_refused(
        &["NodeNumber", "NodeNumber"],
        Err(RegistryError::AlreadyExists("NodeNumber".into()))
    )]
    fn registry_merges_added_plugins_with_the_in_tree_ones(
        #[case] added: &[&'static str],
        #[case] want_extra: Result<Vec<&'static str>, RegistryError>,
    ) {
        let want = want_extra.map(|extra| {
            let mut names: Vec<&'static str> =
                plugins::in_tree_registry().keys().copied().collect();
            names.extend(extra);
            names.sort_unstable();
            names
        });
        assert_eq!(registry_names(&with_plugins(added)), want);
    }

    #[rstest::rstest]
    #[case::no_config_file_gets_ups_limits(None, (UP_CLIENT_QPS, UP_CLIENT_BURST))]
    #[case::a_file_without_client_connection_gets_ups_limits(Some(""), (UP_CLIENT_QPS, UP_CLIENT_BURST))]
    #[case::a_file_setting_both_keeps_them(
        Some("clientConnection:\n  qps: 20\n  burst: 30\n"),
        (20.0, 30)
    )]
    #[case::a_file_setting_qps_only_keeps_it(Some("clientConnection:\n  qps: 20\n"), (20.0, UP_CLIENT_BURST))]
    fn up_raises_the_client_limits_unless_the_config_file_sets_them(
        #[case] file: Option<&str>,
        #[case] want: (f32, i32),
    ) {
        let text = file.map(|body| format!("{HEADER}{body}"));
        let mut cfg = config::load_str(text.as_deref().unwrap_or(HEADER), "test")
            .unwrap_or_else(|e| panic!("{e}"));
        up_client_limits(&mut cfg, text.as_deref());
        assert_eq!(
            (cfg.client_connection.qps, cfg.client_connection.burst),
            want
        );
    }
}
