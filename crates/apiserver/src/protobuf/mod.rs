//! Decoding of protobuf request bodies (`application/vnd.kubernetes.protobuf`: kube-scheduler's
//! Bindings, Events and Leases, kubectl's generators, any client-go client) into the JSON
//! object the rest of the server handles, the same JSON a client sending JSON would send.
//!
//! A body is the 4-byte magic `k8s\0` and a `runtime.Unknown` envelope: typeMeta (apiVersion,
//! kind) and `raw`, the typed message. The typed message is read generically against
//! [`schema`], a table generated from kube-rs's k8s-pb bindings (field numbers and types, as
//! upstream's `generated.proto`) and k8s-openapi (JSON names), so every kind of the served
//! group-versions decodes without code of its own.
//!
//! Go's JSON encoding is followed where the wire cannot say it: `metav1.Time` and `MicroTime`
//! become RFC 3339 strings (seconds, microseconds; an unset optional one is left out),
//! `Quantity` its string, `IntOrString` a
//! number or string, `RawExtension`/`FieldsV1` their embedded JSON, bytes base64, int64 a
//! number. Go's protobuf encoder writes every non-pointer field, empty or not, so an optional
//! scalar equal to its zero value is left out as `omitempty` would, except for the pointer
//! fields in [`KEEP_ZERO`] whose zero means something else than unset.
//!
//! Upstream: staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf (the envelope),
//! staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go (transformDecodeError).

use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Map, Value};

use crate::status::ApiError;

#[rustfmt::skip]
mod schema;

/// One protobuf message: its full proto name and fields.
#[derive(Debug)]
struct Message {
    name: &'static str,
    fields: &'static [Field],
}

/// One field of a message.
#[derive(Debug)]
struct Field {
    tag: u64,
    /// The JSON name (Go's json tag).
    json: &'static str,
    ty: Ty,
    label: Label,
}

/// A field's protobuf type; messages and map values by index into [`schema::MESSAGES`].
#[derive(Debug, Clone, Copy)]
enum Ty {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Message(u16),
    MapString,
    MapBytes,
    MapMessage(u16),
}

/// How a field appears in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    /// `omitempty` (or a pointer): left out when unset or zero.
    Optional,
    /// Always written, zero or not.
    Required,
    /// A list.
    Repeated,
    /// A Go struct embedded with `json:",inline"`: its fields are the parent's.
    Inline,
}

/// Go pointer fields (by message and JSON name) whose zero value is not the same as unset
/// (`replicas: 0` is not the defaulted 1, `runAsUser: 0` is root), so a zero on the wire is
/// kept. Other optional scalars are value fields with `omitempty`, always on the wire and
/// left out of JSON when zero (DeploymentStatus' `replicas: 0` among them).
const KEEP_ZERO: &[(&str, &[&str])] = &[
    (
        "CSIDriverSpec",
        &[
            "attachRequired",
            "podInfoOnMount",
            "requiresRepublish",
            "seLinuxMount",
            "storageCapacity",
        ],
    ),
    ("ConfigMap", &["immutable"]),
    ("ConfigMapEnvSource", &["optional"]),
    ("ConfigMapKeySelector", &["optional"]),
    ("ConfigMapProjection", &["optional"]),
    ("ConfigMapVolumeSource", &["defaultMode", "optional"]),
    ("ContainerStatus", &["started"]),
    (
        "CronJobSpec",
        &[
            "failedJobsHistoryLimit",
            "startingDeadlineSeconds",
            "successfulJobsHistoryLimit",
            "suspend",
        ],
    ),
    ("DaemonSetSpec", &["revisionHistoryLimit"]),
    (
        "DeploymentSpec",
        &[
            "progressDeadlineSeconds",
            "replicas",
            "revisionHistoryLimit",
        ],
    ),
    ("DownwardAPIVolumeFile", &["mode"]),
    ("DownwardAPIVolumeSource", &["defaultMode"]),
    (
        "JobSpec",
        &[
            "activeDeadlineSeconds",
            "backoffLimit",
            "backoffLimitPerIndex",
            "completions",
            "manualSelector",
            "maxFailedIndexes",
            "parallelism",
            "suspend",
            "ttlSecondsAfterFinished",
        ],
    ),
    ("KeyToPath", &["mode"]),
    ("LeaseSpec", &["leaseDurationSeconds", "leaseTransitions"]),
    ("ObjectMeta", &["deletionGracePeriodSeconds"]),
    ("OwnerReference", &["blockOwnerDeletion", "controller"]),
    (
        "PodSecurityContext",
        &["fsGroup", "runAsGroup", "runAsNonRoot", "runAsUser"],
    ),
    (
        "PodSpec",
        &[
            "activeDeadlineSeconds",
            "automountServiceAccountToken",
            "enableServiceLinks",
            "hostUsers",
            "priority",
            "setHostnameAsFQDN",
            "shareProcessNamespace",
            "terminationGracePeriodSeconds",
        ],
    ),
    ("ProjectedVolumeSource", &["defaultMode"]),
    ("ReplicaSetSpec", &["replicas"]),
    ("ReplicationControllerSpec", &["replicas"]),
    ("RollingUpdateStatefulSetStrategy", &["partition"]),
    ("Secret", &["immutable"]),
    ("SecretEnvSource", &["optional"]),
    ("SecretKeySelector", &["optional"]),
    ("SecretProjection", &["optional"]),
    ("SecretVolumeSource", &["defaultMode", "optional"]),
    (
        "SecurityContext",
        &[
            "allowPrivilegeEscalation",
            "privileged",
            "readOnlyRootFilesystem",
            "runAsGroup",
            "runAsNonRoot",
            "runAsUser",
        ],
    ),
    ("StatefulSetSpec", &["replicas", "revisionHistoryLimit"]),
    ("StorageClass", &["allowVolumeExpansion"]),
    ("Toleration", &["tolerationSeconds"]),
];

/// Whether `msg.field`'s zero value is kept (see [`KEEP_ZERO`]).
fn keeps_zero(msg: &Message, field: &Field) -> bool {
    let short = msg.name.rsplit('.').next().unwrap_or(msg.name);
    KEEP_ZERO
        .iter()
        .any(|(m, fields)| *m == short && fields.contains(&field.json))
}

/// The magic every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The scheme kube-apiserver names when a kind is not registered.
const SCHEME: &str = "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30";

/// Why a protobuf message could not be read; the messages are gogo-protobuf's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The body ends inside a field.
    #[error("unexpected EOF")]
    UnexpectedEof,
    /// A varint longer than 64 bits.
    #[error("proto: integer overflow")]
    IntegerOverflow,
    /// A length that does not fit in memory.
    #[error("proto: negative length found during unmarshaling")]
    InvalidLength,
    /// Field number 0 or a group wire type.
    #[error("proto: illegal tag {tag} (wire type {wire})")]
    IllegalTag {
        /// The field number.
        tag: u64,
        /// The wire type.
        wire: u64,
    },
    /// A known field with another wire type than its type has.
    #[error("proto: wrong wireType = {wire} for field {field}")]
    WrongWireType {
        /// The wire type found.
        wire: u64,
        /// The field, as Go names it.
        field: String,
    },
    /// Embedded JSON (`RawExtension`, `FieldsV1`) that is not JSON.
    #[error("invalid embedded JSON in field {field}: {reason}")]
    EmbeddedJson {
        /// The field's JSON name.
        field: &'static str,
        /// serde_json's message.
        reason: String,
    },
}

/// What a request body must decode into: the kind the URL's resource (or subresource) takes.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// API group, `""` for core.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Kind.
    pub kind: &'a str,
}

impl Target<'_> {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The internal (hub) API group upstream converts into, as its conversion errors name it.
    fn internal_group(&self) -> &str {
        internal_group(self.group)
    }
}

fn internal_group(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// Whether `(apiVersion, kind)` has a protobuf schema here.
pub fn knows(api_version: &str, kind: &str) -> bool {
    root(api_version, kind).is_some()
}

fn root(api_version: &str, kind: &str) -> Option<&'static Message> {
    schema::KINDS
        .iter()
        .find(|(av, k, _)| *av == api_version && *k == kind)
        .and_then(|(_, _, i)| message_at(*i))
}

fn message_at(i: u16) -> Option<&'static Message> {
    schema::MESSAGES.get(usize::from(i))
}

/// Decodes a `k8s\0`-prefixed protobuf body into the JSON object of `into`'s kind, with
/// apiVersion and kind set; errors are upstream's 400s.
pub fn decode(body: &[u8], into: Target<'_>) -> Result<Value, ApiError> {
    let unrecognized = |why: String| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {why} ({})",
            into.kind,
            summarize(body)
        ))
    };
    let Some(envelope) = body.strip_prefix(MAGIC) else {
        return Err(unrecognized(format!(
            "provided data does not appear to be a protobuf message, expected prefix {:?}",
            MAGIC
        )));
    };
    let (mut api_version, mut kind, raw) =
        read_envelope(envelope).map_err(|e| unrecognized(e.to_string()))?;
    // An envelope without kind or apiVersion takes the URL resource's, as upstream defaults
    // them (gvkWithDefaults).
    if kind.is_empty() {
        kind = into.kind.to_string();
    }
    if api_version.is_empty() {
        api_version = into.api_version();
    }
    let version = api_version.rsplit('/').next().unwrap_or(&api_version);
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let cannot = |why: String| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
            into.kind
        ))
    };
    let Some(msg) = root(&api_version, &kind) else {
        return Err(cannot(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme \"{SCHEME}\""
        )));
    };
    let mut obj = Map::new();
    message(raw, msg, &mut obj).map_err(|e| cannot(e.to_string()))?;
    if kind != into.kind || internal_group(group) != into.internal_group() {
        return Err(cannot(format!(
            "converting ({version}.{kind}) to ({}.{}): unknown conversion",
            into.internal_group(),
            into.kind
        )));
    }
    let want = into.api_version();
    if api_version != want {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({want})"
        )));
    }
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

/// The start of a body as upstream's errors quote it: 30 bytes and ` ...` when longer.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    match body.get(..MAX) {
        Some(head) if body.len() > MAX => format!("{} ...", String::from_utf8_lossy(head)),
        _ => String::from_utf8_lossy(body).into_owned(),
    }
}

/// `runtime.Unknown`: typeMeta {apiVersion = 1, kind = 2} = 1, raw = 2.
fn read_envelope(b: &[u8]) -> Result<(String, String, &[u8]), DecodeError> {
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut r = Reader(b);
    while let Some((tag, w)) = r.next()? {
        match (tag, w) {
            (1, Wire::Bytes(tm)) => {
                let mut t = Reader(tm);
                while let Some((tag, w)) = t.next()? {
                    match (tag, w) {
                        (1, Wire::Bytes(s)) => api_version = text(s),
                        (2, Wire::Bytes(s)) => kind = text(s),
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// A protobuf field as read off the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32,
}

impl Wire<'_> {
    fn number(self) -> u64 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64 => 1,
            Wire::Bytes(_) => 2,
            Wire::Fixed32 => 5,
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().ok_or(DecodeError::UnexpectedEof)?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::IntegerOverflow)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.0.len() {
            return Err(DecodeError::UnexpectedEof);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, DecodeError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (tag, wire) = (key >> 3, key & 7);
        let value = match wire {
            _ if tag == 0 => return Err(DecodeError::IllegalTag { tag, wire }),
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed64
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| DecodeError::InvalidLength)?;
                Wire::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed32
            }
            _ => return Err(DecodeError::IllegalTag { tag, wire }),
        };
        Ok(Some((tag, value)))
    }
}

/// Go's `string(bytes)`: invalid UTF-8 is carried as U+FFFD when encoded to JSON.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn wrong(field: &Field, wire: Wire<'_>) -> DecodeError {
    let mut go = field.json.to_string();
    if let Some(first) = go.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    DecodeError::WrongWireType {
        wire: wire.number(),
        field: go,
    }
}

/// Reads `buf` as `msg` into `out` (fields of inlined structs land in `out` too).
fn message(buf: &[u8], msg: &Message, out: &mut Map<String, Value>) -> Result<(), DecodeError> {
    let mut r = Reader(buf);
    while let Some((tag, wire)) = r.next()? {
        // Unknown fields are skipped, as a newer client's are by upstream.
        let Some(field) = msg.fields.iter().find(|f| f.tag == tag) else {
            continue;
        };
        if let (Label::Repeated, Wire::Bytes(b), Ty::Int32 | Ty::Int64 | Ty::Bool) =
            (field.label, wire, field.ty)
        {
            // A packed list of varints.
            let mut p = Reader(b);
            while !p.0.is_empty() {
                let v = value(field, Wire::Varint(p.varint()?))?;
                push(out, field.json, v);
            }
            continue;
        }
        if let (Label::Inline, Ty::Message(i), Wire::Bytes(b)) = (field.label, field.ty, wire) {
            if let Some(inner) = message_at(i) {
                message(b, inner, out)?;
            }
            continue;
        }
        let v = value(field, wire)?;
        match field.label {
            Label::Repeated => push(out, field.json, v),
            Label::Required => {
                out.insert(field.json.to_string(), v);
            }
            Label::Optional | Label::Inline => {
                if is_zero(&v) && !keeps_zero(msg, field) {
                    out.remove(field.json);
                } else if let (Value::Object(new), Some(Value::Object(old))) =
                    (&v, out.get_mut(field.json))
                {
                    // A message field seen twice is merged, as protobuf does.
                    for (k, x) in new {
                        old.insert(k.clone(), x.clone());
                    }
                } else {
                    out.insert(field.json.to_string(), v);
                }
            }
        }
    }
    Ok(())
}

/// The zero values `omitempty` leaves out, and the zero Time (`null`), which the `omitzero`
/// upstream's optional Time fields carry leaves out (kubectl 1.37 sends no
/// `creationTimestamp`); other messages (Go structs) are never empty to either.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
        Value::Object(_) | Value::Array(_) => false,
    }
}

fn push(out: &mut Map<String, Value>, key: &str, v: Value) {
    match out.get_mut(key) {
        Some(Value::Array(a)) => a.push(v),
        _ => {
            out.insert(key.to_string(), Value::Array(vec![v]));
        }
    }
}

/// One field's JSON value.
fn value(field: &Field, wire: Wire<'_>) -> Result<Value, DecodeError> {
    // Varints carry int32 sign-extended to 64 bits, so truncating recovers it.
    #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
    Ok(match (field.ty, wire) {
        (Ty::String, Wire::Bytes(b)) => json!(text(b)),
        (Ty::Bytes, Wire::Bytes(b)) => json!(base64_std(b)),
        (Ty::Bool, Wire::Varint(v)) => json!(v != 0),
        (Ty::Int32, Wire::Varint(v)) => json!(v as i32),
        (Ty::Int64, Wire::Varint(v)) => json!(v as i64),
        (Ty::Message(i), Wire::Bytes(b)) => match message_at(i) {
            Some(m) => typed(field, m, b)?,
            None => Value::Null,
        },
        (Ty::MapString | Ty::MapBytes | Ty::MapMessage(_), Wire::Bytes(b)) => map_entry(field, b)?,
        _ => return Err(wrong(field, wire)),
    })
}

/// A map entry (key = 1, value = 2) as a one-key object, merged by the caller.
fn map_entry(field: &Field, b: &[u8]) -> Result<Value, DecodeError> {
    let (mut key, mut val) = (String::new(), None);
    let mut r = Reader(b);
    while let Some((tag, wire)) = r.next()? {
        match (tag, field.ty, wire) {
            (1, _, Wire::Bytes(k)) => key = text(k),
            (2, Ty::MapString, Wire::Bytes(v)) => val = Some(json!(text(v))),
            (2, Ty::MapBytes, Wire::Bytes(v)) => val = Some(json!(base64_std(v))),
            (2, Ty::MapMessage(i), Wire::Bytes(v)) => {
                if let Some(m) = message_at(i) {
                    val = Some(typed(field, m, v)?);
                }
            }
            (1 | 2, _, w) => return Err(wrong(field, w)),
            _ => {}
        }
    }
    let empty = match field.ty {
        Ty::MapMessage(i) => match message_at(i) {
            Some(m) => typed(field, m, &[])?,
            None => Value::Null,
        },
        _ => json!(""),
    };
    let mut m = Map::new();
    m.insert(key, val.unwrap_or(empty));
    Ok(Value::Object(m))
}

/// A message's JSON: the apimachinery types with their own JSON form, or an object.
fn typed(field: &Field, m: &Message, b: &[u8]) -> Result<Value, DecodeError> {
    let mut obj = Map::new();
    message(b, m, &mut obj)?;
    let int = |k: &str| obj.get(k).and_then(Value::as_i64).unwrap_or(0);
    let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(match m.name {
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => time(int("seconds"), 0, false),
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            time(int("seconds"), int("nanos"), true)
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration" => json!(go_duration(int("duration"))),
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => {
            // The zero Quantity is written as "0".
            let q = s("string");
            json!(if q.is_empty() { "0".to_string() } else { q })
        }
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => {
            if int("type") == 1 {
                json!(s("strVal"))
            } else {
                json!(int("intVal"))
            }
        }
        "k8s.io.apimachinery.pkg.runtime.RawExtension"
        | "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1" => embedded_json(field, b)?,
        _ => Value::Object(obj),
    })
}

/// `raw` (field 1) of a RawExtension or FieldsV1: JSON carried as bytes; empty is `null`.
fn embedded_json(field: &Field, b: &[u8]) -> Result<Value, DecodeError> {
    let mut raw: &[u8] = &[];
    let mut r = Reader(b);
    while let Some((tag, wire)) = r.next()? {
        if let (1, Wire::Bytes(v)) = (tag, wire) {
            raw = v;
        }
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| DecodeError::EmbeddedJson {
        field: field.json,
        reason: e.to_string(),
    })
}

/// `metav1.Time` (nanos 0: to the second) or `MicroTime` (to the microsecond), UTC; the zero
/// time is `null`, as Go writes it.
fn time(seconds: i64, nanos: i64, micro: bool) -> Value {
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Ok(t) = Timestamp::new(seconds, i32::try_from(nanos).unwrap_or(0)) else {
        return Value::Null;
    };
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    json!(t.strftime(format).to_string())
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `150ms`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = match n {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(n, div));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let secs = fraction(rest, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

/// `n / div` with the fraction's trailing zeros dropped.
fn fraction(n: u64, div: u64) -> String {
    let (whole, frac) = (n / div, n % div);
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.ilog10() as usize;
    let f = format!("{frac:0width$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

fn base64_std(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[cfg(test)]
mod tests;
