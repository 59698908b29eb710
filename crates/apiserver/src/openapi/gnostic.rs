//! The protobuf form of an OpenAPI v2 document: gnostic's `openapi.v2.Document`, which is what
//! client-go's `OpenAPISchema` decodes (it asks for protobuf and unmarshals the body as such,
//! so a JSON answer fails there). Encoded from the JSON document, field by field, with the
//! field numbers of gnostic's OpenAPIv2.proto; vendor extensions and free-form values
//! (`default`, `enum`, `example`) travel as `Any.yaml`, JSON text being YAML too.

use serde_json::{Map, Value};

/// A protobuf message being written: fields in the order they are added.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    /// An embedded message; written even when empty, since presence can carry meaning.
    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }

    fn bool(&mut self, field: u32, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.key(field, 0);
            // Two's complement, as protobuf encodes a negative int64.
            self.varint(v as u64);
        }
    }

    fn double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }
}

fn str_of<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings<'a>(o: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a str> + use<'a> {
    o.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `Any { yaml = 2 }`.
fn any(v: &Value) -> Message {
    let mut m = Message::default();
    m.string(2, &v.to_string());
    m
}

/// `NamedAny { name = 1; value = 2 }` for every `x-` key of `o`, added as `field`.
fn vendor_extensions(m: &mut Message, field: u32, o: &Map<String, Value>) {
    for (k, v) in o.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Message::default();
        named.string(1, k);
        named.message(2, any(v));
        m.message(field, named);
    }
}

/// `Schema`.
fn schema(v: &Value) -> Message {
    let mut m = Message::default();
    let Some(o) = v.as_object() else {
        return m;
    };
    m.string(1, str_of(o, "$ref"));
    m.string(2, str_of(o, "format"));
    m.string(3, str_of(o, "title"));
    m.string(4, str_of(o, "description"));
    if let Some(d) = o.get("default") {
        m.message(5, any(d));
    }
    let f = |k: &str| o.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let i = |k: &str| o.get(k).and_then(Value::as_i64).unwrap_or(0);
    let b = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    m.double(6, f("multipleOf"));
    m.double(7, f("maximum"));
    m.bool(8, b("exclusiveMaximum"));
    m.double(9, f("minimum"));
    m.bool(10, b("exclusiveMinimum"));
    m.int64(11, i("maxLength"));
    m.int64(12, i("minLength"));
    m.string(13, str_of(o, "pattern"));
    m.int64(14, i("maxItems"));
    m.int64(15, i("minItems"));
    m.bool(16, b("uniqueItems"));
    m.int64(17, i("maxProperties"));
    m.int64(18, i("minProperties"));
    for r in strings(o, "required") {
        m.string(19, r);
    }
    for e in o
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(e));
    }
    match o.get("additionalProperties") {
        // AdditionalPropertiesItem { oneof { Schema schema = 1; bool boolean = 2; } }
        Some(Value::Bool(flag)) => {
            let mut item = Message::default();
            item.key(2, 0);
            item.varint(u64::from(*flag));
            m.message(21, item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(s));
            m.message(21, item);
        }
        _ => {}
    }
    match o.get("type") {
        Some(Value::String(t)) => {
            let mut item = Message::default();
            item.string(1, t);
            m.message(22, item);
        }
        Some(Value::Array(ts)) => {
            let mut item = Message::default();
            for t in ts.iter().filter_map(Value::as_str) {
                item.string(1, t);
            }
            m.message(22, item);
        }
        _ => {}
    }
    match o.get("items") {
        Some(s @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema(s));
            m.message(23, item);
        }
        Some(Value::Array(ss)) => {
            let mut item = Message::default();
            for s in ss {
                item.message(1, schema(s));
            }
            m.message(23, item);
        }
        _ => {}
    }
    for s in o
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(s));
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        m.message(25, named_schemas(props));
    }
    m.string(26, str_of(o, "discriminator"));
    m.bool(27, b("readOnly"));
    if let Some(e) = o.get("example") {
        m.message(30, any(e));
    }
    vendor_extensions(&mut m, 31, o);
    m
}

/// `Properties` / `Definitions`: `repeated NamedSchema additional_properties = 1`.
fn named_schemas(o: &Map<String, Value>) -> Message {
    let mut m = Message::default();
    for (name, s) in o {
        let mut named = Message::default();
        named.string(1, name);
        named.message(2, schema(s));
        m.message(1, named);
    }
    m
}

/// `ParametersItem { Parameter parameter = 1 }`, body or (query | path) non-body.
fn parameter(p: &Map<String, Value>) -> Message {
    let mut inner = Message::default();
    let mut param = Message::default();
    match str_of(p, "in") {
        "body" => {
            // BodyParameter { description = 1; name = 2; in = 3; required = 4; schema = 5 }
            inner.string(1, str_of(p, "description"));
            inner.string(2, str_of(p, "name"));
            inner.string(3, "body");
            inner.bool(
                4,
                p.get("required").and_then(Value::as_bool).unwrap_or(false),
            );
            if let Some(s) = p.get("schema") {
                inner.message(5, schema(s));
            }
            vendor_extensions(&mut inner, 6, p);
            param.message(1, inner);
        }
        location => {
            // Query and path sub-schemas share the first fields (required, in, description,
            // name); `type` is 6 for a query parameter and 5 for a path parameter.
            let (oneof_field, type_field) = if location == "path" { (4, 5) } else { (3, 6) };
            inner.bool(
                1,
                p.get("required").and_then(Value::as_bool).unwrap_or(false),
            );
            inner.string(2, location);
            inner.string(3, str_of(p, "description"));
            inner.string(4, str_of(p, "name"));
            inner.string(type_field, str_of(p, "type"));
            let mut non_body = Message::default();
            non_body.message(oneof_field, inner);
            param.message(2, non_body);
        }
    }
    let mut item = Message::default();
    item.message(1, param);
    item
}

/// `Operation`.
fn operation(o: &Map<String, Value>) -> Message {
    let mut m = Message::default();
    m.string(3, str_of(o, "description"));
    m.string(5, str_of(o, "operationId"));
    for p in strings(o, "produces") {
        m.string(6, p);
    }
    for c in strings(o, "consumes") {
        m.string(7, c);
    }
    for p in o
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(p) = p.as_object() {
            m.message(8, parameter(p));
        }
    }
    let mut responses = Message::default();
    for (code, r) in o
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let Some(r) = r.as_object() else { continue };
        // Response { description = 1; SchemaItem schema = 2 { Schema schema = 1 } }
        let mut response = Message::default();
        response.string(1, str_of(r, "description"));
        if let Some(s) = r.get("schema") {
            let mut item = Message::default();
            item.message(1, schema(s));
            response.message(2, item);
        }
        let mut value = Message::default();
        value.message(1, response);
        let mut named = Message::default();
        named.string(1, code);
        named.message(2, value);
        responses.message(1, named);
    }
    m.message(9, responses);
    vendor_extensions(&mut m, 13, o);
    m
}

/// The gnostic `Document` of a swagger 2.0 JSON document.
pub fn document(doc: &Value) -> Vec<u8> {
    let mut m = Message::default();
    let Some(o) = doc.as_object() else {
        return m.0;
    };
    m.string(1, str_of(o, "swagger"));
    if let Some(info) = o.get("info").and_then(Value::as_object) {
        let mut i = Message::default();
        i.string(1, str_of(info, "title"));
        i.string(2, str_of(info, "version"));
        m.message(2, i);
    }
    let mut paths = Message::default();
    for (path, item) in o
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let Some(item) = item.as_object() else {
            continue;
        };
        // PathItem { get = 2; put = 3; post = 4; delete = 5; options = 6; head = 7; patch = 8 }
        let mut pi = Message::default();
        for (method, field) in [
            ("get", 2),
            ("put", 3),
            ("post", 4),
            ("delete", 5),
            ("patch", 8),
        ] {
            if let Some(op) = item.get(method).and_then(Value::as_object) {
                pi.message(field, operation(op));
            }
        }
        let mut named = Message::default();
        named.string(1, path);
        named.message(2, pi);
        paths.message(2, named);
    }
    m.message(8, paths);
    if let Some(defs) = o.get("definitions").and_then(Value::as_object) {
        m.message(9, named_schemas(defs));
    }
    m.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Bytes worked out by hand from the protobuf wire format: the smallest document with a
    /// typed definition and a vendor extension.
    #[test]
    fn a_definition_with_a_type_and_an_extension_encodes_as_gnostic_does() {
        let doc = json!({"swagger": "2.0", "definitions": {"A": {"type": "string", "x-k": 1}}});
        let schema = [
            &[0xb2, 0x01, 0x08, 0x0a, 0x06][..], // type = 22 (TypeItem, 8 bytes): value = 1
            b"string",
            &[0xfa, 0x01, 0x0a, 0x0a, 0x03], // vendor_extension = 31 (10 bytes): name = 1
            b"x-k",
            &[0x12, 0x03, 0x12, 0x01, b'1'], // value = 2 (Any): yaml = 2 "1"
        ]
        .concat();
        let named = [&[0x0a, 0x01, b'A', 0x12, schema.len() as u8][..], &schema].concat();
        let defs = [&[0x0a, named.len() as u8][..], &named].concat();
        let want = [
            &[0x0a, 0x03][..],
            b"2.0",
            &[0x42, 0x00], // paths = 8, empty
            &[0x4a, defs.len() as u8],
            &defs,
        ]
        .concat();
        assert_eq!(document(&doc), want);
    }

    /// A length-delimited field with a one-byte key and length.
    fn field(key: u8, body: &[u8]) -> Vec<u8> {
        [&[key, body.len() as u8][..], body].concat()
    }

    /// What kubectl's fallback field-validation check reads: a PATCH operation's query
    /// parameter names and its `x-` extensions.
    #[test]
    fn an_operation_with_a_query_parameter_encodes_as_gnostic_does() {
        let op = json!({"operationId": "patchX", "x-kubernetes-action": "patch",
                        "parameters": [{"name": "fieldValidation", "in": "query", "type": "string"}]});
        let query = [
            field(0x12, b"query"),           // in = 2
            field(0x22, b"fieldValidation"), // name = 4
            field(0x32, b"string"),          // type = 6
        ]
        .concat();
        let non_body = field(0x1a, &query); // query_parameter_sub_schema = 3
        let parameter = field(0x12, &non_body); // non_body_parameter = 2
        let item = field(0x0a, &parameter); // ParametersItem.parameter = 1
        let extension = [
            field(0x0a, b"x-kubernetes-action"),     // name = 1
            field(0x12, &field(0x12, b"\"patch\"")), // value = 2: Any.yaml = 2
        ]
        .concat();
        let want = [
            field(0x2a, b"patchX"),  // operation_id = 5
            field(0x42, &item),      // parameters = 8
            field(0x4a, b""),        // responses = 9
            field(0x6a, &extension), // vendor_extension = 13
        ]
        .concat();
        assert_eq!(operation(op.as_object().expect("an object")).0, want);
    }
}
