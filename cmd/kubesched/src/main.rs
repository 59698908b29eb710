//! `kubesched`: a Kubernetes scheduler, kube-scheduler rebuilt in Rust.
//!
//! This binary parses flags, loads files, sets up logging and maps errors to exit codes
//! (2 for invalid input or configuration, 1 for anything else). The work is done by the
//! `scheduler` crate.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use framework::{Handle, Parallelizer};
use scheduler::config::{self, ConfigError, KubeSchedulerConfiguration};
use scheduler::memory::MemoryCluster;
use scheduler::profile::Profiles;
use scheduler::simulate::{self, ClusterInput, InputError};

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
    /// any cluster.
    ///
    /// Examples:
    ///   kubectl get nodes,pods,namespaces -A -o yaml > cluster.yaml
    ///   kubesched simulate -f cluster.yaml
    ///   kubesched simulate -f cluster.yaml -f new-pods.yaml --config binpack.yaml -o json
    ///
    /// Exit status: 0 when the simulation ran (even if pods stay pending), 2 when an input
    /// file or the configuration is invalid.
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
    #[command(verbatim_doc_comment)]
    Apiserver(ApiserverArgs),
    /// Run upstream scheduler_perf's workloads against kubesched and report throughput.
    ///
    /// Each workload creates upstream's nodes (4 CPU / 32Gi / 110 pods) and initial pods,
    /// waits until those are bound, then creates the measured pods and samples every second
    /// how many are bound: pods/s average and p50/p90/p99 (upstream's SchedulingThroughput),
    /// scheduling-attempt latency, peak RSS, and upstream's floor for the workload.
    ///
    /// Modes: `in-process` drives the scheduler directly (an in-memory cluster, the default
    /// profile, the real plugins); `http` (the default, through the local API server and
    /// `run`'s client) needs `kubesched run`, which is not built yet: use --mode in-process.
    ///
    /// Examples:
    ///   kubesched bench --mode in-process --workload SchedulingBasic
    ///   kubesched bench --mode in-process --workload all -o json > bench.json
    ///   kubesched bench --mode in-process --workload TopologySpreading --nodes 500 --pods 1000
    ///
    /// Exit status: 0 when every workload ran (skipped ones included), 1 when one timed
    /// out, 2 for invalid flags.
    #[command(verbatim_doc_comment)]
    Bench(BenchArgs),
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// The workload to run (upstream's test case name), or `all`.
    #[arg(long, value_name = "NAME", default_value = "all",
          value_parser = clap::builder::PossibleValuesParser::new(bench::workload::names_and_all()))]
    workload: String,
    /// How pods reach the scheduler (http needs `kubesched run`, not yet built).
    #[arg(long, value_enum, default_value_t = BenchMode::Http)]
    mode: BenchMode,
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
}

#[derive(clap::Args, Debug)]
struct ApiserverArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    listen: std::net::SocketAddr,
    /// Write a kubeconfig pointing at the server to this path.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Keep the state in this directory: every write is logged there and fsynced before it
    /// is acknowledged, and the state is recovered from it on start. Without it, the state
    /// is in memory only.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Require `Authorization: Bearer <token>` on every request but /healthz, /livez,
    /// /readyz and /version, with the tokens in this file (upstream's --token-auth-file CSV,
    /// `token,user,uid,"groups"`, or one token per line). --kubeconfig then holds the first.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Act as the nodes' kubelets: nodes become Ready, and pods bound to a node become
    /// Running with Ready conditions (the status transitions KWOK performs).
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
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OutputFormat {
    Json,
    Table,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbosity);
    let result = match cli.command {
        Command::Simulate(args) => run_simulate(args),
        Command::Apiserver(args) => run_apiserver(args),
        Command::Bench(args) => run_bench(args),
    };
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
    err.chain()
        .any(|e| e.is::<ConfigError>() || e.is::<InputError>())
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
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn run_apiserver(args: ApiserverArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let config = apiserver::Config {
            listen: args.listen,
            data_dir: args.data_dir.clone(),
            simulate_kubelets: args.simulate_kubelets,
            tokens: match &args.token_file {
                Some(f) => apiserver::read_token_file(f)
                    .with_context(|| format!("reading token file {}", f.display()))?,
                None => Vec::new(),
            },
            ..apiserver::Config::default()
        };
        let server = apiserver::Server::start(config).await?;
        if let Some(path) = &args.kubeconfig {
            std::fs::write(path, server.kubeconfig())
                .with_context(|| format!("writing kubeconfig {}", path.display()))?;
        }
        println!("kubesched apiserver listening on {}", server.url());
        tokio::select! {
            r = server.wait() => r?,
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        }
        Ok(())
    })
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<(KubeSchedulerConfiguration, String)> {
    match path {
        Some(p) => Ok((config::load_file(p)?, p.display().to_string())),
        None => Ok((
            config::load_str(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
                "default configuration",
            )?,
            "default configuration".to_string(),
        )),
    }
}

fn run_simulate(args: SimulateArgs) -> anyhow::Result<()> {
    let (cfg, source) = load_config(args.config.as_ref())?;
    let parallelism = usize::try_from(cfg.parallelism()).unwrap_or(1);
    let cluster = MemoryCluster::new();
    let handle = Handle::new(Parallelizer::new(parallelism), cluster.clone());
    let profiles = Profiles::build(&cfg, &plugins::in_tree_registry(), &handle, &source)?;
    for w in &profiles.warnings {
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
    let report = simulate::run(
        &input,
        profiles.frameworks,
        cluster,
        &simulate::Options {
            seed: args.seed,
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
        },
    )
    .context("running the simulation")?;
    let format = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Table
    } else {
        OutputFormat::Json
    });
    let text = match format {
        OutputFormat::Json => simulate::output::to_json(&report) + "\n",
        OutputFormat::Table => simulate::output::to_table(&report),
    };
    use std::io::Write;
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing the report to stdout")?;
    Ok(())
}

fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    use std::io::Write;
    if let BenchMode::Http = args.mode {
        <BenchArgs as clap::Args>::augment_args(clap::Command::new("kubesched bench"))
            .error(
                clap::error::ErrorKind::InvalidValue,
                "bench --mode http needs `kubesched run` (not yet built); use --mode in-process",
            )
            .exit();
    }
    let workloads: Vec<&bench::Workload> = if args.workload == "all" {
        bench::WORKLOADS.iter().collect()
    } else {
        bench::workload::find(&args.workload).into_iter().collect()
    };
    let options = bench::RunOptions {
        timeout: std::time::Duration::from_secs(args.timeout),
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
        let report = bench::in_process::run(w, sizes, &options, &mut progress)
            .with_context(|| format!("running workload {}", w.name))?;
        reports.push(report);
    }
    let format = args.output.unwrap_or(if std::io::stdout().is_terminal() {
        OutputFormat::Table
    } else {
        OutputFormat::Json
    });
    let text = match format {
        OutputFormat::Json => bench::report::to_json(&reports, args.workload == "all") + "\n",
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
