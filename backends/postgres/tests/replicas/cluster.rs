//! A primary and its hot standbys as containers (testcontainers) on a Docker network of
//! their own: the project's PostgreSQL image (`CORTEX_TEST_PG_IMAGE`, built by
//! scripts/build-images.sh), whose entrypoint makes a standby from its primary with
//! `pg_basebackup -R -X stream` when `CORTEX_STANDBY_OF` names it. One primary per test
//! process, started at its first use; each kind of standby at its first use.
//!
//! The containers and the network outlive the test process, as the other container suites'
//! do: they carry the label `cortex.test=postgres`, by which scripts/test-docker.sh removes
//! them. Stopping, freezing or cutting off a standby goes through the `docker` command
//! (testcontainers has no network disconnect).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::OnceCell;

/// Where a server of the cluster is.
#[derive(Debug, Clone)]
pub struct Server {
    /// The container's id, for `docker stop` and `docker network disconnect`.
    pub id: String,
    /// Its name on the cluster's network.
    pub name: String,
    /// A URL from this host (through the published port).
    pub url: String,
}

/// A standby started once, at its first use, or why it could not be.
type Starting = OnceCell<Result<Server, String>>;

/// The primary, and the standbys started so far by kind.
#[derive(Debug)]
pub struct Cluster {
    pub network: String,
    pub primary: Server,
    image: String,
    standbys: Mutex<HashMap<String, Arc<Starting>>>,
}

/// Why the replica tests cannot run here, or `None`: they need the project's image
/// (`CORTEX_TEST_PG_IMAGE`, whose entrypoint makes standbys) and a Docker engine.
pub fn image() -> Result<String, String> {
    std::env::var("CORTEX_TEST_PG_IMAGE")
        .ok()
        .map(|image| image.trim().to_owned())
        .filter(|image| !image.is_empty())
        .ok_or_else(|| {
            "CORTEX_TEST_PG_IMAGE is not set: the replica tests need the project's PostgreSQL \
             image (scripts/build-images.sh postgres), and run from scripts/test-docker.sh"
                .to_owned()
        })
}

/// The cluster of this process, started on first use.
pub async fn cluster() -> Result<Arc<Cluster>, String> {
    static CLUSTER: OnceCell<Result<Arc<Cluster>, String>> = OnceCell::const_new();
    CLUSTER.get_or_init(start_cluster).await.clone()
}

async fn start_cluster() -> Result<Arc<Cluster>, String> {
    let image = image()?;
    docker(&["info", "--format", "{{.ServerVersion}}"])
        .map_err(|e| format!("no Docker engine answers: {e}"))?;
    let network = format!("cortex-replicas-{}", unique());
    docker(&[
        "network",
        "create",
        "--label",
        "cortex.test=postgres",
        &network,
    ])?;
    let primary = start(&image, &network, "primary", None, &[]).await?;
    Ok(Arc::new(Cluster {
        network,
        primary,
        image,
        standbys: Mutex::new(HashMap::new()),
    }))
}

impl Cluster {
    /// The standby of kind `kind`, started at its first use with `settings` (`name=value`
    /// server settings such as `recovery_min_apply_delay=300ms`).
    pub async fn standby(&self, kind: &str, settings: &[&str]) -> Result<Server, String> {
        let cell = Arc::clone(
            self.standbys
                .lock()
                .unwrap()
                .entry(kind.to_owned())
                .or_default(),
        );
        cell.get_or_init(|| async {
            let of = format!("{}:5432", self.primary.name);
            start(&self.image, &self.network, kind, Some(&of), settings).await
        })
        .await
        .clone()
    }

    /// The standby whose replay is held 300 ms behind the primary
    /// (`recovery_min_apply_delay`): one per test process, for the tests that need a lag.
    pub async fn delayed_standby(&self) -> Server {
        self.standby("delayed", &["recovery_min_apply_delay=300ms"])
            .await
            .expect("a delayed standby")
    }

    /// Stops `server` (`docker stop`: the server shuts down fast, its sessions ended).
    pub fn stop(&self, server: &Server) -> Result<(), String> {
        docker(&["stop", "--time", "5", &server.id]).map(drop)
    }

    /// Cuts `server` off the network: the primary cannot reach it, nor can this host
    /// through its published port, which goes with the network (Docker's proxy then
    /// refuses new connections and closes the ones it carried).
    pub fn disconnect(&self, server: &Server) -> Result<(), String> {
        let network = self.network.as_str();
        docker(&["network", "disconnect", "--force", network, &server.id]).map(drop)
    }

    /// Freezes `server` (`docker pause`): its connections stay open and its kernel takes
    /// every packet, but nothing answers, as a server hung or behind a link that drops
    /// packets without closing anything.
    pub fn pause(&self, server: &Server) -> Result<(), String> {
        docker(&["pause", &server.id]).map(drop)
    }

    /// Thaws a server [`pause`](Self::pause) froze.
    pub fn unpause(&self, server: &Server) -> Result<(), String> {
        docker(&["unpause", &server.id]).map(drop)
    }
}

/// Runs `docker args`, its standard output or why it failed.
fn docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("running docker {}: {e}", args.join(" ")))?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        false => Err(format!(
            "docker {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A suffix no other container or network of this machine has.
fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

/// Starts one server on a thread of its own (its runtime ends with it; the container is
/// kept), and waits until it answers from here.
async fn start(
    image: &str,
    network: &str,
    kind: &str,
    standby_of: Option<&str>,
    settings: &[&str],
) -> Result<Server, String> {
    let name = format!("cortex-{kind}-{}", unique());
    let (image, network, standby_of) = (
        image.to_owned(),
        network.to_owned(),
        standby_of.map(str::to_owned),
    );
    let mut cmd = vec!["postgres".to_owned()];
    for setting in settings {
        cmd.push("-c".into());
        cmd.push((*setting).to_owned());
    }
    let container_name = name.clone();
    let started = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            use testcontainers::core::{IntoContainerPort, WaitFor};
            use testcontainers::runners::AsyncRunner;
            use testcontainers::{GenericImage, ImageExt};
            let (repository, tag) = match image.rsplit_once(':') {
                Some((name, tag)) if !tag.contains('/') => (name.to_owned(), tag.to_owned()),
                _ => (image.clone(), "latest".to_owned()),
            };
            let ready = match standby_of {
                Some(_) => "database system is ready to accept read-only connections",
                None => "database system is ready to accept connections",
            };
            let mut request = GenericImage::new(repository, tag)
                .with_exposed_port(5432.tcp())
                .with_wait_for(WaitFor::message_on_stderr(ready))
                .with_env_var("POSTGRES_PASSWORD", "postgres")
                .with_label("cortex.test", "postgres")
                .with_network(network)
                .with_container_name(container_name)
                .with_startup_timeout(Duration::from_secs(120))
                .with_cmd(cmd);
            if let Some(primary) = standby_of {
                request = request.with_env_var("CORTEX_STANDBY_OF", primary);
            }
            let container = request
                .start()
                .await
                .map_err(|e| format!("starting a container of {image}: {e}"))?;
            let port = container
                .get_host_port_ipv4(5432)
                .await
                .map_err(|e| format!("its port: {e}"))?;
            let id = container.id().to_owned();
            // Kept past this runtime and this process; scripts/test-docker.sh removes it.
            std::mem::forget(container);
            Ok::<_, String>((id, port))
        })
    })
    .join()
    .map_err(|_| "the thread starting a container panicked".to_owned())?;
    let (id, port) = started?;
    let url = format!("postgres://postgres:postgres@127.0.0.1:{port}/postgres?sslmode=disable");
    for _ in 0..120 {
        if tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .is_ok()
        {
            return Ok(Server { id, name, url });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!("{name} never accepted connections at {url}"))
}
