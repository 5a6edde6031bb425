//! `docs/configuration.md` is generated from the configuration file's types: their fields,
//! serde names and doc comments, read from the source (`server/src/config/`, and the shared
//! types it uses) and walked from `FileConfig`, the file's root. The test fails when the
//! committed file differs from what the types say; `BREAKGLASS_UPDATE_DOCS=1` rewrites it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use syn::{Attribute, Fields, GenericArgument, Item, PathArguments, Type};

const GENERATED: &str = "docs/configuration.md";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A `Deserialize` type of the configuration.
enum Def {
    Struct {
        doc: String,
        rename_all: Option<String>,
        fields: Vec<Field>,
    },
    Enum {
        doc: String,
        tag: Option<String>,
        untagged: bool,
        rename_all: Option<String>,
        /// Name, doc, named fields, and the types of unnamed ones.
        variants: Vec<(String, String, Vec<Field>, Vec<Type>)>,
    },
}

struct Field {
    name: String,
    rename: Option<String>,
    ty: Type,
    doc: String,
    flatten: bool,
}

fn doc_of(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value().trim().to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    // Intra-doc links read as code in Markdown.
    lines
        .join(" ")
        .replace("[`", "`")
        .replace("`]", "`")
        .replace('|', "\\|")
        .trim()
        .to_string()
}

/// `(key, value)` pairs and bare words of the `#[serde(...)]` attributes.
fn serde_of(attrs: &[Attribute]) -> (BTreeMap<String, String>, Vec<String>) {
    let mut pairs = BTreeMap::new();
    let mut words = Vec::new();
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = a.parse_nested_meta(|m| {
            let key = m
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            if let Ok(v) = m.value() {
                match v.parse::<syn::Expr>() {
                    Ok(syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    })) => {
                        pairs.insert(key, s.value());
                    }
                    _ => {
                        pairs.insert(key, String::new());
                    }
                }
            } else {
                words.push(key);
            }
            Ok(())
        });
    }
    (pairs, words)
}

fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("derive")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().contains("Deserialize"))
    })
}

fn fields_of(fields: &Fields) -> Vec<Field> {
    fields
        .iter()
        .filter_map(|f| {
            let (pairs, words) = serde_of(&f.attrs);
            if words
                .iter()
                .any(|w| w == "skip" || w == "skip_deserializing")
            {
                return None;
            }
            Some(Field {
                name: f.ident.as_ref()?.to_string(),
                rename: pairs.get("rename").cloned(),
                ty: f.ty.clone(),
                doc: doc_of(&f.attrs),
                flatten: words.iter().any(|w| w == "flatten"),
            })
        })
        .collect()
}

fn definitions() -> BTreeMap<String, Def> {
    let mut files = Vec::new();
    rust_files(&root().join("server/src/config"), &mut files);
    files.push(root().join("shared/src/validate.rs"));
    files.push(root().join("shared/src/session/kinds.rs"));
    let mut defs = BTreeMap::new();
    for path in files {
        let ast = syn::parse_file(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for item in ast.items {
            match item {
                Item::Struct(s) if derives_deserialize(&s.attrs) => {
                    let (pairs, _) = serde_of(&s.attrs);
                    defs.insert(
                        s.ident.to_string(),
                        Def::Struct {
                            doc: doc_of(&s.attrs),
                            rename_all: pairs.get("rename_all").cloned(),
                            fields: fields_of(&s.fields),
                        },
                    );
                }
                Item::Enum(e) if derives_deserialize(&e.attrs) => {
                    let (pairs, words) = serde_of(&e.attrs);
                    defs.insert(
                        e.ident.to_string(),
                        Def::Enum {
                            doc: doc_of(&e.attrs),
                            tag: pairs.get("tag").cloned(),
                            untagged: words.iter().any(|w| w == "untagged"),
                            rename_all: pairs.get("rename_all").cloned(),
                            variants: e
                                .variants
                                .iter()
                                .map(|v| {
                                    let (p, _) = serde_of(&v.attrs);
                                    let name = p.get("rename").cloned().unwrap_or_else(|| {
                                        renamed(&v.ident.to_string(), pairs.get("rename_all"))
                                    });
                                    let unnamed = match &v.fields {
                                        Fields::Unnamed(u) => {
                                            u.unnamed.iter().map(|f| f.ty.clone()).collect()
                                        }
                                        _ => Vec::new(),
                                    };
                                    (name, doc_of(&v.attrs), fields_of(&v.fields), unnamed)
                                })
                                .collect(),
                        },
                    );
                }
                _ => {}
            }
        }
    }
    defs
}

/// A Rust name as serde's `rename_all` writes it.
fn renamed(name: &str, rule: Option<&String>) -> String {
    let snake = || {
        let mut out = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    };
    match rule.map(String::as_str) {
        Some("snake_case") => snake(),
        Some("lowercase") => name.to_lowercase(),
        Some("kebab-case") => snake().replace('_', "-"),
        Some("SCREAMING_SNAKE_CASE") => snake().to_uppercase(),
        _ => name.to_string(),
    }
}

/// The last segment of a type path, with its generic arguments.
fn last(ty: &Type) -> Option<(String, Vec<Type>)> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    let args = match &seg.arguments {
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((seg.ident.to_string(), args))
}

/// How a key's value is written in the file, for the table.
fn type_words(ty: &Type, defs: &BTreeMap<String, Def>) -> String {
    let Some((name, args)) = last(ty) else {
        return "value".into();
    };
    let inner = |i: usize| args.get(i).map(|t| type_words(t, defs)).unwrap_or_default();
    match name.as_str() {
        "Option" | "Box" => inner(0),
        "Vec" => format!("list of {}", inner(0)),
        "HashMap" | "BTreeMap" => format!("table of {}", inner(1)),
        "String" | "Secret" => "string".into(),
        "bool" => "boolean".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64" => "integer".into(),
        "f32" | "f64" => "number".into(),
        "PathBuf" => "path".into(),
        "SocketAddr" => "address (`host:port`)".into(),
        "IpNet" => "IP range (CIDR)".into(),
        "Url" => "URL".into(),
        other if defs.contains_key(other) => match &defs[other] {
            Def::Struct { .. } => "table".into(),
            Def::Enum { tag: Some(_), .. } => "table".into(),
            Def::Enum {
                untagged: true,
                variants,
                ..
            } => variants
                .iter()
                .filter_map(|(_, _, _, types)| types.first())
                .map(|t| type_words(t, defs))
                .collect::<Vec<_>>()
                .join(" or "),
            Def::Enum { variants, .. } => variants
                .iter()
                .map(|(v, _, _, _)| format!("`\"{v}\"`"))
                .collect::<Vec<_>>()
                .join(" or "),
        },
        other => format!("`{other}`"),
    }
}

/// The struct or tagged enum a key's value is a table of, with how the table is written
/// (`[x]`, `[[x]]`, `[x.NAME]`), if any.
fn table_of<'a>(
    ty: &Type,
    defs: &'a BTreeMap<String, Def>,
) -> Option<(&'a str, &'static str, &'a Def)> {
    let (name, args) = last(ty)?;
    match name.as_str() {
        "Option" | "Box" => table_of(args.first()?, defs),
        "Vec" => table_of(args.first()?, defs).map(|(n, _, d)| (n, "array", d)),
        "HashMap" | "BTreeMap" => table_of(args.get(1)?, defs).map(|(n, _, d)| (n, "map", d)),
        other => {
            let (key, def) = defs.get_key_value(other)?;
            match def {
                Def::Struct { .. } | Def::Enum { tag: Some(_), .. } => {
                    Some((key.as_str(), "table", def))
                }
                Def::Enum { .. } => None,
            }
        }
    }
}

/// The rows of a struct's own keys (flattened structs inlined), and its sub-tables.
fn rows(
    fields: &[Field],
    rename_all: Option<&String>,
    defs: &BTreeMap<String, Def>,
    out: &mut String,
    subtables: &mut Vec<(String, String)>,
    path: &str,
) {
    for f in fields {
        if f.flatten {
            if let Some((
                _,
                _,
                Def::Struct {
                    fields, rename_all, ..
                },
            )) = table_of(&f.ty, defs)
            {
                rows(fields, rename_all.as_ref(), defs, out, subtables, path);
            }
            continue;
        }
        let key = f
            .rename
            .clone()
            .unwrap_or_else(|| renamed(&f.name, rename_all));
        let full = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let words = match table_of(&f.ty, defs) {
            Some((name, how, _)) => {
                let header = match how {
                    "array" => format!("[[{full}]]"),
                    "map" => format!("[{full}.NAME]"),
                    _ => format!("[{full}]"),
                };
                let words = format!("see `{header}`");
                subtables.push((header, name.to_string()));
                words
            }
            None => type_words(&f.ty, defs),
        };
        let _ = writeln!(out, "| `{key}` | {words} | {} |", f.doc);
    }
}

fn section(header: &str, def: &Def, defs: &BTreeMap<String, Def>, out: &mut String, depth: usize) {
    assert!(
        depth < 8,
        "the configuration's tables nest too deep at {header}"
    );
    let path = header
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches('[')
        .trim_end_matches(']');
    let _ = writeln!(out, "\n## `{header}`\n");
    let mut subtables = Vec::new();
    match def {
        Def::Struct {
            doc,
            rename_all,
            fields,
        } => {
            if !doc.is_empty() {
                let _ = writeln!(out, "{doc}\n");
            }
            let _ = writeln!(out, "| key | value | what |\n|---|---|---|");
            rows(fields, rename_all.as_ref(), defs, out, &mut subtables, path);
        }
        Def::Enum {
            doc,
            tag,
            rename_all,
            variants,
            ..
        } => {
            if !doc.is_empty() {
                let _ = writeln!(out, "{doc}\n");
            }
            let tag = tag.clone().unwrap_or_default();
            for (name, vdoc, fields, _) in variants {
                let _ = writeln!(out, "`{tag} = \"{name}\"`: {vdoc}\n");
                if !fields.is_empty() {
                    let _ = writeln!(out, "| key | value | what |\n|---|---|---|");
                    rows(fields, rename_all.as_ref(), defs, out, &mut subtables, path);
                    out.push('\n');
                }
            }
        }
    }
    for (h, name) in subtables {
        section(&h, &defs[&name], defs, out, depth + 1);
    }
}

fn generate() -> String {
    let defs = definitions();
    let mut out = String::from(
        "# Configuration reference\n\n\
         The server reads one TOML file (`--config FILE`, or `BREAKGLASS_CONFIG`). This page is\n\
         generated from the file's types (`server/src/config/`): each key with the type it takes\n\
         and what its doc comment says. `server/tests/config_reference.rs` fails when the page\n\
         and the types disagree; `BREAKGLASS_UPDATE_DOCS=1 cargo test -p breakglass-server --test\n\
         config_reference` writes it again. `breakglass-server check-config --config FILE` checks a\n\
         file against the same types, naming the key at fault. A key left out takes the default\n\
         its description gives.\n",
    );
    let top = &defs["FileConfig"];
    let Def::Struct {
        fields, rename_all, ..
    } = top
    else {
        panic!("FileConfig is a struct")
    };
    let _ = writeln!(
        out,
        "\n## Top level\n\n| key | value | what |\n|---|---|---|"
    );
    let mut subtables = Vec::new();
    rows(
        fields,
        rename_all.as_ref(),
        &defs,
        &mut out,
        &mut subtables,
        "",
    );
    for (h, name) in subtables {
        section(&h, &defs[&name], &defs, &mut out, 1);
    }
    out
}

#[test]
fn the_configuration_reference_is_generated_from_the_types() {
    let want = generate();
    let path = root().join(GENERATED);
    if std::env::var_os("BREAKGLASS_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{GENERATED} differs from the configuration's types: run \
         `BREAKGLASS_UPDATE_DOCS=1 cargo test -p breakglass-server --test config_reference` \
         and commit it"
    );
    // Every key of the file's root is there, with its doc comment.
    for key in [
        "listen",
        "environments",
        "recording",
        "notifications",
        "limits",
    ] {
        assert!(want.contains(&format!("| `{key}` |")), "{key}");
    }
}
