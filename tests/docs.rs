//! The docs and code comments name only files that exist: every repository path
//! (`crates/...`, `src/...`, `tests/...`, `docs/...`, `scripts/...`, ...) written in
//! README.md, docs/*.md and the comments of every crate's code is checked against the tree, so
//! a file moved or renamed does not leave its old name behind. The programs' help texts, which
//! users read where no source tree exists, name none at all.

use std::path::{Path, PathBuf};

/// Where repository paths start.
const ROOTS: &[&str] = &[
    "crates/",
    "src/",
    "tests/",
    "docs/",
    "scripts/",
    "fixtures/",
    "fuzz/",
    "hooks/",
    ".ci/",
];

/// Paths in other projects' repositories that the comments cite by name (git-lfs's docs).
const FOREIGN: &[&str] = &[
    "docs/api/",
    "docs/spec.md",
    "docs/custom-transfers.md",
    "docs/proposals/",
];

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// The repository paths named in `text`: a root at a word start, up to the first character
/// that cannot be in a path. Patterns (`locks*.rs`, `{a,b}`, `<name>`) are left out.
fn named_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (start, _) in text.char_indices() {
        let rest = &text[start..];
        if !ROOTS.iter().any(|r| rest.starts_with(r)) {
            continue;
        }
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| is_path_char(c) || c == '$' || c == '~') {
            continue;
        }
        let len = rest.find(|c| !is_path_char(c)).unwrap_or(rest.len());
        if rest[len..].starts_with(['*', '{', '<']) {
            continue;
        }
        let path = rest[..len].trim_end_matches(['.', '-']);
        if FOREIGN.iter().any(|f| path.starts_with(f)) {
            continue;
        }
        found.push(path.to_string());
    }
    found
}

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn every_path_the_docs_and_comments_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    files_under(&root.join("docs"), "md", &mut files);
    files_under(&root.join("src"), "rs", &mut files);
    files_under(&root.join("tests"), "rs", &mut files);
    files_under(&root.join("examples"), "rs", &mut files);
    files_under(&root.join("crates"), "rs", &mut files);
    files_under(&root.join("crates"), "md", &mut files);
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            // In code, only comments name files for readers.
            let is_rs = file.extension().is_some_and(|e| e == "rs");
            if is_rs && !line.trim_start().starts_with("//") {
                continue;
            }
            for path in named_paths(line) {
                checked += 1;
                if !root.join(&path).exists() {
                    let shown = file.strip_prefix(root).unwrap().display();
                    missing.push(format!("{shown}:{}: {path}", n + 1));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "named but missing:\n{}",
        missing.join("\n")
    );
}

#[test]
fn paths_are_found_as_readers_see_them() {
    assert_eq!(
        named_paths("see src/lib.rs. and `docs/server.md`, not x/src/a.rs"),
        ["src/lib.rs", "docs/server.md"]
    );
    assert!(
        named_paths("crates/server/src/lfs/locks*.rs and src/{a,b}/ and $HOME/src/x").is_empty()
    );
    assert!(named_paths("git-lfs's docs/api/batch.md").is_empty());
}

/// Every command's help, as its man page holds it (both programs write them with the hidden
/// `generate-docs`), names no path of this repository: users read it on machines without the
/// source tree.
#[test]
fn help_texts_name_no_repository_path() {
    let dir = tempfile::tempdir().unwrap();
    for (program, out) in [
        (env!("CARGO_BIN_EXE_git-xet"), dir.path().join("client")),
        (
            env!("CARGO_BIN_EXE_git-xet-server"),
            dir.path().join("server"),
        ),
    ] {
        let status = std::process::Command::new(program)
            .arg("generate-docs")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{program} generate-docs: {status}");
    }
    let mut pages = Vec::new();
    files_under(dir.path(), "1", &mut pages);
    assert!(pages.len() > 20, "only {} man pages written", pages.len());
    let mut named = Vec::new();
    for page in &pages {
        // roff escapes a hyphen as `\-`; the paths are read as users see them.
        let text = std::fs::read_to_string(page).unwrap().replace("\\-", "-");
        for path in named_paths(&text) {
            let shown = page.file_name().unwrap().to_string_lossy().into_owned();
            named.push(format!("{shown}: {path}"));
        }
    }
    assert!(
        named.is_empty(),
        "help texts naming repository paths:\n{}",
        named.join("\n")
    );
}

/// The names of the packages in one manifest's `[dependencies]` table (not dev- or build-).
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if !inside || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            names.push(name.strip_suffix(".workspace").unwrap_or(name).to_string());
        }
    }
    names
}

/// The layers as the architecture draws them: no library parses arguments, draws bars or sets
/// up logging (the programs do), the client side and the server side never depend on each
/// other, and the protocol core depends on no other crate of the workspace.
#[test]
fn libraries_depend_downward_only() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let program_only = [
        "clap",
        "clap_complete",
        "clap_mangen",
        "indicatif",
        "tracing-subscriber",
    ];
    let client_side = [
        "git-xet-client",
        "git-xet-lfs",
        "git-xet-git",
        "git-xet-mount",
    ];
    let server_side = [
        "git-xet-server",
        "git-xet-storage",
        "git-xet-index",
        "git-xet-identity",
        "git-xet-deployment",
        "git-xet-hook",
        "git-xet-shell",
        "git-xet-upkeep",
        "git-xet-web",
    ];
    let mut wrong = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        seen += 1;
        let name = format!("git-xet-{}", dir.file_name().unwrap().to_string_lossy());
        let deps = normal_dependencies(&manifest);
        for dep in &deps {
            let forbidden = program_only.contains(&dep.as_str())
                || (client_side.contains(&name.as_str()) && server_side.contains(&dep.as_str()))
                || (server_side.contains(&name.as_str()) && client_side.contains(&dep.as_str()))
                || (name == "git-xet-core" && dep.starts_with("git-xet-"));
            if forbidden {
                wrong.push(format!("{name} depends on {dep}"));
            }
        }
    }
    assert!(seen >= 10, "only {seen} crates found under crates/");
    assert!(
        wrong.is_empty(),
        "dependencies against the layers:\n{}",
        wrong.join("\n")
    );
}

/// The ssh shell relays to the server over HTTP: neither it nor any workspace crate it
/// builds on links the server or an HTTP server framework.
#[test]
fn the_ssh_shell_links_no_http_server() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let deps_of = |name: &str| -> Vec<String> {
        let dir = crates.join(name.strip_prefix("git-xet-").unwrap());
        normal_dependencies(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap())
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec!["git-xet-shell".to_string()];
    let mut wrong = Vec::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        for dep in deps_of(&name) {
            if ["git-xet-server", "git-xet-web", "axum"].contains(&dep.as_str()) {
                wrong.push(format!("{name} depends on {dep}"));
            } else if dep.starts_with("git-xet-") {
                todo.push(dep);
            }
        }
    }
    assert!(seen.contains("git-xet-deployment"), "walked only {seen:?}");
    assert!(wrong.is_empty(), "the shell reaches: {}", wrong.join(", "));
}

#[test]
fn dependencies_are_read_from_the_dependencies_table_only() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nclap.workspace = true\n# note\n\
                    tokio = { workspace = true }\n[dev-dependencies]\nproptest.workspace = true\n";
    assert_eq!(normal_dependencies(manifest), ["clap", "tokio"]);
}
