//! docs/CONFIG.md must document every configuration field of the model (`src/model.rs` and
//! `src/model/*.rs`), by its TOML name.

#[test]
fn every_field_is_documented() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("src/model.rs")];
    let mut sections: Vec<_> = std::fs::read_dir(root.join("src/model"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    sections.sort();
    files.extend(sections);
    let model: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let docs = std::fs::read_to_string(root.join("../../docs/CONFIG.md")).unwrap();
    let mut rename: Option<String> = None;
    let mut missing = Vec::new();
    let mut checked = 0;
    for line in model.lines().map(str::trim) {
        if let Some(i) = line.find("rename = \"") {
            let rest = &line[i + 10..];
            rename = rest.split('"').next().map(str::to_string);
            continue;
        }
        if let Some(decl) = line.strip_prefix("pub ") {
            if let Some((name, _)) = decl.split_once(':') {
                if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !name.is_empty() {
                    let toml_name = rename.take().unwrap_or_else(|| name.to_string());
                    checked += 1;
                    let documented = docs.contains(&format!("`{toml_name}`"))
                        || docs.contains(&format!("[[{toml_name}]]"))
                        || docs.contains(&format!(".{toml_name}]]"))
                        || docs.contains(&format!("[{toml_name}]"))
                        || docs.contains(&format!(".{toml_name}]"));
                    if !documented {
                        missing.push(toml_name);
                    }
                }
            }
        }
        if !line.starts_with("#[") && !line.starts_with("///") {
            rename = None;
        }
    }
    assert!(
        checked > 40,
        "parsed only {checked} fields; did the model files change shape?"
    );
    assert!(missing.is_empty(), "fields missing from docs/CONFIG.md: {missing:?}");
}
