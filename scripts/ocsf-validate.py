#!/usr/bin/env python3
"""Validates OCSF events, one JSON object per line of FILE (or standard input), against the
OCSF schema of the version each names (`metadata.version`), with the JSON Schema of its class
(`class_uid`) that `ocsf-json-schema` derives from schema.ocsf.io's export of that version.

Prints `ok N events (class counts)` and exits 0, or names the first invalid line, the class and
every error, and exits 1. Run through `scripts/ocsf.sh validate FILE` (its venv has both
packages)."""

import json
import sys
from collections import Counter

import jsonschema
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema, get_packaged_versions


def main() -> int:
    src = open(sys.argv[1], encoding="utf-8") if len(sys.argv) > 1 else sys.stdin
    schemas: dict[str, OcsfJsonSchemaEmbedded] = {}
    validators: dict[tuple[str, int], jsonschema.Draft202012Validator] = {}
    classes: Counter[str] = Counter()
    n = 0
    for number, line in enumerate(src, 1):
        if not line.strip():
            continue
        event = json.loads(line)
        version = event.get("metadata", {}).get("version")
        if version not in get_packaged_versions():
            print(f"line {number}: metadata.version {version!r} is no OCSF version known here")
            return 1
        if version not in schemas:
            schemas[version] = OcsfJsonSchemaEmbedded(get_ocsf_schema(version))
        uid = event.get("class_uid")
        key = (version, uid)
        if key not in validators:
            name = schemas[version].lookup_class_name_from_uid(uid)
            schema = schemas[version].get_class_schema(name)
            validators[key] = jsonschema.Draft202012Validator(schema)
        errors = sorted(validators[key].iter_errors(event), key=lambda e: list(e.path))
        if errors:
            print(f"line {number}: class {uid} (OCSF {version}) is invalid:")
            for e in errors:
                print(f"  at {'/'.join(map(str, e.path)) or '(top)'}: {e.message}")
            return 1
        classes[f"{uid}/{event.get('activity_id')}"] += 1
        n += 1
    print(f"ok {n} events ({dict(sorted(classes.items()))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
