//! The document title: the page's own name, the product's, and how many requests wait for the
//! signed-in user's decision.

/// Product name shown in the header (keep `<title>` in index.html in step).
pub const PRODUCT_NAME: &str = "Break-glass";

thread_local! {
    /// The page's own title and how many requests wait for the signed-in user's decision.
    static TITLE: std::cell::RefCell<(String, usize)> = const { std::cell::RefCell::new((String::new(), 0)) };
}

fn render_title() {
    let (page, waiting) = TITLE.with(|t| t.borrow().clone());
    let base = if page.is_empty() {
        PRODUCT_NAME.to_string()
    } else {
        format!("{page} · {PRODUCT_NAME}")
    };
    // First, so a background tab's title says there is work before it is cut short.
    let title = if waiting > 0 {
        format!("({waiting}) {base}")
    } else {
        base
    };
    if let Some(doc) = web_sys::window().and_then(|w| w.document()) {
        doc.set_title(&title);
    }
}

/// Sets the document title: `<page> · Break-glass`, after `(n)` when n requests wait for the
/// signed-in user's decision.
pub fn set_title(page: &str) {
    TITLE.with(|t| t.borrow_mut().0 = page.to_string());
    render_title();
}

/// Sets how many requests wait for the signed-in user's decision (shown in the title).
pub fn set_waiting_count(n: usize) {
    TITLE.with(|t| t.borrow_mut().1 = n);
    render_title();
}
