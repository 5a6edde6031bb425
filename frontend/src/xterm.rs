//! Hand-written bindings to the few xterm.js 6 calls we use (terminal and player).
//!
//! xterm.js is not bundled into the app: `index.html` defines `window.breakglassXterm()`, which
//! on first call loads `/vendor/xterm.css`, imports `/vendor/xterm.mjs` and
//! `/vendor/addon-fit.mjs`, and puts their classes on `window` as `XtermTerminal` and
//! `XtermFitAddon`. [`load`] awaits that; only then may [`Terminal::new`] be called. Pages
//! without a terminal never download xterm.js.

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_name = breakglassXterm)]
    fn load_xterm() -> Result<js_sys::Promise, JsValue>;

    /// `Terminal` of `@xterm/xterm`.
    #[wasm_bindgen(js_name = XtermTerminal)]
    #[derive(Clone)]
    pub type Terminal;

    #[wasm_bindgen(constructor, js_class = "XtermTerminal")]
    fn new_with(options: &Object) -> Terminal;

    /// Attaches the terminal to `parent`.
    #[wasm_bindgen(method, js_class = "XtermTerminal")]
    pub fn open(this: &Terminal, parent: &web_sys::HtmlElement);

    /// Queues text for the parser.
    #[wasm_bindgen(method, js_class = "XtermTerminal", js_name = write)]
    pub fn write_str(this: &Terminal, data: &str);

    /// Queues bytes for the parser. Pass an owned copy, never a view into wasm memory:
    /// xterm parses later.
    #[wasm_bindgen(method, js_class = "XtermTerminal", js_name = write)]
    pub fn write_bytes(this: &Terminal, data: &js_sys::Uint8Array);

    /// Queues text; `callback` runs once it is parsed (orders resizes with writes).
    #[wasm_bindgen(method, js_class = "XtermTerminal", js_name = write)]
    pub fn write_then(this: &Terminal, data: &str, callback: &js_sys::Function);

    /// Typed (or pasted) input.
    #[wasm_bindgen(method, js_class = "XtermTerminal", js_name = onData)]
    pub fn on_data(this: &Terminal, listener: &Closure<dyn FnMut(String)>) -> Disposable;

    /// The terminal's size changed.
    #[wasm_bindgen(method, js_class = "XtermTerminal", js_name = onResize)]
    pub fn on_resize(this: &Terminal, listener: &Closure<dyn FnMut(Dimensions)>) -> Disposable;

    /// Sets the size in cells.
    #[wasm_bindgen(method, js_class = "XtermTerminal")]
    pub fn resize(this: &Terminal, cols: u16, rows: u16);

    /// Full reset (RIS).
    #[wasm_bindgen(method, js_class = "XtermTerminal")]
    pub fn reset(this: &Terminal);

    /// Removes the terminal and frees it.
    #[wasm_bindgen(method, js_class = "XtermTerminal")]
    pub fn dispose(this: &Terminal);

    /// Keyboard focus.
    #[wasm_bindgen(method, js_class = "XtermTerminal")]
    pub fn focus(this: &Terminal);

    /// Columns.
    #[wasm_bindgen(method, getter, js_class = "XtermTerminal")]
    pub fn cols(this: &Terminal) -> u16;

    /// Rows.
    #[wasm_bindgen(method, getter, js_class = "XtermTerminal")]
    pub fn rows(this: &Terminal) -> u16;

    #[wasm_bindgen(method, js_class = "XtermTerminal", js_name = loadAddon)]
    fn load_addon(this: &Terminal, addon: &FitAddon);

    /// `{cols, rows}` of `onResize`.
    pub type Dimensions;

    /// Columns.
    #[wasm_bindgen(method, getter)]
    pub fn cols(this: &Dimensions) -> u16;

    /// Rows.
    #[wasm_bindgen(method, getter)]
    pub fn rows(this: &Dimensions) -> u16;

    /// A listener registration.
    pub type Disposable;

    /// Removes the listener.
    #[wasm_bindgen(method)]
    pub fn dispose(this: &Disposable);

    /// `FitAddon` of `@xterm/addon-fit`.
    #[wasm_bindgen(js_name = XtermFitAddon)]
    #[derive(Clone)]
    pub type FitAddon;

    #[wasm_bindgen(constructor, js_class = "XtermFitAddon")]
    fn new_fit() -> FitAddon;

    /// Resizes the terminal to fill its element.
    #[wasm_bindgen(method, js_class = "XtermFitAddon")]
    pub fn fit(this: &FitAddon);
}

/// Loads xterm.js (once per page); `Err` with a sentence when it cannot be loaded.
pub async fn load() -> Result<(), String> {
    let promise = load_xterm()
        .map_err(|_| "the terminal library loader is missing from the page".to_string())?;
    JsFuture::from(promise)
        .await
        .map(|_| ())
        .map_err(|e| format!("the terminal library could not be loaded: {e:?}"))
}

/// Options of a new terminal.
pub struct Options {
    /// Read-only (the player).
    pub read_only: bool,
    /// Initial size, when not fitted to the element.
    pub size: Option<(u16, u16)>,
    /// Lines kept above the screen.
    pub scrollback: u32,
}

fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value.into());
}

impl Terminal {
    /// A new terminal (call [`load`] first).
    pub fn create(o: &Options) -> Terminal {
        let opts = Object::new();
        set(&opts, "cursorBlink", !o.read_only);
        set(&opts, "disableStdin", o.read_only);
        set(&opts, "scrollback", o.scrollback);
        set(&opts, "fontSize", 14);
        // A row a fifth taller than the font: at 1.0, DejaVu Sans Mono (what Debian and Ubuntu
        // fall back to) is cut at the row's bottom at a device pixel ratio of 1, and with it
        // underscores.
        set(&opts, "lineHeight", 1.2);
        set(
            &opts,
            "fontFamily",
            "ui-monospace, 'SFMono-Regular', 'DejaVu Sans Mono', Menlo, Consolas, monospace",
        );
        if let Some((cols, rows)) = o.size {
            set(&opts, "cols", cols);
            set(&opts, "rows", rows);
        }
        let theme = Object::new();
        set(&theme, "background", "#0d1117");
        set(&theme, "foreground", "#e6edf3");
        set(&theme, "cursor", "#e6edf3");
        set(&theme, "selectionBackground", "#264f78");
        set(&opts, "theme", theme);
        Terminal::new_with(&opts)
    }

    /// Adds the fit addon and returns it.
    pub fn fit_addon(&self) -> FitAddon {
        let fit = FitAddon::new_fit();
        self.load_addon(&fit);
        fit
    }
}
