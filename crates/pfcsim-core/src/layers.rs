//! The layers of the crate's modules, and the test that keeps them: a module may use only
//! modules of lower layers, so no import cycle can form between modules.
//!
//! The test reads the sources under `src/` and finds every `crate::<module>` path of each
//! top-level module (in `use` lines, inline paths and macro calls, not in comments) and checks
//! it against [`LAYERS`], the table `docs/architecture.md` shows. Unit tests are exempt (files
//! `tests.rs` and `*_tests.rs`, and the `#[cfg(test)] mod tests` at the end of a file): they
//! may build a whole run from a spec.

use std::path::Path;

/// The layers of `pfcsim-core`, bottom first. A module may use modules of lower layers only
/// (not of its own layer, not of higher ones). A new module must be placed here.
const LAYERS: &[&[&str]] = &[
    &["units", "tagged", "check", "cdf", "metrics"],
    &["engine", "ns3", "dcqcn", "output", "transport"],
    &["packet", "topology"],
    &["port", "faults", "monitor", "traffic"],
    &["mmu"],
    &["lb"],
    &["sim"],
    &["budget"],
    &["spec"],
    &["run"],
    &["layers"],
];

/// The layer of a top-level module (`None`: not in the table).
fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The code of a source file that the layering applies to: without comments and without its
/// trailing unit-test module. Line breaks are kept, so that positions give line numbers.
fn checked_code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|line| line.find("//").map_or(line, |c| &line[..c]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every top-level module named by a `crate::` path in `code`, with the byte offset of the
/// path (of the item, in a group): `crate::sim::X` names `sim`; `crate::{port::Y, sim}` names
/// `port` and `sim`.
fn crate_refs(code: &str) -> Vec<(usize, String)> {
    let ident = |s: &str| s.chars().take_while(|&c| is_ident(c)).collect::<String>();
    let mut refs = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue; // `pfcsim_crate::`, not the crate root
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first name of every item at the group's own brace depth.
            let (mut depth, mut item_start) = (1, true);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if item_start && is_ident(c) => {
                        let item_at = code.len() - group.len() + i;
                        refs.push((item_at, ident(&group[i..])));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            refs.push((at, ident(rest)));
        }
    }
    refs
}

/// The breaches of the layering in one source file of top-level module `module`.
fn check_file(file: &str, module: &str, text: &str) -> Vec<String> {
    let Some(own) = layer_of(module) else {
        return vec![format!(
            "{file}: module `{module}` is in no layer; add it to LAYERS in src/layers.rs \
             (and to the layer table of docs/architecture.md)"
        )];
    };
    let code = checked_code(text);
    let mut breaches = Vec::new();
    for (at, used) in crate_refs(&code) {
        if used == module || used.is_empty() {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let import = code.lines().nth(line - 1).unwrap_or_default().trim();
        let rule = match layer_of(&used) {
            Some(l) if l < own => continue,
            Some(l) if l == own => format!("`{used}` is in the same layer ({l}) as `{module}`"),
            Some(l) => format!("`{used}` (layer {l}) is above `{module}` (layer {own})"),
            None => format!("`{used}` is in no layer"),
        };
        breaches.push(format!(
            "{file}:{line}: `{import}`: {rule}; a module may use only modules of lower layers \
             (LAYERS in src/layers.rs, docs/architecture.md)"
        ));
    }
    breaches
}

/// The source files under `dir`, recursively, in a stable order.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_module_uses_a_module_of_its_own_or_a_higher_layer() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut breaches = Vec::new();
        for path in &files {
            let rel = path.strip_prefix(&src).expect("under src");
            let name = rel.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            if rel == Path::new("lib.rs") || name == "tests" || name.ends_with("_tests") {
                continue;
            }
            let module = rel
                .components()
                .next()
                .and_then(|c| Path::new(c.as_os_str()).file_stem())
                .and_then(|s| s.to_str())
                .expect("a module name");
            let text = std::fs::read_to_string(path).expect("a readable source file");
            let file = format!("src/{}", rel.display());
            breaches.extend(check_file(&file, module, &text));
        }
        assert!(files.len() > 20, "found only {} source files", files.len());
        assert!(breaches.is_empty(), "\n{}", breaches.join("\n"));
    }

    #[test]
    fn a_back_edge_is_reported_with_file_import_and_rule() {
        let text = "//! The MMU.\nuse crate::port::N_PRIO;\nuse crate::sim::PortState;\n";
        assert_eq!(
            check_file("src/mmu.rs", "mmu", text),
            [
                "src/mmu.rs:3: `use crate::sim::PortState;`: `sim` (layer 6) is above `mmu` \
              (layer 4); a module may use only modules of lower layers (LAYERS in \
              src/layers.rs, docs/architecture.md)"
            ]
        );
    }

    #[test]
    fn grouped_inline_and_same_layer_paths_count_but_comments_and_unit_tests_do_not() {
        let text = "use crate::{\n    units::Time,\n    lb::Ecmp,\n};\n\
                    fn f() { crate::faults::g(); }\n\
                    // see crate::run\n\
                    #[cfg(test)]\nmod tests {\n    use crate::spec::Spec;\n}\n";
        let breaches = check_file("src/traffic.rs", "traffic", text);
        assert_eq!(breaches.len(), 2, "{breaches:?}");
        assert!(breaches[0].starts_with("src/traffic.rs:3: `lb::Ecmp,`: `lb` (layer 5)"));
        assert!(breaches[1].contains("`faults` is in the same layer (3) as `traffic`"));
        let unknown = check_file("src/new.rs", "new", "");
        assert!(
            unknown[0].contains("module `new` is in no layer"),
            "{unknown:?}"
        );
    }
}
