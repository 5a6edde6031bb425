//! "hello" in an xterm.js terminal on a Leptos page: the smallest page with what our first
//! page is made of, so the page weight is read against what Leptos and xterm.js cost anyway.

use leptos::html::Div;
use leptos::prelude::*;
use wasm_bindgen::prelude::*;

// The glue imports xterm.js with the wasm, so the page loads it up front, as a page whose
// first screen is a terminal would.
#[wasm_bindgen(raw_module = "/vendor/xterm.mjs")]
extern "C" {
    type Terminal;

    #[wasm_bindgen(constructor)]
    fn new() -> Terminal;

    #[wasm_bindgen(method)]
    fn open(this: &Terminal, parent: &web_sys::HtmlElement);

    #[wasm_bindgen(method)]
    fn write(this: &Terminal, data: &str);
}

#[component]
fn Hello() -> impl IntoView {
    let host = NodeRef::<Div>::new();
    host.on_load(|el| {
        let term = Terminal::new();
        term.open(&el);
        term.write("hello from xterm.js\r\n");
    });
    view! {
        <h1>"Hello"</h1>
        <div node_ref=host></div>
    }
}

fn main() {
    leptos::mount::mount_to_body(Hello);
}
