//! The layout of `scripts/` (scripts/README.md): every folder has its README, the GPU runner's
//! list and the checks on disk agree, and every script path the docs, CI and scripts name
//! exists, so a moved script cannot leave a stale command behind.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_top_of_scripts_holds_only_the_demo_the_readme_and_folders_with_a_readme() {
    let scripts = root().join("scripts");
    let mut loose = Vec::new();
    for entry in fs::read_dir(&scripts).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            assert!(
                path.join("README.md").is_file(),
                "scripts/{name}/ has no README.md"
            );
        } else if name != "README.md" && name != "demo.sh" {
            loose.push(name);
        }
    }
    assert!(
        loose.is_empty(),
        "files at the top of scripts/ (put them in the folder of their purpose): {loose:?}"
    );
}

#[test]
fn the_gpu_runner_lists_every_check_and_only_checks_that_exist() {
    let gpu = root().join("scripts/gpu");
    let mut listed = BTreeSet::new();
    for line in read(&gpu.join("checks.txt")).lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert!(
            fields.len() >= 5,
            "checks.txt: {line:?} needs NAME GPUS STATE INPUT WHAT"
        );
        let gpus: u32 = fields[1]
            .parse()
            .unwrap_or_else(|_| panic!("checks.txt: GPUS of {line:?} is not a number"));
        assert!(gpus >= 1, "checks.txt: {line:?}");
        assert!(
            ["ready", "not-yet-run"].contains(&fields[2]),
            "checks.txt: STATE of {line:?} is neither ready nor not-yet-run"
        );
        assert!(
            ["shim", "wheel"].contains(&fields[3]),
            "checks.txt: INPUT of {line:?} is neither shim nor wheel"
        );
        assert!(
            listed.insert(fields[0].to_string()),
            "listed twice: {}",
            fields[0]
        );
    }
    let on_disk: BTreeSet<String> = fs::read_dir(&gpu)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".sh").map(str::to_string)
        })
        .filter(|name| name != "run")
        .collect();
    assert_eq!(
        listed, on_disk,
        "scripts/gpu/checks.txt against scripts/gpu/*.sh"
    );
}

/// Every `scripts/...` path with a file extension in `text`.
fn script_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(i) = text[at..].find("scripts/") {
        let start = at + i;
        at = start + "scripts/".len();
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let end = text[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
            .map_or(text.len(), |n| start + n);
        let path = text[start..end].trim_end_matches('.');
        let has_extension = Path::new(path).extension().is_some_and(|e| {
            ["sh", "py", "txt", "md", "c", "cu", "h"].contains(&&*e.to_string_lossy())
        });
        // `scripts/gpu/NAME.sh` in a usage line is a placeholder, not a path.
        let placeholder = Path::new(path).file_stem().is_some_and(|s| s == "NAME");
        if has_extension && !placeholder {
            found.push(path.to_string());
        }
    }
    found
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_script_path_named_in_docs_ci_and_scripts_exists() {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join(".ci/run")];
    for entry in fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files_under(&root.join("scripts"), &mut files);
    files_under(&root.join("tests/e2e"), &mut files);
    let mut missing = Vec::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for path in script_paths(&text) {
            if !root.join(&path).exists() {
                missing.push(format!(
                    "{}: {path}",
                    file.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_path_finder_finds_what_a_reader_would() {
    assert_eq!(
        script_paths("run `bash scripts/gpu/run.sh target/x` or scripts/ci/README.md."),
        ["scripts/gpu/run.sh", "scripts/ci/README.md"]
    );
    assert!(script_paths("bash scripts/gpu/NAME.sh SHIM").is_empty());
    assert!(script_paths("myscripts/x.sh and scripts/gpu/ alone").is_empty());
}
