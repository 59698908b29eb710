//! `kubesched`: a Kubernetes scheduler, kube-scheduler rebuilt in Rust.
//!
//! This binary parses flags, loads files, sets up logging and maps errors to exit codes
//! (2 for invalid input or configuration, 1 for anything else). The work is done by the
//! `scheduler` crate.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use framework::{Handle, Parallelizer};
use scheduler::config::{self, ConfigError, KubeSchedulerConfiguration};
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
    ///   kubesched apiserver --tls-cert-file tls.crt --tls-private-key-file tls.key \
    ///     --token-file tokens.csv --kubeconfig /tmp/kubesched.kubeconfig
    ///   kubesched apiserver --cert-dir ./certs --token-file tokens.csv \
    ///     --kubeconfig /tmp/kubesched.kubeconfig
    ///
    /// Exit status: 2 when a flag, the token file or the TLS files are invalid, or when
    /// another server holds --data-dir.
    #[command(verbatim_doc_comment)]
    Apiserver(ApiserverArgs),
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
    /// is acknowledged, and the state is recovered from it on start. One server per
    /// directory (a lock on DIR/lock; a second one exits 2). Without it, the state is in
    /// memory only.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
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
        || err
            .downcast_ref::<apiserver::Error>()
            .is_some_and(apiserver::Error::is_user_error)
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
                Some(f) => {
                    apiserver::read_token_file(f).map_err(|e| apiserver::Error::TokenFile {
                        path: f.clone(),
                        source: e,
                    })?
                }
                None => Vec::new(),
            },
            tls: match (
                &args.tls_cert_file,
                &args.tls_private_key_file,
                &args.cert_dir,
            ) {
                (Some(cert), Some(key), _) => Some(
                    apiserver::TlsConfig::from_files(cert, key).map_err(apiserver::Error::from)?,
                ),
                (None, None, Some(dir)) => {
                    let mut hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
                    let ip = args.listen.ip();
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
    let handle = Handle::new(
        Parallelizer::new(parallelism),
        Arc::new(framework::handle::NoopClient),
    );
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
        &profiles.frameworks,
        &simulate::Options {
            seed: args.seed,
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
        },
    );
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
