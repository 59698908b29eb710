//! The official Python client (kubernetes 37.0.2, from `KUBESCHED_PYTHON`, which scripts/test
//! sets up): create, list, watch, patch, delete; the storage kinds' defaults and a refused
//! claim update.

use std::path::PathBuf;
use std::process::Command;

use crate::harness::Cluster;

fn python() -> PathBuf {
    let p = std::env::var_os("KUBESCHED_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_default();
    assert!(
        p.is_file(),
        "KUBESCHED_PYTHON must name a Python with the kubernetes package (got {p:?}); run \
         ./scripts/test, which installs kubernetes==37.0.2 into .venv"
    );
    p
}

#[test]
fn python_client_creates_lists_watches_patches_and_deletes() {
    let c = Cluster::start();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/integration/python/client.py");
    let out = Command::new(python())
        .arg(script)
        .arg(c.kubeconfig())
        .env("HOME", c.dir.path())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for check in [
        "create ok",
        "conflict ok",
        "list ok",
        "watch ok",
        "patch ok",
        "delete ok",
        "storage ok",
    ] {
        assert!(stdout.contains(check), "{check} missing: {stdout}");
    }
}
