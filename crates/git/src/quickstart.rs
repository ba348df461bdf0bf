//! `git xet quickstart`: the whole workflow on this machine in about a minute. Starts `git
//! xet server` on a free loopback port with a temporary data directory, pushes a large file
//! and a slightly edited version of it through the agent, clones them back, checks every
//! byte, and shows what moved over the wire, counted by the server.
//!
//! The push leaves every chunk in the per-user chunk store, which a clone by the same user
//! reads instead of the network. So the clone whose downloads the table shows runs as
//! another machine would (a chunk store of its own, empty), and a second clone with this
//! machine's store shows what the store saves.
//!
//! It never prints: the steps go to the caller's `step` callback as they begin, and the
//! table comes back as the report.
//!
//! The demo runs with its own git configuration (a temporary global config file) so that it
//! neither depends on nor changes the user's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};

use crate::GitError;
use git_xet_io::human::human_bytes;

pub struct Options {
    pub size_mib: u64,
    pub dir: Option<PathBuf>,
    /// The git-xet binary (runs the server and is the agent).
    pub program: String,
}

const REPO: &str = "demo/quickstart";

/// Byte counts the server reported for one step.
#[derive(Debug, Default, Clone, Copy)]
struct Moved {
    received: f64,
    served: f64,
    secs: f64,
}

/// What the demo showed.
#[derive(Debug, Clone)]
pub struct QuickstartReport {
    /// The table of bytes moved per step and the dedup ratio, ready to print.
    pub table: String,
    pub seconds: f64,
}

/// Runs the demo, telling `step` what it starts doing.
pub fn run(opts: &Options, step: &dyn Fn(&str)) -> Result<QuickstartReport, GitError> {
    let started = Instant::now();
    let (_keep, root) = match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| GitError::io(format!("creating {}", d.display()), e))?;
            (
                None,
                d.canonicalize()
                    .map_err(|e| GitError::io("resolving --dir", e))?,
            )
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("git-xet-quickstart-")
                .tempdir()
                .map_err(|e| GitError::io("creating a temporary directory", e))?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    step(&format!("working in {}", root.display()));
    enough_space(&root, opts.size_mib * 1024 * 1024)?;
    let mut server = Server::start(&opts.program, &root, step)?;
    let result = demo(opts, &root, &mut server, step);
    server.stop();
    Ok(QuickstartReport {
        table: result?,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Copies of the file the demo keeps at once, at most: the pushed repository's work tree and
/// objects, the server's xorbs, two clones with their objects and chunk stores.
const COPIES_KEPT: u64 = 12;

/// Refuses to start where the demo would fill the disk halfway through.
fn enough_space(root: &Path, size: u64) -> Result<(), GitError> {
    let needed = size.saturating_mul(COPIES_KEPT);
    match git_xet_io::platform::file::available_space(root) {
        Some(available) if available < needed => Err(GitError::NoSpace {
            dir: root.to_path_buf(),
            what: "the quickstart",
            needed,
            available,
            hint: " (--dir DIR), or a smaller file (--size-mib N)",
        }),
        _ => Ok(()),
    }
}

fn demo(
    opts: &Options,
    root: &Path,
    server: &mut Server,
    step: &dyn Fn(&str),
) -> Result<String, GitError> {
    let token = server.token(&opts.program)?;
    let git = DemoGit::new(root, &opts.program)?;
    let remote = format!("http://xet:{token}@{}/{REPO}.git", server.addr());
    let size = opts.size_mib * 1024 * 1024;

    let work = root.join("work");
    std::fs::create_dir_all(&work).map_err(|e| GitError::io("creating the work repository", e))?;
    git.run(&work, &["init", "-q", "-b", "main"])?;
    git.run(&work, &["lfs", "track", "*.bin"])?;
    git.run(&work, &["remote", "add", "origin", &remote])?;

    step(&format!("writing model.bin ({})", human_bytes(size)));
    let file = work.join("model.bin");
    write_random(&file, size)?;
    git.run(&work, &["add", ".gitattributes", "model.bin"])?;
    git.run(&work, &["commit", "-q", "-m", "version 1"])?;
    git.run(&work, &["tag", "v1"])?;
    step("pushing version 1");
    let push1 = server.measure(|| git.run(&work, &["push", "-q", "origin", "main", "v1"]))?;

    step("editing 4 KiB in the middle and pushing version 2");
    insert_middle(&file, size)?;
    git.run(&work, &["commit", "-q", "-am", "version 2: small edit"])?;
    let push2 = server.measure(|| git.run(&work, &["push", "-q", "origin", "main"]))?;

    step("cloning version 1 as another machine would (an empty chunk store of its own)");
    let elsewhere = git.with_cache(root.join("other-machine"));
    let clone = root.join("clone");
    let remote_str = remote.as_str();
    let clone_str = clone.to_string_lossy().into_owned();
    let pull1 = server.measure(|| {
        elsewhere.run(
            root,
            &["clone", "-q", "--branch", "v1", remote_str, &clone_str],
        )
    })?;
    let v1 = object_path(&git, &work, "v1:model.bin")?;
    same_bytes(&v1, &clone.join("model.bin"), "version 1")?;
    step("checking out version 2 in that clone");
    let pull2 = server.measure(|| elsewhere.run(&clone, &["checkout", "-q", "main"]))?;
    same_bytes(&file, &clone.join("model.bin"), "version 2")?;

    step("cloning again on this machine (the chunk store the push filled)");
    let local = root.join("clone-here");
    let local_str = local.to_string_lossy().into_owned();
    let here = server.measure(|| git.run(root, &["clone", "-q", remote_str, &local_str]))?;
    same_bytes(
        &file,
        &local.join("model.bin"),
        "version 2 (clone on this machine)",
    )?;

    let stored = server.metric("git_xet_stored_xorb_bytes")?;
    let logical = 2.0 * size as f64;
    let mut out = String::new();
    out.push_str(
        "\nall files came back bit-exact. Bytes on the wire, as the server counted them:\n\n",
    );
    out.push_str(&format!(
        "  {:<22} {:>12} {:>9}   {:>12} {:>9}\n",
        "", "uploaded", "push", "downloaded", "pull"
    ));
    for (name, push, pull) in [
        ("version 1 (new file)", push1, pull1),
        ("version 2 (4 KiB edit)", push2, pull2),
    ] {
        out.push_str(&format!(
            "  {:<22} {:>12} {:>8.1}s   {:>12} {:>8.1}s\n",
            name,
            human_bytes(push.received as u64),
            push.secs,
            human_bytes(pull.served as u64),
            pull.secs
        ));
    }
    out.push_str(&format!(
        "\n  downloaded: a clone on another machine. A clone on this machine downloaded {} \
         ({:.1}s):\n  the push left every chunk in this user's chunk store, which its clones \
         read instead.\n",
        human_bytes(here.served as u64),
        here.secs
    ));
    let ratio = if stored > 0.0 { logical / stored } else { 0.0 };
    out.push_str(&format!(
        "  dedup ratio: {ratio:.2}x ({} of file versions stored in {} of xorbs)\n",
        human_bytes(logical as u64),
        human_bytes(stored as u64)
    ));
    Ok(out)
}

/// git with the demo's own configuration.
struct DemoGit {
    config: PathBuf,
    cache: PathBuf,
}

impl DemoGit {
    fn new(root: &Path, program: &str) -> Result<DemoGit, GitError> {
        let config = root.join("gitconfig");
        let filter = crate::install::filter_command(program)
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        let text = format!(
            "[user]\n\tname = git-xet quickstart\n\temail = quickstart@localhost\n\
             [filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tsmudge = git-lfs smudge -- %f\n\
             \tprocess = {filter}\n\trequired = true\n\
             [lfs]\n\tlocksverify = false\n\
             [lfs \"customtransfer.xet\"]\n\tpath = {program}\n\targs = transfer\n\tconcurrent = true\n\
             [lfs \"customtransfer.xet-download\"]\n\tpath = {program}\n\targs = transfer\n\tdirection = download\n\
             [advice]\n\tdetachedHead = false\n"
        );
        std::fs::write(&config, text)
            .map_err(|e| GitError::io("writing the demo git config", e))?;
        Ok(DemoGit {
            config,
            cache: root.join("cache"),
        })
    }

    /// The same configuration with another cache and chunk store: another machine's.
    fn with_cache(&self, cache: PathBuf) -> DemoGit {
        DemoGit {
            config: self.config.clone(),
            cache,
        }
    }

    fn run(&self, dir: &Path, args: &[&str]) -> Result<(), GitError> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", &self.config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            // A cache of its own, so the demo's downloads are real on every run.
            .env("GIT_XET_CACHE_DIR", &self.cache)
            .env("GIT_XET_STORE", self.cache.join("store"))
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .stdin(Stdio::null())
            .output()
            .map_err(|source| GitError::Spawn {
                program: "git".into(),
                source,
            })?;
        if !out.status.success() {
            return Err(GitError::Command {
                command: format!("git {}", args.join(" ")),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    fn output(&self, dir: &Path, args: &[&str]) -> Result<String, GitError> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", &self.config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .map_err(|source| GitError::Spawn {
                program: "git".into(),
                source,
            })?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// The local LFS object of `rev:path` in `repo`.
fn object_path(git: &DemoGit, repo: &Path, spec: &str) -> Result<PathBuf, GitError> {
    let text = git.output(repo, &["cat-file", "blob", spec])?;
    let pointer = git_xet_lfs::pointer::Pointer::parse(format!("{text}\n").as_bytes())
        .map_err(git_xet_lfs::LfsError::from)?;
    Ok(repo
        .join(".git/lfs/objects")
        .join(pointer.oid.storage_path()))
}

fn write_random(path: &Path, size: u64) -> Result<(), GitError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let file = std::fs::File::create(path)
        .map_err(|e| GitError::io(format!("creating {}", path.display()), e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        w.write_all(&buf[..n])
            .map_err(|e| GitError::io("writing the demo file", e))?;
        left -= n as u64;
    }
    w.flush()
        .map_err(|e| GitError::io("writing the demo file", e))
}

/// Inserts 4 KiB in the middle of the file (a shift, which content-defined chunking absorbs).
fn insert_middle(path: &Path, size: u64) -> Result<(), GitError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |e| GitError::io("editing the demo file", e);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    let mid = size / 2;
    f.seek(SeekFrom::Start(mid)).map_err(io)?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).map_err(io)?;
    f.seek(SeekFrom::Start(mid)).map_err(io)?;
    f.write_all(&[0x42; 4096]).map_err(io)?;
    f.write_all(&tail).map_err(io)
}

fn same_bytes(a: &Path, b: &Path, what: &str) -> Result<(), GitError> {
    use std::io::Read;
    let open = |p: &Path| {
        std::fs::File::open(p).map_err(|e| GitError::io(format!("opening {}", p.display()), e))
    };
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let na = read_full(&mut fa, &mut ba).map_err(|e| GitError::io("comparing files", e))?;
        let nb = read_full(&mut fb, &mut bb).map_err(|e| GitError::io("comparing files", e))?;
        if na != nb || ba[..na] != bb[..nb] {
            return Err(GitError::ContentMismatch {
                what: what.to_string(),
            });
        }
        if na == 0 {
            return Ok(());
        }
    }

    fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..])? {
                0 => break,
                k => n += k,
            }
        }
        Ok(n)
    }
}

/// The demo's `git xet server`.
struct Server {
    child: Option<Child>,
    url: String,
    data: PathBuf,
    log: PathBuf,
}

impl Server {
    fn start(program: &str, root: &Path, step: &dyn Fn(&str)) -> Result<Server, GitError> {
        let data = root.join("server-data");
        let ready = root.join("server.ready");
        let log = root.join("server.log");
        let _ = std::fs::remove_file(&ready);
        let log_file =
            std::fs::File::create(&log).map_err(|e| GitError::io("creating the server log", e))?;
        step("starting `git xet server` on a free loopback port");
        let child = Command::new(program)
            .args(["server", "--listen", "127.0.0.1:0", "--data"])
            .arg(&data)
            .arg("--ready-file")
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|source| GitError::Spawn {
                program: program.into(),
                source,
            })?;
        let mut server = Server {
            child: Some(child),
            url: String::new(),
            data,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(url) = std::fs::read_to_string(&ready) {
                if !url.trim().is_empty() {
                    server.url = url.trim().to_string();
                    return Ok(server);
                }
            }
            let exited = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(&server.log).unwrap_or_default();
                server.stop();
                return Err(GitError::ServerStart { log });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn addr(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches('/')
    }

    fn token(&self, program: &str) -> Result<String, GitError> {
        let out = Command::new(program)
            .args([
                "server", "token", "create", "--repo", REPO, "--scope", "write", "--ttl", "3600",
                "--data",
            ])
            .arg(&self.data)
            .output()
            .map_err(|source| GitError::Spawn {
                program: program.into(),
                source,
            })?;
        if !out.status.success() {
            return Err(GitError::Command {
                command: format!("{program} server token create"),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn metric(&self, name: &str) -> Result<f64, GitError> {
        let url = format!("{}/metrics", self.url);
        // The quickstart's own server on loopback: the factory's defaults.
        let http = git_xet_client::HttpFactory::default();
        let rt = git_xet_io::runtime::handle().map_err(GitError::Runtime)?;
        let text = rt.block_on(async {
            let transport = |source| GitError::Http {
                url: url.clone(),
                source,
            };
            let request = http
                .request(reqwest::Method::GET, &url)
                .map_err(transport)?;
            let response = request
                .send()
                .await
                .map_err(|e| transport(http.classify(&url, &e)))?;
            if !response.status().is_success() {
                return Err(GitError::HttpStatus {
                    url: url.clone(),
                    status: response.status().as_u16(),
                });
            }
            response
                .text()
                .await
                .map_err(|e| transport(http.classify(&url, &e)))
        })?;
        Ok(text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (key, value) = l.rsplit_once(' ')?;
                (key.split('{').next()? == name)
                    .then(|| value.parse::<f64>().ok())
                    .flatten()
            })
            .sum())
    }

    /// Runs `step` and reports the xorb bytes the server received and served meanwhile.
    fn measure(&self, step: impl FnOnce() -> Result<(), GitError>) -> Result<Moved, GitError> {
        let (r0, s0) = (
            self.metric("git_xet_xorb_bytes_received_total")?,
            self.metric("git_xet_xorb_bytes_served_total")?,
        );
        let t = Instant::now();
        step()?;
        let secs = t.elapsed().as_secs_f64();
        let (r1, s1) = (
            self.metric("git_xet_xorb_bytes_received_total")?,
            self.metric("git_xet_xorb_bytes_served_total")?,
        );
        Ok(Moved {
            received: r1 - r0,
            served: s1 - s0,
            secs,
        })
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = git_xet_io::platform::process::terminate(&child);
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demo_that_cannot_fit_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let err = enough_space(dir.path(), 1 << 60).unwrap_err();
        assert!(
            matches!(err, GitError::NoSpace { needed, available, .. } if needed > available),
            "{err}"
        );
        assert!(err.to_string().contains("--size-mib"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        enough_space(dir.path(), 1).unwrap();
    }
}
