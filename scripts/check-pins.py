#!/usr/bin/env python3
"""Fails unless every base image of the given Dockerfiles is pinned by digest.

A tag (`rust:1-bookworm`) names whatever its publisher pushed last: a build from it is not
reproducible, and a compromised or moved tag changes the image without a change here. So each
`FROM` must resolve, through the `ARG` defaults it uses, to `NAME[:TAG]@sha256:<64 hex>`, the
name of an earlier stage, or `scratch`. A `FROM` whose image an `ARG` without a default
supplies is refused too: its value comes from the command line, where nothing checks it.

    scripts/check-pins.py Dockerfile debug-image/Dockerfile
    scripts/check-pins.py --self-test

Refresh a pin with `docker buildx imagetools inspect IMAGE` (the index digest, for every
platform) and edit the ARG's default.
"""
import re
import sys

DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def lines(text):
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        out.append(cur + s)
        cur = ""
    if cur:
        out.append(cur)
    return out


def problems(text, path="Dockerfile"):
    """Each base image of `text` that is not pinned, as a sentence naming it."""
    args, stages, found = {}, set(), []
    for n, line in enumerate(lines(text), 1):
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG":
            name, eq, default = rest.strip().partition("=")
            args[name.strip()] = default.strip().strip('"') if eq else None
        elif word == "FROM":
            parts = [p for p in rest.split() if not p.startswith("--")]
            if not parts:
                found.append(f"{path}: FROM without an image")
                continue
            image = parts[0]
            unset = [v for v in VAR.findall(image) if args.get(v) is None]
            if unset:
                found.append(
                    f"{path}: FROM {image}: ARG {', '.join(unset)} has no default, so the "
                    "image comes unchecked from the command line; give it a pinned default"
                )
                continue
            resolved = VAR.sub(lambda m: args[m.group(1)], image)
            earlier_stage = resolved.lower() in stages
            if len(parts) >= 3 and parts[1].upper() == "AS":
                stages.add(parts[2].lower())
            if resolved == "scratch" or earlier_stage:
                continue
            if not DIGEST.match(resolved):
                found.append(
                    f"{path}: FROM {resolved} is not pinned by digest (NAME:TAG@sha256:...); "
                    f"pin it with the digest `docker buildx imagetools inspect {resolved}` prints"
                )
    return found


def self_test():
    pin = "@sha256:" + "a" * 64
    ok = [
        f"FROM rust:1-bookworm{pin} AS build\nFROM build\n",
        f"ARG IMG=debian:12{pin}\nFROM ${{IMG}}\n",
        f"ARG IMG=debian:12{pin}\nFROM --platform=$BUILDPLATFORM $IMG AS x\nFROM scratch\n",
        f"# FROM unpinned:1\nFROM debian{pin}\n",
    ]
    bad = [
        "FROM rust:1-bookworm\n",
        "ARG IMG=debian:12\nFROM ${IMG}\n",
        "ARG IMG\nFROM ${IMG}\n",
        f"FROM debian@sha256:{'a' * 63}\n",
        f"FROM a{pin} AS one\nFROM two\n",
    ]
    for text in ok:
        assert problems(text) == [], (text, problems(text))
    for text in bad:
        assert problems(text), text
    print("check-pins self-test: ok")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    found = []
    for path in argv:
        with open(path, encoding="utf-8") as f:
            found += problems(f.read(), path)
    for p in found:
        print(p, file=sys.stderr)
    if not found:
        print(f"base images pinned by digest: {', '.join(argv)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
