//! Every route the API's router serves is in its OpenAPI document, with the same methods. The
//! document is how operators, a proxy's allow list and clients learn the API; a route added
//! without its `#[utoipa::path]` (the terminal socket and the replicas' watch route were) is
//! invisible there. The routes are read from `app`'s source (`server/src/http/mod.rs`), since
//! axum's `Router` does not list them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use breakglass_server::http::ApiDoc;
use syn::{Expr, Item, Lit, Stmt};
use utoipa::OpenApi;

/// The methods axum's `routing` offers, as OpenAPI names them.
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The methods of a route's handler expression: `get(a)`, `post(a).get(b)`,
/// `axum::routing::delete(c)`.
fn methods_of(expr: &Expr, out: &mut BTreeSet<String>) {
    match expr {
        Expr::Call(call) => {
            if let Expr::Path(p) = &*call.func {
                let name = p.path.segments.last().unwrap().ident.to_string();
                assert!(
                    METHODS.contains(&name.as_str()),
                    "a route's handler `{name}(..)` is not a method this test knows"
                );
                out.insert(name);
            }
        }
        Expr::MethodCall(m) => {
            let name = m.method.to_string();
            assert!(
                METHODS.contains(&name.as_str()),
                "a route's handler `.{name}(..)` is not a method this test knows"
            );
            out.insert(name);
            methods_of(&m.receiver, out);
        }
        _ => panic!("a route's handler is neither `method(h)` nor `method(h).method(h)`"),
    }
}

/// The `.route(path, handler)` calls of a method-call chain, with their methods.
fn routes_of(expr: &Expr, out: &mut BTreeMap<String, BTreeSet<String>>) {
    if let Expr::MethodCall(m) = expr {
        if m.method == "route" {
            let path = match &m.args[0] {
                Expr::Lit(l) => match &l.lit {
                    Lit::Str(s) => s.value(),
                    _ => panic!("a route whose path is not a string"),
                },
                _ => panic!("a route whose path is not a literal"),
            };
            methods_of(&m.args[1], out.entry(path).or_default());
        }
        routes_of(&m.receiver, out);
    }
}

/// The API router's routes (the `let api = Router::new()...` chain in `app`).
fn served() -> BTreeMap<String, BTreeSet<String>> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/mod.rs");
    let code = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap();
    let app = code
        .items
        .iter()
        .find_map(|i| match i {
            Item::Fn(f) if f.sig.ident == "app" => Some(f),
            _ => None,
        })
        .expect("fn app in server/src/http/mod.rs");
    let mut routes = BTreeMap::new();
    for stmt in &app.block.stmts {
        if let Stmt::Local(local) = stmt {
            if let (syn::Pat::Ident(name), Some(init)) = (&local.pat, &local.init) {
                if name.ident == "api" {
                    routes_of(&init.expr, &mut routes);
                }
            }
        }
    }
    routes
}

/// The document's paths (without the API's prefix) and their methods.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
    let prefix = breakglass_shared::api::API_PREFIX;
    doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, item)| {
            let path = path
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("{path} is documented outside {prefix}"));
            let methods = item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| METHODS.contains(&k.as_str()))
                .cloned()
                .collect();
            (path.to_string(), methods)
        })
        .collect()
}

#[test]
fn every_route_is_documented_with_its_methods() {
    let mut served = served();
    // Far fewer would mean the reader above lost its way, not that the API shrank.
    assert!(served.len() > 30, "read only {} routes", served.len());
    // The document itself.
    served.remove("/openapi.json");
    let documented = documented();
    let mut wrong = Vec::new();
    for (path, methods) in &served {
        match documented.get(path) {
            None => wrong.push(format!("{path} ({methods:?}) is served, not documented")),
            Some(d) if d != methods => wrong.push(format!(
                "{path} is served for {methods:?}, documented for {d:?}"
            )),
            Some(_) => {}
        }
    }
    for path in documented.keys() {
        if !served.contains_key(path) {
            wrong.push(format!("{path} is documented, not served"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
