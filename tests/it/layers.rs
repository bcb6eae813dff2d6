//! The crate's rooms import down the layer table of docs/architecture.md, and no two rooms
//! import each other however far round: every `crate::<room>` path in code (a `use` line or a
//! path inline), test modules inside `src/` and `spec/` included, comments left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The layer of each room, from the table's rows (`| 3 verify | `verify/` | …`).
fn layers() -> BTreeMap<String, u32> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/architecture.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let mut cells = line.split('|').map(str::trim).skip(1);
        let (Some(first), Some(room)) = (cells.next(), cells.next()) else {
            continue;
        };
        let Some(layer) = first.split(' ').next().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let name = room.split('`').nth(1).unwrap_or("").trim_end_matches('/');
        if !name.is_empty() {
            out.insert(name.to_string(), layer);
        }
    }
    out
}

/// The rooms each `.rs` file under `src/` imports, by its room (`main` is wiring, as commands).
fn arrows() -> BTreeMap<(String, String), Vec<String>> {
    let src = Path::new(ROOT).join("src");
    let mut out: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|x| x.to_str()) != Some("rs") {
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let room = rel.split('/').next().unwrap().trim_end_matches(".rs");
            let room = match room {
                "lib" => continue,
                "main" => "commands",
                r => r,
            };
            let text = std::fs::read_to_string(&path).unwrap();
            // Comments left out, lines kept: a path's line is where it is found.
            let code: String = text
                .lines()
                .map(|l| match l.trim_start().starts_with("//") {
                    true => "\n".to_string(),
                    false => format!("{l}\n"),
                })
                .collect();
            for (i, _) in code.match_indices("crate::") {
                let n = code[..i].matches('\n').count();
                for to in rooms(&code[i + "crate::".len()..]) {
                    if to != room {
                        let at = format!("src/{rel}:{}", n + 1);
                        out.entry((room.into(), to)).or_default().push(at);
                    }
                }
            }
        }
    }
    out
}

/// The rooms a path after `crate::` names: its first segment, or each first segment of a
/// grouped import (`crate::{config, instance::{imds, userdata}}`, over lines as rustfmt
/// writes it).
fn rooms(after: &str) -> Vec<String> {
    let word = |s: &str| -> String {
        let s = s.trim_start();
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect()
    };
    let Some(group) = after.strip_prefix('{') else {
        return [word(after)]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect();
    };
    // The group's top-level items: split at commas outside nested braces, up to its `}`.
    let (mut depth, mut items, mut start) = (0usize, Vec::new(), 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .map(word)
        .filter(|w| !w.is_empty())
        .collect()
}

/// A circle through `from`, if one returns to it.
fn circle(graph: &BTreeMap<&str, BTreeSet<&str>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![(from, vec![from.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for &next in graph.get(at).into_iter().flatten() {
            if next == from {
                return Some([path.clone(), vec![from.into()]].concat());
            }
            if seen.insert(next) {
                stack.push((next, [path.clone(), vec![next.into()]].concat()));
            }
        }
    }
    None
}

#[test]
fn every_import_points_down_the_layer_table_and_none_goes_round() {
    let layers = layers();
    assert!(
        layers.len() >= 13,
        "the layer table is not read: {layers:?}"
    );
    let arrows = arrows();
    assert!(
        arrows.len() > 40,
        "the imports are not read: {}",
        arrows.len()
    );
    let mut wrong = Vec::new();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for ((from, to), at) in &arrows {
        match (layers.get(from), layers.get(to)) {
            (Some(a), Some(b)) if b > a => wrong.push(format!(
                "{from} (layer {a}) imports {to} (layer {b}) at {at:?}"
            )),
            (Some(_), Some(_)) => {}
            _ => wrong.push(format!("{from} → {to}: a room the table lacks, at {at:?}")),
        }
        graph.entry(from).or_default().insert(to);
    }
    for room in layers.keys() {
        if let Some(c) = circle(&graph, room) {
            wrong.push(format!("an import circle: {}", c.join(" → ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn grouped_imports_name_each_room() {
    assert_eq!(rooms("config::Config;"), ["config"]);
    let grouped = "{\n    config,\n    instance::{imds, userdata},\n    plan::step::When,\n};";
    assert_eq!(rooms(grouped), ["config", "instance", "plan"]);
    assert!(rooms("{}").is_empty());
}

#[test]
fn the_scan_sees_a_circle_and_an_arrow_up() {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    graph.entry("spec").or_default().insert("verify");
    graph.entry("verify").or_default().insert("plan");
    assert_eq!(circle(&graph, "spec"), None);
    graph.entry("plan").or_default().insert("spec");
    assert_eq!(
        circle(&graph, "spec").unwrap(),
        ["spec", "verify", "plan", "spec"]
    );
}
