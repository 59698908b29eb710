//! Label and field selectors as the apiserver parses them from `labelSelector` and
//! `fieldSelector` query parameters.
//!
//! Upstream: staging/src/k8s.io/apimachinery/pkg/labels/selector.go and pkg/fields.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::resources::{ResourceInfo, RESOURCES};
use crate::status::ApiError;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; requirements are ANDed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad_label(whole))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

/// A label value: at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both ends, or empty.
fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && v.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.bytes().last().is_some_and(|c| c.is_ascii_alphanumeric()))
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a non-empty name.
fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    !name.is_empty()
        && valid_value(name)
        && prefix.is_none_or(|p| crate::meta::invalid_name(p, false).is_none())
}

fn bad_label(s: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: invalid label selector {s:?}"
    ))
}

impl LabelSelector {
    /// Parses `k=v,k!=v,k in (a,b),k notin (a),k,!k`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err(bad_label(s));
            }
            let req = if let Some(k) = p.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = p.split_once("!=") {
                LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once("==") {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = p.split_once('=') {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, rest)) = p.split_once(" notin ") {
                LabelReq::NotIn(k.trim().to_string(), parse_set(rest, s)?)
            } else if let Some((k, rest)) = p.split_once(" in ") {
                LabelReq::In(k.trim().to_string(), parse_set(rest, s)?)
            } else if p.contains(['(', ')', ' ']) {
                return Err(bad_label(s));
            } else {
                LabelReq::Exists(p.to_string())
            };
            let (key, values): (&str, Vec<&str>) = match &req {
                LabelReq::Eq(k, v) | LabelReq::NotEq(k, v) => (k, vec![v.as_str()]),
                LabelReq::In(k, vs) | LabelReq::NotIn(k, vs) => {
                    (k, vs.iter().map(String::as_str).collect())
                }
                LabelReq::Exists(k) | LabelReq::NotExists(k) => (k, Vec::new()),
            };
            if !valid_key(key) || !values.iter().all(|v| valid_value(v)) {
                return Err(bad_label(s));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// Whether labels looked up with `get` satisfy every requirement.
    fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }

    /// Whether the selector has no requirement.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A parsed field selector: terms, ANDed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldTerm>);

/// One `field=value` or `field!=value` term, with the field's JSON pointer resolved once
/// (watches test every event against it).
#[derive(Debug, Clone, PartialEq)]
struct FieldTerm {
    field: String,
    pointer: String,
    value: String,
    eq: bool,
}

impl FieldSelector {
    /// Parses `a=b,c!=d,e==` and checks every field is supported by `info`.
    pub fn parse(s: &str, info: &ResourceInfo) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(terms));
        }
        for part in s.split(',') {
            let (field, value, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let supported = field == "metadata.name"
                || (info.namespaced && field == "metadata.namespace")
                || info.fields.contains(&field);
            if !supported {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push(FieldTerm {
                field: field.to_string(),
                pointer: pointer_of(field),
                value: value.trim().to_string(),
                eq,
            });
        }
        Ok(FieldSelector(terms))
    }

    /// Whether the object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|t| field_value_is(obj, &t.field, &t.pointer, &t.value) == t.eq)
    }

    /// Whether the attributes satisfy every term.
    fn matches_attrs(&self, attrs: &Attrs) -> bool {
        self.0
            .iter()
            .all(|t| (attrs.field(&t.field) == t.value) == t.eq)
    }

    /// Whether the selector has no term.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The string value of a selectable field, as field selectors compare it: absent is `""`
/// (`"false"` for the two boolean fields), booleans are `true`/`false`.
/// Appends a selectable field's value to `out` as selectors compare it: absent is `""`,
/// booleans are `true`/`false`, numbers, arrays and objects as their JSON text.
fn push_field_string(obj: &Value, field: &str, path: &[String], out: &mut String) {
    use std::fmt::Write as _;
    let value = path.iter().try_fold(obj, |v, segment| v.get(segment));
    match value {
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
        None | Some(Value::Null) => {
            if matches!(field, "spec.hostNetwork" | "spec.unschedulable") {
                out.push_str("false");
            }
        }
        // Writing to a String does not fail.
        Some(other) => {
            let _ = write!(out, "{other}");
        }
    }
}

/// A field's JSON pointer.
fn pointer_of(field: &str) -> String {
    match field {
        "source" => "/source/component".to_string(),
        f => format!("/{}", f.replace('.', "/")),
    }
}

/// The selectable fields of the resources kept under `storage` (every version's, with
/// `metadata.name` and `metadata.namespace`), with their paths in the object (split once:
/// every write reads them).
fn selectable_fields(storage: &str) -> &'static [(&'static str, Vec<String>)] {
    type Table = HashMap<&'static str, Vec<(&'static str, Vec<String>)>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let mut table = Table::new();
            for r in RESOURCES {
                let fields = table.entry(r.storage).or_default();
                for &f in ["metadata.name", "metadata.namespace"]
                    .iter()
                    .chain(r.fields)
                {
                    if !fields.iter().any(|(x, _)| *x == f) {
                        let path = pointer_of(f).split('/').skip(1).map(String::from).collect();
                        fields.push((f, path));
                    }
                }
            }
            table
        })
        .get(storage)
        .map_or(&[], Vec::as_slice)
}

/// What label and field selectors read of one object, copied out of it once per write:
/// the event log keeps these and the encoded object rather than the object (a decoded
/// object takes several times the memory of its JSON). The values are kept in one string,
/// so that a write costs two allocations here, not one per field and label.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attrs {
    /// Every value, one after the other: `metadata.namespace` (empty for cluster-scoped
    /// objects), each selectable field of `fields` in its order, then each string-valued
    /// label's key and value.
    text: String,
    /// Where each value of `text` ends.
    ends: Vec<usize>,
    /// The selectable fields of the object's resource.
    fields: &'static [(&'static str, Vec<String>)],
}

impl Attrs {
    /// The attributes of `obj`, an object kept under `storage`.
    pub fn of(storage: &str, obj: &Value) -> Attrs {
        let fields = selectable_fields(storage);
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        let mut text = String::new();
        let mut ends = Vec::with_capacity(1 + fields.len() + 2 * labels.map_or(0, |l| l.len()));
        let namespace = obj
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str);
        text.push_str(namespace.unwrap_or_default());
        ends.push(text.len());
        for (f, path) in fields {
            push_field_string(obj, f, path, &mut text);
            ends.push(text.len());
        }
        for (k, v) in labels.into_iter().flatten() {
            let Some(v) = v.as_str() else { continue };
            text.push_str(k);
            ends.push(text.len());
            text.push_str(v);
            ends.push(text.len());
        }
        Attrs { text, ends, fields }
    }

    /// The `i`th value of `text`.
    fn value(&self, i: usize) -> &str {
        let start = match i.checked_sub(1) {
            None => 0,
            Some(before) => self.ends.get(before).copied().unwrap_or(0),
        };
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.text.get(start..end).unwrap_or("")
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.value(0)
    }

    fn label(&self, key: &str) -> Option<&str> {
        let first = 1 + self.fields.len();
        let count = self.ends.len().saturating_sub(first) / 2;
        (0..count)
            .map(|j| first + 2 * j)
            .find(|&i| self.value(i) == key)
            .map(|i| self.value(i + 1))
    }

    fn field(&self, field: &str) -> &str {
        self.fields
            .iter()
            .position(|(f, _)| *f == field)
            .map_or("", |i| self.value(1 + i))
    }
}

/// Whether a selectable field's string value is `want`: absent is `""`, booleans are
/// `true`/`false`. Compares in place: watches call this for every event.
fn field_value_is(obj: &Value, field: &str, pointer: &str, want: &str) -> bool {
    match obj.pointer(pointer) {
        Some(Value::String(s)) => s == want,
        Some(Value::Bool(b)) => want == if *b { "true" } else { "false" },
        Some(Value::Number(n)) => n.to_string() == want,
        None | Some(Value::Null) => match field {
            "spec.hostNetwork" | "spec.unschedulable" => want == "false",
            _ => want.is_empty(),
        },
        // An array or object compares as its JSON text, as `push_field_string` renders it.
        Some(other) => matches!(serde_json::to_string(other), Ok(text) if text == want),
    }
}

/// Label and field selector together, as a list or watch applies them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Selector {
    /// Whether the object passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// Whether an object with these attributes passes both selectors.
    pub fn matches_attrs(&self, attrs: &Attrs) -> bool {
        self.labels.matches_with(|k| attrs.label(k)) && self.fields.matches_attrs(attrs)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;
    use crate::resources::lookup;

    fn labeled() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "fe"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    #[rstest]
    #[case::equal("app=web", true)]
    #[case::double_equal("app==web", true)]
    #[case::not_equal("app!=web", false)]
    #[case::not_equal_absent_key("zone!=a", true)]
    #[case::exists("tier", true)]
    #[case::not_exists("!tier", false)]
    #[case::not_exists_absent("!zone", true)]
    #[case::in_set("app in (db,web)", true)]
    #[case::notin_set("app notin (db,web)", false)]
    #[case::notin_absent_key("zone notin (a)", true)]
    #[case::and_of_two("app=web,tier=be", false)]
    #[case::set_then_equal("app in (web, db),tier=fe", true)]
    #[case::empty("", true)]
    fn label_selector(#[case] sel: &str, #[case] want: bool) {
        let s = LabelSelector::parse(sel).expect("parses");
        assert_eq!(s.matches(&labeled()), want, "{sel}");
        // The event log's attributes of the object answer the same.
        let attrs = Attrs::of("pods", &labeled());
        assert_eq!(
            s.matches_with(|k| attrs.label(k)),
            want,
            "{sel} on attributes"
        );
    }

    #[rstest]
    #[case::dangling_comma("app=web,")]
    #[case::unclosed_set("app in (a")]
    #[case::bad_key_characters("a b=c")]
    #[case::bad_value_characters("app=we b")]
    #[case::empty_key("=x")]
    fn label_selector_rejects(#[case] sel: &str) {
        let err = LabelSelector::parse(sel).expect_err("rejected");
        assert_eq!((err.code, err.reason), (400, "BadRequest"));
    }

    #[rstest]
    #[case::name("metadata.name=p", true)]
    #[case::namespace("metadata.namespace=ns", true)]
    #[case::node("spec.nodeName=n1", true)]
    #[case::unscheduled("spec.nodeName=", false)]
    #[case::phase_not("status.phase!=Succeeded,status.phase!=Failed", true)]
    #[case::host_network_default("spec.hostNetwork=false", true)]
    #[case::nominated_empty("status.nominatedNodeName=", true)]
    fn field_selector(#[case] sel: &str, #[case] want: bool) {
        let info = lookup("", "v1", "pods").expect("pods");
        let s = FieldSelector::parse(sel, info).expect("parses");
        assert_eq!(s.matches(&labeled()), want, "{sel}");
        assert_eq!(
            s.matches_attrs(&Attrs::of(info.storage, &labeled())),
            want,
            "{sel} on attributes"
        );
    }

    #[test]
    fn unsupported_field_is_bad_request_naming_it() {
        let info = lookup("", "v1", "pods").expect("pods");
        let err = FieldSelector::parse("spec.foo=1", info).expect_err("rejected");
        assert_eq!(err.message, "field label not supported: spec.foo");
        assert_eq!(err.code, 400);
    }

    #[test]
    fn cluster_scoped_kinds_have_no_namespace_field() {
        let info = lookup("", "v1", "nodes").expect("nodes");
        assert!(FieldSelector::parse("metadata.namespace=x", info).is_err());
        assert!(FieldSelector::parse("spec.unschedulable=true", info).is_ok());
    }

    #[test]
    fn event_source_selects_the_component() {
        let info = lookup("", "v1", "events").expect("events");
        let s = FieldSelector::parse("source=kubesched,involvedObject.namespace=", info)
            .expect("parses");
        let event = json!({"source": {"component": "kubesched"}, "involvedObject": {}});
        assert!(s.matches(&event));
        assert!(s.matches_attrs(&Attrs::of(info.storage, &event)));
    }

    /// The attributes as namespace, labels and fields, for comparing whole values.
    type AttrParts = (String, Vec<(String, String)>, Vec<(&'static str, String)>);

    fn parts(attrs: &Attrs) -> AttrParts {
        let first = 1 + attrs.fields.len();
        let labels = (first..attrs.ends.len())
            .step_by(2)
            .map(|i| (attrs.value(i).to_string(), attrs.value(i + 1).to_string()))
            .collect();
        let fields = attrs
            .fields
            .iter()
            .map(|(f, _)| (*f, attrs.field(f).to_string()))
            .collect();
        (attrs.namespace().to_string(), labels, fields)
    }

    #[test]
    fn attrs_keep_namespace_labels_and_the_resource_fields() {
        let attrs = Attrs::of("pods", &labeled());
        assert_eq!(
            parts(&attrs),
            (
                "ns".into(),
                vec![("app".into(), "web".into()), ("tier".into(), "fe".into())],
                vec![
                    ("metadata.name", "p".into()),
                    ("metadata.namespace", "ns".into()),
                    ("spec.nodeName", "n1".into()),
                    ("spec.schedulerName", String::new()),
                    ("spec.restartPolicy", String::new()),
                    ("spec.serviceAccountName", String::new()),
                    ("spec.hostNetwork", "false".into()),
                    ("status.phase", "Running".into()),
                    ("status.podIP", String::new()),
                    ("status.nominatedNodeName", String::new()),
                ],
            )
        );
    }

    /// The values kept in one string read back as each field and label rendered alone:
    /// booleans, numbers, arrays and objects as their text, labels that are not strings
    /// left out, a cluster-scoped object's namespace empty.
    #[rstest]
    #[case::pod_with_typed_fields(
        "pods",
        json!({"metadata": {"name": "p", "namespace": "ns",
                            "labels": {"n": 1, "a": "", "b": "x"}},
               "spec": {"hostNetwork": true, "nodeName": {"odd": [1]},
                        "restartPolicy": 3, "schedulerName": ["s"]}}),
        (
            "ns".into(),
            vec![("a".into(), String::new()), ("b".into(), "x".into())],
            vec![
                ("metadata.name", "p".into()),
                ("metadata.namespace", "ns".into()),
                ("spec.nodeName", r#"{"odd":[1]}"#.into()),
                ("spec.schedulerName", r#"["s"]"#.into()),
                ("spec.restartPolicy", "3".into()),
                ("spec.serviceAccountName", String::new()),
                ("spec.hostNetwork", "true".into()),
                ("status.phase", String::new()),
                ("status.podIP", String::new()),
                ("status.nominatedNodeName", String::new()),
            ],
        )
    )]
    #[case::node_without_namespace_or_labels(
        "nodes",
        json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": null}}),
        (
            String::new(),
            vec![],
            vec![
                ("metadata.name", "n1".into()),
                ("metadata.namespace", String::new()),
                ("spec.unschedulable", "false".into()),
            ],
        )
    )]
    #[case::not_an_object("pods", json!("text"), (String::new(), vec![], parts(&Attrs::of("pods", &json!({}))).2))]
    fn attrs_read_back_each_value_as_rendered(
        #[case] storage: &str,
        #[case] obj: Value,
        #[case] want: AttrParts,
    ) {
        assert_eq!(parts(&Attrs::of(storage, &obj)), want);
    }
}
