#!/usr/bin/env python3
"""Writes crates/apiserver/src/protobuf/schema.rs: the protobuf schema of every kind the API
server can decode, as a table (message -> fields: tag, JSON name, type).

Field numbers, wire types and message types come from k8s-pb's prost attributes (kube-rs's
bindings generated from k8s.io/api's generated.proto files); JSON names and which fields are
required come from k8s-openapi's serde field keys for the same type (prost renames fields to
snake_case and loses names such as `podIP`). Both crates are read from the cargo registry's
sources, at the versions below (k8s-openapi is a dependency; k8s-pb is not, and
`cargo info k8s-pb@0.9.0` puts its source there); run again after bumping either:

    scripts/gen-protobuf-schema.py > crates/apiserver/src/protobuf/schema.rs

It reports on stderr the messages whose JSON names are guessed (camelCase of the Rust name:
apimachinery types with JSON forms of their own) and the inlined Go structs.
"""
import glob
import os
import re
import sys

K8S_PB = "k8s-pb-0.9.0"
K8S_OPENAPI = "k8s-openapi-0.29.0"
OPENAPI_VERSION = "v1_35"

# The group-versions whose kinds are in the table: what the server serves, and the ones a
# client may send a body of (autoscaling/v1 Scale).
GROUP_VERSIONS = [
    "v1",
    "apps/v1",
    "autoscaling/v1",
    "batch/v1",
    "coordination.k8s.io/v1",
    "events.k8s.io/v1",
    "policy/v1",
    "resource.k8s.io/v1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1",
]


def registry_src(name):
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = glob.glob(os.path.join(home, "registry", "src", "*", name))
    if not found:
        sys.exit(f"{name} is not in the cargo registry's sources; `cargo info {name.replace('-0', '@0', 1)}` fetches it")
    return found[0]


def camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def parse_pb(root):
    """Module path -> {struct name -> [field]}, and the kinds: (apiVersion, kind, module, name)."""
    modules, kinds = {}, []
    for path in glob.glob(os.path.join(root, "src", "**", "mod.rs"), recursive=True):
        mod = os.path.relpath(os.path.dirname(path), os.path.join(root, "src")).split(os.sep)
        text = open(path).read()
        structs = {}
        for m in re.finditer(r"pub struct (\w+) \{\n(.*?)\n\}", text, re.S):
            fields, attr, decl = [], None, None
            for line in m.group(2).split("\n"):
                s = line.strip()
                if s.startswith("#[prost("):
                    attr = s
                elif attr and (decl is not None or s.startswith("pub ")):
                    decl = (decl or "") + s
                    if decl.endswith(",") and decl.count("<") == decl.count(">"):
                        fields.append((attr, decl))
                        attr, decl = None, None
            structs[m.group(1)] = fields
        modules[tuple(mod)] = structs
        for m in re.finditer(
            r'impl crate::Resource for (\w+) \{\s*const API_VERSION: &\'static str = "([^"]*)";'
            r'.*?const KIND: &\'static str = "([^"]*)";',
            text,
            re.S,
        ):
            kinds.append((m.group(2), m.group(3), tuple(mod), m.group(1)))
    return modules, kinds


def parse_openapi(root):
    """(module path, lowercased struct name) -> (name, {rust field -> (json key, required)})."""
    index = {}
    base = os.path.join(root, "src", OPENAPI_VERSION)
    for path in glob.glob(os.path.join(base, "**", "*.rs"), recursive=True):
        text = open(path).read()
        m = re.search(r"pub struct (\w+) \{\n(.*?)\n\}", text, re.S)
        if not m:
            continue
        required = {}
        for f in re.finditer(r"^    pub (?:r#)?(\w+): (.*),$", m.group(2), re.M):
            required[f.group(1)] = not f.group(2).startswith("Option<")
        keys = {}
        for k in re.finditer(r'"([^"]+)" => Field::Key_(\w+),', text):
            keys[k.group(2)] = (k.group(1), required.get(k.group(2), False))
        mod = tuple(os.path.relpath(os.path.dirname(path), base).split(os.sep))
        index[(mod, m.group(1).lower())] = (m.group(1), keys)
    return index


def resolve(mod, ty):
    """The (module, struct) a field's Rust type names."""
    names = [
        t
        for t in re.findall(r"((?:super::)*(?:[a-z_0-9]+::)*[A-Z]\w*)", ty)
        if t.split("::")[-1] not in ("Option", "Vec", "String", "BTreeMap", "Box")
        and not t.startswith(("::", "core::", "prost::", "alloc::", "std::"))
    ]
    if len(names) != 1:
        sys.exit(f"cannot tell the message type of {ty!r} in {mod}")
    parts = names[0].split("::")
    up = parts.count("super")
    base = list(mod[: len(mod) - up]) if up else list(mod)
    rest = [p for p in parts if p != "super"]
    return tuple(base + rest[:-1]), rest[-1]


def main():
    modules, kinds = parse_pb(registry_src(K8S_PB))
    openapi = parse_openapi(registry_src(K8S_OPENAPI))

    order, index = [], {}

    def visit(key, inherited=None):
        if key in index:
            return index[key]
        index[key] = len(order)
        order.append([key, None])
        mod, name = key
        fields = modules.get(mod, {}).get(name)
        if fields is None:
            sys.exit(f"no message {name} in {mod}")
        api = openapi.get((mod, name.lower()))
        # An inlined Go struct (`json:",inline"`) has no k8s-openapi type of its own: its
        # fields' JSON names are its parent's.
        keys = api[1] if api else (inherited or {})
        if not api and not inherited:
            print(f"{name}: no k8s-openapi type, JSON names by camelCase", file=sys.stderr)
        out = []
        for attr, decl in fields:
            rust = re.match(r"pub (?:r#)?(\w+):", decl).group(1)
            tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
            json_name, required = keys.get(rust, (camel(rust), False))
            repeated = ", repeated" in attr
            kind = attr[len("#[prost(") :].split(",")[0].split(" ")[0]
            if kind == "btree_map":
                k, v = re.search(r'btree_map = "(\w+), (\w+)"', attr).groups()
                if k != "string":
                    sys.exit(f"map key {k} in {name}.{rust}")
                if v == "message":
                    ty = f"MapMessage({visit(resolve(mod, decl))})"
                else:
                    ty = {"string": "MapString", "bytes": "MapBytes"}[v]
            elif kind == "message":
                inline = api is not None and rust not in keys
                ty = f"Message({visit(resolve(mod, decl), keys if inline else None)})"
                if inline:
                    repeated, required = False, False
                    print(f"{name}.{rust}: inline", file=sys.stderr)
            else:
                ty = {
                    "string": "String",
                    "bytes": "Bytes",
                    "bool": "Bool",
                    "int32": "Int32",
                    "int64": "Int64",
                    "double": "Double",
                }[kind]
            if kind == "message" and inline:
                label = "Inline"
            else:
                label = "Repeated" if repeated else ("Required" if required else "Optional")
            out.append((tag, json_name, ty, label))
        proto = "k8s.io." + ".".join(mod) + "." + (api[0] if api else name)
        order[index[key]][1] = (proto, out)
        return index[key]

    roots = [
        (av, kind, visit((mod, name)))
        for av, kind, mod, name in sorted(kinds)
        if av in GROUP_VERSIONS and not kind.endswith("List")
    ]

    w = sys.stdout.write
    w(
        f"// @generated by scripts/gen-protobuf-schema.py from {K8S_PB} and {K8S_OPENAPI}\n"
        f"// ({OPENAPI_VERSION}): do not edit; run the script again instead.\n\n"
        "use super::{Field, Label::*, Message, Ty::*};\n\n"
        "/// The top-level kinds: apiVersion, kind, message.\n"
        "pub(super) static KINDS: &[(&str, &str, u16)] = &[\n"
    )
    for av, kind, i in roots:
        w(f'    ("{av}", "{kind}", {i}),\n')
    w("];\n\n/// Every message the kinds reach, by index.\n")
    w("pub(super) static MESSAGES: &[Message] = &[\n")
    for i, (_, (proto, fields)) in enumerate(order):
        w(f'    // {i}\n    Message {{\n        name: "{proto}",\n        fields: &[\n')
        for tag, json_name, ty, label in fields:
            w(f'            Field {{ tag: {tag}, json: "{json_name}", ty: {ty}, label: {label} }},\n')
        w("        ],\n    },\n")
    w("];\n")


if __name__ == "__main__":
    main()
