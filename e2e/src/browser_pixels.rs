//! What the browser painted, read back as pixels: the window's screenshot decoded and cut to
//! one element's box, for what the DOM cannot answer (a glyph cut off by the row it sits in).

use anyhow::{ensure, Context as _};
use serde_json::Value;

use crate::browser::Browser;

/// The pixels of one rectangle of the window, as 8-bit RGB.
pub struct Pixels {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Pixels {
    /// How many pixels `pick` accepts.
    pub fn count(&self, pick: impl Fn([u8; 3]) -> bool) -> usize {
        self.rgb.iter().filter(|p| pick(**p)).count()
    }
}

impl Browser {
    /// The pixels inside the border box of the first element matching `css`, taken from a
    /// screenshot of the window. Needs a device pixel ratio of 1 (CSS pixels are then the
    /// screenshot's), which it checks.
    pub async fn pixels_of(&self, css: &str) -> anyhow::Result<Pixels> {
        let rect = self
            .js(&format!(
                "const e = document.querySelector({}); if (!e) return null; \
                 const r = e.getBoundingClientRect(); \
                 return [r.left, r.top, r.right, r.bottom, window.devicePixelRatio]",
                Value::from(css)
            ))
            .await?;
        let r: Vec<f64> = serde_json::from_value(rect.clone())
            .with_context(|| format!("{}: no element matches {css} ({rect})", self.name))?;
        ensure!(
            r[4] == 1.0,
            "the device pixel ratio is {}, not 1: CSS pixels are not the screenshot's",
            r[4]
        );
        let png = self.client.screenshot().await?;
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder
            .read_info()
            .context("reading the screenshot's header")?;
        let mut buf = vec![
            0;
            reader
                .output_buffer_size()
                .context("screenshot too large")?
        ];
        let info = reader
            .next_frame(&mut buf)
            .context("decoding the screenshot")?;
        let step = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => anyhow::bail!("a screenshot in {other:?}, not RGB"),
        };
        ensure!(
            info.bit_depth == png::BitDepth::Eight,
            "a screenshot of {:?} bits a channel",
            info.bit_depth
        );
        // The pixels whose centres fall inside the box.
        let clamp = |v: f64, max: u32| (v.round().max(0.0) as u32).min(max);
        let (x0, x1) = (clamp(r[0], info.width), clamp(r[2], info.width));
        let (y0, y1) = (clamp(r[1], info.height), clamp(r[3], info.height));
        let mut rgb = Vec::with_capacity(((x1 - x0) * (y1 - y0)) as usize);
        for y in y0..y1 {
            for x in x0..x1 {
                let at = (y as usize * info.line_size) + x as usize * step;
                rgb.push([buf[at], buf[at + 1], buf[at + 2]]);
            }
        }
        Ok(Pixels {
            width: x1 - x0,
            height: y1 - y0,
            rgb,
        })
    }
}
