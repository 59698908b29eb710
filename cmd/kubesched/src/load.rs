//! `kubesched up -f FILE`: creates the objects of YAML/JSON files through the API, as
//! `kubectl create -f` would (namespaces and priority classes first, then nodes, then the
//! rest in file order). Namespaces the objects use but the files do not define are created.
//! Objects that already exist (a restart with `--data-dir`) are left as they are.

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use thiserror::Error;

/// A file that cannot be loaded: nothing of it was created past the object named.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{file}: {message}")]
    File { file: PathBuf, message: String },
    #[error("{file}: {object}: {message}")]
    Object {
        file: PathBuf,
        object: String,
        message: String,
    },
    #[error("discovering the API server's resources: {0}")]
    Discovery(#[source] kube::Error),
}

/// One object to create, with where it came from.
struct Item {
    file: PathBuf,
    value: serde_json::Value,
}

impl Item {
    fn kind(&self) -> &str {
        self.value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
    }

    fn describe(&self) -> String {
        let name = self
            .value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("<no name>");
        format!("{} {name}", self.kind())
    }

    /// Creation order: what others live in first.
    fn rank(&self) -> u8 {
        match self.kind() {
            "Namespace" => 0,
            "PriorityClass" => 1,
            "Node" => 2,
            _ => 3,
        }
    }
}

/// Reads every file (lists are expanded) and creates its objects. Returns how many objects
/// were created and how many already existed.
pub async fn load_files(
    client: &kube::Client,
    files: &[PathBuf],
) -> Result<(usize, usize), LoadError> {
    let mut items = Vec::new();
    for f in files {
        read_file(f, &mut items)?;
    }
    add_missing_namespaces(&mut items);
    items.sort_by_key(Item::rank);
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(LoadError::Discovery)?;
    let (mut created, mut existed) = (0, 0);
    for item in items {
        let err = |message: String| LoadError::Object {
            file: item.file.clone(),
            object: item.describe(),
            message,
        };
        let api_version = item
            .value
            .get("apiVersion")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, item.kind());
        let Some((ar, caps)) = discovery.resolve_gvk(&gvk) else {
            return Err(err(format!(
                "the server does not serve kind {} in {api_version}",
                item.kind()
            )));
        };
        let obj: DynamicObject =
            serde_json::from_value(item.value.clone()).map_err(|e| err(e.to_string()))?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client.clone(), &ar),
            Scope::Namespaced => {
                let ns = obj.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &ar)
            }
        };
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => created += 1,
            Err(kube::Error::Api(s)) if s.code == 409 => existed += 1,
            Err(kube::Error::Api(s)) => return Err(err(s.message)),
            Err(e) => return Err(err(e.to_string())),
        }
    }
    Ok((created, existed))
}

/// Namespaces the objects live in but the files do not define are created first, so that a
/// file of pods in `prod` loads without a separate `kubectl create namespace prod`.
fn add_missing_namespaces(items: &mut Vec<Item>) {
    let defined: std::collections::BTreeSet<String> = items
        .iter()
        .filter(|i| i.kind() == "Namespace")
        .filter_map(|i| {
            i.value
                .pointer("/metadata/name")?
                .as_str()
                .map(String::from)
        })
        .collect();
    let used: std::collections::BTreeSet<(String, PathBuf)> = items
        .iter()
        .filter_map(|i| {
            let ns = i.value.pointer("/metadata/namespace")?.as_str()?;
            Some((ns.to_string(), i.file.clone()))
        })
        .filter(|(ns, _)| ns != "default" && !defined.contains(ns))
        .collect();
    let mut added = std::collections::BTreeSet::new();
    for (ns, file) in used {
        if added.insert(ns.clone()) {
            items.push(Item {
                file,
                value: serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": { "name": ns },
                }),
            });
        }
    }
}

fn read_file(file: &Path, out: &mut Vec<Item>) -> Result<(), LoadError> {
    let ferr = |message: String| LoadError::File {
        file: file.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(file).map_err(|e| ferr(e.to_string()))?;
    let docs = scheduler::simulate::input::parse_documents(&text).map_err(ferr)?;
    let mut stack: Vec<serde_json::Value> = docs.into_iter().rev().collect();
    while let Some(v) = stack.pop() {
        if v.is_null() {
            continue;
        }
        let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
        if kind.is_empty() {
            return Err(ferr("an object has no kind".into()));
        }
        if kind.ends_with("List") {
            if let Some(serde_json::Value::Array(items)) = v.get("items") {
                stack.extend(items.iter().rev().cloned());
            }
            continue;
        }
        out.push(Item {
            file: file.to_path_buf(),
            value: v,
        });
    }
    Ok(())
}
