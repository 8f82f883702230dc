//! Keeps the runtime crate's layers one-directional: a module may name
//! (`crate::...`) only modules of its own layer or of layers below it.
//!
//! The layers, lowest first, are listed once, here; `lib.rs` declares the
//! modules in the same order. Moving code so a lower layer needs a higher
//! one fails this test, which names the file, the line and both layers.

use std::path::{Path, PathBuf};

/// Top-level modules of `scriptling-plugin/src`, by layer, lowest first.
const LAYERS: &[&[&str]] = &[
    &["sys"],
    &["support"],
    &["value"],
    &["rpc"],
    &["call"],
    &["exports"],
    &["runtime"],
    &["transport"],
    &["testing", "bridge", "fuzz"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`value/codec.rs` -> `value`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// Every `crate::<module>` named on a line of code (comments skipped).
fn named_modules(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // `crate::{a, b}` names several.
        if name.is_empty() && after.starts_with('{') {
            let group = &after[1..after.find('}').unwrap_or(after.len())];
            for part in group.split(',') {
                let part = part.trim();
                found.push(part.split("::").next().unwrap_or(part).to_owned());
            }
        } else {
            found.push(name);
        }
        rest = after;
    }
    found
}

/// The runtime crate's source directory and its `.rs` files, sorted.
fn sources() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scriptling-plugin/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    (src, files)
}

#[test]
fn no_module_imports_from_a_higher_layer() {
    let (src, files) = sources();
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            violations.push(format!("{}: module `{module}` is in no layer; add it to LAYERS", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            for named in named_modules(line) {
                match layer_of(&named) {
                    Some(layer) if layer > own => violations.push(format!(
                        "{}:{}: `{module}` (layer {own}) names `crate::{named}` (layer {layer}): {}",
                        file.strip_prefix(&src).unwrap().display(),
                        number + 1,
                        trimmed
                    )),
                    Some(_) => {}
                    None => violations.push(format!(
                        "{}:{}: names `crate::{named}`, which is in no layer",
                        file.strip_prefix(&src).unwrap().display(),
                        number + 1
                    )),
                }
            }
        }
    }
    assert!(violations.is_empty(), "layering violations:\n{}", violations.join("\n"));
}

#[test]
fn the_scanner_sees_what_it_must() {
    assert_eq!(named_modules("use crate::value::Value;"), ["value"]);
    assert_eq!(named_modules("    crate::support::deep(|| x) // crate::transport"), ["support"]);
    assert_eq!(named_modules("use crate::{rpc, value::Value};"), ["rpc", "value"]);
    assert_eq!(layer_of("transport"), Some(7));
    assert!(layer_of("transport") > layer_of("call"));
}

/// What only `sys` may name: foreign calls and raw OS handles.
const OS_ONLY: &[&str] =
    &["libc::", "windows_sys", "std::os::fd", "std::os::windows", "extern \"C\"", "extern \"system\""];

/// The files outside `sys` that may hold `unsafe`, and why: the object
/// cell's shared access, which the object lock guards (no OS involved).
const UNSAFE_ELSEWHERE: &[&str] = &["call/objects/handle.rs", "call/objects/mod.rs"];

/// Every foreign call and raw OS handle lives in `sys`, one module per OS,
/// with the `unsafe` it takes; the rest of the crate is portable.
#[test]
fn os_code_and_unsafe_stay_in_sys() {
    let (src, files) = sources();
    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        if module_of(&src, file) == "sys" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let os = OS_ONLY.iter().find(|needle| code.contains(*needle));
            let unsafe_here = code.contains("unsafe") && !UNSAFE_ELSEWHERE.contains(&relative.as_str());
            if let Some(needle) = os {
                violations.push(format!("{relative}:{}: `{needle}` belongs in sys/", number + 1));
            } else if unsafe_here && !code.contains("unsafe_op_in_unsafe_fn") {
                violations.push(format!("{relative}:{}: `unsafe` belongs in sys/", number + 1));
            }
        }
    }
    assert!(violations.is_empty(), "OS code outside sys/:\n{}", violations.join("\n"));
}
