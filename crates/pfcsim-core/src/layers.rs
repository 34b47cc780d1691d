//! The layers of the crate's modules, and the tests that keep them: a module may use only
//! modules of lower layers, so no import cycle can form between modules; and inside a folder
//! module, its files form no import cycle either.
//!
//! The test reads the sources under `src/` and finds every `crate::<module>` path of each
//! top-level module (in `use` lines, inline paths and macro calls, not in comments) and checks
//! it against [`LAYERS`], the table `docs/reference/architecture.md` shows. Unit tests are exempt
//! (files `tests.rs` and `*_tests.rs`, and the `#[cfg(test)] mod tests` at the end of a file): they
//! may build a whole run from a spec.
//!
//! Inside a folder (`sim/`, `lb/`, `lb/hermes/`, ...: every folder under `src/`, found by
//! walking it), the children of the folder module, its files and its sub-folders (a sub-folder
//! counting as one child with all its files), form no import cycle. A file imports a sibling
//! when its code (with the same exemptions) names it by a relative or absolute path:
//! `super::b::X`, `super::{b, ...}`, `use super::b`, `crate::sim::b::X` from `sim/a.rs`, or
//! `super::super::c::X` from a file of sub-folder `lb/hermes/` (sibling `c` of `hermes` in
//! `lb/`). The folder's root (`mod.rs`, or `metrics.rs` beside `metrics/`) declares the files
//! and may hold what they share: its own imports are not edges, nor are the items a file takes
//! from it (`super::Simulation`), nor what a file takes from a higher folder's root
//! (`super::super::Capabilities`, `crate::lb::LbCtx`): everything flows through the root, as
//! through a lower layer. An item the root re-exports from one of its files counts as the
//! root's (the check sees the paths as written). A cycle is reported with the imports that
//! form it, file and line; the cure is to move the shared item into one of the files, into the
//! root, or into a new file both use.
//!
//! The core names no plug-in: the code of `sim/` (but `sim/config.rs`, whose `FabricConfig`
//! holds the spec's tables) names no public item of a plug-in's file (a file or folder of
//! `transport/`, `cc/` or `mmu/` other than the folder's root and `transport/flow.rs`, the
//! state every transport shares), and no variant of the registries' enums (`Protocol::Tcp`,
//! `Cc::Dcqcn`, `PfcModel::Egress`, `Mmu::Egress`, `CcConfig::None`, `TransportKind::Roce`):
//! it asks the plug-ins through their interfaces ([`PLUG_IN_FOLDERS`], [`REGISTRY_ENUMS`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers of `pfcsim-core`, bottom first. A module may use modules of lower layers only
/// (not of its own layer, not of higher ones). A new module must be placed here.
const LAYERS: &[&[&str]] = &[
    &["units", "tagged", "check", "cdf", "metrics"],
    &["engine", "ns3", "cc", "output"],
    &["packet", "topology"],
    &["port", "faults", "monitor", "traffic"],
    &["mmu"],
    &["lb"],
    &["transport"],
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
             (and to the layer table of docs/reference/architecture.md)"
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
             (LAYERS in src/layers.rs, docs/reference/architecture.md)"
        ));
    }
    breaches
}

/// The folders whose children are plug-ins (one file or sub-folder each), and the files among
/// them that are not (shared by every plug-in of the folder).
const PLUG_IN_FOLDERS: &[&str] = &["transport", "cc", "mmu"];
const SHARED_FILES: &[&str] = &["transport/flow.rs"];

/// The enums whose variants name the registered plug-ins.
const REGISTRY_ENUMS: &[&str] = &[
    "Protocol",
    "Cc",
    "CcConfig",
    "PfcModel",
    "Mmu",
    "TransportKind",
];

/// The public items (`pub struct`, `enum`, `fn`, `const`, `type`, `trait`) declared at the
/// start of a line of `code`.
fn public_items(code: &str) -> Vec<String> {
    let kinds = ["struct ", "enum ", "fn ", "const ", "type ", "trait "];
    code.lines()
        .filter_map(|line| line.strip_prefix("pub "))
        .filter_map(|rest| kinds.iter().find_map(|k| rest.strip_prefix(k)))
        .map(|name| {
            name.chars()
                .take_while(|&c| is_ident(c))
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// Where the code of the core (`sim/`, but `sim/config.rs`) names a plug-in among `files`
/// (path under `src/`, text): an item of a plug-in's files, or a variant of a registry enum.
fn core_names_of_plug_ins(files: &[(String, String)]) -> Vec<String> {
    let plug_in = |rel: &str| {
        let mut parts = rel.split('/');
        let (folder, child) = (parts.next().unwrap_or(""), parts.next());
        PLUG_IN_FOLDERS.contains(&folder)
            && child.is_some_and(|c| c != "mod.rs")
            && !SHARED_FILES.contains(&rel)
    };
    let mut items: Vec<(String, &str)> = files
        .iter()
        .filter(|(rel, _)| plug_in(rel) && !is_test_file(rel))
        .flat_map(|(rel, text)| {
            let items = public_items(&checked_code(text));
            items.into_iter().map(move |item| (item, rel.as_str()))
        })
        .collect();
    items.sort();
    items.dedup_by(|a, b| a.0 == b.0);
    let mut breaches = Vec::new();
    for (rel, text) in files {
        if !rel.starts_with("sim/") || rel == "sim/config.rs" || is_test_file(rel) {
            continue;
        }
        let code = checked_code(text);
        for (n, line) in code.lines().enumerate() {
            let tokens: Vec<&str> = line.split(|c: char| !is_ident(c)).collect();
            let mut named: Vec<String> = items
                .iter()
                .filter(|(item, _)| tokens.contains(&item.as_str()))
                .map(|(item, from)| format!("`{item}` (src/{from})"))
                .collect();
            for e in REGISTRY_ENUMS {
                for (at, _) in line.match_indices(&format!("{e}::")) {
                    let before = line[..at].chars().next_back();
                    let after = line[at + e.len() + 2..].chars().next();
                    if !before.is_some_and(is_ident) && after.is_some_and(|c| c.is_uppercase()) {
                        named.push(format!("a variant of `{e}`"));
                    }
                }
            }
            if !named.is_empty() {
                breaches.push(format!(
                    "src/{rel}:{}: `{}` names {}: the core asks plug-ins through their \
                     interfaces (src/layers.rs, docs/reference/architecture.md)",
                    n + 1,
                    line.trim(),
                    named.join(", ")
                ));
            }
        }
    }
    breaches
}

/// Whether the file at `rel` (under `src/`) is a unit-test file (`tests.rs`, `*_tests.rs`),
/// which the checks exempt.
fn is_test_file(rel: &str) -> bool {
    let name = rel
        .rsplit('/')
        .next()
        .unwrap_or(rel)
        .trim_end_matches(".rs");
    name == "tests" || name.ends_with("_tests")
}

/// The module path of the source file at `rel` (under `src/`): `sim/switch.rs` is
/// `sim::switch`; a folder's root, `sim/mod.rs` or `metrics.rs` beside `metrics/`, is the
/// folder's module (`sim`, `metrics`); `lib.rs` is the crate (no segment).
fn module_path(rel: &str) -> Vec<String> {
    let mut path: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if path.last().is_some_and(|s| s == "mod") || path == ["lib"] {
        path.pop();
    }
    path
}

/// Every path in `code` that starts with `crate::`, `super::` or `self::`, as its segments
/// with the byte offset of each: `use super::{a::B, c as d};` gives `super::a::B` and
/// `super::c`, at the offsets of `a` and `c`; a glob (`super::*`) ends at the module.
fn rooted_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut paths = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(root) {
            let before = &code[..at];
            if before.chars().next_back().is_some_and(is_ident) || before.ends_with("::") {
                continue; // `pfcsim_crate::`, or a later segment of a path already read
            }
            path_tree(code, at, Vec::new(), &mut paths);
        }
    }
    paths.sort();
    paths
}

/// Reads the path (or `use` tree) that starts at byte `at` of `code` after the segments
/// `prefix`, pushes each path it names to `paths`, and gives the offset where it ends.
fn path_tree(
    code: &str,
    mut at: usize,
    mut prefix: Vec<String>,
    paths: &mut Vec<(usize, Vec<String>)>,
) -> usize {
    let start = at;
    loop {
        if code[at..].starts_with('{') {
            at += 1;
            loop {
                let rest = &code[at..];
                let item = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                at += rest.len() - item.len();
                if item.is_empty() || item.starts_with('}') {
                    return (at + 1).min(code.len());
                }
                at = path_tree(code, at, prefix.clone(), paths);
                // Past a renaming (`as d`) or a glob, to the item's end.
                at += code[at..].find([',', '}']).unwrap_or(code.len() - at);
            }
        }
        let name: String = code[at..].chars().take_while(|&c| is_ident(c)).collect();
        at += name.len();
        if !name.is_empty() {
            prefix.push(name);
        }
        if !code[at..].starts_with("::") {
            paths.push((start, prefix));
            return at;
        }
        at += "::".len();
    }
}

/// The module path that `segments`, a path written in module `own`, leads to (module and
/// item segments alike): `crate::` from the crate, `self::` from `own`, each leading `super::`
/// one module up; a `self` inside a group (`super::{self, X}`) names the group's module.
fn resolve(own: &[String], segments: &[String]) -> Vec<String> {
    let (mut path, rest) = match segments.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &segments[1..]),
        Some("self") => (own.to_vec(), &segments[1..]),
        _ => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let kept = own.len().saturating_sub(ups);
            (own[..kept].to_vec(), &segments[ups..])
        }
    };
    path.extend(rest.iter().filter(|s| *s != "self").cloned());
    path
}

/// An import of one child of a folder module by another.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SiblingImport {
    /// The folder, as its module path.
    folder: Vec<String>,
    /// The importing child and the imported one (names in the folder).
    from: String,
    to: String,
    /// `src/<file>:<line>: `<the line>``.
    at: String,
}

/// Every import of a folder's child by another child of that folder among `files` (path under
/// `src/`, text), in the code the layering applies to ([`checked_code`]; unit-test files
/// exempt). A child is a file or a sub-folder (with all its files); the folder's root neither
/// imports nor is imported (see the module's doc).
fn sibling_imports(files: &[(String, String)]) -> Vec<SiblingImport> {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(rel, _)| module_path(rel)).collect();
    let mut imports = BTreeSet::new();
    for (rel, text) in files.iter().filter(|(rel, _)| !is_test_file(rel)) {
        let own = module_path(rel);
        let code = checked_code(text);
        for (at, segments) in rooted_paths(&code) {
            let mut target = resolve(&own, &segments);
            while !modules.contains(&target) && !target.is_empty() {
                target.pop();
            }
            // The deepest folder holding both: the only one where they are distinct children.
            let shared = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if shared == 0 || shared >= own.len() || shared >= target.len() {
                continue; // across top-level modules (LAYERS), or the folder's root
            }
            let line = code[..at].matches('\n').count() + 1;
            let import = code.lines().nth(line - 1).unwrap_or_default().trim();
            imports.insert(SiblingImport {
                folder: own[..shared].to_vec(),
                from: own[shared].clone(),
                to: target[shared].clone(),
                at: format!("src/{rel}:{line}: `{import}`"),
            });
        }
    }
    imports.into_iter().collect()
}

/// An import cycle among the children of a folder.
#[derive(Debug, PartialEq, Eq)]
struct Cycle {
    /// The children in the cycle's order, as their paths under `src/` (`sim/switch.rs`,
    /// `lb/hermes/` for a sub-folder), the least first.
    members: Vec<String>,
    /// The imports that close it, in the cycle's order.
    imports: Vec<String>,
}

impl Cycle {
    fn message(&self) -> String {
        let mut ring: Vec<String> = self.members.iter().map(|m| format!("src/{m}")).collect();
        ring.push(ring[0].clone());
        format!(
            "import cycle {}:\n    {}\n  move the shared item into one of them, or into the \
             folder's mod.rs, or into a new file both use (src/layers.rs, \
             docs/reference/architecture.md)",
            ring.join(" -> "),
            self.imports.join("\n    ")
        )
    }
}

/// Every import cycle among the children of a folder, in `files` (path under `src/`, text):
/// each elementary cycle once, starting at its least child.
fn folder_cycles(files: &[(String, String)]) -> Vec<Cycle> {
    let folders: BTreeSet<Vec<String>> = files
        .iter()
        .flat_map(|(rel, _)| {
            let dirs: Vec<&str> = rel.split('/').collect();
            (1..dirs.len()).map(move |n| dirs[..n].iter().map(|s| s.to_string()).collect())
        })
        .collect();
    let mut graphs: BTreeMap<&[String], BTreeMap<&str, Vec<&SiblingImport>>> = BTreeMap::new();
    let imports = sibling_imports(files);
    for import in &imports {
        let graph = graphs.entry(&import.folder).or_default();
        graph.entry(&import.from).or_default().push(import);
    }
    let mut cycles = Vec::new();
    for (folder, graph) in &graphs {
        let child = |name: &str| {
            let mut path = folder.to_vec();
            path.push(name.to_string());
            let tail = if folders.contains(&path) { "/" } else { ".rs" };
            format!("{}{tail}", path.join("/"))
        };
        for &start in graph.keys() {
            let mut ring = vec![start];
            walk_cycles(graph, &mut ring, &mut |ring: &[&str]| {
                let mut imports = Vec::new();
                for (i, from) in ring.iter().enumerate() {
                    let to = ring[(i + 1) % ring.len()];
                    imports.extend(
                        graph[from]
                            .iter()
                            .filter(|m| m.to == to)
                            .map(|m| m.at.clone()),
                    );
                }
                cycles.push(Cycle {
                    members: ring.iter().map(|m| child(m)).collect(),
                    imports,
                });
            });
        }
    }
    cycles
}

/// Calls `found` with every elementary cycle of `graph` that goes on from the path `ring`
/// through children greater than its first (so that each cycle is found once, from its
/// least child).
fn walk_cycles<'a>(
    graph: &BTreeMap<&'a str, Vec<&'a SiblingImport>>,
    ring: &mut Vec<&'a str>,
    found: &mut dyn FnMut(&[&str]),
) {
    let last = ring[ring.len() - 1];
    let mut next: Vec<&str> = graph.get(last).map_or(Vec::new(), |out| {
        out.iter().map(|m| m.to.as_str()).collect()
    });
    next.dedup();
    for to in next {
        if to == ring[0] {
            found(ring);
        } else if to > ring[0] && !ring.contains(&to) {
            ring.push(to);
            walk_cycles(graph, ring, found);
            ring.pop();
        }
    }
}

/// The breaches of the in-folder rule among `files` (path under `src/`, text): every import
/// cycle.
fn check_folders(files: &[(String, String)]) -> Vec<String> {
    folder_cycles(files).iter().map(Cycle::message).collect()
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

/// Every source file under `src/`, as its path there (`/`-separated) and its text.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|path| {
            let rel = path.strip_prefix(&src).expect("under src");
            let rel: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            let text = std::fs::read_to_string(path).expect("a readable source file");
            (rel.join("/"), text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_module_uses_a_module_of_its_own_or_a_higher_layer() {
        let files = sources();
        let mut breaches = Vec::new();
        for (rel, text) in &files {
            if rel == "lib.rs" || is_test_file(rel) {
                continue;
            }
            let module = rel
                .split('/')
                .next()
                .expect("a path")
                .trim_end_matches(".rs");
            breaches.extend(check_file(&format!("src/{rel}"), module, text));
        }
        assert!(files.len() > 20, "found only {} source files", files.len());
        assert!(breaches.is_empty(), "\n{}", breaches.join("\n"));
    }

    #[test]
    fn no_files_of_a_folder_import_each_other_in_a_cycle() {
        let files = sources();
        assert!(
            files.iter().any(|(rel, _)| rel == "lb/hermes/paths.rs"),
            "the walk reaches into sub-folders"
        );
        let breaches = check_folders(&files);
        assert!(breaches.is_empty(), "\n{}", breaches.join("\n"));
    }

    #[test]
    fn the_core_names_no_transport_congestion_control_or_pfc_model() {
        let files = sources();
        let breaches = core_names_of_plug_ins(&files);
        assert!(breaches.is_empty(), "\n{}", breaches.join("\n"));
    }

    #[test]
    fn a_plug_in_named_in_the_core_is_reported() {
        let files = files(&[
            (
                "transport/mod.rs",
                "pub struct Transports;\npub enum Protocol { A }\n",
            ),
            ("transport/flow.rs", "pub struct FlowState;\n"),
            (
                "transport/tcp/mod.rs",
                "pub struct Tcp;\npub fn window() {}\n",
            ),
            (
                "sim/config.rs",
                "pub struct FabricConfig { tcp: crate::transport::Tcp }\n",
            ),
            (
                "sim/host.rs",
                "use crate::transport::{FlowState, Tcp};\n\
                 // a Tcp in a comment\n\
                 fn f(p: Protocol) -> bool { p == Protocol::A }\n\
                 fn g(t: &Transports) {}\n",
            ),
        ]);
        let breaches = core_names_of_plug_ins(&files);
        assert_eq!(breaches.len(), 2, "{breaches:?}");
        assert!(
            breaches[0].starts_with(
                "src/sim/host.rs:1: `use crate::transport::{FlowState, Tcp};` names `Tcp` \
                 (src/transport/tcp/mod.rs)"
            ),
            "{breaches:?}"
        );
        assert!(
            breaches[1].contains("names a variant of `Protocol`"),
            "{breaches:?}"
        );
    }

    #[test]
    fn a_back_edge_is_reported_with_file_import_and_rule() {
        let text = "//! The MMU.\nuse crate::port::N_PRIO;\nuse crate::sim::PortState;\n";
        assert_eq!(
            check_file("src/mmu.rs", "mmu", text),
            [
                "src/mmu.rs:3: `use crate::sim::PortState;`: `sim` (layer 7) is above `mmu` \
              (layer 4); a module may use only modules of lower layers (LAYERS in \
              src/layers.rs, docs/reference/architecture.md)"
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

    /// Synthetic source files: (path under `src/`, text).
    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(rel, text)| (rel.to_string(), text.to_string()))
            .collect()
    }

    #[test]
    fn a_cycle_added_inside_sim_is_reported_with_its_imports_and_the_cure() {
        let sim = files(&[
            ("sim/mod.rs", "mod a;\nmod b;\npub struct Simulation;\n"),
            (
                "sim/a.rs",
                "//! A.\nuse super::Simulation;\nuse super::b::B;\npub struct A;\n",
            ),
            (
                "sim/b.rs",
                "//! B.\n\nfn f() -> super::a::A {\n    super::a::A\n}\n",
            ),
        ]);
        let breaches = check_folders(&sim);
        let cycle = "import cycle src/sim/a.rs -> src/sim/b.rs -> src/sim/a.rs:\n    \
                     src/sim/a.rs:3: `use super::b::B;`\n    \
                     src/sim/b.rs:3: `fn f() -> super::a::A {`\n    \
                     src/sim/b.rs:4: `super::a::A`\n  \
                     move the shared item into one of them, or into the folder's mod.rs, or \
                     into a new file both use (src/layers.rs, docs/reference/architecture.md)";
        assert_eq!(breaches, [cycle]);
    }

    #[test]
    fn groups_absolute_paths_and_longer_cycles_count() {
        let sim = files(&[
            ("sim/mod.rs", "mod a;\nmod b;\nmod c;\n"),
            (
                "sim/a.rs",
                "use super::{\n    Event,\n    b::{B, C as D},\n};\n",
            ),
            ("sim/b.rs", "pub fn f() {\n    crate::sim::c::g();\n}\n"),
            ("sim/c.rs", "use super::{self, a};\n"),
        ]);
        let cycles = folder_cycles(&sim);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].members, ["sim/a.rs", "sim/b.rs", "sim/c.rs"]);
        assert_eq!(
            cycles[0].imports,
            [
                "src/sim/a.rs:3: `b::{B, C as D},`",
                "src/sim/b.rs:2: `crate::sim::c::g();`",
                "src/sim/c.rs:1: `use super::{self, a};`"
            ]
        );
    }

    #[test]
    fn a_cycle_inside_an_lb_sub_folder_is_found_and_the_parents_root_is_not_a_sibling() {
        let lb = files(&[
            (
                "lb/mod.rs",
                "pub mod host;\npub mod hermes;\npub struct Capabilities;\n",
            ),
            ("lb/host.rs", "use super::Capabilities;\n"),
            (
                "lb/hermes/mod.rs",
                "mod paths;\nmod reroute;\nuse crate::lb::host::X;\n",
            ),
            (
                "lb/hermes/paths.rs",
                "use super::super::Capabilities;\nuse super::reroute::FlowState;\n",
            ),
            (
                "lb/hermes/reroute.rs",
                "use crate::lb::Capabilities;\nuse crate::lb::hermes::paths::PathClass;\n",
            ),
        ]);
        let cycles = folder_cycles(&lb);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(
            cycles[0].members,
            ["lb/hermes/paths.rs", "lb/hermes/reroute.rs"]
        );
        assert_eq!(
            cycles[0].imports,
            [
                "src/lb/hermes/paths.rs:2: `use super::reroute::FlowState;`",
                "src/lb/hermes/reroute.rs:2: `use crate::lb::hermes::paths::PathClass;`"
            ]
        );
        // A sub-folder is one child of its folder, with all its files.
        let across = files(&[
            ("lb/mod.rs", ""),
            ("lb/host.rs", "use super::hermes::Hermes;\n"),
            ("lb/hermes/mod.rs", ""),
            ("lb/hermes/probe.rs", "use super::super::host::HostCtx;\n"),
        ]);
        let cycles = folder_cycles(&across);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert_eq!(cycles[0].members, ["lb/hermes/", "lb/host.rs"]);
    }

    #[test]
    fn the_roots_imports_comments_and_unit_tests_do_not_count() {
        let sim = files(&[
            (
                "sim/mod.rs",
                "mod a;\nmod b;\nuse self::a::A;\nuse b::B;\npub use a::Shared;\n\
                 pub struct Simulation;\n",
            ),
            ("sim/a.rs", "use super::{Shared, Simulation};\n// see super::b::B\npub struct A;\n"),
            (
                "sim/b.rs",
                "use super::a::A;\nuse super::*;\n#[cfg(test)]\nmod tests {\n    use super::super::a::A;\n}\n",
            ),
            ("sim/tests.rs", "use super::a::A;\nuse super::b::B;\n"),
            ("sim/a_tests.rs", "use super::b::B;\n"),
            ("metrics.rs", "mod coflows;\nuse coflows::C;\n"),
            ("metrics/coflows.rs", "use super::Record;\n"),
        ]);
        assert_eq!(folder_cycles(&sim), []);
        assert!(check_folders(&sim).is_empty());
        let edges: Vec<_> = sibling_imports(&sim)
            .into_iter()
            .map(|i| (i.from, i.to))
            .collect();
        assert_eq!(edges, [("b".to_string(), "a".to_string())]);
    }
}
